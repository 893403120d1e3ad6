"""The example daily pipeline written with deltaguard operators: no hand-made pools, no retries on conflicts.

Every Delta write is a deltaguard operator. The lease manager lets the writes the conflict model calls
compatible run at once (the appends to ``events``; the per-country MERGEs into ``sales_fact`` when the
engine's rules allow disjoint partitions) and makes the others wait, deferred in the triggerer, for the
write they would collide with: the upsert, the UPDATE, the DELETE and the schema change on ``customers``, and the
nightly OPTIMIZE after the MERGEs. Trigger it with ``{"date": "2026-11-21"}`` as run conf to pick the day.
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, task

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
    CUSTOMER_MERGE_CONDITION,
    CUSTOMER_MERGE_INSERT,
    CUSTOMER_MERGE_UPDATE,
    CUSTOMER_UPDATE,
    CUSTOMER_UPDATE_PREDICATE,
    EVENT_SOURCES,
    NEW_CUSTOMER_COLUMN,
    business_date,
    create_tables,
    max_active_runs,
    schedule,
    slow_source,
    table_uris,
)

VARIANT = "deltaguard"
TABLES = table_uris(VARIANT)
DAY = "{{ business_date(dag_run, logical_date) }}"

with DAG(
    dag_id="deltaguard_daily_sales",
    description="Daily sales pipeline on Delta tables, with conflict-aware deltaguard operators",
    schedule=schedule(),
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=max_active_runs(),
    user_defined_macros={"business_date": business_date},
    # A Delta conflict must never be papered over by a retry: deltaguard avoids it instead.
    default_args={"retries": 0, "execution_timeout": timedelta(minutes=15)},
    tags=["deltaguard", "example"],
):

    @task
    def setup_tables(day: str) -> dict[str, str]:
        """Create the three tables with seed rows on the first run (idempotent afterwards)."""
        return create_tables(VARIANT, day)

    setup = setup_tables(DAY)

    # [START howto_operator_delta_merge]
    merges = [
        DeltaMergeOperator(
            task_id=f"merge_sales_{country.lower()}",
            table=TABLES["sales_fact"],
            source=slow_source("sales", country),
            source_reads_target=False,  # the source reads staging data, never this table
            condition="t.date = s.date AND t.country = s.country AND t.sku = s.sku",
            # The explicit partition values are what tell the model two countries never touch the same files.
            target_partition_values={"date": DAY, "country": country},
        )
        for country in COUNTRIES
    ]
    # [END howto_operator_delta_merge]

    # [START howto_operator_delta_insert]
    appends = [
        DeltaInsertOperator(
            task_id=f"log_events_{source}",
            table=TABLES["events"],
            source=slow_source("events", source),
            source_reads_target=False,  # the source reads staging data, never this table
        )
        for source in EVENT_SOURCES
    ]
    # [END howto_operator_delta_insert]

    customer_writes = [
        DeltaMergeOperator(
            task_id="upsert_customers",
            table=TABLES["customers"],
            source=slow_source("customers", "crm"),
            source_reads_target=False,  # the source reads staging data, never this table
            condition=CUSTOMER_MERGE_CONDITION,
            matched_update=CUSTOMER_MERGE_UPDATE,
            not_matched_insert=CUSTOMER_MERGE_INSERT,
        ),
        # [START howto_operator_delta_update]
        DeltaUpdateOperator(
            task_id="update_customer_tiers",
            table=TABLES["customers"],
            updates=CUSTOMER_UPDATE,
            predicate=CUSTOMER_UPDATE_PREDICATE,
        ),
        # [END howto_operator_delta_update]
        # [START howto_operator_delta_delete]
        DeltaDeleteOperator(
            task_id="delete_closed_customers",
            table=TABLES["customers"],
            predicate=CUSTOMER_DELETE_PREDICATE,
        ),
        # [END howto_operator_delta_delete]
        # [START howto_operator_delta_alter]
        DeltaAlterTableOperator(
            task_id="add_loyalty_column",
            table=TABLES["customers"],
            add_columns={NEW_CUSTOMER_COLUMN[0]: NEW_CUSTOMER_COLUMN[1]},
            # runs for other dates may overlap: the first adds the column, the others find it there
            if_not_exists=True,
        ),
        # [END howto_operator_delta_alter]
    ]

    # [START howto_operator_delta_optimize]
    optimize = DeltaOptimizeOperator(task_id="optimize_sales", table=TABLES["sales_fact"])
    # [END howto_operator_delta_optimize]

    setup >> [*merges, *appends, *customer_writes]
    merges >> optimize
