"""The same daily pipeline the conventional way: plain Python tasks serialized by one-slot pools per table.

This is what teams do today to avoid ``ConcurrentAppendException``: every write of a table goes through a
pool with a single slot, so even writes that could safely run together (appends, MERGEs on different
partitions) wait for each other. Compare its run time with ``deltaguard_daily_sales``. The pools
(``conventional_sales_fact``, ``conventional_events``, ``conventional_customers``) must exist with one slot
each; the deltaguard harness creates them.
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, task

# ``example_pipeline.py`` sits beside this file. The dag-processor puts the DAGs folder on sys.path, but
# ``airflow dags list --local`` and a DagBag of another folder (``deltaguard pools sync --dags-folder``) do
# not: append this folder (shadowing nothing) so the file parses however Airflow loads it.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from example_pipeline import (
    CONVENTIONAL_POOLS,
    COUNTRIES,
    EVENT_SOURCES,
    business_date,
    conventional_write,
    create_tables,
    schedule,
)

VARIANT = "conventional"
DAY = "{{ business_date(dag_run, logical_date) }}"

with DAG(
    dag_id="conventional_daily_sales",
    description="Daily sales pipeline on Delta tables, serialized by one-slot pools per table",
    schedule=schedule(),
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    user_defined_macros={"business_date": business_date},
    default_args={"retries": 0, "execution_timeout": timedelta(minutes=15)},
    tags=["deltaguard", "example", "baseline"],
):

    @task
    def setup_tables(day: str) -> dict[str, str]:
        return create_tables(VARIANT, day)

    @task
    def delta_write(table: str, write: str, key: str = "") -> dict[str, object]:
        return conventional_write(table, write, key)

    setup = setup_tables(DAY)

    def pooled(task_id: str, table: str) -> object:
        return delta_write.override(task_id=task_id, pool=CONVENTIONAL_POOLS[table])

    merges = [
        pooled(f"merge_sales_{country.lower()}", "sales_fact")("sales_fact", "merge", country)
        for country in COUNTRIES
    ]
    appends = [
        pooled(f"log_events_{source}", "events")("events", "append", source) for source in EVENT_SOURCES
    ]
    customer_writes = [
        pooled("upsert_customers", "customers")("customers", "upsert"),
        pooled("update_customer_tiers", "customers")("customers", "update"),
        pooled("delete_closed_customers", "customers")("customers", "delete"),
        pooled("add_loyalty_column", "customers")("customers", "add_column"),
    ]
    optimize = pooled("optimize_sales", "sales_fact")("sales_fact", "optimize")

    setup >> [*merges, *appends, *customer_writes]
    merges >> optimize
