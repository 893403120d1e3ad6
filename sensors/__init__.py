"""deltaguard sensors (installed as ``deltaguard.sensors``)."""
