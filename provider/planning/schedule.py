"""The expected makespan of one DAG run: a list-scheduling simulation in virtual time.

Pure: no Airflow, no engine, no clock. Each job (a task instance) has a duration and upstream jobs; an
``admit`` function says which running jobs keep a ready job from starting (none: it starts). The policies
differ only in ``admit``: one-slot pools block a job while any job on one of its tables runs, deltaguard
blocks it while a running write the conflict model says it conflicts with runs, running everything at once
blocks nothing.

Whenever a job ends, the ready jobs are tried in priority order (the longest chain of work still after
them in the DAG first: the critical-path rule of list scheduling) and every one ``admit`` lets through
starts at once; ``workers`` bounds how many run together (``None``: unbounded). The critical path is walked
back from the job that ends last: each step names what it waited for (a dependency, a blocking write or a
worker slot).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

#: ``admit(job_id, running_job_ids)`` -> the running jobs that keep it from starting (empty: it starts)
Admit = Callable[[str, Sequence[str]], Sequence[str]]


@dataclass(frozen=True)
class Job:
    """One task instance of the run.

    :param id: unique id (``task_id`` or ``task_id[map_index]``).
    :param duration_s: expected seconds (``>= 0``).
    :param upstream: ids of the jobs that must end before it starts.
    """

    id: str
    duration_s: float
    upstream: tuple[str, ...] = ()


class Because(StrEnum):
    """Why a job on the critical path started when it did."""

    START = "start"  #: at the start of the run
    DEPENDENCY = "dependency"  #: when an upstream task ended
    CONFLICT = "conflict"  #: when a write blocking it ended
    WORKER = "worker"  #: when a worker slot freed up


@dataclass(frozen=True)
class Step:
    """One job on the critical path and what it waited for (``after``: the job whose end started it)."""

    job: str
    start_s: float
    end_s: float
    because: Because
    after: str | None = None


@dataclass(frozen=True)
class Schedule:
    """Start and end of every job, the makespan and the critical path (first job first)."""

    starts: dict[str, float] = field(default_factory=dict)
    ends: dict[str, float] = field(default_factory=dict)
    critical_path: tuple[Step, ...] = ()
    #: when each write first asked for its lease (the play under the lease manager only)
    asks: dict[str, float] = field(default_factory=dict)

    @property
    def makespan_s(self) -> float:
        return max(self.ends.values(), default=0.0)


def downstream_sums(jobs: Sequence[Job], weights: Mapping[str, float]) -> dict[str, float]:
    """Each job's weight plus the weights of every job after it in the DAG (Airflow's default
    ``weight_rule="downstream"`` for a task's effective priority).

    :raises ValueError: on an unknown upstream id or a dependency cycle.
    """
    downstream: dict[str, set[str]] = {job.id: set() for job in jobs}
    by_id = {job.id: job for job in jobs}
    for job_id in reversed(_topological(jobs)):
        for up in by_id[job_id].upstream:
            downstream[up] |= {job_id} | downstream[job_id]
    return {job.id: weights[job.id] + sum(weights[d] for d in downstream[job.id]) for job in jobs}


def bottom_levels(jobs: Sequence[Job]) -> dict[str, float]:
    """Each job's duration plus the longest chain of downstream work after it (the list-scheduling priority).

    :raises ValueError: on an unknown upstream id or a dependency cycle.
    """
    by_id = {job.id: job for job in jobs}
    downstream: dict[str, list[str]] = {job.id: [] for job in jobs}
    for job in jobs:
        for up in job.upstream:
            if up not in by_id:
                raise ValueError(f"job {job.id!r} depends on unknown job {up!r}")
            downstream[up].append(job.id)
    level: dict[str, float] = {}
    for job_id in reversed(_topological(jobs)):
        level[job_id] = by_id[job_id].duration_s + max((level[d] for d in downstream[job_id]), default=0.0)
    return level


def _topological(jobs: Sequence[Job]) -> list[str]:
    pending = {job.id: set(job.upstream) for job in jobs}
    order: list[str] = []
    ready = [job.id for job in jobs if not job.upstream]
    while ready:
        current = ready.pop(0)
        order.append(current)
        for job in jobs:
            waiting = pending[job.id]
            if current in waiting:
                waiting.discard(current)
                if not waiting:
                    ready.append(job.id)
    if len(order) != len(jobs):
        raise ValueError("the jobs' dependencies form a cycle")
    return order


def simulate(
    jobs: Sequence[Job],
    admit: Admit,
    workers: int | None = None,
    priority: Mapping[str, float] | None = None,
    cold_extra_s: float = 0.0,
) -> Schedule:
    """List-schedule ``jobs`` in virtual time.

    :param jobs: the run's jobs (ids unique).
    :param admit: which running jobs keep a ready job from starting.
    :param workers: how many jobs may run at once (``None``: as many as are ready).
    :param priority: the order ready jobs are tried in, highest first (default: :func:`bottom_levels`).
    :param cold_extra_s: seconds a job started on a new worker takes longer (one that raises the most jobs
        ever run at once: the executor starts a worker for it).
    :raises ValueError: on duplicate ids, unknown upstream ids, a cycle, a negative duration or
        ``workers < 1``.
    """
    ids = [job.id for job in jobs]
    if len(set(ids)) != len(ids):
        raise ValueError("job ids must be unique")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if any(job.duration_s < 0 for job in jobs):
        raise ValueError("durations must be >= 0")
    level = dict(priority) if priority is not None else bottom_levels(jobs)
    by_id = {job.id: job for job in jobs}
    position = {job_id: i for i, job_id in enumerate(ids)}
    starts: dict[str, float] = {}
    ends: dict[str, float] = {}
    blocked_by: dict[str, tuple[str, ...]] = {}
    waited_worker: set[str] = set()
    running: list[str] = []
    peak = 0
    now = 0.0
    while len(ends) < len(jobs):
        ready = sorted(
            (
                job_id
                for job_id in ids
                if job_id not in starts
                and all(up in ends and ends[up] <= now for up in by_id[job_id].upstream)
            ),
            key=lambda job_id: (-level[job_id], position[job_id]),
        )
        for job_id in ready:
            if workers is not None and len(running) >= workers:
                waited_worker.add(job_id)
                continue
            blockers = tuple(admit(job_id, tuple(running)))
            if blockers:
                blocked_by[job_id] = blockers
                continue
            starts[job_id] = now
            running.append(job_id)
            cold = len(running) > peak
            peak = max(peak, len(running))
            ends[job_id] = now + by_id[job_id].duration_s + (cold_extra_s if cold else 0.0)
        if not running:  # pragma: no cover - admit blocks only on running jobs, so something started
            raise RuntimeError("no job could start although none is running")
        now = min(ends[job_id] for job_id in running)
        running = [job_id for job_id in running if ends[job_id] > now]
    return Schedule(starts, ends, _critical_path(by_id, starts, ends, blocked_by, waited_worker))


def _critical_path(
    by_id: dict[str, Job],
    starts: dict[str, float],
    ends: dict[str, float],
    blocked_by: dict[str, tuple[str, ...]],
    waited_worker: set[str],
) -> tuple[Step, ...]:
    if not ends:
        return ()
    current: str | None = max(ends, key=lambda job_id: (ends[job_id], -starts[job_id]))
    steps: list[Step] = []
    while current is not None:
        start = starts[current]
        before: str | None = None
        because = Because.START
        if start > 0:
            ups = [up for up in by_id[current].upstream if ends[up] == start]
            blockers = [b for b in blocked_by.get(current, ()) if ends[b] == start]
            if ups:
                before, because = max(ups, key=lambda up: starts[up]), Because.DEPENDENCY
            elif blockers:
                before, because = blockers[0], Because.CONFLICT
            elif current in waited_worker:
                ended = [j for j in ends if ends[j] == start and j != current]
                before, because = (ended[0] if ended else None), Because.WORKER
        steps.append(Step(current, start, ends[current], because, before))
        current = before
    return tuple(reversed(steps))
