"""The plan of one DAG run from its writes: per table, which writes serialize and why, the conflict chains,
the changes that would let a serializing pair run together, and the makespan under three policies.

Pure: the conflict model (:func:`~deltaguard.core.model.pair_verdict` for a pair,
:func:`~deltaguard.core.model.decide` for a write beside the writes running, exactly as the lease manager
asks it), the chain search (:func:`~deltaguard.core.chains.heaviest_clique`), the remedies
(:func:`~deltaguard.core.remedies.explain_verdict`) and the schedule (:mod:`deltaguard.planning.schedule`).
The Airflow side (finding the writes, reading the tables) is :mod:`deltaguard.planning.discover`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from deltaguard.core.admission import Owner
from deltaguard.core.chains import heaviest_clique
from deltaguard.core.decision import PairVerdict
from deltaguard.core.model import decide, pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.priority import DEFAULT_EXPECTED_S, table_priorities
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.remedies import Change, ChangeKind, explain_verdict
from deltaguard.core.table_config import TableConfig
from deltaguard.planning.first_holders import RaceRange, first_holder_range, with_slot_race
from deltaguard.planning.leased_run import (
    DEFAULT_FIRST_CHECK_S,
    DEFAULT_HANDOFF_S,
    DEFAULT_SLOT_TIMES,
    UNKNOWN_OPERATION,
    LeasedWrite,
    SlotTimes,
    TableRules,
    simulate_leased,
)
from deltaguard.planning.schedule import Job, Schedule, downstream_sums, simulate

#: the policies the plan compares, in the order they are shown
POLICIES = ("one_slot_pools", "all_at_once", "deltaguard")
#: the rule name of a pair one of whose operations is not known before the run
UNKNOWN_RULE = "plan.unknown_operation"
#: how a table key starts when a template names the table (rendered only when the task runs)
TEMPLATED_TABLE = "(templated) "


@dataclass(frozen=True)
class Target:
    """One table a task writes and how (``operation`` ``None``: not known before the run).

    :param table: the table key (as the lease manager names the table).
    :param operation: the write, as the conflict model sees it.
    :param unknown: why the operation is not known (a templated field, ...), when it is not.
    """

    table: str
    operation: Operation | None
    unknown: str = ""


@dataclass(frozen=True)
class PlannedTask:
    """One task instance of the run.

    :param id: unique id: the task id, with ``[i]`` for a mapped task's instance.
    :param task_id: the Airflow task id.
    :param targets: the tables it writes (empty: not a deltaguard write).
    :param duration_s: its expected duration.
    :param duration_source: where the duration comes from (``recorded``, ``declared``, ``default``).
    :param upstream: ids of the instances that must end before it starts.
    :param map_index: the instance's map index (``None``: not mapped).
    :param lease_priority: its author's lease queue priority (0: the one the ``dag_policy`` gives it).
    :param asks_after: the tasks it lets ask first, as the ``dag_policy`` set them when the DAG was parsed
        (ADR 0040; none for a task the policy does not phase).
    """

    id: str
    task_id: str
    targets: tuple[Target, ...]
    duration_s: float
    duration_source: str
    upstream: tuple[str, ...] = ()
    map_index: int | None = None
    lease_priority: int = 0
    asks_after: tuple[str, ...] = ()

    @property
    def estimate_s(self) -> float | None:
        """The expected duration its lease request carries (``None``: none, only the default stood in)."""
        return self.duration_s if self.duration_source in ("declared", "recorded") else None


@dataclass(frozen=True)
class TableSetting:
    """A table's configuration as the plan uses it and where it comes from.

    :param config: the configuration.
    :param source: ``table`` (read from its Delta log), ``document`` (a declared table document),
        ``recorded`` (the lease store's last decision), ``created`` (as a write of the DAG creates it) or
        ``assumed``.
    :param note: what was assumed or why the table was not read.
    :param profile: the engine whose rules judge its writes.
    """

    config: TableConfig
    source: str
    note: str
    profile: EngineProfile


@dataclass(frozen=True)
class PairReport:
    """Two writes on one table and the model's verdict on them, with checked changes when they serialize."""

    table: str
    a: str
    b: str
    conflict: bool
    rule: str
    exceptions: tuple[str, ...]
    reason: str
    why: str
    changes: tuple[Change, ...] = ()
    advice: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "a": self.a,
            "b": self.b,
            "conflict": self.conflict,
            "rule": self.rule,
            "exceptions": list(self.exceptions),
            "why": self.why,
            "reason": self.reason,
            "changes": [c.to_json() for c in self.offered],
            "advice": list(self.sequence_advice),
        }

    @property
    def offered(self) -> tuple[Change, ...]:
        """The checked changes that would let the pair run together."""
        return tuple(c for c in self.changes if c.kind is not ChangeKind.SEQUENCE)

    @property
    def sequence_advice(self) -> tuple[str, ...]:
        """What the model advises for a pair no change lets overlap (a metadata change: run it alone, ...);
        a pair's own free-text advice is not offered as a change, since the model has not checked it."""
        return tuple(c.text for c in self.changes if c.kind is ChangeKind.SEQUENCE)


@dataclass(frozen=True)
class Chain:
    """The heaviest set of pairwise-conflicting writes of a table: work that runs one write after another."""

    tasks: tuple[str, ...]
    seconds: float
    exact: bool


@dataclass(frozen=True)
class TableReport:
    table: str
    setting: TableSetting
    writes: tuple[str, ...]
    pairs: tuple[PairReport, ...]
    chain: Chain

    @property
    def serializing(self) -> tuple[PairReport, ...]:
        return tuple(p for p in self.pairs if p.conflict)

    @property
    def side_by_side(self) -> tuple[PairReport, ...]:
        return tuple(p for p in self.pairs if not p.conflict)


@dataclass(frozen=True)
class Plan:
    """The plan of one DAG run."""

    dag_id: str
    tasks: tuple[PlannedTask, ...]
    tables: tuple[TableReport, ...]
    schedules: dict[str, Schedule]
    #: seconds no policy can beat: the longest dependency chain, or a table's heaviest conflict chain
    lower_bound_s: float
    #: what the plan assumed (stated in every output)
    assumptions: tuple[str, ...] = ()
    #: running everything at once: the conflicting pairs that would overlap (and fail, or worse)
    unsafe_overlaps: tuple[tuple[str, str, str], ...] = field(default=())
    #: under deltaguard, the fastest and slowest runs over which write asks first for each table
    race: RaceRange | None = None

    def makespan_s(self, policy: str) -> float:
        return self.schedules[policy].makespan_s


def build_plan(
    dag_id: str,
    tasks: Sequence[PlannedTask],
    settings: dict[str, TableSetting],
    assumptions: Sequence[str] = (),
    workers: int | None = None,
    handoff_s: float = DEFAULT_HANDOFF_S,
    slot_times: SlotTimes = DEFAULT_SLOT_TIMES,
    worker_slots: int | None = None,
    first_check_s: float = DEFAULT_FIRST_CHECK_S,
    phase_wait_s: float = 0.0,
) -> Plan:
    """Judge every pair of writes per table, find the chains, and schedule the run under each policy.

    :param dag_id: the DAG.
    :param tasks: every task instance of one run (writes and other tasks).
    :param settings: each written table's configuration (every target's table must have one).
    :param assumptions: what the caller assumed, carried into the plan.
    :param workers: how many tasks run at once at most (``None``: unbounded).
    :param handoff_s: under deltaguard, seconds from a grant out of the lease queue to the write
        (:mod:`deltaguard.planning.leased_run`).
    :param slot_times: a write's time in its worker slot outside its write, under every policy.
    :param worker_slots: under deltaguard, the lease manager's slot gate: leases held at once at most
        (``[deltaguard] worker_slots``, ADR 0028; ``None``: no gate).
    :param first_check_s: under deltaguard, seconds from a write's deferral to its trigger's first check
        (``[deltaguard] poll_interval``).
    :param phase_wait_s: under deltaguard, the longest a write lets the earlier phases of its table ask
        first (``[deltaguard] phase_wait``, ADR 0040; default: none).
    :raises ValueError: on a target whose table has no setting, or bad dependencies.
    """
    by_id = {task.id: task for task in tasks}
    writes_on: dict[str, list[tuple[str, Target]]] = {}
    for task in tasks:
        for target in task.targets:
            if target.table not in settings:
                raise ValueError(f"no configuration for table {target.table!r}")
            writes_on.setdefault(target.table, []).append((task.id, target))
    verdicts: dict[tuple[str, str, str], PairReport] = {}
    reports: list[TableReport] = []
    for table in sorted(writes_on):
        setting = settings[table]
        members = writes_on[table]
        pairs = [_pair(table, a, b, setting) for a, b in combinations(members, 2)]
        for pair in pairs:
            verdicts[(table, pair.a, pair.b)] = verdicts[(table, pair.b, pair.a)] = pair
        ids = [task_id for task_id, _ in members]
        weights = [by_id[task_id].duration_s for task_id in ids]
        seconds, chosen, exact = heaviest_clique(weights, _conflict_test(verdicts, table, ids))
        reports.append(
            TableReport(
                table, setting, tuple(ids), tuple(pairs), Chain(tuple(ids[i] for i in chosen), seconds, exact)
            )
        )
    # in a pool's slot or beside everything, a write's task also starts up and ends around its write
    around = slot_times.start_s + slot_times.end_s
    jobs = [
        Job(task.id, task.duration_s + (around if task.targets else 0.0), task.upstream) for task in tasks
    ]
    targets = {task.id: task.targets for task in tasks}

    def one_slot(job: str, running: Sequence[str]) -> Sequence[str]:
        mine = {t.table for t in targets[job]}
        return [other for other in running if mine & {t.table for t in targets[other]}]

    def at_once(job: str, running: Sequence[str]) -> Sequence[str]:
        return ()

    start_order, bonuses = _policy_priorities(
        [Job(task.id, _policy_seconds(task), task.upstream) for task in tasks], writes_on, settings
    )
    leased = _leased_writes(dag_id, tasks, settings, start_order, bonuses)
    rules = {table: TableRules(s.config, s.profile) for table, s in settings.items()}

    def play(
        ask_first: Collection[str] = (), ask_last: Collection[str] = (), slot_waiters_first: bool = False
    ) -> Schedule:
        return simulate_leased(
            leased,
            rules,
            decide,
            workers=workers,
            worker_slots=worker_slots,
            handoff_s=handoff_s,
            slot_times=slot_times,
            first_check_s=first_check_s,
            ask_first=ask_first,
            ask_last=ask_last,
            slot_waiters_first=slot_waiters_first,
            phase_wait_s=phase_wait_s,
        )

    cold_extra = slot_times.start_up_s(cold=True) - slot_times.start_s
    schedules = {
        "one_slot_pools": simulate(jobs, one_slot, workers, cold_extra_s=cold_extra),
        "all_at_once": simulate(jobs, at_once, workers, cold_extra_s=cold_extra),
        "deltaguard": play(),
    }
    tables_of = {w.id: {table for table, _ in w.claims} for w in leased if w.claims}
    race = first_holder_range(play, schedules["deltaguard"], tables_of)
    if worker_slots is not None and len(tables_of) > worker_slots:
        # more writes than slots of the gate: the race for a slot freed by a release, played both ways

        def slot_first(ask_first: Collection[str] = (), ask_last: Collection[str] = ()) -> Schedule:
            return play(ask_first, ask_last, slot_waiters_first=True)

        race = with_slot_race(race, first_holder_range(slot_first, slot_first(), tables_of))
    free = schedules["all_at_once"]
    overlaps = tuple(
        sorted(
            (table, pair.a, pair.b)
            for (table, a, b), pair in verdicts.items()
            if a == pair.a
            and pair.conflict
            and free.starts[a] < free.ends[b]
            and free.starts[b] < free.ends[a]
        )
    )
    chain_bound = max((report.chain.seconds for report in reports if report.chain.exact), default=0.0)
    lower = max(free.makespan_s if workers is None else 0.0, chain_bound)
    return Plan(dag_id, tuple(tasks), tuple(reports), schedules, lower, tuple(assumptions), overlaps, race)


def plan_limits(
    workers: int | None,
    where: str,
    handoff_s: float,
    slot_times: SlotTimes = DEFAULT_SLOT_TIMES,
    gate: tuple[int | None, str] = (None, ""),
    first_check_s: float = DEFAULT_FIRST_CHECK_S,
    phase_wait_s: float = 0.0,
) -> str:
    """The assumption a plan states about the deployment: its worker slots, the lease manager's slot gate
    (its size and where that comes from), the lease hand-off and a write's time in its slot outside its
    write."""
    slots = "no limit on tasks running at once" if workers is None else f"at most {workers} tasks run at once"
    gated = (
        "no slot gate (every lease the conflict model admits is granted)"
        if gate[0] is None
        else f"the lease manager grants a lease only while fewer than {gate[0]} are held (slot gate, {gate[1]})"
    )
    return (
        f"{slots} ({where}); {gated}; a write lets the conflicting writes of earlier phases on its table "
        f"ask first for up to {phase_wait_s:g} s; a deferred write's trigger first asks again "
        f"{first_check_s:g} s after "
        f"the deferral; under deltaguard a write granted out of the lease queue writes {handoff_s:g} s "
        "after its grant or the worker slot it then waited for (the hand-off); a write's task holds its "
        f"worker slot {slot_times.start_s:g} s before its lease question (start-up"
        + (
            ""
            if slot_times.cold_start_s is None
            else f"; {slot_times.cold_start_s:g} s on a worker the executor starts for it"
        )
        + f") and {slot_times.end_s:g} s after its commit (release, task end)"
    )


def _policy_seconds(task: PlannedTask) -> float:
    """The seconds the priority policy weighs ``task`` by: ``dag_policy`` runs at parse time and reads no
    decision log (:func:`deltaguard.pools.priority.dag_policy`), so a duration known only from the recorded
    holds is not what orders the real run; it weighs such a write by the default, as an undeclared one."""
    return DEFAULT_EXPECTED_S if task.duration_source == "recorded" else task.duration_s


def _policy_priorities(
    jobs: Sequence[Job], writes_on: dict[str, list[tuple[str, Target]]], settings: dict[str, TableSetting]
) -> tuple[dict[str, float], dict[str, int]]:
    """What the priority policy gives the run's tasks (:func:`~deltaguard.core.priority.table_priorities`,
    as ``dag_policy`` does): the order Airflow starts ready tasks in (each task's weight, 1 for a task that
    is not a write, summed over the task and everything downstream of it: Airflow's default weight rule),
    and each write's phase bonus (its lease queue priority; the highest of its tables')."""
    durations = {job.id: job.duration_s for job in jobs}
    own: dict[str, float] = dict.fromkeys(durations, 1.0)
    bonus: dict[str, int] = {}
    for table, members in writes_on.items():
        setting = settings[table]
        ranked = table_priorities(
            [target.operation for _, target in members],
            [durations[job] for job, _ in members],
            setting.config,
            setting.profile,
        )
        for (job, _), weight, phase in zip(members, ranked.weights, ranked.phase_bonus, strict=True):
            own[job] = max(own[job], float(weight))
            bonus[job] = max(bonus.get(job, phase), phase)
    return downstream_sums(jobs, own), bonus


def _leased_writes(
    dag_id: str,
    tasks: Sequence[PlannedTask],
    settings: dict[str, TableSetting],
    weights: dict[str, float],
    bonuses: dict[str, int],
) -> list[LeasedWrite]:
    """The run's tasks as the lease manager sees them. An operation not known before the run is judged as
    a metadata change (kept apart from every write on its table); a table named by a template may be any
    table, so such a write claims every table of the plan. A write lets ask first every instance of the
    tasks its ``asks_after`` names."""
    instances: dict[str, list[str]] = {}
    for task in tasks:
        instances.setdefault(task.task_id, []).append(task.id)
    known_tables = sorted(t for t in settings if not t.startswith(TEMPLATED_TABLE))
    found = []
    for task in tasks:
        claims: dict[str, Operation] = {}
        for target in task.targets:
            if target.table.startswith(TEMPLATED_TABLE):
                claims.update(dict.fromkeys([*known_tables, target.table], UNKNOWN_OPERATION))
            else:
                claims.setdefault(target.table, target.operation or UNKNOWN_OPERATION)
        found.append(
            LeasedWrite(
                id=task.id,
                duration_s=task.duration_s,
                upstream=task.upstream,
                claims=tuple(sorted(claims.items())),
                estimate_s=task.estimate_s,
                lease_priority=task.lease_priority or bonuses.get(task.id, 0),
                after=tuple(job for other in task.asks_after for job in instances.get(other, ())),
                weight=weights[task.id],
                owner=Owner(
                    dag_id=dag_id,
                    task_id=task.task_id,
                    map_index=-1 if task.map_index is None else task.map_index,
                ),
            )
        )
    return found


def _conflict_test(
    verdicts: dict[tuple[str, str, str], PairReport], table: str, ids: Sequence[str]
) -> Callable[[int, int], bool]:
    def conflicts(i: int, j: int) -> bool:
        return verdicts[(table, ids[i], ids[j])].conflict

    return conflicts


def _pair(table: str, a: tuple[str, Target], b: tuple[str, Target], setting: TableSetting) -> PairReport:
    (a_id, a_target), (b_id, b_target) = a, b
    if a_target.operation is None or b_target.operation is None:
        unknown = "; ".join(
            dict.fromkeys(t.unknown for t in (a_target, b_target) if t.operation is None and t.unknown)
        )
        why = f"not known before the run ({unknown or 'operation not declared'}): judged as conflicting"
        advice = Change(
            ChangeKind.SEQUENCE,
            "declare the operation (or make the templated field literal) so the model can judge the pair",
        )
        return PairReport(table, a_id, b_id, True, UNKNOWN_RULE, (), why, why, (advice,))
    a_op, b_op = a_target.operation, b_target.operation
    verdict: PairVerdict = pair_verdict(a_op, b_op, setting.config, setting.profile)
    explained = explain_verdict(verdict, a_op, b_op, setting.config, setting.profile)
    return PairReport(
        table,
        a_id,
        b_id,
        verdict.conflict,
        verdict.rule,
        tuple(e.value for e in verdict.exceptions),
        verdict.reason,
        explained.why,
        explained.changes,
        verdict.advice,
    )
