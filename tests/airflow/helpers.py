"""Shared helpers for the Airflow-layer tests: small Delta tables, running one task through ``dag.test()``."""

from __future__ import annotations

import datetime as dt
import json
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def sales_table(path: str) -> str:
    """A table partitioned by ``country``: DE (id 1, 2) and FR (id 3)."""
    data = pa.table({"id": [1, 2, 3], "country": ["DE", "DE", "FR"], "amount": [10, 20, 30]})
    write_deltalake(path, data, partition_by=["country"])
    return path


def rows(path: str) -> list[dict[str, Any]]:
    return sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


DAG_TEMPLATE = """
import datetime as dt
import pyarrow as pa
from airflow.sdk import DAG
{imports}

with DAG(dag_id={dag_id!r}, schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), catchup=False) as dag:
{body}
"""


def write_dag(dag_id: str, body: str, imports: str = "") -> Any:
    """Write a DAG file into the Airflow home's dags folder and import it; return the DAG.

    ``dag.test()`` in Airflow 3.3 syncs the DAG from its bundle (the dags folder), so the DAG must live in
    a file there. ``body`` is indented into the ``with DAG(...)`` block.
    """
    import importlib.util
    import os
    import textwrap
    from pathlib import Path

    folder = Path(os.environ["AIRFLOW_HOME"]) / "dags"
    folder.mkdir(exist_ok=True)
    path = folder / f"{dag_id}.py"
    path.write_text(
        DAG_TEMPLATE.format(
            imports=imports, dag_id=dag_id, body=textwrap.indent(textwrap.dedent(body), "    ")
        )
    )
    spec = importlib.util.spec_from_file_location(f"deltaguard_test_dag_{dag_id}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def run_dag(dag_id: str, body: str, imports: str = "", **test_kwargs: Any) -> Any:
    """Write, import and ``dag.test()`` a DAG; return the DAG run."""
    dag = write_dag(dag_id, body, imports)
    return dag.test(logical_date=test_kwargs.pop("logical_date", START), **test_kwargs)


def task_state(dag_run: Any, task_id: str) -> str:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        ti = (
            session.query(TaskInstance)
            .filter_by(dag_id=dag_run.dag_id, run_id=dag_run.run_id, task_id=task_id)
            .one()
        )
        return str(ti.state)


def xcom_return(dag_run: Any, task_id: str) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=dag_run.dag_id, run_id=dag_run.run_id, task_id=task_id, key="return_value")
            .one_or_none()
        )
        if row is None:
            return None
        value = row.value
        return json.loads(value) if isinstance(value, str) else value


def decision_rows(store_url: str) -> int:
    """How many decision-log rows the lease store holds (0 when the store was never created)."""
    import sqlalchemy as sa

    path = store_url.removeprefix("sqlite:///")
    import os

    if not os.path.exists(path):
        return 0
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            names = sa.inspect(conn).get_table_names()
            table = next((n for n in names if "decision" in n), None)
            return (
                0
                if table is None
                else int(conn.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one())
            )
    finally:
        engine.dispose()


def hold_lease_until_waiter(
    table: str, waiter_task_id: str, until: str = "appears", timeout_s: float = 300
) -> str:
    """Take an exclusive lease on ``table`` as "maintenance" and release it from a background thread once a
    request of ``waiter_task_id`` is queued (``until="appears"``) or was queued and withdrawn again
    (``until="withdrawn"``). Returns the lease id. Bounded by ``timeout_s``.
    """
    import threading
    import time

    from deltaguard import config
    from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim
    from deltaguard.core.operations import Operation, OperationKind
    from deltaguard.core.profiles import EngineName, EngineProfile
    from deltaguard.core.table_config import TableConfig
    from deltaguard.leases.manager import LeaseManager
    from deltaguard.writes.table_uri import table_key

    key = table_key(table)
    manager = LeaseManager(config.lease_store_url())
    owner = Owner(name="maintenance")
    claim = TableClaim(
        key,
        Operation(OperationKind.SET_TBLPROPERTIES, label="maintenance"),
        EngineProfile(EngineName.DELTA_RS, "1.6.6"),
        TableConfig(),
    )
    granted = manager.acquire(LeaseRequest(claims=(claim,), owner=owner, ttl_s=timeout_s))
    assert isinstance(granted, Granted)

    def release_when_seen() -> None:
        seen = False
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            queued = any(w.owner.task_id == waiter_task_id for w in manager.waiters(key))
            seen = seen or queued
            if seen and (until == "appears" or not queued):
                break
            time.sleep(0.1)
        time.sleep(1.0)  # let the waiter wait a little longer, so the measured wait is clearly > 0
        manager.release(granted.lease_id, owner)
        manager.store.close()

    threading.Thread(target=release_when_seen, daemon=True).start()
    return granted.lease_id


def wait_until_unleased(store_url: str, table: str, timeout_s: float = 30.0) -> None:
    """Poll until no lease holds ``table`` (released, or expired), failing after ``timeout_s``."""
    import time

    from deltaguard.leases.manager import LeaseManager
    from deltaguard.writes.table_uri import table_key

    manager = LeaseManager(store_url)
    try:
        deadline = time.monotonic() + timeout_s
        while held := manager.leases(table_key(table)):
            assert time.monotonic() < deadline, f"{table} is still leased: {[h.lease_id for h in held]}"
            time.sleep(0.05)
    finally:
        manager.store.close()


def task_context(task_id: str) -> dict:
    """A minimal task context for calling an operator's ``execute`` outside a DAG run."""
    start = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    ti = SimpleNamespace(dag_id="adhoc", task_id=task_id, run_id="r1", try_number=1, map_index=-1)
    return {
        "ti": ti,
        "dag_run": SimpleNamespace(run_id="r1", start_date=start, run_after=start, logical_date=start),
    }


def open_store_handles() -> int:
    """Shared lease-store handles open in this process (:mod:`deltaguard.hooks.lease`)."""
    from deltaguard.hooks import lease

    return len(lease._SHARED)


async def store_handles_closed() -> None:
    """Wait until every scheduled close of a shared lease-store handle has finished."""
    import asyncio

    from deltaguard.hooks import lease

    while lease._CLOSING:
        await asyncio.gather(*list(lease._CLOSING), return_exceptions=True)


def store_held_by(tmp_path: Any, monkeypatch: Any, request: Any) -> tuple[str, Any, Any]:
    """A SQLite lease store in ``tmp_path``, named to the triggers by ``[deltaguard] lease_store_url``, with
    ``request`` granted in it: the store's URL, its :class:`~deltaguard.leases.manager.LeaseManager` and the
    grant."""
    from deltaguard.core.admission import Granted
    from deltaguard.leases.manager import LeaseManager

    url = f"sqlite:///{tmp_path / 'leases.db'}"
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", url)
    manager = LeaseManager(url)
    holder = manager.acquire(request)
    assert isinstance(holder, Granted), holder
    return url, manager, holder
