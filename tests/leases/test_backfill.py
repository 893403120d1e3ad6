"""Reservations and backfilling in :func:`deltaguard.core.admission.admit`, and its wait bound.

The bound (module docstring of ``deltaguard.core.admission``) is checked by an event-driven replay of
adversarial arrival streams on one table: estimates may be off by a factor of ten either way, and a blocker
may overrun its estimate by hours.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltaguard.core.admission import MAX_PRIORITY, Holder, Owner, TableView, admit, queue_rank
from deltaguard.core.decision import Decision, Verdict
from deltaguard.core.model import decide
from deltaguard.core.operations import Operation
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig

from .conftest import CONFIG, PROFILE, op

OWNER = Owner(name="w")
APPEND, MERGE, OPTIMIZE = op("INSERT"), op("MERGE"), op("OPTIMIZE")


def lease(id_: str, o: Operation, since: float | None, expected: float | None) -> Holder:
    return Holder(id_, OWNER, o, granted=True, since=since, expected_duration_s=expected)


def queued(id_: str, o: Operation, rank: float, expected: float | None) -> Holder:
    return Holder(id_, OWNER, o, granted=False, rank=rank, since=rank, expected_duration_s=expected)


def ask(candidate: Operation, granted: Sequence[Holder], waiting: Sequence[Holder], **kw: float | None):
    view = TableView("t", candidate, CONFIG, PROFILE, granted=list(granted), waiting=list(waiting))
    return admit("c", 10.0, [view], decide, **kw)  # type: ignore[arg-type]


def conflicts(a: Operation, b: Operation) -> bool:
    return decide(a, [b], CONFIG, PROFILE).conflict


def test_the_scenario_operations_conflict_as_the_tests_assume() -> None:
    """The real model, unpartitioned predicates: appends and compaction run beside appends; a MERGE
    conflicts with both."""
    assert not conflicts(APPEND, APPEND) and not conflicts(OPTIMIZE, APPEND)
    assert conflicts(MERGE, APPEND) and conflicts(OPTIMIZE, MERGE) and conflicts(APPEND, MERGE)


RUNNING = lease("a0", APPEND, since=0.0, expected=100.0)  # expected to end at 100
HEAD = queued("m", MERGE, rank=1.0, expected=60.0)  # waits for the append: reserved at 100


def test_a_write_that_ends_before_the_reservation_backfills() -> None:
    for candidate in (APPEND, OPTIMIZE):
        assert ask(candidate, [RUNNING], [HEAD], now=10.0, expected_duration_s=90.0).granted
        too_long = ask(candidate, [RUNNING], [HEAD], now=10.0, expected_duration_s=91.0)
        assert not too_long.granted and [b.id for b in too_long.blockers] == ["m"]


def test_without_estimates_admission_is_fifo_among_conflicting_requests() -> None:
    assert not ask(APPEND, [RUNNING], [HEAD], now=10.0, expected_duration_s=None).granted
    assert not ask(APPEND, [RUNNING], [HEAD], expected_duration_s=5.0).granted  # no clock
    unknown = lease("a0", APPEND, since=0.0, expected=None)
    assert not ask(APPEND, [unknown], [HEAD], now=10.0, expected_duration_s=5.0).granted
    no_estimate = queued("m", MERGE, rank=1.0, expected=None)
    chain = queued("m2", MERGE, rank=2.0, expected=60.0)  # its reservation needs m's duration
    assert not ask(APPEND, [RUNNING], [no_estimate, chain], now=10.0, expected_duration_s=5.0).granted


def test_no_backfilling_past_an_overrun_reservation_or_a_long_wait() -> None:
    assert not ask(APPEND, [RUNNING], [HEAD], now=101.0, expected_duration_s=0.5).granted  # append overran
    assert not ask(APPEND, [RUNNING], [HEAD], now=10.0, expected_duration_s=5.0, max_overtake_s=8.0).granted


def test_a_conflict_with_a_granted_lease_is_never_backfilled() -> None:
    merge_running = lease("m0", MERGE, since=0.0, expected=100.0)
    assert not ask(APPEND, [merge_running], [], now=10.0, expected_duration_s=1.0).granted


def test_a_slack_lets_a_backfill_run_part_of_its_estimate_past_the_reservation() -> None:
    """Reserved at 100, asked at 10: with half its estimate as slack a write may take up to 180 s, with
    all of it any time; never past an overrun reservation or a granted conflicting lease."""
    assert ask(APPEND, [RUNNING], [HEAD], now=10.0, expected_duration_s=180.0, backfill_slack=0.5).granted
    late = ask(APPEND, [RUNNING], [HEAD], now=10.0, expected_duration_s=181.0, backfill_slack=0.5)
    assert not late.granted and [b.id for b in late.blockers] == ["m"]
    assert not ask(APPEND, [RUNNING], [HEAD], now=10.0, expected_duration_s=91.0).granted  # default: none
    assert ask(APPEND, [RUNNING], [HEAD], now=10.0, expected_duration_s=1e6, backfill_slack=1.0).granted
    assert not ask(APPEND, [RUNNING], [HEAD], now=101.0, expected_duration_s=1.0, backfill_slack=1.0).granted
    merge_running = lease("m0", MERGE, since=0.0, expected=100.0)
    assert not ask(APPEND, [merge_running], [], now=10.0, expected_duration_s=1.0, backfill_slack=1.0).granted
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match="backfill_slack"):
            ask(APPEND, [RUNNING], [HEAD], now=10.0, expected_duration_s=1.0, backfill_slack=bad)


def test_reservations_chain_through_the_queue() -> None:
    """A second queued MERGE is reserved after the first: 100 + 60."""
    second = queued("m2", MERGE, rank=2.0, expected=60.0)
    assert ask(OPTIMIZE, [RUNNING], [HEAD, second], now=10.0, expected_duration_s=90.0).granted
    assert not ask(OPTIMIZE, [RUNNING], [HEAD, second], now=10.0, expected_duration_s=91.0).granted


# -- the wait bound, over adversarial streams ----------------------------------------------------------

KINDS = ("a", "m", "o")
AGEING_S = 0.01
MAX_OVERTAKE_S = 5.0


@dataclass(frozen=True)
class Arrival:
    gap: float
    kind: str
    duration: float
    estimate_factor: float
    priority: int


def toy_decide(matrix: frozenset[tuple[str, str]]):
    """A conflict relation drawn by hypothesis; an operation's kind letter travels in its label."""

    def decide_fn(
        candidate: Operation, running: Sequence[Operation], table: TableConfig, profile: EngineProfile
    ) -> Decision:
        hit = tuple(
            i
            for i, r in enumerate(running)
            if (candidate.label, r.label) in matrix or (r.label, candidate.label) in matrix
        )
        return Decision(Verdict.CONFLICT if hit else Verdict.NO_CONFLICT, conflicts_with=hit)

    return decide_fn


def replay(
    arrivals: Sequence[Arrival], matrix: frozenset[tuple[str, str]], overrun: float, slack: float = 0.0
):
    """Event-driven replay on one table with unlimited workers; write 0 overruns its estimate by
    ``overrun`` seconds; backfills may run ``slack`` of their estimate past a reservation. Returns per
    write (arrival, rank, grant, end)."""
    decide_fn = toy_decide(matrix)
    n = len(arrivals)
    arrive, rank, dur, est = [0.0] * n, [0.0] * n, [0.0] * n, [0.0] * n
    now = 0.0
    for i, a in enumerate(arrivals):
        now += a.gap
        arrive[i], rank[i] = now, queue_rank(now, a.priority, AGEING_S)
        est[i] = a.duration * a.estimate_factor
        dur[i] = a.duration + (overrun if i == 0 else 0.0)
    real = {"a": APPEND, "m": MERGE, "o": OPTIMIZE}
    ops = [dataclasses.replace(real[a.kind], label=a.kind) for a in arrivals]
    grant, end = [math.inf] * n, [math.inf] * n
    waiting: list[int] = []
    running: list[int] = []
    pending_times = set(arrive)
    while pending_times:
        now = min(pending_times)
        pending_times.discard(now)
        for i in [r for r in running if end[r] <= now]:
            running.remove(i)
        waiting.extend(i for i in range(n) if arrive[i] == now and i not in waiting and grant[i] == math.inf)
        waiting.sort(key=lambda i: (rank[i], str(i)))
        for i in list(waiting):
            view = TableView(
                "t",
                ops[i],
                CONFIG,
                PROFILE,
                granted=[
                    Holder(str(j), OWNER, ops[j], True, since=grant[j], expected_duration_s=est[j])
                    for j in running
                ],
                waiting=[
                    Holder(
                        str(j),
                        OWNER,
                        ops[j],
                        False,
                        rank=rank[j],
                        since=arrive[j],
                        expected_duration_s=est[j],
                    )
                    for j in waiting
                ],
            )
            verdict = admit(
                str(i),
                rank[i],
                [view],
                decide_fn,
                now=now,
                expected_duration_s=est[i],
                max_overtake_s=MAX_OVERTAKE_S,
                backfill_slack=slack,
            )
            if verdict.granted:
                waiting.remove(i)
                running.append(i)
                grant[i], end[i] = now, now + dur[i]
                pending_times.add(end[i])
    assert not waiting, "every request is eventually granted"
    return arrive, rank, grant, end, dur


arrival = st.builds(
    Arrival,
    gap=st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0]),
    kind=st.sampled_from(KINDS),
    duration=st.sampled_from([1.0, 2.0, 5.0, 20.0]),
    estimate_factor=st.sampled_from([0.1, 0.7, 1.0, 1.3, 10.0]),
    priority=st.integers(-2, 2),
)
relation = st.frozensets(st.tuples(st.sampled_from(KINDS), st.sampled_from(KINDS)), max_size=9)


@settings(max_examples=150, deadline=None)
@given(
    arrivals=st.lists(arrival, min_size=1, max_size=25),
    matrix=relation,
    overrun=st.sampled_from([0.0, 500.0]),
    slack=st.sampled_from([0.0, 0.5, 1.0]),
)
def test_every_wait_is_within_the_stated_bound(
    arrivals: list[Arrival], matrix, overrun: float, slack: float
) -> None:
    arrive, rank, grant, end, dur = replay(arrivals, matrix, overrun, slack)
    for w in range(len(arrivals)):
        freeze = arrive[w] + MAX_OVERTAKE_S + (MAX_PRIORITY - arrivals[w].priority) * AGEING_S
        if grant[w] <= freeze:
            continue
        held = [j for j in range(len(arrivals)) if grant[j] <= freeze < end[j]]
        ahead = [
            j
            for j in range(len(arrivals))
            if j != w and arrive[j] <= freeze < grant[j] and (rank[j], str(j)) < (rank[w], str(w))
        ]
        bound = freeze + sum(dur[j] for j in held + ahead)
        assert grant[w] <= bound + 1e-9, (w, grant[w], bound)


@settings(max_examples=40, deadline=None)
@given(
    appends=st.integers(20, 80),
    estimate_factor=st.sampled_from([0.5, 1.0, 2.0]),
    priority=st.sampled_from([0, MAX_PRIORITY]),
    slack=st.sampled_from([0.0, 0.5, 1.0]),
)
def test_an_endless_stream_of_compatible_appends_cannot_starve_an_optimize(
    appends: int, estimate_factor: float, priority: int, slack: float
) -> None:
    """A MERGE overruns its 10 s estimate by an hour; an OPTIMIZE queues behind it; appends compatible with
    the MERGE but not with the OPTIMIZE arrive every second, each expected to take 2 s (at top priority,
    those of the first ``MAX_PRIORITY * ageing_s`` seconds rank ahead of the OPTIMIZE)."""
    matrix = frozenset({("m", "o"), ("a", "o")})
    stream = [Arrival(0.0, "m", 10.0, 1.0, 0), Arrival(1.0, "o", 5.0, 1.0, 0)]
    stream += [Arrival(1.0, "a", 2.0, estimate_factor, priority) for _ in range(appends)]
    arrive, rank, grant, end, _dur = replay(stream, matrix, overrun=3600.0, slack=slack)
    # appends backfill only while the MERGE is within its estimate (less the slack of their own);
    # then they queue behind the OPTIMIZE
    overtakers = [j for j in range(2, len(stream)) if grant[j] < grant[1] and rank[j] > rank[1]]
    assert overtakers or estimate_factor == 2.0 or priority > 0  # the backfilling happens
    assert all(arrive[j] + (1 - slack) * 2.0 * estimate_factor <= 10.0 + 1e-9 for j in overtakers)
    assert grant[1] == end[0]  # the OPTIMIZE starts the moment the MERGE ends


def test_a_request_keeps_its_expected_duration_in_its_stored_payload() -> None:
    from deltaguard.core.admission import LeaseRequest, TableClaim
    from deltaguard.leases.codec import request_from_payload, request_payload

    claims = (TableClaim("t", MERGE, PROFILE, CONFIG),)
    with_estimate = LeaseRequest(claims, OWNER, request_id="r", expected_duration_s=90.0)
    assert request_from_payload("r", request_payload(with_estimate)).expected_duration_s == 90.0
    without = LeaseRequest(claims, OWNER, request_id="r")
    assert "expected_duration_s" not in request_payload(without)  # older payload texts stay the same
    assert request_from_payload("r", request_payload(without)).expected_duration_s is None
