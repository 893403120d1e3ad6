"""deltaguard: conflict-aware orchestration of Delta Lake writes for Apache Airflow.

The pure conflict model lives in :mod:`deltaguard.core` and imports neither Airflow nor an engine.
"""

__version__ = "0.1.0"
