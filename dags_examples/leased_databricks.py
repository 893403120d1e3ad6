"""Operators teams already run - Databricks SQL, a Databricks job run, spark-submit - under deltaguard leases.

Each operator stays as it is; ``with_delta_lease`` puts it under a lease on the table(s) it writes, so
these writers wait for each other (and for deltaguard's own operators on the same tables) exactly when
Delta's conflict rules say they would collide. Needs a ``databricks_default`` connection and a ``spark``
connection to run; it parses without them. Without the databricks and apache-spark providers it defines
no DAG (a warning says which is missing). The tables are named by their storage location, the same
spelling every other writer of them uses (the lease key is the location).

* ``merge_daily_sales``: the operator's own SQL is classified (a MERGE restricted to the day's rows).
* ``rebuild_customer_360``: a notebook job that writes two tables: one lease over both, all-or-nothing;
  ``deferrable=True`` waits for the run in the triggerer, where the lease is renewed meanwhile.
* ``compact_events``: a spark-submit job compacting one partition: declared as an OPTIMIZE of that day.
"""

from __future__ import annotations

import logging
from datetime import datetime

from airflow.sdk import DAG

from deltaguard.operators.leased import with_delta_lease

LAKE = "s3://example-lake/warehouse"
RUNTIME = "15.4"  # the Databricks Runtime of the cluster / SQL warehouse (SELECT current_version())

# The wrapped operators come from optional providers (databricks; apache-spark, in deltaguard's ``spark``
# extra). Without them this file defines no DAG and says why, as Airflow's own example DAGs do for theirs,
# so a DAGs folder holding it parses everywhere with an import error nowhere.
try:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
    from airflow.providers.databricks.operators.databricks import DatabricksSubmitRunOperator
    from airflow.providers.databricks.operators.databricks_sql import DatabricksSqlOperator
except ImportError as exc:
    MISSING_PROVIDER: str | None = exc.name or str(exc)
    logging.getLogger(__name__).warning(
        "example DAG deltaguard_leased_databricks skipped: %s is not installed (pip install "
        "apache-airflow-providers-databricks apache-airflow-providers-apache-spark)",
        MISSING_PROVIDER,
    )
else:
    MISSING_PROVIDER = None

if MISSING_PROVIDER is None:
    with DAG(
        dag_id="deltaguard_leased_databricks",
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        tags=["deltaguard", "example", "databricks"],
    ) as dag:
        # [START howto_with_delta_lease_databricks]
        merge_daily_sales = with_delta_lease(
            DatabricksSqlOperator(
                task_id="merge_daily_sales",
                sql=f"""
                    MERGE INTO delta.`{LAKE}/sales` AS t
                    USING staging.daily_sales AS s
                    ON t.date = s.date AND t.sku = s.sku AND t.date = '{{{{ ds }}}}'
                    WHEN MATCHED THEN UPDATE SET *
                    WHEN NOT MATCHED THEN INSERT *
                """,
            ),
            databricks_runtime=RUNTIME,
        )
        # [END howto_with_delta_lease_databricks]

        rebuild_customer_360 = with_delta_lease(
            DatabricksSubmitRunOperator(
                task_id="rebuild_customer_360",
                json={
                    "run_name": "customer_360",
                    "tasks": [
                        {
                            "task_key": "build",
                            "notebook_task": {"notebook_path": "/Jobs/customer_360"},
                            "existing_cluster_id": "{{ var.value.get('etl_cluster_id', 'cluster-id') }}",
                        }
                    ],
                },
                deferrable=True,
            ),
            tables={f"{LAKE}/customers": "OVERWRITE", f"{LAKE}/customer_scores": "OVERWRITE"},
            databricks_runtime=RUNTIME,
        )

        compact_events = with_delta_lease(
            SparkSubmitOperator(
                task_id="compact_events",
                application="jobs/compact_events.py",
                application_args=["--date", "{{ ds }}"],
            ),
            tables=f"{LAKE}/events",
            operation="OPTIMIZE",
            predicate="date = '{{ ds }}'",
            engine="spark",
        )

        merge_daily_sales >> compact_events
