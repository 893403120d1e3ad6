"""Store plumbing: fail closed when unreachable, schema creation and migration from older versions."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import sqlalchemy as sa

from deltaguard.core.admission import Granted, Owner
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.open import open_store
from deltaguard.leases.sql import migrations
from deltaguard.leases.store import StoreError, StoreUnavailableError, redact_url

from .conftest import FakeClock, op, request


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket closes


def test_unreachable_postgres_fails_closed_naming_the_store() -> None:
    url = f"postgresql+psycopg://deltaguard:s3cret@127.0.0.1:{_closed_port()}/leases"
    with pytest.raises(StoreUnavailableError) as info:
        open_store(url, connect_timeout_s=2)
    message = str(info.value)
    assert "127.0.0.1" in message and "deltaguard:***@" in message
    assert "s3cret" not in message
    assert "refused" in message.lower() or "connect" in message.lower()


def test_store_going_away_fails_closed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    store = open_store(url)
    manager = LeaseManager(store, clock=FakeClock())
    assert isinstance(manager.acquire(request("a", ("t1", op("INSERT")))), Granted)
    with store.engine.begin() as conn:  # simulate a broken store: its tables are gone
        conn.execute(sa.text("DROP TABLE dg_leases"))
    with pytest.raises(StoreError, match=r"lease store sqlite:///.*leases\.db failed: OperationalError"):
        manager.acquire(request("b", ("t1", op("INSERT"))))


def test_missing_sqlite_directory_fails_closed(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailableError, match="does not exist"):
        open_store(f"sqlite:///{tmp_path / 'nope' / 'leases.db'}")


def test_bad_urls() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        open_store("mysql://u:pw@h/db")
    with pytest.raises(ValueError, match="needs a file"):
        open_store("sqlite:///:memory:")
    assert redact_url("postgresql+psycopg://u:pw@h:5/db") == "postgresql+psycopg://u:***@h:5/db"
    assert redact_url("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"
    # an IPv6 host keeps its brackets; text that is no URL but may hold credentials shows its scheme only
    assert redact_url("postgresql+psycopg://u:pw@[::1]:5432/db") == "postgresql+psycopg://u:***@[::1]:5432/db"
    assert "pw" not in redact_url("postgres:u:pw@host") and "pw" not in redact_url("x+y://u:pw@h:port")


def test_fresh_store_is_at_latest_version(store) -> None:
    assert store.schema_version() == migrations.LATEST == 9


def test_migration_from_version_1_keeps_data(store_url: str) -> None:
    old = open_store(store_url, migrate=False)
    assert old.migrate(target=1) == 1
    with old.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO dg_requests (request_id, owner_key, status, rank, enqueued_at, expires_at, payload, "
                "updated_at) VALUES ('old', :k, 'released', 0, 0, 0, '{}', 0)"
            ),
            {"k": Owner(name="legacy").key},
        )
        conn.execute(sa.text("INSERT INTO dg_tables (uri, fencing) VALUES ('t1', 41)"))
        columns = {c["name"] for c in sa.inspect(conn).get_columns("dg_requests")}
    assert "blockers_sig" not in columns
    old.close()
    # Opening the store migrates it; existing rows and fencing counters survive.
    with open_store(store_url) as store:
        assert store.schema_version() == migrations.LATEST
        assert store.read_request("old").status == "released"
        manager = LeaseManager(store, clock=FakeClock())
        g = manager.acquire(request("a", ("t1", op("MERGE"))))
        assert isinstance(g, Granted) and g.fencing == {"t1": 42}
        assert json.loads(store.decisions(uri="t1")[0].detail)["fencing"] == 42


def test_newer_schema_is_refused(store_url: str) -> None:
    with open_store(store_url) as store, store.engine.begin() as conn:
        # a newer deltaguard's breaking step (the rule of additive ones: tests/leases/test_migrate_command.py)
        conn.execute(sa.text("UPDATE dg_schema_version SET version = 99, compatible_from = 99"))
    with pytest.raises(StoreUnavailableError, match="newer than this deltaguard"):
        open_store(store_url)
