"""The PostgreSQL store folds a decision's buffered writes into one statement when that is safe."""

from __future__ import annotations

from typing import Any

import pytest

from deltaguard.core.admission import Granted
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.sql import postgres as postgres_store

from .conftest import FakeClock, general_path_only, op, request

_SET = postgres_store._P_SET_TABLE


def _table(uri: str, fencing: int) -> tuple[str, dict[str, Any]]:
    return _SET, {"uri": uri, "fencing": fencing, "cv": 1, "cj": "{}"}


def test_writes_to_distinct_tables_fold_into_one_cte_with_renamed_parameters() -> None:
    writes = [
        _table("a", 2),
        _table("b", 5),
        (postgres_store._P_SET_STATUS, {"id": "r", "status": "released", "at": 1.0}),
        (postgres_store._P_DEL_WAITER, {"id": "r"}),
    ]
    folded = postgres_store._fold(writes)
    assert len(folded) == 1
    sql, params = folded[0]
    assert sql.startswith("WITH w0 AS (UPDATE dg_tables") and sql.count("UPDATE dg_tables") == 2
    assert sql.rstrip().endswith("WHERE request_id = %(s3_id)s")
    assert params["s0_uri"] == "a" and params["s1_fencing"] == 5 and params["s2_status"] == "released"
    assert len(params) == 4 + 4 + 3 + 1


@pytest.mark.parametrize(
    "writes",
    [
        # Two writes on one table: the second must see the first, so they go one by one, in order.
        [
            (postgres_store._P_DEL_WAITER, {"id": "r"}),
            (postgres_store._P_DEL_WAITER_ON, {"id": "s", "uris": ["a"]}),
        ],
        [_table("a", 2), (postgres_store._P_SET_TABLE + " ", {"uri": "a"})],
    ],
)
def test_writes_touching_the_same_table_are_not_folded(writes: list[tuple[str, dict[str, Any]]]) -> None:
    assert postgres_store._fold(writes) == writes


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record, per pipeline, how many buffered writes went in and how many statements came out."""
    seen: list[int] = []
    real = postgres_store._fold

    def recording(writes: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
        out = real(writes)
        if writes:
            seen.append(len(out))
        return out

    monkeypatch.setattr(postgres_store, "_fold", recording)
    return seen


@pytest.mark.postgres
def test_grant_and_release_commit_one_statement_and_keep_fencing_and_log(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LeaseManager(pg_url, clock=FakeClock())
    general_path_only(manager, monkeypatch)  # the fast paths are tested in test_pg_fast_path.py
    try:
        a = request("a", ("t1", op("MERGE")), ("t2", op("MERGE")))
        warm = request("warm", ("t1", op("MERGE")), ("t2", op("MERGE")))
        warm_lease = manager.acquire(warm)  # the tables become known and their configs stored
        assert isinstance(warm_lease, Granted) and manager.release(warm_lease.lease_id, warm.owner)
        seen = _spy(monkeypatch)
        first = manager.acquire(a)
        assert isinstance(first, Granted)
        assert manager.release(first.lease_id, a.owner) is True
        assert seen == [1, 1]
        again = manager.acquire(request("b", ("t1", op("MERGE")), ("t2", op("MERGE"))))
        assert isinstance(again, Granted)
        assert again.fencing == {"t1": first.fencing["t1"] + 1, "t2": first.fencing["t2"] + 1}
        assert [d.kind for d in manager.decisions(uri="t2")] == ["grant", "release"] * 2 + ["grant"]
        assert [x.lease_id for x in manager.leases("t1")] == [again.lease_id]
    finally:
        manager.store.close()


@pytest.mark.postgres
def test_expired_holder_reclaim_is_logged_and_not_folded_unsafely(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    manager = LeaseManager(pg_url, clock=clock)
    general_path_only(manager, monkeypatch)  # the fast paths are tested in test_pg_fast_path.py
    try:
        old = manager.acquire(request("old", ("t1", op("MERGE")), ttl_s=5.0))
        assert isinstance(old, Granted)
        clock.advance(10.0)
        seen = _spy(monkeypatch)
        new = manager.acquire(request("new", ("t1", op("MERGE"))))
        assert isinstance(new, Granted) and new.fencing["t1"] == old.fencing["t1"] + 1
        # The reclaim deletes a dg_leases row and the grant inserts one: they must not share a snapshot.
        # The reclaim's writes go out (folded) ahead of the request read, the grant's with the COMMIT.
        assert seen == [1, 1]
        assert [d.kind for d in manager.decisions(uri="t1")] == ["grant", "expiry", "grant"]
        assert [x.lease_id for x in manager.leases("t1")] == [new.lease_id]
    finally:
        manager.store.close()
