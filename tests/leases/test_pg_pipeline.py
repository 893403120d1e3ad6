"""The PostgreSQL store's pipelined transactions: round trips, prefetch hints and recovery."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from deltaguard.core.admission import Granted, Waiting
from deltaguard.leases.manager import LeaseManager, LeaseOwnershipError
from deltaguard.leases.open import open_store
from deltaguard.leases.store import LeaseRow, StoreError

from .conftest import FakeClock, op, request

pytestmark = pytest.mark.postgres


def _kill_backends(url: str) -> int:
    """Terminate every deltaguard connection to the database (what a server restart does to a pool)."""
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        killed = conn.execute(
            sa.text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'deltaguard-leases' AND datname = current_database()"
            )
        ).scalar_one()
    engine.dispose()
    return int(killed)


def test_dropped_connections_are_retried_without_granting_twice(pg_url: str) -> None:
    manager = LeaseManager(pg_url, clock=FakeClock())
    try:
        a = request("a", ("t1", op("MERGE")))
        first = manager.acquire(a)
        assert isinstance(first, Granted)
        assert _kill_backends(pg_url) >= 1
        # The pooled connection is dead; the pipelined transaction fails, is rolled back whole and re-run.
        b = request("b", ("t1", op("MERGE")))
        assert isinstance(manager.acquire(b), Waiting)
        assert manager.release(first.lease_id, a.owner) is True
        granted = manager.acquire(b)
        assert isinstance(granted, Granted) and granted.fencing["t1"] == first.fencing["t1"] + 1
        assert [d.kind for d in manager.decisions(uri="t1")] == ["grant", "release", "wait", "grant"]
    finally:
        manager.store.close()


def test_release_prefetch_refuses_a_foreign_owner_and_keeps_the_lease(pg_url: str) -> None:
    manager = LeaseManager(pg_url, clock=FakeClock())
    try:
        a = request("a", ("t1", op("MERGE")))
        lease = manager.acquire(a)
        assert isinstance(lease, Granted)
        intruder = request("intruder", ("t1", op("MERGE"))).owner
        with pytest.raises(LeaseOwnershipError):
            manager.release(lease.lease_id, intruder)  # the speculative DELETE matched nothing
        assert [x.lease_id for x in manager.leases("t1")] == [lease.lease_id]
        assert manager.release(lease.lease_id, a.owner) is True
        assert manager.leases("t1") == []
    finally:
        manager.store.close()


def test_a_write_failing_at_commit_rolls_back_the_whole_decision(pg_url: str) -> None:
    row = LeaseRow("L1", "t1", "k", "{}", "{}", 1.0, 2.0, 1, 1.0)
    with open_store(pg_url) as store:
        with store.transaction(["t1"]) as txn:
            txn.insert_lease_rows([row])
        with pytest.raises(StoreError, match="UniqueViolation"), store.transaction(["t1"]) as txn:
            txn.set_table("t1", 7, None, None)  # buffered: sent with the COMMIT
            txn.insert_lease_rows([row])  # duplicate key: the server refuses in the same round trip
        with store.transaction(["t1"]) as txn:
            assert txn.tables()["t1"].fencing == 0  # the buffered update never committed
            assert [r.lease_id for r in txn.holders()[0]] == ["L1"]


def test_one_connection_stays_checked_out_between_calls_and_is_reused(pg_url: str) -> None:
    """The store keeps one connection out of the pool between uses (a check-out and check-in cost more
    client CPU than a one-call decision); nested uses get their own, which go back to the pool."""
    store = open_store(pg_url)
    try:
        pool = store.engine.pool  # type: ignore[attr-defined]
        with store._connect() as first:  # type: ignore[attr-defined]
            with store._connect() as nested:  # type: ignore[attr-defined]
                assert nested is not first
            assert pool.checkedout() == 2
        assert pool.checkedout() == 1  # the first one back is kept; the other went back to the pool
        with store._connect() as again:  # type: ignore[attr-defined]
            assert again is nested
        # Read-only uses carry their own execution options (autocommit): never kept as the spare.
        with store._connect(read_only=True) as reader:  # type: ignore[attr-defined]
            assert reader is not nested
        assert pool.checkedout() == 1
    finally:
        store.close()
    assert pool.checkedout() == 0


def test_a_connection_broken_in_use_is_not_kept(pg_url: str) -> None:
    manager = LeaseManager(pg_url, clock=FakeClock())
    try:
        a = request("a", ("t1", op("MERGE")))
        assert isinstance(manager.acquire(a), Granted)
        spare = manager.store._spare[0]  # type: ignore[attr-defined]
        assert _kill_backends(pg_url) >= 1
        # The one-call release fails on the dead connection, is retried on a new one and succeeds.
        assert manager.release(a.request_id, a.owner) is True
        assert manager.store._spare[0] is not spare  # type: ignore[attr-defined]
        assert spare.closed  # invalidated, then closed rather than kept
    finally:
        manager.store.close()
