"""Production settings: an SQLite store under a distributed executor is refused, the ``delta`` connection's
Test button, and a lease store from an Airflow connection whose password never reaches trigger arguments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import write_deltalake

from deltaguard import config
from deltaguard.config import resolve_store_reference
from deltaguard.executor_guard import (
    DistributedSqliteStoreError,
    distributed_executors,
    refuse_sqlite_under_distributed_executor,
)
from deltaguard.leases.store_location import store_reference
from deltaguard.triggers.lease import LeaseAvailableTrigger
from deltaguard.triggers.table_version import DeltaAdmissionTrigger
from tests.airflow.helpers import decision_rows, run_dag, sales_table, task_state

OPS = "from deltaguard.operators.dml import DeltaMergeOperator"

# --- SQLite under a distributed executor ----------------------------------------------------------------


@pytest.mark.parametrize(
    "setting",
    [
        "CeleryExecutor",
        "KubernetesExecutor",
        "airflow.providers.edge3.executors.EdgeExecutor",
        "LocalExecutor,CeleryExecutor",
        "LocalExecutor;team_a=KubernetesExecutor",
        "remote:my_company.executors.BatchExecutor",
    ],
)
def test_sqlite_store_is_refused_under_a_distributed_executor(
    setting: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", setting)
    with pytest.raises(DistributedSqliteStoreError, match=r"SQLite file.*PostgreSQL"):
        refuse_sqlite_under_distributed_executor(f"sqlite:///{tmp_path / 'leases.db'}")
    # a PostgreSQL store is shared by every worker: nothing to refuse
    refuse_sqlite_under_distributed_executor("postgresql+psycopg://dg@db.example/leases")


@pytest.mark.parametrize("setting", ["LocalExecutor", "airflow.executors.local_executor.LocalExecutor"])
def test_sqlite_store_is_accepted_under_a_local_executor(
    setting: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", setting)
    assert distributed_executors(setting) == []
    refuse_sqlite_under_distributed_executor(f"sqlite:///{tmp_path / 'leases.db'}")


@pytest.mark.usefixtures("airflow_db")
def test_write_under_celery_with_sqlite_fails_before_any_lease(
    tmp_path: Path, lease_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real ``dag.test()`` run: the executor setting is read when the task starts, not at import."""
    table = sales_table(str(tmp_path / "sales"))
    body = f"""
    DeltaMergeOperator(
        task_id="merge",
        table={table!r},
        source=lambda: pa.table({{"id": [2], "country": ["DE"], "amount": [21]}}),
        condition="t.id = s.id",
    )
    """
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTOR", "CeleryExecutor")
    dag_run = run_dag("celery_sqlite_dag", body, OPS)
    assert task_state(dag_run, "merge") == "failed"
    assert decision_rows(lease_store_url) == 0  # the store was never opened: no request, no lease
    assert not Path(lease_store_url.removeprefix("sqlite:///")).exists()


# --- the delta connection's Test button -----------------------------------------------------------------


def _test_button(host: str, extra: dict[str, object] | None = None) -> tuple[bool, str]:
    """What ``POST /api/v2/connections/test`` does: export the connection as an environment variable (hooks
    look their connection up by id) and call ``Connection.test_connection``."""
    import os

    from airflow.models.connection import Connection

    conn = Connection(conn_id="delta_under_test", conn_type="delta", host=host, extra=json.dumps(extra or {}))
    os.environ["AIRFLOW_CONN_DELTA_UNDER_TEST"] = conn.get_uri()
    try:
        return conn.test_connection()
    finally:
        del os.environ["AIRFLOW_CONN_DELTA_UNDER_TEST"]


@pytest.mark.usefixtures("airflow_db")
def test_connection_test_reports_a_table_and_a_warehouse(tmp_path: Path) -> None:
    """Through Airflow's own ``Connection.test_connection``, as the UI's Test button runs it."""
    import pyarrow as pa

    table = tmp_path / "warehouse" / "sales"
    write_deltalake(str(table), pa.table({"id": [1]}))
    write_deltalake(str(table), pa.table({"id": [2]}), mode="append")
    ok, message = _test_button(f"file://{table}")
    assert ok and "Delta table at version 1" in message, message
    ok, message = _test_button(f"file://{tmp_path / 'warehouse'}")
    assert ok and "reachable, 1 entries" in message, message


@pytest.mark.usefixtures("airflow_db")
@pytest.mark.parametrize(
    ("host", "extra", "reason"),
    [
        ("file:///no/such/warehouse", {}, "does not exist"),
        ("ftp://somewhere/warehouse", {}, "unknown table URI scheme"),
        ("", {}, "no Base URI"),
        ("file:///tmp", {"engine": "oracle"}, "oracle"),
    ],
)
def test_connection_test_explains_what_is_wrong(host: str, extra: dict[str, object], reason: str) -> None:
    ok, message = _test_button(host, extra)
    assert not ok and reason in message, message


# --- lease store from an Airflow connection -------------------------------------------------------------

SECRET = "s3cr3t-pw"


@pytest.fixture
def store_connection(monkeypatch: pytest.MonkeyPatch) -> str:
    """``[deltaguard] lease_store_conn_id`` naming a connection held by the environment-variables
    secrets backend (the password is nowhere in deltaguard's own settings)."""
    uri = f"postgres://dg_user:{SECRET}@db.example:5433/leases?sslmode=require&cursor=dictcursor"
    monkeypatch.setenv("AIRFLOW_CONN_DG_LEASES", uri)
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_CONN_ID", "dg_leases")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", "sqlite:////never/used.db")
    return uri


@pytest.mark.usefixtures("airflow_db")
def test_lease_store_url_comes_from_the_connection(store_connection: str) -> None:
    from sqlalchemy.engine import make_url

    url = make_url(config.lease_store_url())
    assert (url.drivername, url.username, url.password, url.host, url.port, url.database) == (
        "postgresql+psycopg",
        "dg_user",
        SECRET,
        "db.example",
        5433,
        "leases",
    )
    assert dict(url.query) == {"sslmode": "require"}  # libpq extras only, not the provider's cursor option


@pytest.mark.usefixtures("airflow_db")
def test_trigger_arguments_carry_no_password_and_the_triggerer_restores_it(store_connection: str) -> None:
    configured = config.lease_store_url()
    triggers = [
        LeaseAvailableTrigger(store_url=configured, request_id="r1", poll_interval=1.0),
        DeltaAdmissionTrigger(
            store_url=configured, table_key="/t", operation={}, table_config={}, profile={}
        ),
    ]
    for trigger in triggers:
        path, kwargs = trigger.serialize()
        assert SECRET not in json.dumps(kwargs) and SECRET not in repr(trigger)
        assert "dg_user@db.example:5433/leases" in kwargs["store_url"]
        revived = type(trigger)(**kwargs)  # what the triggerer builds from the stored arguments
        assert revived.serialize() == (path, kwargs)
        assert resolve_store_reference(revived.store_url) == configured


def test_store_references_of_urls_without_password_are_unchanged(tmp_path: Path) -> None:
    sqlite = f"sqlite:///{tmp_path / 'leases.db'}"
    assert store_reference(sqlite) == sqlite
    assert store_reference("postgresql+psycopg://dg@db/leases") == "postgresql+psycopg://dg@db/leases"
    with_password = "postgresql+psycopg://dg:p%40ss@db/leases"
    assert store_reference(with_password) == "postgresql+psycopg://dg@db/leases"
    assert store_reference(store_reference(with_password)) == store_reference(with_password)


@pytest.mark.usefixtures("airflow_db")
def test_store_connection_of_another_type_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_DG_LEASES", "mysql://u:p@h/db")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_CONN_ID", "dg_leases")
    with pytest.raises(ValueError, match="needs a postgres connection"):
        config.lease_store_url()


def test_provider_info_marks_the_store_url_sensitive() -> None:
    from deltaguard.get_provider_info import get_provider_info

    options = get_provider_info()["config"]["deltaguard"]["options"]
    assert options["lease_store_url"]["sensitive"] is True
    assert options["lease_store_conn_id"]["sensitive"] is False


def test_sensitive_store_url_may_come_from_a_command(tmp_path: Path) -> None:
    """Airflow reads ``_CMD`` / ``_SECRET`` variants only of options a provider marks sensitive."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__DELTAGUARD__")}
    env["AIRFLOW_HOME"] = str(tmp_path)
    env["AIRFLOW__DELTAGUARD__LEASE_STORE_URL_CMD"] = "echo postgresql+psycopg://dg@db.example/leases"
    code = "from deltaguard import config; print(config.lease_store_url())"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "postgresql+psycopg://dg@db.example/leases"


@pytest.mark.usefixtures("airflow_db")
def test_revived_trigger_reaches_the_postgres_store_of_the_connection(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real PostgreSQL store named by a connection: the trigger rebuilt from its password-free arguments
    finds the queued request there and fires once the holder releases."""
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
    from deltaguard.core.operations import Operation, OperationKind
    from deltaguard.core.profiles import EngineName, EngineProfile
    from deltaguard.core.table_config import TableConfig
    from deltaguard.leases.manager import LeaseManager
    from tests.airflow.test_triggers_sensors import _first_event

    pg_url = request.getfixturevalue("pg_server")
    server = make_url(pg_url)
    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text("DROP DATABASE IF EXISTS dg_conn_leases"))
        conn.execute(sa.text("DROP ROLE IF EXISTS dg_conn_user"))
        conn.execute(sa.text(f"CREATE ROLE dg_conn_user LOGIN PASSWORD '{SECRET}'"))
        conn.execute(sa.text("CREATE DATABASE dg_conn_leases OWNER dg_conn_user"))
    admin.dispose()
    monkeypatch.setenv(
        "AIRFLOW_CONN_DG_LEASES",
        f"postgres://dg_conn_user:{SECRET}@{server.host}:{server.port}/dg_conn_leases",
    )
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_CONN_ID", "dg_leases")

    def lease_request(name: str, kind: OperationKind) -> LeaseRequest:
        profile = EngineProfile(EngineName.DELTA_RS, "1.6.6")
        claim = TableClaim("/t/conn", Operation(kind, label=name), profile, TableConfig())
        return LeaseRequest(claims=(claim,), owner=Owner(name=name), ttl_s=30)

    manager = LeaseManager(config.lease_store_url())
    try:
        holder = manager.acquire(lease_request("alter", OperationKind.SET_TBLPROPERTIES))
        waiting = manager.acquire(lease_request("merge", OperationKind.MERGE))
        assert isinstance(holder, Granted) and isinstance(waiting, Waiting)
        _, kwargs = LeaseAvailableTrigger(config.lease_store_url(), waiting.request_id, 0.1).serialize()
        assert SECRET not in json.dumps(kwargs)
        manager.release(holder.lease_id, Owner(name="alter"))
        event = _first_event(LeaseAvailableTrigger(**kwargs))
        assert event is not None and event.payload["status"] == "granted"
    finally:
        manager.store.close()


@pytest.mark.usefixtures("airflow_db")
def test_the_lease_trigger_opens_the_store_with_the_password_it_does_not_carry(
    store_connection: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trigger row holds a password-free reference; the store the triggerer opens gets the full URL."""
    import asyncio

    from deltaguard.core.admission import Granted
    from deltaguard.hooks import lease as shared_store

    opened: list[str] = []

    class _RecordingManager:
        def check(self, request_id: str) -> Granted:
            return Granted(request_id, request_id, {}, 0.0)

    class _NoStore:
        """Stands in for the store, which is not reachable here."""

        def close(self) -> None:
            pass

    def _open(entry: shared_store.SharedStore) -> None:
        opened.append(entry.url)
        entry.store = _NoStore()  # type: ignore[assignment]

    monkeypatch.setattr(shared_store, "_open_blocking", _open)
    monkeypatch.setattr(shared_store.SharedStore, "manager", lambda self: _RecordingManager())
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_LISTEN", "False")
    trigger = LeaseAvailableTrigger(config.lease_store_url(), "req-1", poll_interval=0.01)
    assert SECRET not in json.dumps(trigger.serialize())

    async def first_event() -> object:
        async for event in trigger.run():
            return event
        return None

    event = asyncio.run(first_event())
    assert event is not None and event.payload["status"] == "granted"
    assert opened and SECRET in opened[0]
