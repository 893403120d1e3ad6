"""The production-shaped run's conflicting writer for its frozen PySpark holder: a whole-table OPTIMIZE.

``stop_worker_past_lease`` (``benchmarks/cluster/faults.py``) freezes the Celery worker running a PySpark
``merge_sales_*`` of ``pyspark_daily_sales`` while it holds its lease, then triggers one of these DAGs: an
OPTIMIZE of the whole ``sales_fact`` table over the same Spark Connect server, which the conflict model calls
conflicting with a per-partition MERGE (delta-spark's ConflictChecker, ``spark.partition_overlap``). It waits
(deferred) for the frozen holder; once that lease expired, the store may hand the table over only after the
Connect fence confirmed the holder's server-side work ended (ADR 0033).

One DAG per Celery worker, each routed to that worker's own queue (``worker<i>``, see
``ClusterStack.airflow_services``): the fault triggers the one of a worker that is not frozen, since a frozen
worker still holds a blocking fetch on the broker and could take the task and never run it.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG

from deltaguard.operators.maintenance import DeltaOptimizeOperator

# ``example_pipeline.py`` sits in the same DAGs folder (this file is linked there, not resolved)
if str(Path(__file__).parent) not in sys.path:
    sys.path.append(str(Path(__file__).parent))

from example_pipeline import table_uris

#: the connection ``pyspark_daily_sales`` writes through (its ``SPARK_CONNECT_CONN_ID``; importing that DAG
#: file here would define its DAG twice)
SPARK_CONNECT_CONN_ID = "deltaguard_example_spark_connect"
#: DAG id of the writer routed to Celery worker ``i``: ``DAG_ID_PREFIX + str(i)``
DAG_ID_PREFIX = "pyspark_optimize_sales_on_worker"
WORKERS = int(os.environ.get("DELTAGUARD_CLUSTER_CELERY_WORKERS", "2"))

for i in range(1, WORKERS + 1):
    with DAG(
        dag_id=f"{DAG_ID_PREFIX}{i}",
        description="OPTIMIZE of the whole PySpark sales_fact table, brought while a MERGE's holder is frozen",
        schedule=None,
        start_date=datetime(2026, 11, 1),
        catchup=False,
        default_args={"retries": 0, "execution_timeout": timedelta(minutes=15)},
        tags=["deltaguard", "cluster"],
    ):
        DeltaOptimizeOperator(
            task_id="optimize_sales",
            table=table_uris("pyspark")["sales_fact"],
            engine="spark",
            spark_connect_conn_id=SPARK_CONNECT_CONN_ID,
            queue=f"worker{i}",
        )
