"""The PostgreSQL store's one-call fast paths: a grant on idle tables and a release by the owner, and the
decision on busy tables made from the snapshot the declined grant returns (ADR 0007).

They must commit exactly what the general (locking, model-calling) path commits. The one-call grant steps
aside whenever a table has a holder, an expired lease to reclaim, a queued request, or the request id is
already known; a decision made from a snapshot is committed only if the tables did not change since.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from deltaguard.core import EngineName, EngineProfile, Operation, TableConfig
from deltaguard.core.admission import Granted, Owner, TableClaim, Waiting
from deltaguard.leases import codec
from deltaguard.leases.manager import LeaseManager, LeaseOwnershipError
from deltaguard.leases.store import DecisionRow, IdleGrant, QueuedBehind, SnapshotChanged, TableSnapshot

from .conftest import (
    CONFIG,
    PROFILE,
    FakeClock,
    counting_model,
    fresh_pg_database,
    general_path_only,
    op,
    request,
)

pytestmark = pytest.mark.postgres


@pytest.fixture
def manager(pg_url: str) -> Iterator[LeaseManager]:
    m = LeaseManager(pg_url, clock=FakeClock())
    yield m
    m.store.close()


def _count_calls(manager: LeaseManager, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Record the store's fast-path answers and its general-path transactions."""
    store = manager.store
    seen: dict[str, list[Any]] = {"grant_if_idle": [], "release_owned": [], "run": [], "run_on_snapshot": []}
    for name in seen:
        real = getattr(store, name)

        def spy(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            out = _real(*args, **kwargs)
            seen[_name].append(out)
            return out

        monkeypatch.setattr(store, name, spy)
    return seen


def _owner(task_id: str) -> Owner:
    """The owner the conftest ``request`` helper gives a task."""
    return Owner(dag_id="dag", task_id=task_id)


def _text(operation: Operation) -> str:
    """An operation's stored JSON text."""
    return codec.dumps(codec.operation_to_json(dataclasses.replace(operation, engine=PROFILE)))


def _config_text(config: TableConfig) -> str:
    """A configuration's stored JSON text."""
    return codec.dumps(codec.config_to_json(config))


def _grant(request_id: str, uris: tuple[str, ...], **overrides: Any) -> IdleGrant:
    fields: dict[str, Any] = {
        "request_id": request_id,
        "owner_key": "k",
        "owner_json": "{}",
        "uris": uris,
        "op_jsons": tuple(_text(op("INSERT")) for _ in uris),
        "config_versions": tuple(1 for _ in uris),
        "config_jsons": tuple(_config_text(TableConfig(version=1)) for _ in uris),
        "now": 10.0,
        "expires_at": 70.0,
        "ttl_s": 60.0,
        "rank": 10.0,
        "payload": json.dumps({"uris": list(uris)}),
        "details": tuple('{"operation":"INSERT","owner":"o","waited_s":0.0}' for _ in uris),
    }
    fields.update(overrides)
    return IdleGrant(**fields)


def test_idle_tables_are_granted_and_released_without_a_locking_transaction(
    manager: LeaseManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    warm = request("warm", ("t1", op("MERGE")), ("t2", op("MERGE")))
    first = manager.acquire(warm)  # unknown tables: the general path creates their rows
    assert isinstance(first, Granted)
    assert manager.release(first.lease_id, warm.owner) is True
    seen = _count_calls(manager, monkeypatch)
    a = request("a", ("t2", op("MERGE")), ("t1", op("MERGE")))
    lease = manager.acquire(a)
    assert isinstance(lease, Granted)
    assert lease.fencing == {"t1": first.fencing["t1"] + 1, "t2": first.fencing["t2"] + 1}
    assert manager.release(lease.lease_id, a.owner) is True
    assert seen["run"] == []  # neither needed the general path
    assert seen["grant_if_idle"] == [lease.fencing]
    assert seen["release_owned"] == [[("t1", lease.fencing["t1"]), ("t2", lease.fencing["t2"])]]
    grant, release = manager.decisions(uri="t1", limit=2)[::-1]
    assert (grant.kind, grant.request_id, release.kind) == ("grant", a.request_id, "release")
    assert grant.detail == {
        "fencing": lease.fencing["t1"],
        "operation": op("MERGE").describe(),
        "owner": a.owner.describe(),
        "waited_s": 0.0,
    }
    assert release.detail == {"fencing": lease.fencing["t1"]}
    assert manager.store.read_request(a.request_id).status == "released"  # type: ignore[union-attr]


def test_each_grant_stores_its_own_operation_text(manager: LeaseManager) -> None:
    # Operations that compare equal (labels are not compared) must still be stored with their own label.
    first = dataclasses.replace(op("MERGE"), label="dag_a.merge")
    second = dataclasses.replace(op("MERGE"), label="dag_b.merge")
    assert first == second
    for uri in ("t1", "t2"):  # make the tables known, so the grants below take the fast path
        warm = request("warm", (uri, op("INSERT")))
        assert manager.release(manager.acquire(warm).lease_id, warm.owner)
    for uri, operation in (("t1", first), ("t2", second)):
        lease = manager.acquire(request("a", (uri, operation)))
        assert isinstance(lease, Granted)
        assert [x.operation.label for x in manager.leases(uri)] == [operation.label]


def test_a_busy_table_is_decided_from_its_snapshot_and_keeps_fifo(
    manager: LeaseManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = request("holder", ("t1", op("MERGE")))
    held = manager.acquire(holder)
    assert isinstance(held, Granted)
    queued = request("queued", ("t1", op("MERGE")))
    assert isinstance(manager.acquire(queued), Waiting)
    assert manager.release(held.lease_id, holder.owner) is True
    manager.clock.advance(1.0)  # type: ignore[attr-defined]  # the newcomer ranks after the queued one
    seen = _count_calls(manager, monkeypatch)
    # The table has no lease now, but a queued request: a newcomer may not jump it.
    late = request("late", ("t1", op("MERGE")))
    answer = manager.acquire(late)
    assert isinstance(answer, Waiting) and [b.id for b in answer.blockers] == [queued.request_id]
    # The declined grant returned the table's state; the wait was decided from it, with no locking round.
    (snapshot,) = seen["grant_if_idle"]
    assert isinstance(snapshot, TableSnapshot) and [w.request_id for w in snapshot.waiters] == [
        queued.request_id
    ]
    assert seen["run_on_snapshot"] == [answer] and seen["run"] == []
    assert [w.request_id for w in manager.waiters("t1")] == [queued.request_id, late.request_id]
    granted = manager.check(queued.request_id)  # a waiting request's re-check skips the one-step attempt
    assert isinstance(granted, Granted) and granted.fencing["t1"] == held.fencing["t1"] + 1
    assert len(seen["grant_if_idle"]) == 1 and len(seen["run"]) == 1


def test_an_expired_holder_is_reclaimed_and_logged_by_the_next_decision(pg_url: str) -> None:
    clock = FakeClock()
    manager = LeaseManager(pg_url, clock=clock)
    try:
        dead = manager.acquire(request("dead", ("t1", op("MERGE")), ttl_s=5.0))
        assert isinstance(dead, Granted)
        clock.advance(10.0)
        new = manager.acquire(request("new", ("t1", op("MERGE"))))
        assert isinstance(new, Granted) and new.fencing["t1"] == dead.fencing["t1"] + 1
        kinds = [(d.kind, d.request_id) for d in manager.decisions(uri="t1")][::-1]
        assert kinds == [("grant", dead.lease_id), ("expiry", dead.lease_id), ("grant", new.lease_id)]
        assert manager.store.read_request(dead.lease_id).status == "expired"  # type: ignore[union-attr]
    finally:
        manager.store.close()


def test_busy_tables_come_back_as_state_and_unknown_tables_as_nothing(
    manager: LeaseManager,
) -> None:
    store = manager.store
    assert store.grant_if_idle(_grant("r1", ("new",))) is None  # no table row yet
    lease = manager.acquire(request("a", ("t1", op("INSERT"))))
    assert isinstance(lease, Granted)
    busy = store.grant_if_idle(_grant("r2", ("t1",)))  # a lease is held: its state comes back instead
    assert isinstance(busy, TableSnapshot) and busy.request is None
    assert [(x.lease_id, x.fencing) for x in busy.leases] == [(lease.lease_id, lease.fencing["t1"])]
    assert busy.leases == store.read_lease(lease.lease_id)  # the same values the locking path reads
    assert busy.tables["t1"].fencing == lease.fencing["t1"]
    known = store.grant_if_idle(_grant(lease.lease_id, ("t1",)))  # the request's own status row comes too
    assert isinstance(known, TableSnapshot) and known.request == store.read_request(lease.lease_id)
    assert store.grant_if_idle(_grant("r3", ("t1", "new"))) is None  # one table has no row yet
    manager.acquire(request("b", ("t2", op("INSERT"))))  # creates t2 with a configuration
    with store.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.execute(sa.text("DELETE FROM dg_leases"))
        conn.execute(sa.text("UPDATE dg_tables SET config_json = NULL, config_version = NULL"))
    # No stored configuration and none offered: the grant declines with the state, the decision made from
    # it raises, and so does the locking path it falls back to.
    unknown = store.grant_if_idle(_grant("r3", ("t2",), config_versions=(None,), config_jsons=(None,)))
    assert isinstance(unknown, TableSnapshot) and unknown.leases == []
    with pytest.raises(ValueError, match="no table configuration known"):  # raised by the locking path
        fresh = LeaseManager(store, clock=manager.clock)  # nothing cached either
        fresh.acquire(request("c", ("t2", op("INSERT")), config=None))  # type: ignore[arg-type]
    fencing = store.grant_if_idle(_grant("r4", ("t2",)))
    assert isinstance(fencing, dict) and set(fencing) == {"t2"}


def test_a_sole_live_holder_known_compatible_is_granted_beside_in_one_call(manager: LeaseManager) -> None:
    store, clock = manager.store, manager.clock
    insert, merge = _text(op("INSERT")), _text(op("MERGE"))
    v1, v2 = _config_text(CONFIG), _config_text(dataclasses.replace(CONFIG, version=2))
    held = manager.acquire(request("holder", ("t1", op("INSERT"))))  # stores CONFIG as the configuration
    assert isinstance(held, Granted)
    now = clock()  # type: ignore[operator]
    key = _owner("direct").key  # also its stored JSON text
    live = {"now": now, "expires_at": now + 60.0, "config_jsons": (v1,), "owner_key": key, "owner_json": key}

    def ask(request_id: str, **fields: Any) -> Any:
        return store.grant_if_idle(_grant(request_id, ("t1",), **{**live, **fields}))

    assert isinstance(ask("r1"), TableSnapshot)  # nothing known compatible
    assert isinstance(ask("r2", compatible=((merge,),)), TableSnapshot)  # not the holder's operation
    # Judged under another configuration than the one the decision would use (the stored one, as new):
    unpartitioned = _config_text(dataclasses.replace(CONFIG, partition_columns=()))
    assert isinstance(ask("r3", compatible=((insert,),), config_jsons=(unpartitioned,)), TableSnapshot)
    assert store.read_request("r3") is None and [x.lease_id for x in manager.leases("t1")] == [held.lease_id]

    granted = ask("r4", compatible=((merge, insert),))
    assert granted == {"t1": held.fencing["t1"] + 1}
    assert sorted(x.lease_id for x in manager.leases("t1")) == sorted([held.lease_id, "r4"])
    assert store.read_request("r4").status == "granted"  # type: ignore[union-attr]
    assert isinstance(ask("r5", compatible=((insert,),)), TableSnapshot)  # two holders: pairs do not add up

    # A newer offered configuration is the one the decision uses: granted, and it replaces the stored one.
    manager.acquire(request("other", ("t2", op("INSERT"))))
    newer = store.grant_if_idle(
        _grant(
            "r6", ("t2",), compatible=((insert,),), config_versions=(2,), **{**live, "config_jsons": (v2,)}
        )
    )
    assert isinstance(newer, dict)
    with store.transaction(["t2"]) as txn:  # type: ignore[attr-defined]
        assert (txn.tables()["t2"].config_version, txn.tables()["t2"].config_json) == (2, v2)

    # An expired holder must be reclaimed and logged: the general decision does that.
    manager.acquire(request("dying", ("t3", op("INSERT")), ttl_s=5.0))
    later = {"now": now + 10.0, "expires_at": now + 70.0}
    assert isinstance(
        store.grant_if_idle(_grant("r7", ("t3",), compatible=((insert,),), **{**live, **later})),
        TableSnapshot,
    )
    # A queued request keeps its place (FIFO): the general decision runs.
    manager.acquire(request("h4", ("t4", op("INSERT"))))
    assert isinstance(manager.acquire(request("q4", ("t4", op("MERGE")))), Waiting)
    assert isinstance(
        store.grant_if_idle(_grant("r8", ("t4",), compatible=((insert,),), **live)), TableSnapshot
    )


def test_the_manager_learns_a_compatible_holder_from_its_model_and_reuses_it(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked, counting_decide = counting_model()
    manager = LeaseManager(pg_url, clock=FakeClock(), decide=counting_decide)
    try:
        holder = manager.acquire(request("holder", ("t1", op("INSERT"))))  # creates t1: general path
        assert isinstance(holder, Granted)
        seen = _count_calls(manager, monkeypatch)
        first = manager.acquire(request("first", ("t1", op("INSERT"))))
        assert isinstance(first, Granted) and asked == ["INSERT"]  # decided from the snapshot by the model
        assert len(seen["run_on_snapshot"]) == 1
        assert manager.release(first.lease_id, _owner("first")) is True
        # The verdict was for that engine: the same INSERT committed by another engine asks the model again.
        other_engine = dataclasses.replace(
            request("rs", ("t1", op("INSERT"))),
            claims=(TableClaim("t1", op("INSERT"), EngineProfile(EngineName.DELTA_RS, "1.6.6"), CONFIG),),
        )
        rs = manager.acquire(other_engine)
        assert isinstance(rs, Granted) and asked == ["INSERT", "INSERT"]
        assert len(seen["run_on_snapshot"]) == 2
        assert manager.release(rs.lease_id, other_engine.owner) is True
        second = manager.acquire(request("second", ("t1", op("INSERT"))))
        assert isinstance(second, Granted) and second.fencing == {"t1": rs.fencing["t1"] + 1}
        # One call, no model: the store granted beside the holder the model had found compatible.
        assert seen["grant_if_idle"][-1] == second.fencing and asked == ["INSERT", "INSERT"]
        assert len(seen["run_on_snapshot"]) == 2 and seen["run"] == []
        grant = manager.decisions(uri="t1", limit=1)[0]
        assert (grant.kind, grant.request_id, grant.detail["fencing"]) == ("grant", second.lease_id, 4)
        # With two holders now, a third INSERT goes back to the model (rules over several operations).
        third = manager.acquire(request("third", ("t1", op("INSERT"))))
        assert isinstance(third, Granted) and asked == ["INSERT"] * 3
        # A MERGE was never found compatible: the model decides, and it waits.
        assert isinstance(manager.acquire(request("merge", ("t1", op("MERGE")))), Waiting)
        assert asked[-1] == "MERGE" and len(seen["run_on_snapshot"]) == 4
    finally:
        manager.store.close()


def test_release_of_a_foreign_or_ended_lease_is_not_done_in_one_step(manager: LeaseManager) -> None:
    a = request("a", ("t1", op("MERGE")))
    lease = manager.acquire(a)
    assert isinstance(lease, Granted)
    intruder = _owner("intruder")
    assert manager.store.release_owned(lease.lease_id, intruder.key, ["t1"], [], 5.0) == []
    with pytest.raises(LeaseOwnershipError):
        manager.release(lease.lease_id, intruder)
    assert [x.lease_id for x in manager.leases("t1")] == [lease.lease_id]
    assert manager.release(lease.lease_id, a.owner) is True
    assert manager.release(lease.lease_id, a.owner) is False  # idempotent
    kinds = [d.kind for d in manager.decisions(uri="t1")][::-1]
    assert kinds == ["grant", "refuse", "release"]


def test_a_queued_request_is_withdrawn_in_one_step_only_by_its_owner(
    manager: LeaseManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = request("holder", ("t1", op("MERGE")))
    assert isinstance(manager.acquire(holder), Granted)
    queued = request("queued", ("t1", op("MERGE")))
    assert isinstance(manager.acquire(queued), Waiting)
    assert manager.store.release_owned(queued.request_id, _owner("intruder").key, ["t1"], [], 1.0) == []
    seen = _count_calls(manager, monkeypatch)
    assert manager.release(queued.request_id, queued.owner) is True
    assert seen["release_owned"] == [[("t1", None)]] and seen["run"] == []
    assert manager.waiters("t1") == []
    assert manager.store.read_request(queued.request_id).status == "released"  # type: ignore[union-attr]
    withdrawn = manager.decisions(uri="t1", limit=1)[0]
    assert (withdrawn.kind, withdrawn.request_id, withdrawn.detail) == (
        "release",
        queued.request_id,
        {"withdrawn": True},
    )
    assert manager.release(queued.request_id, queued.owner) is False  # idempotent


def test_releasing_a_metadata_change_drops_the_stored_configuration(manager: LeaseManager) -> None:
    alter = request("alter", ("t1", op("SET_TBLPROPERTIES")))
    lease = manager.acquire(alter)
    assert isinstance(lease, Granted)
    assert manager.release(lease.lease_id, alter.owner) is True
    other = LeaseManager(manager.store, clock=manager.clock)  # a manager that did not grant it
    second = request("again", ("t1", op("SET_TBLPROPERTIES")))
    lease2 = other.acquire(second)
    assert isinstance(lease2, Granted)
    with manager.store.transaction(["t1"]) as txn:  # type: ignore[attr-defined]
        assert txn.tables()["t1"].config_json is not None
    assert manager.release(lease2.lease_id, second.owner) is True  # read_lease finds the operation
    with manager.store.transaction(["t1"]) as txn:  # type: ignore[attr-defined]
        row = txn.tables()["t1"]
    assert (row.config_json, row.config_version) == (None, None)


def _snapshot(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row the decisions wrote, in a comparable order (the decision-log sequence left out)."""
    engine = sa.create_engine(url)
    queries = {
        "tables": "SELECT uri, fencing, config_version, config_json FROM dg_tables ORDER BY uri",
        "leases": "SELECT lease_id, uri, owner_key, owner_json, op_json, granted_at, expires_at, fencing, ttl_s "
        "FROM dg_leases ORDER BY lease_id, uri",
        "queue": "SELECT request_id, uri, owner_key, rank, expires_at FROM dg_queue ORDER BY request_id, uri",
        "requests": "SELECT request_id, owner_key, status, rank, enqueued_at, expires_at, payload, updated_at, "
        "last_wait FROM dg_requests ORDER BY request_id",
        "decisions": "SELECT at, kind, request_id, uri, owner_key, detail FROM dg_decisions "
        "ORDER BY at, request_id, uri, kind",
    }
    try:
        with engine.connect() as conn:
            return {name: [tuple(r) for r in conn.execute(sa.text(q))] for name, q in queries.items()}
    finally:
        engine.dispose()


def _scenario(url: str, fast: bool, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[tuple[Any, ...]]]:
    """Grants, a refused release, releases (one of a metadata change), re-grants with older and newer
    configurations, waits (decided by the model, then known), grants beside a holder (decided by the model, then known compatible) and a grant
    after reclaiming an expired holder, with deterministic ids and times."""
    clock = FakeClock(1_700_000_000.123456789)  # a fraction: stored floats must come back exact
    manager = LeaseManager(url, clock=clock)
    if fast:
        seen = _count_calls(manager, monkeypatch)
    else:
        general_path_only(manager, monkeypatch)

    def ask(owner: str, *tables: Any, config: TableConfig, ttl_s: float = 60.0) -> Granted:
        req = dataclasses.replace(
            request(owner, *tables, config=config, ttl_s=ttl_s), request_id=f"{owner}-id"
        )
        answer = manager.acquire(req)
        clock.advance(1.0)
        assert isinstance(answer, Granted)
        return answer

    def release(lease: Granted, owner: str) -> None:
        assert manager.release(lease.lease_id, _owner(owner)) is True
        clock.advance(1.0)

    v1, v2 = TableConfig(version=1), TableConfig(partition_columns=("d",), version=2)
    try:
        a = ask("a", ("t1", op("MERGE")), ("t2", op("INSERT")), config=v1)
        b = ask("b", ("t3", op("DELETE", "d = 1")), config=v2)
        release(b, "b")
        c = ask("c", ("t3", op("INSERT")), config=v1)  # older than the stored v2: v2 is kept
        with pytest.raises(LeaseOwnershipError):
            manager.release(a.lease_id, _owner("intruder"))
        queued = dataclasses.replace(request("w", ("t1", op("MERGE")), config=v1), request_id="w-id")
        assert isinstance(manager.acquire(queued), Waiting)  # behind a's MERGE
        clock.advance(0.25)
        assert isinstance(manager.acquire(queued), Waiting)  # asks again: keeps its rank, as read
        clock.advance(1.0)
        assert manager.release(queued.request_id, _owner("w")) is True  # withdrawn
        clock.advance(1.0)
        again = dataclasses.replace(request("w2", ("t1", op("MERGE")), config=v1), request_id="w2-id")
        assert isinstance(manager.acquire(again), Waiting)  # the same wait: queued in one call (ADR 0010)
        clock.advance(1.0)
        assert manager.release(again.request_id, _owner("w2")) is True
        clock.advance(1.0)
        release(a, "a")
        release(c, "c")
        d = ask("d", ("t1", op("MERGE")), ("t2", op("MERGE")), config=v2)  # newer: replaces v1
        e = ask("e", ("t4", op("SET_TBLPROPERTIES")), config=v1)
        release(e, "e")  # a metadata change: the stored configuration is dropped
        assert d.fencing == {"t1": 2, "t2": 2}
        f = ask("f", ("t5", op("INSERT")), config=v1)
        g = ask("g", ("t5", op("INSERT")), config=v1)  # beside f: the model says blind appends coexist
        release(g, "g")
        h = ask("h", ("t5", op("INSERT")), config=v1)  # beside f again: known compatible, one call
        release(f, "f")
        release(h, "h")
        ask("x", ("t6", op("MERGE")), config=v1, ttl_s=0.5)  # dies: never released
        y = ask("y", ("t6", op("MERGE")), config=v1)  # reclaims x's expired lease first
        assert (g.fencing, h.fencing, y.fencing) == ({"t5": 2}, {"t5": 3}, {"t6": 2})
        if fast:  # the comparison means something only if the one-call paths did part of the work
            assert any(seen["grant_if_idle"]) and any(seen["release_owned"])
            assert len(seen["run_on_snapshot"]) == 4  # committed: w's two waits, g's and y's grants
            assert h.fencing in seen["grant_if_idle"]
            assert [x.lease_id for x in seen["grant_if_idle"] if isinstance(x, QueuedBehind)] == [a.lease_id]
    finally:
        manager.store.close()
    return _snapshot(url)


def test_fast_and_general_paths_commit_the_same_rows(pg_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with_fast = _scenario(fresh_pg_database(pg_server), True, monkeypatch)
    without = _scenario(fresh_pg_database(pg_server), False, monkeypatch)
    assert with_fast == without
    tables = {row[0]: row[1:] for row in with_fast["tables"]}
    assert tables["t1"][:2] == (2, 2) and tables["t3"][:2] == (2, 2) and tables["t4"] == (1, None, None)
    kinds = [row[1] for row in with_fast["decisions"]]
    assert kinds.count("refuse") == 2 and kinds.count("wait") == 2  # refused on both tables of lease a
    assert [(row[1], row[2]) for row in with_fast["decisions"] if row[3] == "t6"] == [
        ("grant", "x-id"),
        ("expiry", "x-id"),
        ("grant", "y-id"),
    ]
    assert ("w-id", "released") in [(row[0], row[2]) for row in with_fast["requests"]]


def test_a_decision_from_a_stale_snapshot_writes_nothing(manager: LeaseManager) -> None:
    store = manager.store
    a, b = request("a", ("t1", op("INSERT"))), request("b", ("t1", op("INSERT")))
    assert isinstance(manager.acquire(a), Granted) and isinstance(manager.acquire(b), Granted)
    entry = DecisionRow(5.0, "wait", "r1", "t1", "k", "{}")

    def log_beside(holders: int) -> Any:
        """A decision body that sees ``holders`` leases and writes one log entry."""

        def body(txn: Any) -> str:
            assert len(txn.holders()[0]) == holders
            txn.log([entry])
            return "decided"

        return body

    stale = store.grant_if_idle(_grant("r1", ("t1",)))
    assert isinstance(stale, TableSnapshot)
    assert manager.release(b.request_id, b.owner) is True  # the table changes after the snapshot
    with pytest.raises(SnapshotChanged):
        store.run_on_snapshot(stale, log_beside(2))
    assert [d.request_id for d in manager.decisions(uri="t1")] == [b.request_id, b.request_id, a.request_id]

    def read_after_write(txn: Any) -> str:
        txn.log([entry])
        txn.holders()  # the snapshot does not show the transaction's own writes
        return "decided"

    with pytest.raises(SnapshotChanged, match="needs the table locks"):
        store.run_on_snapshot(store.grant_if_idle(_grant("r1", ("t1",))), read_after_write)  # type: ignore[arg-type]
    assert "r1" not in [d.request_id for d in manager.decisions(uri="t1")]

    fresh = store.grant_if_idle(_grant("r1", ("t1",)))
    assert isinstance(fresh, TableSnapshot)
    assert store.run_on_snapshot(fresh, log_beside(1)) == "decided"
    assert "r1" in [d.request_id for d in manager.decisions(uri="t1")]  # an unchanged snapshot commits


def test_tables_that_changed_meanwhile_are_decided_again_under_the_locks(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    manager, other = LeaseManager(pg_url, clock=clock), LeaseManager(pg_url, clock=clock)
    try:
        dead = manager.acquire(request("dead", ("t1", op("INSERT")), ttl_s=5.0))
        holder = request("holder", ("t1", op("INSERT")))
        held = manager.acquire(holder)
        assert isinstance(dead, Granted) and isinstance(held, Granted)
        clock.advance(10.0)  # the dead lease expired; the holder's has not
        real = manager.store.run_on_snapshot
        outcomes: list[Any] = []

        def racing(snapshot: TableSnapshot, body: Any) -> Any:
            assert {x.lease_id for x in snapshot.leases} == {dead.lease_id, held.lease_id}
            other.release(held.lease_id, holder.owner)  # another process releases after the snapshot
            try:
                outcomes.append(real(snapshot, body))
            except SnapshotChanged as exc:
                outcomes.append(exc)
                raise
            return outcomes[-1]

        monkeypatch.setattr(manager.store, "run_on_snapshot", racing)
        with caplog.at_level("WARNING", logger="deltaguard.leases"):
            late = manager.acquire(request("late", ("t1", op("MERGE"))))
        # From the snapshot a MERGE would have waited for the holder; under the locks the holder is gone.
        assert [type(x) for x in outcomes] == [SnapshotChanged]
        assert isinstance(late, Granted) and late.fencing["t1"] == held.fencing["t1"] + 1
        kinds = [(d.kind, d.request_id) for d in manager.decisions(uri="t1")][::-1]
        assert kinds[2:] == [
            ("release", held.lease_id),
            ("expiry", dead.lease_id),
            ("grant", late.lease_id),
        ]
        assert manager.waiters("t1") == []
        warned = [r.getMessage() for r in caplog.records if "reclaimed expired lease" in r.getMessage()]
        assert len(warned) == 1 and dead.lease_id in warned[0]  # once: the discarded attempt said nothing
    finally:
        manager.store.close()
        other.store.close()


def test_a_store_that_stops_answering_on_the_snapshot_path_fails_the_request_once(
    manager: LeaseManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The locking transaction would meet the same store: deciding again there would make the request
    wait a second ``store_timeout`` (ADR 0018)."""
    from deltaguard.exceptions import StoreUnavailableError

    assert isinstance(manager.acquire(request("holder", ("t1", op("INSERT")))), Granted)
    seen = _count_calls(manager, monkeypatch)

    def stopped(snapshot: TableSnapshot, body: Any) -> Any:
        raise StoreUnavailableError("lease store did not answer in time")

    monkeypatch.setattr(manager.store, "run_on_snapshot", stopped)
    with pytest.raises(StoreUnavailableError):
        manager.acquire(request("late", ("t1", op("MERGE"))))
    assert seen["run"] == []  # no second attempt under the locks
