"""Backfilling on the real lease manager (ADR 0017, 0024): requests carry duration estimates, the manager
passes the store's clock and the holders' estimates to the admission rule, on SQLite and PostgreSQL.

The scenario: ``hold`` (a DELETE of one partition, estimated 100 s) holds the table; ``merge`` (a MERGE of
the whole table) queues behind it, so its reservation is ``hold``'s expected end. DELETEs of other
partitions are compatible with ``hold`` but conflict with the queued MERGE: one that is expected to end
before the reservation starts at once (backfills), one that would not, waits behind the MERGE.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltaguard.core import model
from deltaguard.core.admission import Granted, LeaseRequest, Owner, Waiting
from deltaguard.core.operations import Operation
from deltaguard.leases.manager import LeaseManager

from .conftest import CONFIG, PROFILE, FakeClock, general_path_only, op, request

HOLD = op("DELETE", "date = '2024-01-01'")
MERGE = op("MERGE")


def other_day(day: int) -> Operation:
    return op("DELETE", f"date = '2024-02-{day:02d}'")


def est(req: LeaseRequest, seconds: float | None) -> LeaseRequest:
    return dataclasses.replace(req, expected_duration_s=seconds)


@pytest.fixture(params=["one-call", "general"])
def manager(
    request: pytest.FixtureRequest, store_url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LeaseManager]:
    m = LeaseManager(store_url, clock=clock, ageing_s=10.0, retention_s=3600.0, max_overtake_s=600.0)
    if request.param == "general":
        general_path_only(m, monkeypatch)
    yield m
    m.store.close()


def _queue(manager: LeaseManager, clock: FakeClock, hold_s: float | None, merge_s: float | None) -> None:
    """``hold`` granted now, ``merge`` queued behind it, then 10 s pass."""
    assert isinstance(manager.acquire(est(request("hold", ("t", HOLD), ttl_s=1000), hold_s)), Granted)
    merge = request("merge", ("t", MERGE), wait_ttl_s=1000)
    assert isinstance(manager.acquire(est(merge, merge_s)), Waiting)
    clock.advance(10)


def test_short_write_backfills_only_when_it_fits(manager: LeaseManager, clock: FakeClock) -> None:
    _queue(manager, clock, hold_s=100, merge_s=50)
    # Reservation of the MERGE: 100 s after the grant; now is 10 s after it.
    long = manager.acquire(est(request("long", ("t", other_day(2))), 91))
    assert isinstance(long, Waiting)
    assert [b.owner.task_id for b in long.blockers] == ["merge"]
    short = manager.acquire(est(request("short", ("t", other_day(3))), 90))  # ends exactly at the reservation
    assert isinstance(short, Granted)
    holders = {lease.owner.task_id for lease in manager.leases("t")}
    assert holders == {"hold", "short"}


def test_without_estimates_fifo_as_before(manager: LeaseManager, clock: FakeClock) -> None:
    _queue(manager, clock, hold_s=None, merge_s=None)
    short = manager.acquire(request("short", ("t", other_day(3))))
    assert isinstance(short, Waiting)
    assert [b.owner.task_id for b in short.blockers] == ["merge"]


@pytest.mark.parametrize(
    ("hold_s", "short_s"),
    [(None, 1.0), (100.0, None)],
    ids=["holder-without-estimate", "request-without-estimate"],
)
def test_one_missing_estimate_keeps_fifo(
    manager: LeaseManager, clock: FakeClock, hold_s: float | None, short_s: float | None
) -> None:
    _queue(manager, clock, hold_s=hold_s, merge_s=50)
    assert isinstance(manager.acquire(est(request("short", ("t", other_day(3))), short_s)), Waiting)


def test_overrunning_holder_stops_backfilling(manager: LeaseManager, clock: FakeClock) -> None:
    _queue(manager, clock, hold_s=100, merge_s=50)
    clock.advance(85)  # the holder is expected to end 5 s from now
    assert isinstance(manager.acquire(est(request("a", ("t", other_day(3))), 5)), Granted)
    # Both overran their expected end (the MERGE's reservation): it is in the past now, so nothing
    # overtakes the MERGE any more, however short.
    clock.advance(20)
    assert isinstance(manager.acquire(est(request("b", ("t", other_day(4))), 0)), Waiting)


def test_long_queued_request_is_not_overtaken(manager: LeaseManager, clock: FakeClock) -> None:
    assert isinstance(manager.acquire(est(request("hold", ("t", HOLD), ttl_s=3600), 3000)), Granted)
    merge = est(request("merge", ("t", MERGE), wait_ttl_s=3600), 50)
    assert isinstance(manager.acquire(merge), Waiting)
    clock.advance(601)  # the MERGE has waited longer than max_overtake_s
    assert isinstance(manager.acquire(merge), Waiting)  # still behind the holder, its place kept
    assert isinstance(manager.acquire(est(request("short", ("t", other_day(3))), 1)), Waiting)


def test_backfilled_write_still_excludes_the_queued_merge(manager: LeaseManager, clock: FakeClock) -> None:
    """Backfilling reorders; it never lets the MERGE start beside a conflicting write."""
    hold = est(request("hold", ("t", HOLD), ttl_s=1000), 100)
    merge = est(request("merge", ("t", MERGE), wait_ttl_s=1000), 50)
    short = est(request("short", ("t", other_day(3)), ttl_s=1000), 30)
    assert isinstance(manager.acquire(hold), Granted)
    assert isinstance(manager.acquire(merge), Waiting)
    assert isinstance(manager.acquire(short), Granted)
    assert manager.release(hold.request_id, hold.owner)
    clock.advance(60)  # the short write overran its estimate by 30 s
    # Asked again (a full decision, not the cached answer of a poll), and a newcomer: both wait for it.
    answer = manager.acquire(merge)
    assert isinstance(answer, Waiting)
    assert [b.owner.task_id for b in answer.blockers] == ["short"]
    assert isinstance(manager.acquire(est(request("merge2", ("t", MERGE)), 1)), Waiting)
    assert manager.release(short.request_id, short.owner)
    assert isinstance(manager.check(merge.request_id), Granted)


def test_stream_of_short_writes_does_not_starve_the_merge(manager: LeaseManager, clock: FakeClock) -> None:
    """Short DELETEs keep arriving (every 2 s, 5 s each, estimates off by up to 30 %) in front of a queued
    MERGE. They backfill while they fit before its reservation (the holder's estimated end, at most 130 s);
    after that none starts, so the MERGE starts once the writes already running end."""
    rng = random.Random(7)
    start = clock.now
    hold = est(request("hold", ("t", HOLD), ttl_s=1000), 100 * rng.uniform(0.7, 1.3))
    merge = est(request("merge", ("t", MERGE), wait_ttl_s=1000), 50)
    assert isinstance(manager.acquire(hold), Granted)
    assert isinstance(manager.acquire(merge), Waiting)
    running: dict[str, tuple[LeaseRequest, float]] = {hold.request_id: (hold, start + 100)}
    backfilled: list[float] = []
    for n in range(300):
        clock.advance(2)
        for rid, (req, end) in list(running.items()):
            if end <= clock.now:
                assert manager.release(rid, req.owner)
                del running[rid]
        if isinstance(manager.acquire(merge), Granted):
            break
        short = est(request(f"s{n}", ("t", other_day(n % 28 + 1)), ttl_s=1000), 5 * rng.uniform(0.7, 1.3))
        if isinstance(manager.acquire(short), Granted):
            backfilled.append(clock.now - start)
            running[short.request_id] = (short, clock.now + 5)
        else:
            manager.release(short.request_id, short.owner)  # gives up (withdraws), as a timed-out task
    waited = clock.now - start
    assert backfilled, "no short write backfilled"
    assert max(backfilled) <= 130
    assert waited <= 130 + 5 + 2, waited


# --- randomised: conflicting writes never overlap, whatever the estimates say --------------------------

# Pairs of every kind: conflicting, compatible, and compatible with one holder but not another (so
# backfilling has room to reorder).
OPS = [
    HOLD,
    other_day(2),
    op("UPDATE", "date = '2024-01-01'"),
    op("REPLACE_WHERE", "date = '2024-02-02'"),
    MERGE,
    op("INSERT"),
    op("OPTIMIZE"),
]

steps = st.lists(
    st.tuples(
        st.sampled_from(["acquire", "acquire", "acquire", "release", "poll"]),
        st.integers(0, len(OPS) - 1),
        st.one_of(st.none(), st.floats(0, 300), st.floats(0, 300), st.floats(0, 300)),
        st.floats(0, 120),
    ),
    min_size=3,
    max_size=30,
)


def _assert_no_conflicting_holders(manager: LeaseManager, uri: str) -> None:
    leases = manager.leases(uri)
    for i, lease in enumerate(leases):
        others = [x.operation for j, x in enumerate(leases) if j != i]
        if others:
            verdict = model.decide(lease.operation, others, CONFIG, PROFILE)
            assert not verdict.conflict, (lease, others, verdict.reasons)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=steps)
def test_conflicting_writes_never_overlap(
    store_url: str, plan: list[tuple[str, int, float | None, float]]
) -> None:
    clock = FakeClock()
    manager = LeaseManager(store_url, clock=clock, ageing_s=10.0, max_overtake_s=600.0)
    uri = f"t-{uuid.uuid4().hex[:8]}"  # a fresh table per example on the shared store
    mine: list[LeaseRequest] = []
    try:
        for n, (action, which, estimate, pause) in enumerate(plan):
            clock.advance(pause)
            if action == "acquire":
                req = est(request(f"w{n}", (uri, OPS[which]), ttl_s=1000, wait_ttl_s=1000), estimate)
                mine.append(req)
                manager.acquire(req)
            elif action == "release" and mine:
                req = mine.pop(which % len(mine))
                manager.release(req.request_id, Owner(dag_id="dag", task_id=req.owner.task_id))
            else:
                for req in mine:
                    manager.check(req.request_id)
            _assert_no_conflicting_holders(manager, uri)
    finally:
        manager.store.close()
