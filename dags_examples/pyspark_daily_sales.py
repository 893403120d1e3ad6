"""The example daily pipeline built and committed by Spark: PySpark sources, delta-spark commits over Spark Connect.

The same writes as ``deltaguard_daily_sales`` (per-country MERGEs into the partitioned ``sales_fact``,
appends to ``events``, an UPDATE, a DELETE and a schema change on ``customers``, then OPTIMIZE), the way
most users run them: every write uses ``engine="spark"`` and reaches a Spark Connect server through the
``spark_connect`` connection :data:`SPARK_CONNECT_CONN_ID` (define it, for example, with
``AIRFLOW_CONN_DELTAGUARD_EXAMPLE_SPARK_CONNECT='{"conn_type": "spark_connect", "host": "127.0.0.1",
"port": 15002}'``). The server needs Delta's jars, SQL extension and catalog; ``make demo`` and the
end-to-end test start one with :class:`~benchmarks.harness.connect_server.LocalConnectServer`.

The MERGE and append sources are :class:`~deltaguard.engines.spark.sources.SparkSource` builders whose
PySpark transformations (a join of the day's SKUs with a price list, computed columns) run on the engine's
Connect session; delta-spark commits them as ``MERGE INTO`` and DataFrame appends. The task processes start
no JVM: they are Connect clients only. Like the other example, each builder first spends
:func:`example_pipeline.write_seconds` standing in for the upstream job it waits on, so compatible writes
visibly run side by side.

Parsing this file never contacts Spark. The tables live under ``<data dir>/pyspark``, apart from the other
example DAGs' tables. Trigger it with ``{"date": "2026-11-21"}`` as run conf.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import DAG, task

from deltaguard.engines.spark.sources import SparkSource
from deltaguard.operators.dml import (
    DeltaDeleteOperator,
    DeltaInsertOperator,
    DeltaMergeOperator,
    DeltaUpdateOperator,
)
from deltaguard.operators.maintenance import DeltaAlterTableOperator, DeltaOptimizeOperator

# ``example_pipeline.py`` sits beside this file. The dag-processor puts the DAGs folder on sys.path, but
# ``airflow dags list --local`` and a DagBag of another folder (``deltaguard pools sync --dags-folder``) do
# not: append this folder (shadowing nothing) so the file parses however Airflow loads it.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from example_pipeline import (
    COUNTRIES,
    CUSTOMER_DELETE_PREDICATE,
    CUSTOMER_UPDATE,
    CUSTOMER_UPDATE_PREDICATE,
    EVENT_SOURCES,
    NEW_CUSTOMER_COLUMN,
    SKUS_PER_DAY,
    business_date,
    create_tables,
    max_active_runs,
    schedule,
    table_uris,
    write_seconds,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

VARIANT = "pyspark"
TABLES = table_uris(VARIANT)
DAY = "{{ business_date(dag_run, logical_date) }}"
#: The ``spark_connect`` connection every write of this DAG goes through.
SPARK_CONNECT_CONN_ID = "deltaguard_example_spark_connect"
#: What every write operator of this DAG is given: delta-spark, reached over Spark Connect.
SPARK_WRITES: dict[str, Any] = {"engine": "spark", "spark_connect_conn_id": SPARK_CONNECT_CONN_ID}


def _current_day() -> str:
    from airflow.sdk import get_current_context

    context = get_current_context()
    return business_date(context["dag_run"], context.get("logical_date"))


# Builders are small frozen dataclasses rather than closures: their repr (which Airflow stores for the
# rendered ``source`` field) is then the same on every parse, so re-parsing never looks like a DAG change.


@dataclass(frozen=True)
class DailySales:
    """The day's sales of one country, computed by PySpark.

    Quantities follow the same rule as :func:`example_pipeline.sales_rows`; the amount comes from a join
    with the price list. The end-to-end test checks the committed rows against the plain-Python rule.

    :param country: two-letter country code.
    """

    country: str

    def __call__(self, spark: SparkSession) -> DataFrame:
        from pyspark.sql import functions as F

        day = _current_day()
        time.sleep(write_seconds())
        ordinal = date.fromisoformat(day).toordinal()
        skus = spark.range(1, SKUS_PER_DAY + 1).withColumnRenamed("id", "sku")
        prices = skus.select("sku", F.round(F.lit(2.5) + F.col("sku") * F.lit(1.25), 2).alias("price"))
        offset = ord(self.country[0]) * 3 + ord(self.country[1]) + ordinal
        qty = (F.col("sku") * 7 + F.lit(offset)) % 40 + 1
        return (
            skus.withColumn("qty", qty)
            .join(prices, "sku")
            .select(
                F.lit(day).alias("date"),
                F.lit(self.country).alias("country"),
                F.col("sku").cast("bigint").alias("sku"),
                F.col("qty").cast("bigint").alias("qty"),
                F.round(F.col("qty") * F.col("price"), 2).cast("double").alias("amount"),
            )
        )


@dataclass(frozen=True)
class DailyEvents:
    """Five log lines of one event source for the day, computed by PySpark.

    :param source: the event source (``orders``, ``shipments``).
    """

    source: str

    def __call__(self, spark: SparkSession) -> DataFrame:
        from pyspark.sql import functions as F

        day = _current_day()
        time.sleep(write_seconds())
        return spark.range(5).select(
            F.lit(day).alias("date"),
            F.lit(self.source).alias("source"),
            F.col("id").cast("bigint").alias("seq"),
            F.concat(F.lit(f"{self.source} batch "), F.col("id").cast("string"), F.lit(f" for {day}")).alias(
                "message"
            ),
        )


with DAG(
    dag_id="pyspark_daily_sales",
    description="Daily sales pipeline built by PySpark and committed by delta-spark over Spark Connect",
    schedule=schedule(),
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=max_active_runs(),
    user_defined_macros={"business_date": business_date},
    # A Delta conflict must never be papered over by a retry: deltaguard avoids it instead.
    default_args={"retries": 0, "execution_timeout": timedelta(minutes=15)},
    tags=["deltaguard", "example", "pyspark", "spark"],
):

    @task
    def setup_tables(day: str) -> dict[str, str]:
        """Create the three tables with seed rows on the first run (idempotent afterwards)."""
        return create_tables(VARIANT, day)

    setup = setup_tables(DAY)

    merges = [
        DeltaMergeOperator(
            task_id=f"merge_sales_{country.lower()}",
            table=TABLES["sales_fact"],
            **SPARK_WRITES,
            source=SparkSource(DailySales(country)),
            source_reads_target=False,  # the source reads staging data, never this table
            condition="t.date = s.date AND t.country = s.country AND t.sku = s.sku",
            # The explicit partition values are what tell the model two countries never touch the same files.
            target_partition_values={"date": DAY, "country": country},
        )
        for country in COUNTRIES
    ]

    appends = [
        DeltaInsertOperator(
            task_id=f"log_events_{source}",
            table=TABLES["events"],
            **SPARK_WRITES,
            source=SparkSource(DailyEvents(source)),
            source_reads_target=False,  # the source reads staging data, never this table
        )
        for source in EVENT_SOURCES
    ]

    customer_writes = [
        DeltaUpdateOperator(
            task_id="update_customer_tiers",
            table=TABLES["customers"],
            **SPARK_WRITES,
            updates=CUSTOMER_UPDATE,
            predicate=CUSTOMER_UPDATE_PREDICATE,
        ),
        DeltaDeleteOperator(
            task_id="delete_closed_customers",
            table=TABLES["customers"],
            **SPARK_WRITES,
            predicate=CUSTOMER_DELETE_PREDICATE,
        ),
        DeltaAlterTableOperator(
            task_id="add_loyalty_column",
            table=TABLES["customers"],
            **SPARK_WRITES,
            add_columns={NEW_CUSTOMER_COLUMN[0]: NEW_CUSTOMER_COLUMN[1]},
            # runs for other dates may overlap: the first adds the column, the others find it there
            if_not_exists=True,
        ),
    ]

    optimize = DeltaOptimizeOperator(task_id="optimize_sales", table=TABLES["sales_fact"], **SPARK_WRITES)

    setup >> [*merges, *appends, *customer_writes]
    merges >> optimize
