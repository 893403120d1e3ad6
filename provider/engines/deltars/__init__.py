"""The delta-rs engine: :class:`~deltaguard.engines.deltars.engine.DeltaRsEngine` and its operation runners."""
