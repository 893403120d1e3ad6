"""The lease manager on both stores, with an injectable clock and the real conflict model."""

from __future__ import annotations

import logging

import pytest

from deltaguard.core.admission import Closed, Granted, Owner, Waiting
from deltaguard.leases.manager import (
    LeaseLostError,
    LeaseManager,
    LeaseOwnershipError,
    RequestClosedError,
)

from .conftest import CONFIG, FakeClock, op, request


@pytest.fixture
def manager(store, clock: FakeClock) -> LeaseManager:
    return LeaseManager(store, clock=clock, ageing_s=10.0, retention_s=3600.0)


def granted(result) -> Granted:
    assert isinstance(result, Granted), result
    return result


def waiting(result) -> Waiting:
    assert isinstance(result, Waiting), result
    return result


def test_grant_wait_release_then_waiter_granted(manager: LeaseManager) -> None:
    a = request("merge_de", ("t1", op("MERGE")))
    b = request("merge_fr", ("t1", op("MERGE")))
    ga = granted(manager.acquire(a))
    wb = waiting(manager.acquire(b))
    assert [(x.id, x.kind, x.owner.task_id) for x in wb.blockers] == [(a.request_id, "lease", "merge_de")]
    assert wb.reasons and wb.position == 1
    assert isinstance(manager.check(b.request_id), Waiting)
    assert manager.release(ga.lease_id, a.owner) is True
    gb = granted(manager.check(b.request_id))
    assert gb.fencing["t1"] == ga.fencing["t1"] + 1
    kinds = [d.kind for d in manager.decisions(uri="t1")]
    assert kinds == ["grant", "release", "wait", "grant"]  # newest first
    assert [d.kind for d in manager.decisions(owner=b.owner)] == ["grant", "wait"]


def test_compatible_writes_share_a_table(manager: LeaseManager) -> None:
    first = granted(manager.acquire(request("a", ("t1", op("INSERT")))))
    second = granted(manager.acquire(request("b", ("t1", op("INSERT")))))
    assert second.fencing["t1"] == first.fencing["t1"] + 1
    assert {x.owner.task_id for x in manager.leases("t1")} == {"a", "b"}


def test_acquire_again_is_idempotent_and_keeps_queue_place(manager: LeaseManager, clock: FakeClock) -> None:
    a = request("a", ("t1", op("MERGE")))
    b = request("b", ("t1", op("MERGE")))
    c = request("c", ("t1", op("MERGE")))
    ga = granted(manager.acquire(a))
    assert granted(manager.acquire(a)) == ga
    waiting(manager.acquire(b))
    clock.advance(1)
    waiting(manager.acquire(c))
    waiting(manager.acquire(b))  # re-asking keeps b ahead of c
    manager.release(a.request_id, a.owner)
    assert waiting(manager.acquire(c)).blockers[0].id == b.request_id
    granted(manager.acquire(b))
    assert manager.decisions(owner=b.owner)[-1].kind == "wait"
    assert len([d for d in manager.decisions(owner=b.owner) if d.kind == "wait"]) == 1  # logged once


def test_fifo_later_conflicting_request_cannot_jump_the_queue(manager: LeaseManager) -> None:
    a = request("a", ("t1", op("MERGE")))
    b = request("b", ("t1", op("MERGE")))
    c = request("c", ("t1", op("MERGE")))
    granted(manager.acquire(a))
    waiting(manager.acquire(b))
    manager.release(a.request_id, a.owner)
    wc = waiting(manager.acquire(c))  # the table is free, but b was first
    assert [(x.id, x.kind) for x in wc.blockers] == [(b.request_id, "waiting")]
    assert wc.position == 2
    granted(manager.check(b.request_id))


def test_non_conflicting_request_not_held_back(manager: LeaseManager) -> None:
    day1 = "t.id = s.id AND t.date = '2024-01-01'"
    granted(manager.acquire(request("a", ("t1", op("MERGE", day1)))))
    waiting(manager.acquire(request("b", ("t1", op("MERGE", day1)))))
    granted(manager.acquire(request("c", ("t1", op("MERGE", "t.id = s.id AND t.date = '2024-01-02'")))))
    granted(manager.acquire(request("d", ("t2", op("MERGE")))))


def test_multi_table_all_or_nothing(manager: LeaseManager) -> None:
    holder = request("holder", ("t2", op("MERGE")))
    granted(manager.acquire(holder))
    both = request("both", ("t1", op("MERGE")), ("t2", op("MERGE")))
    wb = waiting(manager.acquire(both))
    assert {b.table for b in wb.blockers} == {"t2"}
    assert manager.leases("t1") == []  # nothing held on t1 while waiting for t2
    assert [w.request_id for w in manager.waiters("t1")] == [both.request_id]
    manager.release(holder.request_id, holder.owner)
    g = granted(manager.check(both.request_id))
    assert set(g.fencing) == {"t1", "t2"}


def test_expiry_reclaim_and_theft_after_expiry(manager: LeaseManager, clock: FakeClock, caplog) -> None:
    dead = request("dead", ("t1", op("MERGE")), ttl_s=10)
    g = granted(manager.acquire(dead))
    clock.advance(9)
    waiting(manager.acquire(request("early", ("t1", op("MERGE")))))
    clock.advance(2)
    thief = request("thief", ("t1", op("MERGE")))
    with caplog.at_level(logging.WARNING, logger="deltaguard.leases"):
        waiting(manager.acquire(thief))  # "early" is still queued ahead of the thief
    assert "held by dag.dead" in caplog.text
    expiry = [d for d in manager.decisions(uri="t1") if d.kind == "expiry"]
    assert len(expiry) == 1 and expiry[0].detail["dead_owner"]["task_id"] == "dead"
    # The dead owner cannot come back: no heartbeat, no write under the old lease.
    with pytest.raises(LeaseLostError):
        manager.heartbeat(g.lease_id, dead.owner)
    with pytest.raises(RequestClosedError):
        manager.acquire(dead)
    assert manager.release(g.lease_id, dead.owner) is False
    assert isinstance(manager.check(dead.request_id), Closed)


def test_heartbeat_extends_and_late_heartbeat_fails(manager: LeaseManager, clock: FakeClock) -> None:
    a = request("a", ("t1", op("MERGE")), ttl_s=10)
    g = granted(manager.acquire(a))
    clock.advance(8)
    assert manager.heartbeat(g.lease_id, a.owner) == clock.now + 10
    clock.advance(8)
    waiting(manager.acquire(request("b", ("t1", op("MERGE")))))  # still held thanks to the heartbeat
    with pytest.raises(LeaseOwnershipError):
        manager.heartbeat(g.lease_id, Owner(dag_id="dag", task_id="other"))
    clock.advance(3)
    with pytest.raises(LeaseLostError):
        manager.heartbeat(g.lease_id, a.owner)
    assert manager.leases("t1") == []


def test_double_release_and_foreign_release(manager: LeaseManager) -> None:
    a = request("a", ("t1", op("MERGE")))
    g = granted(manager.acquire(a))
    with pytest.raises(LeaseOwnershipError):
        manager.release(g.lease_id, Owner(dag_id="dag", task_id="intruder"))
    assert [x.lease_id for x in manager.leases("t1")] == [g.lease_id]
    assert any(d.kind == "refuse" for d in manager.decisions(uri="t1"))
    assert manager.release(g.lease_id, a.owner) is True
    assert manager.release(g.lease_id, a.owner) is False
    assert manager.release("never-existed", a.owner) is False


def test_fencing_tokens_increase_per_table(manager: LeaseManager) -> None:
    tokens = []
    for i in range(4):
        r = request(f"w{i}", ("t1", op("MERGE")), ("t2", op("INSERT")))
        g = granted(manager.acquire(r))
        tokens.append((g.fencing["t1"], g.fencing["t2"]))
        manager.release(g.lease_id, r.owner)
    assert tokens == [(i + 1, i + 1) for i in range(4)]
    assert granted(manager.acquire(request("x", ("t1", op("INSERT"))))).fencing == {"t1": 5}


def test_priority_with_ageing(manager: LeaseManager, clock: FakeClock) -> None:
    holder = request("holder", ("t1", op("MERGE")))
    granted(manager.acquire(holder))
    low = request("low", ("t1", op("MERGE")), priority=0)
    waiting(manager.acquire(low))
    clock.advance(5)
    urgent = request("urgent", ("t1", op("MERGE")), priority=1)  # 5 s later but worth 10 s: goes ahead
    waiting(manager.acquire(urgent))
    clock.advance(10)
    late = request("late", ("t1", op("MERGE")), priority=1)  # 15 s later: low has aged past it
    waiting(manager.acquire(late))
    assert [w.owner.task_id for w in manager.waiters("t1")] == ["urgent", "low", "late"]
    manager.release(holder.request_id, holder.owner)
    assert waiting(manager.check(low.request_id)).blockers[0].id == urgent.request_id
    g = granted(manager.check(urgent.request_id))
    manager.release(g.lease_id, urgent.owner)
    granted(manager.check(low.request_id))


def test_abandoned_waiter_stops_blocking(manager: LeaseManager, clock: FakeClock) -> None:
    holder = request("holder", ("t1", op("MERGE")))
    granted(manager.acquire(holder))
    ghost = request("ghost", ("t1", op("MERGE")), wait_ttl_s=5)
    waiting(manager.acquire(ghost))
    manager.release(holder.request_id, holder.owner)
    clock.advance(6)
    granted(manager.acquire(request("next", ("t1", op("MERGE")))))
    assert any(d.kind == "abandon" and d.request_id == ghost.request_id for d in manager.decisions(uri="t1"))


def test_withdraw_waiting_request(manager: LeaseManager) -> None:
    granted(manager.acquire(request("a", ("t1", op("MERGE")))))
    b = request("b", ("t1", op("MERGE")))
    waiting(manager.acquire(b))
    assert manager.release(b.request_id, b.owner) is True
    assert manager.waiters("t1") == []
    assert manager.check(b.request_id) == Closed(b.request_id, "released")


def test_metadata_change_is_exclusive_and_invalidates_config(manager: LeaseManager) -> None:
    ins = request("ins", ("t1", op("INSERT")))
    granted(manager.acquire(ins))
    alter = request("alter", ("t1", op("SET_TBLPROPERTIES")))
    w = waiting(manager.acquire(alter))
    assert any("metadata" in r for r in w.reasons)
    manager.release(ins.request_id, ins.owner)
    g = granted(manager.check(alter.request_id))
    waiting(manager.acquire(request("ins2", ("t1", op("INSERT")))))
    manager.release(g.lease_id, alter.owner)
    # The stored configuration was dropped: a request must bring a fresh one.
    fresh = request("fresh", ("t1", op("INSERT")))
    no_config = type(fresh)(
        claims=tuple(type(c)(c.uri, c.operation, c.profile, None) for c in fresh.claims), owner=fresh.owner
    )
    with pytest.raises(ValueError, match="no table configuration"):
        LeaseManager(manager.store, clock=manager.clock).acquire(no_config)


def test_config_cache_ttl_and_newer_version(store, clock: FakeClock) -> None:
    loads = []

    def loader(uri: str):
        loads.append(uri)
        return CONFIG

    manager = LeaseManager(store, clock=clock, config_loader=loader, config_ttl_s=30)
    bare = request("a", ("t1", op("INSERT")))
    bare = type(bare)(
        claims=tuple(type(c)(c.uri, c.operation, c.profile, None) for c in bare.claims), owner=bare.owner
    )
    granted(manager.acquire(bare))
    granted(manager.acquire(type(bare)(claims=bare.claims, owner=bare.owner)))
    assert loads == ["t1"]  # cached
    clock.advance(31)
    granted(manager.acquire(type(bare)(claims=bare.claims, owner=bare.owner)))
    assert loads == ["t1", "t1"]  # reloaded after the TTL
    # A request read at a newer table version refreshes the shared configuration at once.
    from deltaguard.core import TableConfig

    newer = TableConfig(partition_columns=(), version=7)
    granted(manager.acquire(request("b", ("t1", op("INSERT")), config=newer)))
    assert manager.memo.loaded["t1"][0].version == 7


def test_decision_log_retention(manager: LeaseManager, clock: FakeClock) -> None:
    a = request("a", ("t1", op("INSERT")))
    granted(manager.acquire(a))
    manager.release(a.request_id, a.owner)
    assert len(manager.decisions(uri="t1")) == 2
    clock.advance(3601)
    assert manager.prune() == 3  # two log entries and the closed request
    assert manager.decisions(uri="t1") == []
    assert manager.check(a.request_id) == Closed(a.request_id, "unknown")


def test_retention_keeps_open_requests_and_recently_closed_ones(
    manager: LeaseManager, clock: FakeClock
) -> None:
    """Pruning finds old requests by enqueue time (schema 7); what counts is still when a request closed."""
    held = request("a", ("t1", op("INSERT")), ttl_s=10_000)
    granted(manager.acquire(held))
    closed_late = request("b", ("t2", op("INSERT")), ttl_s=10_000)
    granted(manager.acquire(closed_late))
    clock.advance(3601)
    assert manager.release(closed_late.request_id, closed_late.owner)
    manager.prune()
    assert manager.store.read_request(held.request_id).status == "granted"
    assert manager.store.read_request(closed_late.request_id).status == "released"
    clock.advance(3601)
    manager.prune()
    assert manager.store.read_request(closed_late.request_id) is None
    assert manager.store.read_request(held.request_id).status == "granted"


def test_foreign_owner_cannot_reuse_a_request_id(manager: LeaseManager) -> None:
    a = request("a", ("t1", op("MERGE")))
    granted(manager.acquire(a))
    stolen = type(a)(claims=a.claims, owner=Owner(dag_id="dag", task_id="b"), request_id=a.request_id)
    with pytest.raises(LeaseOwnershipError):
        manager.acquire(stolen)


def test_check_of_a_blocked_waiter_is_a_cheap_read(manager: LeaseManager, clock: FakeClock) -> None:
    granted(manager.acquire(request("a", ("t1", op("MERGE")))))
    b = request("b", ("t1", op("MERGE")), wait_ttl_s=60)
    first = waiting(manager.acquire(b))
    before = manager.store.read_request(b.request_id)
    clock.advance(20)
    again = waiting(manager.check(b.request_id))
    assert (again.blockers, again.reasons, again.position) == (first.blockers, first.reasons, first.position)
    assert manager.store.read_request(b.request_id) == before  # nothing written
    clock.advance(15)  # past half the wait ttl: the queue entry is renewed by a full decision
    renewed = waiting(manager.check(b.request_id))
    assert renewed.expires_at == clock.now + 60
    assert [w.expires_at for w in manager.waiters("t1")] == [clock.now + 60]
