"""deltaguard operators (installed as ``deltaguard.operators``)."""
