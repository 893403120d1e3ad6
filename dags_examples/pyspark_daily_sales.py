"""The example daily pipeline with its sources built by PySpark and its commits made by delta-rs.

The same writes as ``deltaguard_daily_sales`` (per-country MERGEs into the partitioned ``sales_fact``,
appends to ``events``, an UPDATE, a DELETE and a schema change on ``customers``, then OPTIMIZE), but
the MERGE and append sources are Spark DataFrames: each is a :class:`~deltaguard.engines.spark.sources.SparkSource`
whose builder runs PySpark transformations (a join of the day's SKUs with a price list, computed
columns). The operators use ``engine="delta-rs"``, so the DataFrame is converted with ``toArrow()`` and
committed by delta-rs: no Delta jars are needed, only PySpark and a JVM on the worker.

Parsing this file never starts Spark: the session is created in the task process, when the write runs
under its lease. Each source task starts one small local session (``local[1]`` by default, see
:data:`SPARK_MASTER_ENV`); the data is a few dozen rows. The tables live under ``<data dir>/pyspark``,
apart from the other example DAGs' tables. Trigger it with ``{"date": "2026-11-21"}`` as run conf.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from airflow.sdk import DAG, task
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
    data_dir,
    schedule,
    table_uris,
)

from deltaguard.engines.spark.sources import SparkSource
from deltaguard.operators.dml import (
    DeltaDeleteOperator,
    DeltaInsertOperator,
    DeltaMergeOperator,
    DeltaUpdateOperator,
)
from deltaguard.operators.maintenance import DeltaAlterTableOperator, DeltaOptimizeOperator

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

VARIANT = "pyspark"
TABLES = table_uris(VARIANT)
DAY = "{{ business_date(dag_run, logical_date) }}"
#: Environment variable overriding the sources' Spark master (default ``local[1]``: one core per task).
SPARK_MASTER_ENV = "DELTAGUARD_EXAMPLE_SPARK_MASTER"
#: Conf key carrying the data directory into the driver's command line, so a test can tell this DAG's
#: JVMs from any other Spark process on the machine.
DATA_DIR_CONF = "spark.deltaguard.example.dataDir"


def spark_conf() -> dict[str, str]:
    """The sources' session conf: small, local, bound to the loopback interface, no UI or progress bar."""
    return {
        # applied after the session's default master, so it wins
        "spark.master": os.environ.get(SPARK_MASTER_ENV, "local[1]"),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "512m",
        # start-up dominates these tiny jobs: a cheap JIT and a single-threaded GC cost the least CPU
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        "spark.sql.shuffle.partitions": "1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        DATA_DIR_CONF: str(data_dir()),
    }


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
    description="Daily sales pipeline with PySpark-built sources committed by delta-rs through deltaguard",
    schedule=schedule(),
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    user_defined_macros={"business_date": business_date},
    # A Delta conflict must never be papered over by a retry: deltaguard avoids it instead.
    default_args={"retries": 0, "execution_timeout": timedelta(minutes=15)},
    tags=["deltaguard", "example", "pyspark"],
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
            engine="delta-rs",
            source=SparkSource(DailySales(country), conf=spark_conf()),
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
            engine="delta-rs",
            source=SparkSource(DailyEvents(source), conf=spark_conf()),
        )
        for source in EVENT_SOURCES
    ]

    customer_writes = [
        DeltaUpdateOperator(
            task_id="update_customer_tiers",
            table=TABLES["customers"],
            engine="delta-rs",
            updates=CUSTOMER_UPDATE,
            predicate=CUSTOMER_UPDATE_PREDICATE,
        ),
        DeltaDeleteOperator(
            task_id="delete_closed_customers",
            table=TABLES["customers"],
            engine="delta-rs",
            predicate=CUSTOMER_DELETE_PREDICATE,
        ),
        DeltaAlterTableOperator(
            task_id="add_loyalty_column",
            table=TABLES["customers"],
            engine="delta-rs",
            add_columns={NEW_CUSTOMER_COLUMN[0]: NEW_CUSTOMER_COLUMN[1]},
        ),
    ]

    optimize = DeltaOptimizeOperator(task_id="optimize_sales", table=TABLES["sales_fact"], engine="delta-rs")

    setup >> [*merges, *appends, *customer_writes]
    merges >> optimize
