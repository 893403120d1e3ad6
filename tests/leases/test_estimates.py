"""Duration estimates learned from the decision log (:func:`deltaguard.leases.manager.learned_duration`), on a real store."""

from __future__ import annotations

import pytest

from deltaguard.core.admission import Owner
from deltaguard.leases.manager import LeaseManager, learned_duration

from .conftest import FakeClock, op, request


@pytest.fixture
def manager(store, clock: FakeClock) -> LeaseManager:
    return LeaseManager(store, clock=clock, retention_s=10**9)


def _hold(manager: LeaseManager, clock: FakeClock, task: str, seconds: float, release: bool = True) -> None:
    req = request(task, ("t", op("MERGE")), ttl_s=10_000)
    manager.acquire(req)
    clock.advance(seconds)
    if release:
        assert manager.release(req.request_id, req.owner)
    clock.advance(1)


def test_median_of_the_last_holds_of_the_same_task(manager: LeaseManager, clock: FakeClock) -> None:
    owner = Owner(dag_id="dag", task_id="merge", run_id="any run", try_number=3)
    assert learned_duration(manager.store, owner, "t") is None
    for seconds in (1000, 10, 20, 30, 500, 40):  # the oldest (1000) falls out of the last five
        _hold(manager, clock, "merge", seconds)
        _hold(manager, clock, "other", 7)  # another task's holds on the same table do not count
    assert learned_duration(manager.store, owner, "t") == 30
    assert learned_duration(manager.store, owner, "elsewhere") is None


def test_expired_leases_do_not_count(manager: LeaseManager, clock: FakeClock) -> None:
    _hold(manager, clock, "merge", 10)
    _hold(manager, clock, "merge", 20_000, release=False)  # the holder died; its lease expired
    req = request("merge", ("t", op("MERGE")), ttl_s=10_000)  # a new run reclaims it, then holds 30 s
    manager.acquire(req)
    clock.advance(30)
    assert manager.release(req.request_id, req.owner)
    kinds = [d.kind for d in manager.decisions(uri="t")]
    assert "expiry" in kinds
    assert (
        learned_duration(manager.store, Owner(dag_id="dag", task_id="merge"), "t") == 20
    )  # median of 10, 30


def test_decisions_by_kind(manager: LeaseManager, clock: FakeClock) -> None:
    _hold(manager, clock, "merge", 10)
    blocker = request("blocker", ("t", op("MERGE")), ttl_s=10_000)
    manager.acquire(blocker)
    manager.acquire(request("waiter", ("t", op("MERGE"))))  # logs a wait
    everything = manager.store.decisions(uri="t")
    assert {d.kind for d in everything} == {"grant", "release", "wait"}
    picked = manager.store.decisions(uri="t", kinds=("grant", "release"))
    assert [d.kind for d in picked] == [d.kind for d in everything if d.kind != "wait"]
    assert manager.store.decisions(uri="t", kinds=()) == []
