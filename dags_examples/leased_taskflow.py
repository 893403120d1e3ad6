"""TaskFlow functions and a deferring operator writing Delta tables with delta-rs, each under a deltaguard lease.

Nothing here is a deltaguard write operator: the functions write with ``deltalake`` themselves and only
declare what they write (``@task.delta_write``); ``fix_balances`` is a classic operator that waits in the
triggerer before it writes (as ``DatabricksSubmitRunOperator(deferrable=True)`` waits for its run), wrapped
with ``with_delta_lease``. The lease manager lets the two blind appends to ``events`` run together and makes
the writers of ``balances`` take turns; ``fix_balances`` keeps its lease while deferred, renewed from the
triggerer. Trigger it by hand (no schedule).
"""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, BaseOperator, task

from deltaguard.operators.leased import with_delta_lease

#: seconds each write spends before it commits (the work a real job does), so overlaps are visible
WORK_SECONDS = float(os.environ.get("DELTAGUARD_LEASED_WORK_SECONDS", "8"))
#: seconds ``fix_balances`` waits in the triggerer
DEFER_SECONDS = float(os.environ.get("DELTAGUARD_LEASED_DEFER_SECONDS", "15"))


def data_dir() -> Path:
    """``$DELTAGUARD_EXAMPLE_DATA_DIR``, else ``$AIRFLOW_HOME/deltaguard_example_data``."""
    configured = os.environ.get("DELTAGUARD_EXAMPLE_DATA_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("AIRFLOW_HOME", Path.home() / "airflow")) / "deltaguard_example_data"


EVENTS = str(data_dir() / "leased" / "events")
BALANCES = str(data_dir() / "leased" / "balances")


def _append_event(source: str) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    time.sleep(WORK_SECONDS)
    write_deltalake(EVENTS, pa.table({"source": [source], "at": [time.time()]}), mode="append")


def _update_balances(step: str) -> None:
    from deltalake import DeltaTable

    time.sleep(WORK_SECONDS)
    DeltaTable(BALANCES).update(updates={"amount": "amount + 1", "last": f"'{step}'"})


class DeferThenDelete(BaseOperator):
    """Waits in the triggerer (Airflow's ``TimeDeltaTrigger``), then deletes closed accounts with delta-rs."""

    def __init__(self, *, wait_seconds: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.wait_seconds = wait_seconds

    def execute(self, context: Any) -> None:
        from airflow.providers.standard.triggers.temporal import TimeDeltaTrigger

        self.defer(
            trigger=TimeDeltaTrigger(timedelta(seconds=self.wait_seconds)), method_name="execute_complete"
        )

    def execute_complete(self, context: Any, event: Any = None) -> str:
        from deltalake import DeltaTable

        DeltaTable(BALANCES).delete("account = 'closed'")
        return "deleted closed accounts"


with DAG(
    dag_id="deltaguard_leased_taskflow",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["deltaguard", "example"],
) as dag:

    @task
    def create_tables() -> None:
        import pyarrow as pa
        from deltalake import DeltaTable, write_deltalake

        if not DeltaTable.is_deltatable(EVENTS):
            write_deltalake(EVENTS, pa.table({"source": ["setup"], "at": [time.time()]}))
        if not DeltaTable.is_deltatable(BALANCES):
            accounts = {"account": ["a", "b", "closed"], "amount": [1, 2, 3], "last": ["", "", ""]}
            write_deltalake(BALANCES, pa.table(accounts))

    # blind appends: compatible, so both hold leases at once
    # [START howto_decorator_delta_write]
    @task.delta_write(tables=EVENTS, operation="INSERT")
    def append_orders() -> None:
        _append_event("orders")

    # [END howto_decorator_delta_write]

    @task.delta_write(tables=EVENTS, operation="INSERT")
    def append_shipments() -> None:
        _append_event("shipments")

    # whole-table UPDATEs of one table: conflicting, so they take turns
    @task.delta_write(tables=BALANCES, operation="UPDATE")
    def accrue_interest() -> None:
        _update_balances("interest")

    @task.delta_write(tables=BALANCES, operation="UPDATE")
    def apply_fees() -> None:
        _update_balances("fees")

    # [START howto_with_delta_lease]
    fix_balances = with_delta_lease(
        DeferThenDelete(task_id="fix_balances", wait_seconds=DEFER_SECONDS),
        tables=BALANCES,
        operation="DELETE",
        predicate="account = 'closed'",
    )
    # [END howto_with_delta_lease]

    setup = create_tables()
    setup >> [append_orders(), append_shipments(), accrue_interest(), apply_fees(), fix_balances]
