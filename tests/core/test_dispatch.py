"""Worker-slot order (:mod:`lab.simulation.dispatch`): longest conflict chain first, and its wait bound.

The bound is checked by replaying adversarial streams of ready writes through :func:`next_for_slot` on a
few slots: newcomers may all outweigh a waiting write, durations and weights are drawn by hypothesis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltaguard.core import EngineName, EngineProfile, Operation, OperationKind, TableConfig
from deltaguard.core.admission import Holder, Owner, TableView
from deltaguard.core.model import decide
from lab.simulation.dispatch import ReadyWrite, chain_weight, next_for_slot

PROFILE = EngineProfile(EngineName.DATABRICKS, "15.4")
CONFIG = TableConfig()
OWNER = Owner(name="w")
APPEND = Operation(OperationKind.INSERT)
MERGE = Operation(OperationKind.MERGE, merge_condition="t.k = s.k")
OPTIMIZE = Operation(OperationKind.OPTIMIZE)


def queued(id_: str, o: Operation, expected: float | None) -> Holder:
    return Holder(id_, OWNER, o, granted=False, rank=0.0, since=0.0, expected_duration_s=expected)


def view(candidate: Operation, waiting: Sequence[Holder]) -> TableView:
    return TableView("t", candidate, CONFIG, PROFILE, waiting=list(waiting))


def test_the_scenario_operations_conflict_as_the_tests_assume() -> None:
    assert decide(MERGE, [MERGE], CONFIG, PROFILE).conflict
    assert not decide(APPEND, [APPEND], CONFIG, PROFILE).conflict
    assert not decide(APPEND, [OPTIMIZE], CONFIG, PROFILE).conflict


def test_a_write_heading_a_chain_of_conflicting_queued_writes_weighs_their_estimates() -> None:
    behind = [queued("m1", MERGE, 30.0), queued("m2", MERGE, 40.0), queued("a", APPEND, 50.0)]
    # the MERGE holds up both queued MERGEs (and the append, which conflicts with a MERGE)
    merge = chain_weight("m0", [view(MERGE, behind)], decide, 20.0)
    append = chain_weight("a0", [view(APPEND, behind)], decide, 20.0)
    assert merge > append >= 20.0
    assert merge == 20.0 + sum(h.expected_duration_s or 0.0 for h in behind)
    # the request itself among the queued ones does not count; unknown estimates weigh nothing
    assert chain_weight("m1", [view(MERGE, behind[:1])], decide, 20.0) == 20.0
    assert chain_weight("m0", [view(MERGE, [queued("m1", MERGE, None)])], decide, None) == 0.0


def test_on_several_tables_the_heaviest_table_counts() -> None:
    one = view(MERGE, [queued("m1", MERGE, 30.0)])
    other = TableView("u", MERGE, CONFIG, PROFILE, waiting=[queued("m2", MERGE, 70.0)])
    assert chain_weight("m0", [one, other], decide, 10.0) == 80.0


def test_the_heaviest_ready_write_goes_first_and_ties_keep_arrival_order() -> None:
    ready = [ReadyWrite("a", 0.0, 10.0), ReadyWrite("b", 1.0, 90.0), ReadyWrite("c", 2.0, 90.0)]
    assert next_for_slot(ready, now=5.0) == 1
    assert next_for_slot([ReadyWrite("x", 0.0, 5.0), ReadyWrite("y", 0.0, 5.0)], now=0.0) == 0


def test_an_overdue_write_goes_first_whatever_its_weight() -> None:
    ready = [ReadyWrite("heavy", 50.0, 1e9), ReadyWrite("light", 0.0, 1.0), ReadyWrite("old", 1.0, 2.0)]
    assert next_for_slot(ready, now=20.0, max_wait_s=30.0) == 0  # nothing overdue yet
    assert next_for_slot(ready, now=30.5, max_wait_s=30.0) == 1  # "light" overdue
    assert next_for_slot(ready, now=40.0, max_wait_s=30.0) == 1  # both overdue: the earliest ready
    assert next_for_slot([ReadyWrite("w", 0.0, math.inf), ReadyWrite("v", 0.0, 1.0)], now=0.0) == 1


def test_nothing_ready_or_a_negative_wait_is_an_error() -> None:
    with pytest.raises(ValueError, match="no write"):
        next_for_slot([], now=0.0)
    with pytest.raises(ValueError, match="max_wait_s"):
        next_for_slot([ReadyWrite("a", 0.0, 1.0)], now=0.0, max_wait_s=-1.0)


# -- the slot wait bound, over adversarial streams -----------------------------------------------------

MAX_WAIT_S = 5.0


@dataclass(frozen=True)
class Ready:
    gap: float
    duration: float
    weight: float


def replay(stream: Sequence[Ready], slots: int, max_wait_s: float = MAX_WAIT_S):
    """Writes become ready at the cumulated gaps; a free slot goes to :func:`next_for_slot`'s choice once
    every event of the instant is played. Returns per write (ready, start, duration)."""
    n = len(stream)
    ready_at, start = [0.0] * n, [math.inf] * n
    now = 0.0
    for i, r in enumerate(stream):
        now += r.gap
        ready_at[i] = now
    ends: list[float] = []
    queue: list[int] = []
    times = sorted(set(ready_at))
    while times:
        now = times.pop(0)
        ends = [e for e in ends if e > now]
        queue += [i for i in range(n) if ready_at[i] == now]
        while queue and len(ends) < slots:
            pick = queue[
                next_for_slot(
                    [ReadyWrite(str(i), ready_at[i], stream[i].weight) for i in queue], now, max_wait_s
                )
            ]
            queue.remove(pick)
            start[pick] = now
            ends.append(now + stream[pick].duration)
            times = sorted({*times, now + stream[pick].duration})
    assert not queue
    return ready_at, start, [r.duration for r in stream]


ready_write = st.builds(
    Ready,
    gap=st.sampled_from([0.0, 0.5, 1.0, 3.0]),
    duration=st.sampled_from([1.0, 2.0, 5.0, 20.0]),
    weight=st.sampled_from([0.0, 1.0, 10.0, 1e6]),
)


@settings(max_examples=150, deadline=None)
@given(stream=st.lists(ready_write, min_size=1, max_size=30), slots=st.integers(1, 3))
def test_every_slot_wait_is_within_the_stated_bound(stream: list[Ready], slots: int) -> None:
    """From ``ready + max_wait_s`` on, only the writes then running and those ready before it can take a
    slot ahead of a write, so it starts at the latest when all of them have run one after another."""
    ready_at, start, duration = replay(stream, slots)
    for w in range(len(stream)):
        overdue = ready_at[w] + MAX_WAIT_S
        if start[w] <= overdue:
            continue
        running = [j for j in range(len(stream)) if start[j] <= overdue < start[j] + duration[j]]
        earlier = [
            j for j in range(len(stream)) if j < w and ready_at[j] <= ready_at[w] and start[j] > overdue
        ]
        assert start[w] <= overdue + sum(duration[j] for j in running + earlier) + 1e-9, w


def test_an_endless_stream_of_heavier_writes_cannot_starve_a_light_one() -> None:
    """One slot; a light write becomes ready while a heavy one runs, and a heavier write becomes ready
    every second for ten minutes: the light one starts once it is overdue and the running write ends."""
    stream = [Ready(0.0, 2.0, 100.0), Ready(0.5, 2.0, 0.0)] + [Ready(1.0, 2.0, 100.0)] * 600
    ready_at, start, _ = replay(stream, slots=1)
    assert start[1] <= ready_at[1] + MAX_WAIT_S + 2.0
    heavier_first = [j for j in range(2, len(stream)) if start[j] < start[1]]
    assert heavier_first  # the chain rule does let heavier writes pass it while it is not overdue
