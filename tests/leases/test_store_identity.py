"""A lease store has an identity that every fence check verifies (ADR 0018, "A store has an identity").

Real SQLite files: the store is unlinked with its ``-wal`` and ``-shm`` while a lease is held, the next
process opens the path, which creates an empty store, and is granted the same table. The holder's
connections still read the unlinked file, where its lease lives on; its fence must fail all the same.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa
from deltalake import DeltaTable, write_deltalake

from deltaguard.core.admission import Granted
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.specs import DeleteSpec, WriteContext
from deltaguard.exceptions import (
    CommitFencedError,
    LateCommitError,
    LeaseLostError,
    StoreReplacedError,
    StoreUnavailableError,
)
from deltaguard.leases.keeper import LeaseKeeper
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.open import open_store
from deltaguard.leases.sql.sqlite import SqliteLeaseStore

from .conftest import op, request


def _unlink_store(path: Path) -> None:
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if name.exists():
            os.unlink(name)


def _holder(tmp_path: Path, uri: str) -> tuple[LeaseManager, LeaseKeeper]:
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}")
    me = request("holder", (uri, op("DELETE")), ttl_s=120)
    grant = manager.acquire(me)
    assert isinstance(grant, Granted)
    keeper = LeaseKeeper(
        manager, grant.lease_id, me.owner, expires_at=grant.expires_at, fencing=grant.fencing
    )
    return manager, keeper


def test_a_store_deleted_under_a_holder_fails_its_next_fence_check(tmp_path: Path, caplog) -> None:
    uri = str(tmp_path / "sales")
    manager, keeper = _holder(tmp_path, uri)
    keeper.check()  # the store is the one that granted the lease
    _unlink_store(tmp_path / "leases.db")
    # the holder's own handle does not create a store at the path when it connects again
    manager.store.engine.dispose()  # type: ignore[attr-defined]
    with pytest.raises(StoreUnavailableError):  # the unlinked file is not created again
        manager.store.schema_version()
    assert not (tmp_path / "leases.db").exists()
    manager.store.close()
    manager, keeper = _holder(tmp_path, uri)
    keeper.check()
    _unlink_store(tmp_path / "leases.db")
    with caplog.at_level(logging.WARNING, logger="deltaguard.leases"):
        other = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}")  # the next task: a new, empty store
    assert any("created a new lease store" in r.getMessage() for r in caplog.records)  # not silently
    try:
        granted = other.acquire(request("other", (uri, op("INSERT"))))
        assert isinstance(granted, Granted)  # the new store knows nothing of the old lease
        assert other.store.store_id != keeper.store_id
        # the holder's connections still renew its lease in the unlinked file; the identity check does not
        with pytest.raises(LeaseLostError, match="lease store was replaced"):
            keeper.check()
        assert keeper.lost and "deleted" in (keeper.lost_reason or "")
    finally:
        other.store.close()
        manager.store.close()


def test_a_holder_of_a_deleted_store_commits_nothing_and_a_late_commit_is_flagged(tmp_path: Path) -> None:
    """The fence before the commit fails (nothing written); a commit already past its last check when the
    store was replaced is reported late, since the old store cannot tell who was granted since."""
    uri = str(tmp_path / "sales")
    write_deltalake(uri, pa.table({"id": pa.array([1, 2], pa.int64()), "country": ["DE", "FR"]}))
    manager, keeper = _holder(tmp_path, uri)
    try:
        _unlink_store(tmp_path / "leases.db")
        SqliteLeaseStore(f"sqlite:///{tmp_path / 'leases.db'}").close()
        with pytest.raises(CommitFencedError, match="lease store was replaced"):
            DeltaRsEngine().write(uri, DeleteSpec(predicate="country = 'FR'"), WriteContext(fence=keeper))
        assert DeltaTable(uri).version() == 0
    finally:
        manager.store.close()

    manager, keeper = _holder(tmp_path, uri)
    real_check = keeper.check

    def check_then_store_replaced() -> None:
        real_check()
        _unlink_store(tmp_path / "leases.db")
        SqliteLeaseStore(f"sqlite:///{tmp_path / 'leases.db'}").close()

    keeper.check = check_then_store_replaced  # type: ignore[method-assign]
    try:
        with pytest.raises(LateCommitError, match="lease store was replaced"):
            DeltaRsEngine().write(uri, DeleteSpec(predicate="country = 'FR'"), WriteContext(fence=keeper))
        assert DeltaTable(uri).version() == 1  # in the table: the error says so
    finally:
        manager.store.close()


def test_every_handle_of_a_store_reads_one_identity_and_a_new_store_another(store_url: str) -> None:
    with open_store(store_url) as first, open_store(store_url) as second:
        assert first.store_id is not None and first.store_id == second.store_id
        first.verify_identity(first.store_id)
        with pytest.raises(StoreReplacedError):
            first.verify_identity("0" * 32)


@pytest.mark.postgres
def test_a_postgres_store_created_anew_fails_the_identity_check(pg_url: str) -> None:
    """A database dropped and created again under the same name gets a new id at its first migration;
    played here by replacing the id row, as a fresh schema would write it."""
    with open_store(pg_url) as store:
        assert store.store_id is not None
        engine = sa.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1))
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE dg_store SET store_id = 'another'"))
        engine.dispose()
        with pytest.raises(StoreReplacedError, match="another"):
            store.verify_identity(store.store_id)


def _statements(store: object, run: Callable[[], object]) -> list[str]:
    """The SQL statements ``run`` sends through the store's SQLAlchemy engine (PostgreSQL's locked
    transaction runs as one psycopg pipeline beside it, the same with or without the identity check)."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(" ".join(statement.split()))

    engine = store.engine  # type: ignore[attr-defined]
    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        run()
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
    return seen


def test_a_renewal_checks_the_store_identity_in_its_own_read(store_url: str) -> None:
    """The identity check costs a renewal no statement of its own: a keeper's renewal sends as many
    statements as a heartbeat that checks nothing, one of them reading the store's id; and a store whose id
    changed fails the renewal all the same."""
    manager = LeaseManager(store_url)
    try:
        me = request("holder", ("/t/sales", op("DELETE")), ttl_s=120)
        grant = manager.acquire(me)
        assert isinstance(grant, Granted)
        keeper = LeaseKeeper(
            manager, grant.lease_id, me.owner, expires_at=grant.expires_at, fencing=grant.fencing
        )
        assert keeper.store_id is not None
        unchecked = _statements(manager.store, lambda: manager.heartbeat(grant.lease_id, me.owner))
        renewal = _statements(manager.store, keeper._renew)
        assert keeper.renewals == 1 and not keeper.lost
        assert len(renewal) == len(unchecked), (renewal, unchecked)
        assert any("dg_store" in s for s in renewal) and not any("dg_store" in s for s in unchecked)
        with manager.store.engine.begin() as conn:  # type: ignore[attr-defined]
            conn.execute(sa.text("UPDATE dg_store SET store_id = 'another'"))
        keeper._renew()
        assert keeper.lost and keeper.store_replaced is not None and "another" in keeper.store_replaced
    finally:
        manager.store.close()


@pytest.mark.postgres
def test_a_connection_the_server_dropped_is_not_a_replaced_store(pg_url: str) -> None:
    """A lease store's PostgreSQL restarted (fast shutdown) drops every connection: "terminating connection
    due to administrator command". The same store answers again after it, so the identity check reports
    it unavailable (the renewal is retried), never replaced (every holder would lose its lease: measured in
    the production-shaped run, where the restarts failed six writes so). Played here by terminating the
    store's backends."""
    with open_store(pg_url) as store:
        store_id = store.store_id
        assert store_id is not None
        store.verify_identity(store_id)  # a pooled connection, as a holder's renewals keep one
        admin = sa.create_engine(pg_url.replace("postgresql://", "postgresql+psycopg://", 1))
        with admin.begin() as conn:
            terminated = conn.execute(
                sa.text(
                    "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()) t"
                )
            ).scalar_one()
        admin.dispose()
        assert terminated >= 1
        # the dropped connection may surface once as unavailable; the next call reconnects
        with contextlib.suppress(StoreUnavailableError):
            store.verify_identity(store_id)
        store.verify_identity(store_id)  # the same store, once reached again


def test_a_store_without_its_identity_table_is_a_replaced_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    with open_store(url) as store:
        store_id = store.store_id
        assert store_id is not None
        engine = sa.create_engine(url)
        with engine.begin() as conn:
            conn.execute(sa.text("DROP TABLE dg_store"))
        engine.dispose()
        with pytest.raises(StoreReplacedError, match="not the store this holder opened"):
            store.verify_identity(store_id)
