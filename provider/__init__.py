"""deltaguard: conflict-aware orchestration of Delta Lake writes for Apache Airflow.

The pure conflict model lives in :mod:`deltaguard.core` and imports neither Airflow nor an engine.
"""

__version__ = "0.1.0"

#: the project's source repository (``Source`` in the package's Project-URLs; the custom OpenLineage facet's
#: schema is published under it)
SOURCE_URL = "https://github.com/deltaguard/airflow-provider-deltaguard"
#: the repository's files as served raw (``/<tag or branch>/<path>``)
RAW_SOURCE_URL = "https://raw.githubusercontent.com/deltaguard/airflow-provider-deltaguard"
