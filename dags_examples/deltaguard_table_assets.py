"""Delta tables as Airflow assets: a deltaguard write schedules the DAGs that read its table.

* ``deltaguard_orders_load`` appends to ``orders`` with a deltaguard operator. The operator declares the
  table's asset (``file:///<data dir>/assets/orders``) as its outlet and attaches the committed Delta
  version and operation to the asset event.
  ``append_audit`` writes ``orders_audit`` itself with plain delta-rs under a deltaguard lease
  (``@task.delta_write``): deltaguard reads the commit from the table's log, so the wrapped write has the
  same asset event and lineage (version, schema, row count) as deltaguard's own.
* ``deltaguard_orders_report`` is scheduled on that asset: it runs after every successful write and reads
  the version and operation from the triggering event.
* ``deltaguard_partner_feed_watch`` is scheduled on the ``partner_feed`` table through an asset watcher:
  the table-commit trigger runs in the triggerer and starts the DAG for each new commit by anyone (here
  another system writing the table with plain delta-rs).

``$DELTAGUARD_EXAMPLE_WATCH_AFTER`` makes the watcher report commits after that version instead of after
the version the table has when the triggerer starts the trigger.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from airflow.sdk import DAG, AssetWatcher, task

from deltaguard.lineage.assets import delta_table_asset
from deltaguard.operators.dml import DeltaInsertOperator
from deltaguard.triggers.table_version import DeltaTableCommitTrigger

# ``example_pipeline.py`` sits beside this file. The dag-processor puts the DAGs folder on sys.path, but
# ``airflow dags list --local`` and a DagBag of another folder (``deltaguard pools sync --dags-folder``) do
# not: append this folder (shadowing nothing) so the file parses however Airflow loads it.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from example_pipeline import data_dir

ORDERS = str(data_dir() / "assets" / "orders")
ORDERS_AUDIT = str(data_dir() / "assets" / "orders_audit")
PARTNER_FEED = str(data_dir() / "assets" / "partner_feed")
WATCH_AFTER = os.environ.get("DELTAGUARD_EXAMPLE_WATCH_AFTER")

ORDERS_ASSET = delta_table_asset(ORDERS)
PARTNER_FEED_ASSET = delta_table_asset(
    PARTNER_FEED,
    watchers=[
        AssetWatcher(
            name="partner_feed_commits",
            trigger=DeltaTableCommitTrigger(
                table_uri=PARTNER_FEED,
                poll_interval=5,
                start_version=int(WATCH_AFTER) if WATCH_AFTER else None,
            ),
        )
    ],
)


def new_orders() -> pa.Table:
    return pa.table({"order_id": [1, 2], "amount": [120, 80]})


def event_extras(events: Any, asset: Any) -> list[dict[str, Any]]:
    """The ``extra`` of each asset event that started this run (what the upstream write attached)."""
    return [dict(event.extra) for event in events[asset]]


with DAG(
    dag_id="deltaguard_orders_load",
    description="Appends orders with deltaguard; the write's asset event schedules the report",
    schedule=None,
    start_date=datetime(2026, 11, 1),
    catchup=False,
    tags=["deltaguard", "example", "assets"],
):
    append = DeltaInsertOperator(
        task_id="append_orders",
        table=ORDERS,
        source=new_orders,
        source_reads_target=False,  # new_orders builds rows in memory, it never reads the orders table
    )

    @task.delta_write(tables=ORDERS_AUDIT, operation="INSERT")
    def append_audit() -> None:
        from deltalake import write_deltalake

        write_deltalake(ORDERS_AUDIT, pa.table({"order_id": [1, 2], "checked": [True, True]}), mode="append")

    append >> append_audit()


# [START howto_delta_table_asset]
with DAG(
    dag_id="deltaguard_orders_report",
    description="Runs after every committed write to the orders table",
    schedule=[ORDERS_ASSET],
    start_date=datetime(2026, 11, 1),
    catchup=False,
    tags=["deltaguard", "example", "assets"],
):

    @task
    def report(triggering_asset_events: Any = None) -> list[dict[str, Any]]:
        """The orders table's version and operation, as the write that started this run committed them."""
        return event_extras(triggering_asset_events, ORDERS_ASSET)

    report()
# [END howto_delta_table_asset]


with DAG(
    dag_id="deltaguard_partner_feed_watch",
    description="Runs for every new commit on the partner feed table, whoever wrote it",
    schedule=[PARTNER_FEED_ASSET],
    start_date=datetime(2026, 11, 1),
    catchup=False,
    tags=["deltaguard", "example", "assets"],
):

    @task
    def on_commit(triggering_asset_events: Any = None) -> list[dict[str, Any]]:
        """The commit the watcher reported (its payload is in the event's extra)."""
        return event_extras(triggering_asset_events, PARTNER_FEED_ASSET)

    on_commit()
