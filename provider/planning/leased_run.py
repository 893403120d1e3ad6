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
  ``max_active_tasks``, its pool). A write's task holds its slot ``slot_times.start_s`` before it asks for
  its lease (the operator's checks, the request); granted, it writes at once; queued, it defers
  and frees the slot (a deferred task holds none). Granted later, it needs a slot again to resume. Its lease
  is released at its commit; it leaves its slot ``slot_times.end_s`` later.
* **Waiting in the worker**: a queued write whose blockers are all granted leases expected to end within the
  lease hook's limit keeps its slot and asks again every poll interval (:mod:`deltaguard.leases.imminent`,
  the functions the hook calls); granted, it writes at its next question. A blocker overdue by more than
  :data:`~deltaguard.leases.imminent.IMMINENT_S` makes it defer after all.
* **The slot gate** (ADR 0028, :mod:`deltaguard.core.slots`, the function the lease manager asks): with
  ``worker_slots``, a request the conflict model admits while that many leases are held waits instead, for
  a slot; such a wait is never imminent (the write defers). After a release the queue is decided in rank
  order while slots are free. In a real run the writes waiting only for a slot (each trigger watching every
  held lease, checking for itself) race the re-admission of the released table's queue
  (:mod:`deltaguard.hooks.lease_readmissions`) for the freed slots; ``slot_waiters_first`` plays the race
  won by the slot waiters.
* **The trigger's first check**: a write that deferred is granted no earlier than ``first_check_s`` after
  its deferral (its trigger waits one ``[deltaguard] poll_interval`` before its first check, and no less
  than :func:`deltaguard.leases.waiting.first_event_after_s`; :mod:`deltaguard.triggers.lease`).
* **Hand-off**: a write granted from the queue after deferring writes its first byte ``handoff_s`` after it
  was granted or, when no slot was free then, after it got one (Airflow's trigger event, re-queue, worker
  start, opening the table).
* **The earlier phases ask first**: a write holds its first question, in its slot, until the writes it
  lets ask first have asked or ``phase_wait_s`` has passed (the lease hook's
  :meth:`~deltaguard.hooks.lease.DeltaLeaseHook.let_earlier_ask`, ADR 0040).
* **The race of first questions**: questions asked at the same instant are answered in Airflow's start
  order, except that ``ask_first`` writes go first (:mod:`deltaguard.planning.first_holders` plays each).

Everything the lease manager decides is played by :class:`PlayedLeaseManager`, in one place.

Not modelled: the triggerer's later polls, retries, scheduler-loop latency, start-ups slowed by each other,
and which of several writes waiting for a slot checks first after a release (a race: rank order is played).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from deltaguard.core.admission import (
    DEFAULT_AGEING_S,
    DEFAULT_MAX_OVERTAKE_S,
    Admission,
    Blocker,
    DecideFn,
    Holder,
    Owner,
    TableView,
    admit,
    queue_rank,
)
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.slots import free_slots, slot_open
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.imminent import (
    IMMINENT_POLL_S,
    IMMINENT_S,
    expected_wait_s,
    imminent_limit_s,
    is_imminent,
)
from deltaguard.leases.waiting import first_event_after_s
from deltaguard.planning.schedule import Because, Schedule, Step

#: Seconds from a grant out of the queue to the write's first byte: the median release-to-first-byte
#: hand-off of the real-scheduler sweep (``benchmarks/results/orchestration_sweep.json``, seeds 0-4,
#: LocalExecutor, 8 slots: 3.36 s, of which 0.4 s release to grant and 2.88 s grant to first byte).
DEFAULT_HANDOFF_S = 3.36

#: A write's time in its worker slot outside its write (:class:`SlotTimes`: before its lease question, after
#: its commit), measured once under the real scheduler on a workload no comparison of the plan uses: the
#: orchestration benchmark at seed 5 with 12 writes of 10-15 s on 4 tables, 8 LocalExecutor slots
#: (``python -m benchmarks.slot_times``; medians over the 12 writes: 1.1 s from the task's start to its
#: question, 0.07 s from its commit to its end; docs/plan.md).
DEFAULT_SLOT_TIMES_S = (1.1, 0.07)

#: Seconds from a write's deferral to its trigger's first check with Airflow's and deltaguard's defaults:
#: one ``[deltaguard] poll_interval`` (5 s), and no sooner than the deferring try's exit can have reached the
#: scheduler (:func:`~deltaguard.leases.waiting.first_event_after_s`, 8 s with ``[workers]
#: min_heartbeat_interval`` at 5 s).
DEFAULT_FIRST_CHECK_S = max(5.0, first_event_after_s())

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
    :param after: the jobs it lets ask first (the conflicting writes of earlier phases, ADR 0040).
    """

    id: str
    duration_s: float
    upstream: tuple[str, ...] = ()
    claims: tuple[tuple[str, Operation], ...] = ()
    estimate_s: float | None = None
    lease_priority: int = 0
    weight: float = 1.0
    owner: Owner | None = None
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableRules:
    """A table's configuration and the engine whose rules judge its writes."""

    config: TableConfig
    profile: EngineProfile


@dataclass(frozen=True)
class SlotTimes:
    """The seconds a deltaguard write's task holds its worker slot outside its write.

    :param start_s: from taking a slot to its lease question (from the task's start as Airflow logs it,
        after its DAG parse, through the operator's checks of its input and the request itself); a write
        granted at that question writes at once.
    :param end_s: from its commit to leaving the slot (the release, the task's end).
    :param cold_start_s: ``start_s`` of a task that takes a slot no task of the run has held before: the
        executor starts a worker for it, and the tasks that start together share the machine's cores
        (``None``: ``start_s``, warm workers).
    """

    start_s: float = 0.0
    end_s: float = 0.0
    cold_start_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("start_s", "end_s", "cold_start_s"):
            value = getattr(self, name)
            if value is not None and (value < 0 or not math.isfinite(value)):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")

    def start_up_s(self, cold: bool) -> float:
        """The start-up of a task on a new worker (``cold``) or on one an earlier task of the run held."""
        return self.start_s if not cold or self.cold_start_s is None else self.cold_start_s


class PlayedLeaseManager:
    """The lease manager's side of a planned run: its queued requests, its grants and every admission
    decision, each made by the functions the lease manager itself calls (:func:`~deltaguard.core.admission.
    queue_rank`, :func:`~deltaguard.core.admission.admit`). Whatever else the lease manager weighs before
    a grant is played here, in one place.

    :param writes: the run's task instances by id.
    :param tables: every claimed table's rules.
    :param decide: the conflict model.
    :param ageing_s: seconds of waiting worth one priority level.
    :param max_overtake_s: the longest wait that later requests may backfill past.

    :attr:`worker_slots` is the slot gate (:mod:`deltaguard.core.slots`, ADR 0028; ``None``: no gate): a
    request the conflict model admits while as many leases are held waits instead, for a slot.
    """

    #: the slot gate's size (``[deltaguard] worker_slots``; ``None``: no gate)
    worker_slots: int | None = None
    #: whether the requests waiting only for a slot are decided before the rest of the queue after a release
    slot_waiters_first: bool = False

    def __init__(
        self,
        writes: Mapping[str, LeasedWrite],
        tables: Mapping[str, TableRules],
        decide: DecideFn,
        ageing_s: float,
        max_overtake_s: float,
    ) -> None:
        self._writes = writes
        self._tables = tables
        self._decide = decide
        self._ageing_s = ageing_s
        self._max_overtake_s = max_overtake_s
        self._asks = 0  # ask sequence: ties of rank go to the earlier ask, as enqueue times would
        #: queued requests by job
        self.asked: dict[str, Holder] = {}
        #: granted leases by job: (granted at, lease id)
        self.leases: dict[str, tuple[float, str]] = {}
        #: queued requests the model admits that wait only for a slot of the gate
        self.slot_waiting: set[str] = set()
        #: deferred requests by job: when their trigger first checks (no grant before it)
        self.first_checks: dict[str, float] = {}

    def ask(self, job: str, now: float) -> Admission:
        """``job``'s first question at ``now``: granted, or queued (with what it waits for)."""
        write = self._writes[job]
        self._asks += 1
        holder = Holder(
            id=f"{self._asks:08d}:{job}",
            owner=_owner(write),
            operation=write.claims[0][1],
            granted=False,
            rank=queue_rank(now, write.lease_priority, self._ageing_s),
            since=now,
            expected_duration_s=write.estimate_s,
        )
        verdict = self._admit(job, holder, now)
        if verdict.granted and not slot_open(self.worker_slots, len(self.leases)):
            verdict = self._slot_wait()
            self.slot_waiting.add(job)
        if verdict.granted:
            self.leases[job] = (now, holder.id)
        else:
            self.asked[job] = holder
        return verdict

    def wait_in_worker_until(self, job: str, now: float, startup_s: float) -> float | None:
        """Whether queued ``job`` waits in its worker rather than deferring, as the lease hook decides it
        (:mod:`deltaguard.leases.imminent`: every blocker a granted lease expected to end within the limit
        its own start-up sets): until when that stands (a blocker overdue by more than
        :data:`~deltaguard.leases.imminent.IMMINENT_S` counts as unknown again), or ``None``: it defers."""
        verdict = self._admit(job, self.asked[job], now)
        if verdict.granted:
            # only the slot gate can hold a request the model admits; a slot wait is never imminent
            return None if not slot_open(self.worker_slots, len(self.leases)) else now
        by_lease = {lease_id: other for other, (_, lease_id) in self.leases.items()}

        def ends(blocker: Blocker) -> float | None:
            other = by_lease.get(blocker.id)
            if other is None or self._writes[other].estimate_s is None:
                return None
            return self.leases[other][0] + float(self._writes[other].estimate_s or 0.0)

        wait = expected_wait_s(verdict.blockers, ends, now)
        if not is_imminent(wait, imminent_limit_s(startup_s)):
            return None
        latest = max(end for end in (ends(b) for b in verdict.blockers) if end is not None)
        return latest + IMMINENT_S

    def readmit(self, now: float) -> list[str]:
        """Ask the queue again in rank order (with :attr:`slot_waiters_first`, the requests that wait only
        for a slot of the gate first), each decision seeing the grants before it (as the re-admission after
        a release does), granting no more than the gate leaves free and none whose trigger has not made its
        first check; the jobs granted, in that order."""
        granted = []
        first = self.slot_waiters_first
        order = sorted(
            self.asked,
            key=lambda j: (first and j not in self.slot_waiting, self.asked[j].rank, self.asked[j].id),
        )
        for job in order:
            if self.first_checks.get(job, now) > now:
                continue  # its trigger has not checked yet
            holder = self.asked[job]
            if not self._admit(job, holder, now).granted:
                self.slot_waiting.discard(job)
                continue
            if free_slots(self.worker_slots, len(self.leases)) == 0:
                self.slot_waiting.add(job)
                continue
            del self.asked[job]
            self.slot_waiting.discard(job)
            self.leases[job] = (now, holder.id)
            granted.append(job)
        return granted

    def release(self, job: str) -> None:
        """``job`` released its lease (it committed)."""
        self.leases.pop(job, None)

    def _slot_wait(self) -> Admission:
        """The wait of a request the model admits while the held leases fill the worker slots."""
        reason = f"all worker slots are taken by the {len(self.leases)} writes holding leases (slot gate)"
        return Admission(False, 1, (), (reason,))

    def _admit(self, job: str, holder: Holder, now: float) -> Admission:
        write = self._writes[job]
        return admit(
            holder.id,
            holder.rank,
            [self._view(table, operation) for table, operation in write.claims],
            self._decide,
            now=now,
            expected_duration_s=write.estimate_s,
            max_overtake_s=self._max_overtake_s,
        )

    def _view(self, table: str, operation: Operation) -> TableView:
        def on_table(other: str) -> Operation:
            return next(op for t, op in self._writes[other].claims if t == table)

        return TableView(
            uri=table,
            operation=operation,
            config=self._tables[table].config,
            profile=self._tables[table].profile,
            granted=[
                Holder(
                    id=lease_id,
                    owner=_owner(self._writes[other]),
                    operation=on_table(other),
                    granted=True,
                    since=granted_at,
                    expected_duration_s=self._writes[other].estimate_s,
                )
                for other, (granted_at, lease_id) in self.leases.items()
                if table in _tables(self._writes[other])
            ],
            waiting=[
                dataclasses.replace(holder, operation=on_table(other))
                for other, holder in self.asked.items()
                if table in _tables(self._writes[other])
            ],
        )


@dataclass
class _State:
    ready_since: dict[str, float] = field(default_factory=dict)
    asking: dict[str, float] = field(default_factory=dict)  # in a slot, starting up: asks at
    start_up: dict[str, float] = field(default_factory=dict)  # each write's start-up before its question
    peak_slots: int = 0  # the most worker slots held at once so far: a slot beyond it is a new worker
    holding: dict[str, tuple[float, float]] = field(
        default_factory=dict
    )  # started up, letting earlier phases ask first: slot taken at, asks at the latest at
    in_worker: dict[str, tuple[float, float]] = field(
        default_factory=dict
    )  # waits in its slot: asked at, until
    first_ask: dict[str, float] = field(default_factory=dict)
    to_resume: dict[str, float] = field(default_factory=dict)  # granted, waiting for a slot: since
    commits: dict[str, float] = field(default_factory=dict)  # writing: commits (and releases) at
    released_at: dict[str, float] = field(default_factory=dict)
    in_slot: set[str] = field(default_factory=set)
    starts: dict[str, float] = field(default_factory=dict)
    ends: dict[str, float] = field(default_factory=dict)
    cause: dict[str, tuple[Because, str | None]] = field(default_factory=dict)
    granted_after: dict[str, tuple[Because, str | None]] = field(default_factory=dict)


def simulate_leased(
    writes: Sequence[LeasedWrite],
    tables: Mapping[str, TableRules],
    decide: DecideFn,
    *,
    workers: int | None = None,
    worker_slots: int | None = None,
    handoff_s: float = DEFAULT_HANDOFF_S,
    slot_times: SlotTimes = SlotTimes(),
    first_check_s: float = 0.0,
    ask_first: Collection[str] = (),
    ask_last: Collection[str] = (),
    slot_waiters_first: bool = False,
    phase_wait_s: float = 0.0,
    ageing_s: float = DEFAULT_AGEING_S,
    max_overtake_s: float = DEFAULT_MAX_OVERTAKE_S,
) -> Schedule:
    """Play one run of ``writes`` under the lease manager in virtual time (see the module docstring).

    A task's start is when it takes its worker slot for the stint in which it writes (a write granted out
    of the queue: its first byte, the hand-off before it); its end is when it leaves the slot.

    :param writes: the run's task instances (ids unique; tasks without claims are plain tasks).
    :param tables: every claimed table's rules.
    :param decide: the conflict model (:func:`deltaguard.core.model.decide`).
    :param workers: tasks that hold a worker slot at once at most (``None``: unbounded).
    :param worker_slots: the lease manager's slot gate (``[deltaguard] worker_slots``, ADR 0028): leases
        granted at once at most (``None``: no gate).
    :param handoff_s: seconds from a grant out of the queue (or the slot it then waited for) to the write.
    :param slot_times: a write's time in its slot outside its write (default: none).
    :param first_check_s: seconds from a write's deferral to its trigger's first check, before which its
        request is not granted (the trigger waits one ``[deltaguard] poll_interval`` first,
        :mod:`deltaguard.triggers.lease`; default: none).
    :param ask_first: writes that win the race of questions asked at the same instant (the others keep
        Airflow's start order behind them).
    :param ask_last: writes that lose that race: they ask after every other question of the same instant
        (the winners and Airflow's start order before them).
    :param slot_waiters_first: after a release, decide the requests waiting only for a slot of the gate
        before the rest of the queue (one way the race between their own checks and the re-admission of the
        released table's queue goes; default: queue order for all).
    :param phase_wait_s: the longest a write holds its first question for the writes it lets ask first
        (``[deltaguard] phase_wait``; default: none).
    :param ageing_s: the lease manager's seconds of waiting worth one priority level.
    :param max_overtake_s: the lease manager's longest wait that later requests may backfill past.
    :raises ValueError: on duplicate ids, unknown upstream ids or tables, a negative duration or hand-off,
        ``workers < 1``, ``worker_slots < 1``, or a dependency cycle.
    """
    by_id = {w.id: w for w in writes}
    if len(by_id) != len(writes):
        raise ValueError("job ids must be unique")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    free_slots(worker_slots, 0)  # checks it
    for name, value in (
        ("handoff_s", handoff_s),
        ("first_check_s", first_check_s),
        ("phase_wait_s", phase_wait_s),
    ):
        if value < 0 or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    for write in writes:
        if write.duration_s < 0:
            raise ValueError("durations must be >= 0")
        for up in write.upstream:
            if up not in by_id:
                raise ValueError(f"job {write.id!r} depends on unknown job {up!r}")
        for table, _ in write.claims:
            if table not in tables:
                raise ValueError(f"no rules for table {table!r}")
        for other in write.after:
            if other not in by_id:
                raise ValueError(f"job {write.id!r} lets unknown job {other!r} ask first")
    position = {w.id: i for i, w in enumerate(writes)}
    first = frozenset(ask_first)
    last = frozenset(ask_last)
    state = _State()
    manager = PlayedLeaseManager(by_id, tables, decide, ageing_s, max_overtake_s)
    manager.worker_slots = worker_slots
    manager.slot_waiters_first = slot_waiters_first

    def readmit(now: float) -> None:
        for job in manager.readmit(now):
            because, after = released_on(job, now)
            if job in state.in_worker:
                # it asks again every poll interval in its worker and writes at the first one after the grant
                asked_at, _ = state.in_worker.pop(job)
                polls = math.ceil(round((now - asked_at) / IMMINENT_POLL_S, 9))
                first_byte = asked_at + polls * IMMINENT_POLL_S
                write_from(job, first_byte, first_byte, because, after)
                continue
            state.to_resume[job] = now
            state.granted_after[job] = (because, after)
        for job, (_, until) in list(state.in_worker.items()):
            if now >= until or manager.wait_in_worker_until(job, now, state.start_up[job]) is None:
                del state.in_worker[job]  # its blockers are late or changed: it defers after all
                state.in_slot.discard(job)
                manager.first_checks[job] = now + first_check_s

    def released_on(job: str, now: float) -> tuple[Because, str | None]:
        """The write on one of ``job``'s tables whose release just now let it be granted; else, under the
        slot gate, the write whose release just now freed a slot for it."""
        mine = _tables(by_id[job])
        released_now = [other for other, at in state.released_at.items() if at == now]
        on_mine = [other for other in released_now if mine & _tables(by_id[other])]
        if on_mine or worker_slots is None:
            return Because.CONFLICT, max(on_mine, key=lambda other: position[other], default=None)
        return Because.WORKER, max(released_now, key=lambda other: position[other], default=None)

    def write_from(
        job: str, first_byte: float, slot_start: float, because: Because, after: str | None
    ) -> None:
        """``job`` holds its lease and writes from ``first_byte``; its stint in the slot began at
        ``slot_start``."""
        commit = first_byte + by_id[job].duration_s
        state.starts[job] = slot_start
        state.commits[job] = commit
        state.ends[job] = commit + slot_times.end_s
        state.cause[job] = (because, after)

    def fill_slots(now: float, freed_by: str | None) -> None:
        while workers is None or len(state.in_slot) < workers:
            candidates = [j for j in state.to_resume] + [
                j
                for j in state.ready_since
                if j not in state.starts
                and j not in state.asking
                and j not in state.holding
                and j not in manager.asked
                and j not in manager.leases
            ]
            if not candidates:
                return
            job = min(candidates, key=lambda j: (-by_id[j].weight, position[j]))
            write = by_id[job]
            state.in_slot.add(job)
            cold = len(state.in_slot) > state.peak_slots
            state.peak_slots = max(state.peak_slots, len(state.in_slot))
            if job in state.to_resume:
                granted_at = state.to_resume.pop(job)
                waited_slot = now > granted_at
                first_byte = now + handoff_s
                because, after = (
                    (Because.WORKER, freed_by)
                    if waited_slot
                    else state.granted_after.get(job, (Because.CONFLICT, None))
                )
                write_from(job, first_byte, first_byte, because, after)
                continue
            state.cause[job] = _ready_cause(write, state, now, freed_by)
            if not write.claims:
                # a plain task has no start-up of its own here, but a new worker's costs it as it does a write
                extra = slot_times.start_up_s(cold) - slot_times.start_s
                state.starts[job] = now
                state.ends[job] = now + write.duration_s + extra
                continue
            state.start_up[job] = slot_times.start_up_s(cold)
            state.asking[job] = now + state.start_up[job]

    def ask_due(now: float) -> bool:
        """The questions due at ``now``: the race's winners first, then in Airflow's start order, its losers
        last."""
        for job in [j for j, at in state.asking.items() if at <= now]:
            at = state.asking.pop(job)
            state.holding[job] = (at - state.start_up[job], at + phase_wait_s)
        asked = False
        while True:
            due = [
                j
                for j, (_, until) in state.holding.items()
                if until <= now or all(a in state.first_ask for a in by_id[j].after)
            ]
            if not due:
                return asked
            job = min(
                due, key=lambda j: (0 if j in first else 2 if j in last else 1, -by_id[j].weight, position[j])
            )
            slot_start, _ = state.holding.pop(job)
            asked = True
            state.first_ask[job] = now
            because, after = state.cause[job]
            if manager.ask(job, now).granted:
                write_from(job, now, slot_start, because, after)
                continue
            until = manager.wait_in_worker_until(job, now, state.start_up[job])
            if until is not None:
                state.in_worker[job] = (now, until)  # waits for an imminent release in its slot
            else:
                state.in_slot.discard(job)  # deferred: the slot is free again at once
                manager.first_checks[job] = now + first_check_s

    now = 0.0
    ended: str | None = None

    def finish(at: float) -> bool:
        nonlocal ended
        committed = sorted(
            (j for j, commit in state.commits.items() if commit <= at and j not in state.released_at),
            key=lambda j: (state.commits[j], position[j]),
        )
        for job in committed:
            manager.release(job)  # released: the next readmission sees the table free
            state.released_at[job] = state.commits[job]
        done = sorted(
            (j for j in state.in_slot if j in state.ends and state.ends[j] <= at),
            key=lambda j: (state.ends[j], position[j]),
        )
        for job in done:
            state.in_slot.discard(job)
            ended = job
        return bool(committed or done)

    while True:
        while True:  # settle at `now`: a task of 0 s ends at once and may make others ready
            for write in writes:
                if write.id not in state.ready_since and all(
                    up in state.ends and up not in state.in_slot for up in write.upstream
                ):
                    state.ready_since[write.id] = now
            readmit(now)
            fill_slots(now, ended)
            asked = ask_due(now)
            if not (finish(now) or asked):
                break
        pending = [
            *state.asking.values(),
            *(until for _, until in state.holding.values()),
            *(at for job, at in manager.first_checks.items() if job in manager.asked and at > now),
            *(until for _, until in state.in_worker.values()),
            *(c for j, c in state.commits.items() if j not in state.released_at),
            *(state.ends[j] for j in state.in_slot if j in state.ends and state.ends[j] > now),
        ]
        if not pending:
            if len(state.ends) == len(writes) and not state.in_slot:
                break
            if manager.asked or state.to_resume:  # pragma: no cover - the earliest-ranked waiter is grantable
                raise RuntimeError("requests still wait although no write runs")
            raise ValueError("the jobs' dependencies form a cycle")
        if min(pending) <= now:  # pragma: no cover - everything due at `now` was settled above
            raise RuntimeError(f"the play stands still at {now:g} s")
        now = min(pending)
        finish(now)
    return Schedule(state.starts, state.ends, _critical_path(state), dict(state.first_ask))


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


#: the default :class:`SlotTimes` (:data:`DEFAULT_SLOT_TIMES_S`)
DEFAULT_SLOT_TIMES = SlotTimes(*DEFAULT_SLOT_TIMES_S)
