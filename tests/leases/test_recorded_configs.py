"""The store keeps the configuration each table's decisions used; the priority policy reads it in one query.

On SQLite and PostgreSQL (the ``store_url`` fixture): through the one-call fast path and the general path,
on a store at schema 1 opened without migrating (as the policy opens it while DAG files are parsed), and
for a store that is not there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from deltaguard.core import TableConfig
from deltaguard.leases import codec
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.open import open_store
from deltaguard.pools.recorded import _read_rows

from .conftest import FakeClock, general_path_only, op, request

WRITE_SERIALIZABLE = TableConfig(
    partition_columns=("p",), properties={"delta.isolationLevel": "WriteSerializable"}, version=3
)


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "general-path"])
def test_a_decision_records_the_table_configuration_it_used(
    store_url: str, fast_path: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(store_url) as store:
        manager = LeaseManager(store, clock=FakeClock())
        if not fast_path:
            general_path_only(manager, monkeypatch)
        for uri in ("/data/a", "/data/b"):
            ask = request("w", (uri, op("UPDATE", "p = 'x'")), config=WRITE_SERIALIZABLE)
            granted = manager.acquire(ask)
            assert manager.release(granted.lease_id, ask.owner)
        statements: list[str] = []
        sa.event.listen(store.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
        rows = store.read_tables(["/data/b", "/data/a", "/data/never", "/data/a"])
        assert len(statements) == 1  # one query for every table asked about
    assert [r.uri for r in rows] == ["/data/a", "/data/b"]
    for row in rows:
        assert codec.config_from_json(json.loads(row.config_json or "null")) == WRITE_SERIALIZABLE
    assert store.read_tables([]) == []


def test_the_policy_reads_a_store_at_schema_1_without_migrating_it(store_url: str) -> None:
    old = open_store(store_url, migrate=False)
    assert old.migrate(target=1) == 1
    text = codec.dumps(codec.config_to_json(WRITE_SERIALIZABLE))
    with old.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO dg_tables (uri, fencing, config_version, config_json) VALUES (:u, 4, 3, :c)"
            ),
            {"u": "/data/a", "c": text},
        )
        conn.execute(sa.text("INSERT INTO dg_tables (uri, fencing) VALUES ('/data/bare', 1)"))
    old.close()
    assert _read_rows(store_url, ["/data/a", "/data/bare", "/data/never"]) == [("/data/a", text)]
    with open_store(store_url, migrate=False) as store:
        assert store.schema_version() == 1  # read, never migrated


def test_no_store_file_reads_as_nothing_recorded_and_creates_none(tmp_path: Path) -> None:
    path = tmp_path / "leases.db"
    assert _read_rows(f"sqlite:///{path}", ["/data/a"]) == []
    assert not path.exists()
