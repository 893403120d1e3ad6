"""The slot gate in the lease manager (ADR 0028): a request the conflict model admits waits while the held
leases fill the worker slots, behind those leases; a release frees a slot; a re-admission of a crowd grants
no more than the free slots; and the gate never grants what the conflict model refuses."""

from __future__ import annotations

from typing import Any

import pytest

from deltaguard.core.admission import Granted, Waiting
from deltaguard.leases.manager import LeaseManager
from tests.leases.conftest import FakeClock, op, request


def _fill(manager: LeaseManager, clock: FakeClock, n: int) -> list[Granted]:
    held = []
    for i in range(n):
        clock.advance(0.1)
        answer = manager.acquire(request(f"busy{i}", (f"busy{i}", op("INSERT"))))
        assert isinstance(answer, Granted)
        held.append(answer)
    return held


def test_a_compatible_write_waits_while_the_slots_are_full(store_url: str) -> None:
    clock = FakeClock()
    manager = LeaseManager(store_url, clock=clock, worker_slots=2)
    held = _fill(manager, clock, 2)
    clock.advance(0.1)
    fresh = request("fresh", ("t1", op("INSERT")))
    answer = manager.acquire(fresh)
    assert isinstance(answer, Waiting)
    # behind every lease filling a slot, as capacity, not as a conflict
    assert {b.id for b in answer.blockers} == {g.lease_id for g in held}
    assert {b.kind for b in answer.blockers} == {"slot"}
    assert any("slot gate" in r for r in answer.reasons)
    # still full: its own check keeps it waiting
    clock.advance(0.1)
    assert isinstance(manager.check(fresh.request_id), Waiting)
    # a release on another table frees a slot for it
    clock.advance(0.1)
    assert manager.release(held[0].lease_id, request("busy0", ("busy0", op("INSERT"))).owner)
    assert isinstance(manager.check(fresh.request_id), Granted)


def test_without_a_gate_the_same_write_is_granted(store_url: str) -> None:
    clock = FakeClock()
    manager = LeaseManager(store_url, clock=clock)
    _fill(manager, clock, 2)
    assert isinstance(manager.acquire(request("fresh", ("t1", op("INSERT")))), Granted)


def test_the_gate_never_grants_a_conflicting_write(store_url: str) -> None:
    clock = FakeClock()
    manager = LeaseManager(store_url, clock=clock, worker_slots=8)
    holder = manager.acquire(request("alter", ("t1", op("SET_TBLPROPERTIES"))))
    assert isinstance(holder, Granted)
    clock.advance(0.1)
    answer = manager.acquire(request("merge", ("t1", op("MERGE"))))
    assert isinstance(answer, Waiting)
    assert {b.kind for b in answer.blockers} == {"lease"}  # the conflict, with slots to spare


@pytest.mark.parametrize("slots", [3, 5])
def test_one_release_grants_no_more_writes_than_there_are_free_slots(store_url: str, slots: int) -> None:
    clock = FakeClock()
    manager = LeaseManager(store_url, clock=clock, worker_slots=slots)
    holder = manager.acquire(request("alter", ("t1", op("SET_TBLPROPERTIES"))))
    assert isinstance(holder, Granted)
    _fill(manager, clock, 1)  # one more slot taken, on another table
    crowd = []
    for i in range(6):  # six appends, compatible with each other, behind the exclusive holder
        clock.advance(0.1)
        r = request(f"w{i}", ("t1", op("INSERT")))
        assert isinstance(manager.acquire(r), Waiting)
        crowd.append(r.request_id)
    clock.advance(1)
    assert manager.release(holder.lease_id, request("alter", ("t1", op("INSERT"))).owner)
    answers = manager.readmit("t1").answers
    granted = [rid for rid in crowd if isinstance(answers.get(rid), Granted)]
    # the busy lease holds one slot: the rest go to the earliest of the crowd
    assert granted == crowd[: slots - 1]
    # the others' own checks wait behind the slot gate, and their queue places are kept
    for rid in crowd[slots - 1 :]:
        answer = manager.check(rid)
        assert isinstance(answer, Waiting)
        assert {b.kind for b in answer.blockers} == {"slot"}
    assert len({lease.lease_id for lease in manager.store.live_leases(clock())}) == slots


def test_the_gate_counts_the_leases_as_of_the_decision_not_before_it(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two decisions on different tables at once: the other's grant lands after this request was prepared
    # but before its decision. Counted before the decision (an unlocked read), both took the last slot.
    clock = FakeClock()
    manager = LeaseManager(store_url, clock=clock, worker_slots=1)
    other = LeaseManager(store_url, clock=clock, worker_slots=1)
    real = manager.fence_memory.round

    def the_other_is_granted_first() -> Any:
        assert isinstance(other.acquire(request("other", ("t2", op("INSERT")))), Granted)
        return real()

    monkeypatch.setattr(manager.fence_memory, "round", the_other_is_granted_first)
    answer = manager.acquire(request("mine", ("t1", op("INSERT"))))
    assert isinstance(answer, Waiting)
    assert {b.kind for b in answer.blockers} == {"slot"}
    assert len({lease.lease_id for lease in manager.store.live_leases(clock())}) == 1
