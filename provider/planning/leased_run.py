"""The planned run under deltaguard: the lease manager's own admission rule, played in virtual time.

Pure: no Airflow, no store, no clock. What the plan models, and where each part comes from:

* **Admission**: every decision is :func:`deltaguard.core.admission.admit`, the function the lease manager
  calls (:mod:`deltaguard.leases.decide`), with the same queue rank (:func:`~deltaguard.core.admission.
  queue_rank`: ``enqueued_at - priority * ageing_s``), the same holders (granted leases with their grant time
  and estimate, queued requests with their rank, enqueue time and estimate) and the same defaults
  (``ageing_s``, ``max_overtake_s``, no backfill slack). After every event the queue is asked again in rank
  order, each decision seeing the grants before it, as the re-admission after a release does
  (:mod:`deltaguard.leases.readmit`).
* **Priorities**: each write's lease priority is its author's, else the phase bonus the ``dag_policy``
  gives it (:func:`deltaguard.core.priority.table_priorities`); Airflow starts ready tasks by
  ``priority_weight``, highest first (the caller's weights).
* **Estimates**: a write's request carries the estimate :func:`deltaguard.core.durations.write_duration`
  chose (``None`` when it has none: no backfilling), and holds its lease for its planned seconds.
* **Worker slots**: ``workers`` tasks run at once at most (Airflow's ``parallelism``, the DAG's
  ``max_active_tasks``, its pool). A write asks for its lease when it gets a slot; granted, it writes at
  once; queued, it defers and frees the slot (a deferred task holds none). Granted later, it needs a slot
  again to resume.
* **Hand-off**: a write granted from the queue writes its first byte ``handoff_s`` after it was granted
  or, when no slot was free then, after it got one (Airflow's trigger event, re-queue, worker start,
  opening the table).

Not modelled: a write that waits in its worker for an imminent grant instead of deferring
(:mod:`deltaguard.leases.imminent`), the triggerer's poll interval, retries, scheduler-loop latency.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from deltaguard.core.admission import (
    DEFAULT_AGEING_S,
    DEFAULT_MAX_OVERTAKE_S,
    DecideFn,
    Holder,
    Owner,
    TableView,
    admit,
    queue_rank,
)
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.planning.schedule import Because, Schedule, Step

#: Seconds from a grant out of the queue to the write's first byte: the median release-to-first-byte
#: hand-off of the real-scheduler sweep (``benchmarks/results/orchestration_sweep.json``, seeds 0-4,
#: LocalExecutor, 8 slots: 3.36 s, of which 0.4 s release to grant and 2.88 s grant to first byte).
DEFAULT_HANDOFF_S = 3.36

#: What a write whose operation or table is not known before the run is judged as: a metadata change,
#: which the admission rule keeps apart from every write on the table, both ways.
UNKNOWN_OPERATION = Operation(OperationKind.ALTER_SCHEMA, label="(not known before the run)")


@dataclass(frozen=True)
class LeasedWrite:
    """One task instance as the lease manager sees it.

    :param id: the plan's job id.
    :param duration_s: the seconds it holds its worker slot writing (``>= 0``).
    :param upstream: the jobs that must end before it is ready.
    :param claims: ``(table, operation)`` for every table it leases (empty: not a deltaguard write).
    :param estimate_s: the expected duration its request carries (``None``: none).
    :param lease_priority: its lease queue priority.
    :param weight: Airflow's effective ``priority_weight`` (higher starts first).
    :param owner: its owner (dag and task ids, map index).
    """

    id: str
    duration_s: float
    upstream: tuple[str, ...] = ()
    claims: tuple[tuple[str, Operation], ...] = ()
    estimate_s: float | None = None
    lease_priority: int = 0
    weight: float = 1.0
    owner: Owner | None = None


@dataclass(frozen=True)
class TableRules:
    """A table's configuration and the engine whose rules judge its writes."""

    config: TableConfig
    profile: EngineProfile


@dataclass
class _State:
    ready_since: dict[str, float] = field(default_factory=dict)
    asked: dict[str, Holder] = field(default_factory=dict)  # queued requests by job
    leases: dict[str, tuple[float, str]] = field(default_factory=dict)  # job -> (granted at, lease id)
    to_resume: dict[str, float] = field(default_factory=dict)  # granted, waiting for a slot: since
    in_slot: set[str] = field(default_factory=set)
    starts: dict[str, float] = field(default_factory=dict)
    ends: dict[str, float] = field(default_factory=dict)
    cause: dict[str, tuple[Because, str | None]] = field(default_factory=dict)
    granted_after: dict[str, str | None] = field(default_factory=dict)


def simulate_leased(
    writes: Sequence[LeasedWrite],
    tables: Mapping[str, TableRules],
    decide: DecideFn,
    *,
    workers: int | None = None,
    handoff_s: float = DEFAULT_HANDOFF_S,
    ageing_s: float = DEFAULT_AGEING_S,
    max_overtake_s: float = DEFAULT_MAX_OVERTAKE_S,
) -> Schedule:
    """Play one run of ``writes`` under the lease manager in virtual time (see the module docstring).

    :param writes: the run's task instances (ids unique; tasks without claims are plain tasks).
    :param tables: every claimed table's rules.
    :param decide: the conflict model (:func:`deltaguard.core.model.decide`).
    :param workers: tasks that hold a worker slot at once at most (``None``: unbounded).
    :param handoff_s: seconds from a grant out of the queue (or the slot it then waited for) to the write.
    :param ageing_s: the lease manager's seconds of waiting worth one priority level.
    :param max_overtake_s: the lease manager's longest wait that later requests may backfill past.
    :raises ValueError: on duplicate ids, unknown upstream ids or tables, a negative duration or hand-off,
        ``workers < 1``, or a dependency cycle.
    """
    by_id = {w.id: w for w in writes}
    if len(by_id) != len(writes):
        raise ValueError("job ids must be unique")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if handoff_s < 0 or not math.isfinite(handoff_s):
        raise ValueError(f"handoff_s must be a finite number >= 0, got {handoff_s!r}")
    for write in writes:
        if write.duration_s < 0:
            raise ValueError("durations must be >= 0")
        for up in write.upstream:
            if up not in by_id:
                raise ValueError(f"job {write.id!r} depends on unknown job {up!r}")
        for table, _ in write.claims:
            if table not in tables:
                raise ValueError(f"no rules for table {table!r}")
    position = {w.id: i for i, w in enumerate(writes)}
    state = _State()
    asks = [0]  # ask sequence: ties of rank go to the earlier ask, as enqueue times would

    def request_id(job: str) -> str:
        return f"{asks[0]:08d}:{job}"

    def view(job: str, table: str, operation: Operation) -> TableView:
        def on_table(other: str) -> Operation:
            return next(op for t, op in by_id[other].claims if t == table)

        return TableView(
            uri=table,
            operation=operation,
            config=tables[table].config,
            profile=tables[table].profile,
            granted=[
                Holder(
                    id=lease_id,
                    owner=_owner(by_id[other]),
                    operation=on_table(other),
                    granted=True,
                    since=granted_at,
                    expected_duration_s=by_id[other].estimate_s,
                )
                for other, (granted_at, lease_id) in state.leases.items()
                if table in _tables(by_id[other])
            ],
            waiting=[
                dataclasses.replace(holder, operation=on_table(other))
                for other, holder in state.asked.items()
                if table in _tables(by_id[other])
            ],
        )

    def decide_for(job: str, holder: Holder, now: float) -> bool:
        write = by_id[job]
        verdict = admit(
            holder.id,
            holder.rank,
            [view(job, table, operation) for table, operation in write.claims],
            decide,
            now=now,
            expected_duration_s=write.estimate_s,
            max_overtake_s=max_overtake_s,
        )
        return verdict.granted

    def grant(job: str, holder: Holder, now: float) -> None:
        state.leases[job] = (now, holder.id)

    def readmit(now: float) -> None:
        for job in sorted(state.asked, key=lambda j: (state.asked[j].rank, state.asked[j].id)):
            holder = state.asked[job]
            if decide_for(job, holder, now):
                del state.asked[job]
                grant(job, holder, now)
                state.to_resume[job] = now
                state.granted_after[job] = released_on(job, now)

    def released_on(job: str, now: float) -> str | None:
        """The write on one of ``job``'s tables whose release just now let it be granted."""
        mine = _tables(by_id[job])
        ended_now = [
            other
            for other, end in state.ends.items()
            if end == now and other not in state.in_slot and mine & _tables(by_id[other])
        ]
        return max(ended_now, key=lambda other: position[other], default=None)

    def start(job: str, at: float, because: Because, after: str | None) -> None:
        state.in_slot.add(job)
        state.starts[job] = at
        state.ends[job] = at + by_id[job].duration_s
        state.cause[job] = (because, after)

    def fill_slots(now: float, freed_by: str | None) -> None:
        while workers is None or len(state.in_slot) < workers:
            candidates = [j for j in state.to_resume] + [
                j
                for j in state.ready_since
                if j not in state.starts and j not in state.asked and j not in state.leases
            ]
            if not candidates:
                return
            job = min(candidates, key=lambda j: (-by_id[j].weight, position[j]))
            write = by_id[job]
            if job in state.to_resume:
                granted_at = state.to_resume.pop(job)
                waited_slot = now > granted_at
                start(
                    job,
                    now + handoff_s,
                    Because.WORKER if waited_slot else Because.CONFLICT,
                    freed_by if waited_slot else state.granted_after.get(job),
                )
                continue
            because, after = _ready_cause(write, state, now, freed_by)
            if not write.claims:
                start(job, now, because, after)
                continue
            asks[0] += 1
            holder = Holder(
                id=request_id(job),
                owner=_owner(write),
                operation=write.claims[0][1],
                granted=False,
                rank=queue_rank(now, write.lease_priority, ageing_s),
                since=now,
                expected_duration_s=write.estimate_s,
            )
            if decide_for(job, holder, now):
                grant(job, holder, now)
                start(job, now, because, after)
            else:
                state.asked[job] = holder  # deferred: the slot is free again at once
                state.cause[job] = (because, after)

    now = 0.0
    ended: str | None = None

    def finish(at: float) -> bool:
        nonlocal ended
        done = sorted(
            (j for j in state.in_slot if state.ends[j] <= at), key=lambda j: (state.ends[j], position[j])
        )
        for job in done:
            state.in_slot.discard(job)
            state.leases.pop(job, None)  # released: the next readmission sees the table free
            ended = job
        return bool(done)

    while True:
        while True:  # settle at `now`: a task of 0 s ends at once and may make others ready
            for write in writes:
                if write.id not in state.ready_since and all(
                    up in state.ends and up not in state.in_slot for up in write.upstream
                ):
                    state.ready_since[write.id] = now
            readmit(now)
            fill_slots(now, ended)
            if not finish(now):
                break
        if not state.in_slot:
            if len(state.ends) == len(writes):
                break
            if state.asked or state.to_resume:  # pragma: no cover - the earliest-ranked waiter is grantable
                raise RuntimeError("requests still wait although no write runs")
            raise ValueError("the jobs' dependencies form a cycle")
        now = min(state.ends[j] for j in state.in_slot)
        finish(now)
    return Schedule(state.starts, state.ends, _critical_path(state))


def _owner(write: LeasedWrite) -> Owner:
    return write.owner or Owner(name=write.id)


def _tables(write: LeasedWrite) -> set[str]:
    return {table for table, _ in write.claims}


def _ready_cause(
    write: LeasedWrite, state: _State, now: float, freed_by: str | None
) -> tuple[Because, str | None]:
    ups = [up for up in write.upstream if state.ends.get(up) == state.ready_since[write.id]]
    if state.ready_since[write.id] < now:
        return Because.WORKER, freed_by
    if ups and now > 0:  # what ends at the run's start (a task of 0 s) started it: the run's start
        return Because.DEPENDENCY, max(ups, key=lambda up: state.starts[up])
    return Because.START, None


def _critical_path(state: _State) -> tuple[Step, ...]:
    if not state.ends:
        return ()
    current: str | None = max(state.ends, key=lambda j: (state.ends[j], -state.starts[j]))
    steps: list[Step] = []
    seen: set[str] = set()
    while current is not None and current not in seen:
        seen.add(current)
        because, after = state.cause.get(current, (Because.START, None))
        if after is not None and after not in state.ends:
            after = None
        steps.append(Step(current, state.starts[current], state.ends[current], because, after))
        current = after
    return tuple(reversed(steps))
