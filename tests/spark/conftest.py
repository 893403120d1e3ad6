"""Spark tests: a private Airflow home (connections come from ``AIRFLOW_CONN_*``) and loopback-only Spark.

Set before any test imports Airflow or starts a JVM.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# Python UDFs (the interleaving gates) run in Spark's Python workers: the same interpreter as the tests.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="deltaguard-spark-airflow-"))
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")

# py4j logs at interpreter exit, after pytest has closed its capture streams.
logging.getLogger("py4j").setLevel(logging.WARNING)

#: Spark conf every test session uses: small, quiet, loopback.
SMALL_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Delta rebuilds snapshots with 50 tasks by default; the test tables hold a few files
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "512m",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
}
