"""Discrete-event simulation of the three orchestration strategies in virtual time, at scale.

The same writes (Poisson arrivals over a day, heavy-tailed durations, a few hot tables) are played under:

* ``one_slot_pools``: one write at a time per table (a 1-slot pool per table);
* ``optimistic``: every write starts when it arrives; at its commit it fails, with probability
  ``conflict_probability``, if a write the conflict model says it can conflict with committed on its
  table while it ran; it is then retried after an exponential backoff, and its work is wasted;
* ``deltaguard``: each write asks :func:`deltaguard.core.admission.admit` (the lease manager's real,
  pure decision logic with the real conflict model, :func:`deltaguard.core.model.decide`) whether it may
  start, seeing every duration only as a noisy estimate (reservations and backfilling, ADR 0017); if not
  it waits and its table's queue is asked again, in rank order, whenever a write on the table ends (what
  the lease trigger's polling achieves, without the polling); a granted write also needs a slot of its
  table's pool (8 by default, as ``deltaguard pools`` configures).

All three share a global pool of worker slots (waiting in a pool or for a lease takes no slot), handed out
once every event of an instant has been played (as a scheduler loop sees every task that became ready at
once), first come, first served; deltaguard may instead give a free slot to the granted write that heads
the longest conflict chain (``slot_order="chain"``, :mod:`lab.simulation.dispatch`). A deployment's lease
manager gates the slots by count only (ADR 0028, "The slot gate in the lease manager": no more leases than
worker slots); it does not order the grants by chain. Virtual time only: the simulation never sleeps. Decisions are memoised on their exact inputs (operations compare
without their labels), which is how a million writes fit in minutes; :func:`admission_cost` measures the
real, unmemoised cost of one decision as the numbers of tables and running writes grow.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
import statistics
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deltaguard.core.admission import (
    DEFAULT_AGEING_S,
    DEFAULT_MAX_OVERTAKE_S,
    Holder,
    Owner,
    TableView,
    admit,
    queue_rank,
)
from deltaguard.core.decision import Decision
from deltaguard.core.operations import Operation
from deltaguard.core.priority import table_priorities
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig
from lab.simulation.dispatch import ReadyWrite, chain_weight, next_for_slot
from lab.simulation.workload import (
    DEFAULT_MIX,
    KINDS,
    PARTITION_SCOPED,
    BenchTable,
    BenchWrite,
    ConflictFn,
    Workload,
    lower_bound,
    model_conflicts,
    operation,
)

STRATEGIES = ("one_slot_pools", "optimistic", "deltaguard")
SLOT_ORDERS = ("fifo", "chain", "priority")
#: The variant of deltaguard that orders worker slots by conflict chain (``batch_row``'s
#: ``deltaguard_chain_s``): backfills may end up to half their estimate after a reservation.
CHAIN_BACKFILL_SLACK = 0.5
DAY_S = 86_400.0


@dataclass(frozen=True)
class Stream:
    """A workload with arrival times (``arrivals[i]`` belongs to ``workload.writes[i]``; sorted)."""

    workload: Workload
    arrivals: tuple[float, ...]


def generate_stream(
    seed: int,
    *,
    tables: int = 10_000,
    writes: int = 1_000_000,
    period_s: float = DAY_S,
    hot_tables: float = 0.01,
    hot_share: float = 0.05,
    partitions: int = 16,
    hot_partitions: int = 64,
    median_s: float = 60.0,
    sigma: float = 1.2,
    max_duration_s: float = 4 * 3600.0,
    mix: Mapping[str, float] | None = None,
    deletion_vectors_share: float = 0.3,
    serializable_share: float = 0.1,
) -> Stream:
    """Poisson arrivals of ``writes`` writes over ``period_s`` on ``tables`` tables.

    :param seed: the random seed.
    :param hot_tables: share of tables that are hot (at least one).
    :param hot_share: share of all writes that go to the hot tables.
    :param partitions: partition values of an ordinary table; hot tables have ``hot_partitions``.
    :param median_s: median duration; durations are log-normal with ``sigma`` (heavy-tailed), capped at
        ``max_duration_s``.
    :param mix: write-kind weights (default :data:`lab.simulation.workload.DEFAULT_MIX`).
    :param deletion_vectors_share: share of tables with deletion vectors.
    :param serializable_share: share of tables with the ``Serializable`` isolation level.
    :raises ValueError: on out-of-range parameters.
    """
    if tables < 1 or writes < 0 or period_s <= 0 or median_s <= 0 or sigma < 0:
        raise ValueError("need tables >= 1, writes >= 0, period_s > 0, median_s > 0 and sigma >= 0")
    if not (0 <= hot_tables <= 1 and 0 <= hot_share <= 1):
        raise ValueError("hot_tables and hot_share must be within [0, 1]")
    rng = random.Random(seed)
    n_hot = max(1, round(tables * hot_tables)) if hot_share > 0 else 0
    table_list = tuple(
        BenchTable(
            name=f"t{i}",
            partitioned=True,
            deletion_vectors=rng.random() < deletion_vectors_share,
            isolation="Serializable" if rng.random() < serializable_share else "WriteSerializable",
            partitions=hot_partitions if i < n_hot else partitions,
        )
        for i in range(tables)
    )
    weights = dict(mix or DEFAULT_MIX)
    kinds = sorted(k for k in weights if weights[k] > 0)
    if not kinds or set(kinds) - set(KINDS):
        raise ValueError(f"mix must weigh some of {sorted(KINDS)}")
    cumulative = list(_accumulate([weights[k] for k in kinds]))
    rate = writes / period_s
    now = 0.0
    out: list[BenchWrite] = []
    arrivals: list[float] = []
    mu = math.log(median_s)
    for index in range(writes):
        now += rng.expovariate(rate) if rate > 0 else 0.0
        if n_hot and rng.random() < hot_share:
            table = table_list[rng.randrange(n_hot)]
        else:
            table = table_list[rng.randrange(n_hot, tables) if tables > n_hot else rng.randrange(tables)]
        kind = kinds[bisect.bisect_left(cumulative, rng.random() * cumulative[-1])]
        partition = f"p{rng.randrange(table.partitions)}" if kind in PARTITION_SCOPED else None
        duration = min(max_duration_s, rng.lognormvariate(mu, sigma))
        out.append(BenchWrite(f"w{index}", table.name, kind, partition, round(duration, 2), index))
        arrivals.append(now)
    params = {
        "tables": tables,
        "writes": writes,
        "period_s": period_s,
        "hot_tables": n_hot,
        "hot_share": hot_share,
        "partitions": partitions,
        "hot_partitions": hot_partitions,
        "median_s": median_s,
        "sigma": sigma,
        "max_duration_s": max_duration_s,
        "mix": weights,
    }
    return Stream(Workload(table_list, tuple(out), seed, params), tuple(arrivals))


def _accumulate(values: Sequence[float]) -> list[float]:
    total, out = 0.0, []
    for value in values:
        total += value
        out.append(total)
    return out


@dataclass
class Attempt:
    """One run of a write in virtual time."""

    write: int
    start: float
    end: float
    ok: bool


@dataclass
class SimResult:
    """What one strategy did with a stream."""

    strategy: str
    attempts: list[Attempt]
    first_start: list[float]
    finish: list[float]
    failed_writes: int
    decisions: int = 0
    decision_cache_hits: int = 0
    wall_s: float = 0.0

    def summary(self, arrivals: Sequence[float]) -> dict[str, Any]:
        waits = sorted(s - a for s, a in zip(self.first_start, arrivals, strict=True) if s >= 0)
        done = [f for f in self.finish if f >= 0]
        makespan = (max(done) - min(arrivals)) if done else 0.0
        failed = [a for a in self.attempts if not a.ok]
        return {
            "makespan_s": round(makespan, 1),
            "throughput_per_h": round(len(done) / makespan * 3600, 1) if makespan > 0 else 0.0,
            "completed_writes": len(done),
            "failed_writes": self.failed_writes,
            "failed_attempts": len(failed),
            "wasted_task_s": round(sum(a.end - a.start for a in failed), 1),
            "wait_p50_s": round(_quantile(waits, 0.50), 2),
            "wait_p95_s": round(_quantile(waits, 0.95), 2),
            "wait_p99_s": round(_quantile(waits, 0.99), 2),
            "wait_max_s": round(waits[-1], 2) if waits else 0.0,
            "admission_decisions": self.decisions,
            "admission_cache_hits": self.decision_cache_hits,
            "sim_wall_s": round(self.wall_s, 2),
        }


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


class MemoDecide:
    """The real :func:`deltaguard.core.model.decide`, memoised on its exact arguments."""

    def __init__(self) -> None:
        from deltaguard.core.model import decide

        self._decide = decide
        self.cache: dict[tuple[Any, ...], Decision] = {}
        self.calls = 0
        self.hits = 0

    def __call__(
        self, candidate: Operation, running: Sequence[Operation], table: TableConfig, profile: EngineProfile
    ) -> Decision:
        self.calls += 1
        key = (candidate, tuple(running), table, profile)
        found = self.cache.get(key)
        if found is not None:
            self.hits += 1
            return found
        if len(self.cache) > 500_000:
            self.cache.clear()  # bound the memory of a long run
        found = self._decide(candidate, running, table, profile)
        self.cache[key] = found
        return found


class _Sim:
    """Event loop shared by the three strategies (slots, events, attempt bookkeeping)."""

    def __init__(self, stream: Stream, slots: int) -> None:
        self.writes = stream.workload.writes
        self.arrivals = stream.arrivals
        self.slots = slots
        self.free = slots
        self.events: list[tuple[float, int, int, int]] = []  # (time, seq, kind, write)
        self.seq = 0
        self.ready: deque[int] = deque()  # writes waiting for a worker slot, FIFO
        self.running_start: dict[int, float] = {}
        n = len(self.writes)
        self.first_start = [-1.0] * n
        self.finish = [-1.0] * n
        self.attempts: list[Attempt] = []
        self.now = 0.0
        self.on_start: Callable[[int], None] | None = None
        # Which ready write takes a free slot: ``None``, first come, first served; else the position in
        # ``ready`` the function picks.
        self.choose: Callable[[Sequence[int]], int] | None = None
        self.ready_since: dict[int, float] = {}

    ARRIVE, END, READY = 0, 1, 2

    def push(self, when: float, kind: int, write: int) -> None:
        self.seq += 1
        heapq.heappush(self.events, (when, self.seq, kind, write))

    def make_ready(self, write: int) -> None:
        # Slots are handed out once every event of this instant has been played (see ``run``), as a
        # scheduler loop sees every task that became ready at once before it queues any.
        self.ready.append(write)
        self.ready_since[write] = self.now

    def dispatch(self) -> None:
        while self.free > 0 and self.ready:
            if self.choose is None or len(self.ready) == 1:
                write = self.ready.popleft()
            else:
                write = self.ready[self.choose(self.ready)]
                self.ready.remove(write)
            self.ready_since.pop(write, None)
            self.free -= 1
            self.running_start[write] = self.now
            if self.first_start[write] < 0:
                self.first_start[write] = self.now
            if self.on_start is not None:
                self.on_start(write)
            self.push(self.now + self.writes[write].duration_s, self.END, write)

    def end_attempt(self, write: int, ok: bool) -> float:
        start = self.running_start.pop(write)
        self.attempts.append(Attempt(write, start, self.now, ok))
        self.free += 1
        if ok:
            self.finish[write] = self.now
        return start

    def run(self, on_arrive: Callable[[int], None], on_end: Callable[[int], None]) -> None:
        for index, when in enumerate(self.arrivals):
            self.push(when, self.ARRIVE, index)
        while self.events:
            self.now, _, kind, write = heapq.heappop(self.events)
            if kind == self.ARRIVE:
                on_arrive(write)
            elif kind == self.END:
                on_end(write)
            else:
                self.make_ready(write)
            if not self.events or self.events[0][0] > self.now:
                self.dispatch()


def simulate(
    strategy: str,
    stream: Stream,
    *,
    slots: int,
    profile: EngineProfile,
    conflicts: ConflictFn | None = None,
    conflict_probability: float = 0.5,
    retry_delay_s: float = 30.0,
    max_retry_delay_s: float = 600.0,
    max_retries: int = 10,
    seed: int = 0,
    decide: MemoDecide | None = None,
    table_slots: int | None = 8,
    estimate_error: float | None = 0.3,
    max_overtake_s: float = DEFAULT_MAX_OVERTAKE_S,
    slot_order: str = "fifo",
    backfill_slack: float = 0.0,
    lease_priority: str = "none",
) -> SimResult:
    """Play one strategy on a stream in virtual time.

    :param strategy: one of :data:`STRATEGIES`.
    :param stream: the writes and their arrivals.
    :param slots: worker slots shared by all tables.
    :param profile: the engine that commits the writes (the conflict model's rules).
    :param conflicts: pairwise conflicts for the optimistic strategy (default: the real model's).
    :param conflict_probability: chance that an optimistic commit fails when the model says a write that
        committed during its run can conflict with it (the model is conservative; engines are not always).
    :param retry_delay_s: first retry delay; doubled every retry up to ``max_retry_delay_s``.
    :param max_retries: retries before a write is given up (counted in ``failed_writes``).
    :param seed: seed of the optimistic conflict draws.
    :param decide: the memoised conflict model to share between runs.
    :param table_slots: deltaguard only: the per-table pool size the provider configures (default 8, like
        ``deltaguard pools``); a granted write waits for a free slot of its table's pool. ``None``: no pools.
    :param estimate_error: deltaguard only: admission sees each write's duration only as an estimate, the
        true one times a factor drawn uniformly from ``[1 - e, 1 + e]`` (seeded by ``seed``), and backfills
        with it; ``None``: no estimates, i.e. strict FIFO among conflicting requests.
    :param max_overtake_s: deltaguard only: see :func:`deltaguard.core.admission.admit`; also the slot wait
        after which a ready write is served first come, first served (``slot_order="chain"``).
    :param slot_order: deltaguard only: which granted write takes a free worker slot: ``fifo`` (default,
        what Airflow does with equal priority weights) or ``chain`` (longest conflict chain first,
        :func:`lab.simulation.dispatch.next_for_slot`; the lease manager's slot gate bounds grants by the
        free slots but does not order them so) or
        ``priority`` (what Airflow does with the priority weights the ``dag_policy`` cluster policy gives,
        :func:`deltaguard.core.priority.table_priorities` over each table's writes and their estimates;
        ties first come, first served).
    :param backfill_slack: deltaguard only: see :func:`deltaguard.core.admission.admit`.
    :param lease_priority: deltaguard only: each write's lease queue priority: ``none`` (0 for all) or
        ``phase`` (the phase bonus :func:`deltaguard.core.priority.table_priorities` gives it among its
        table's writes, as the ``dag_policy`` sets it), ranked by :func:`deltaguard.core.admission.queue_rank`.
    :raises ValueError: on an unknown strategy or bad parameters.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {STRATEGIES}")
    if slot_order not in SLOT_ORDERS:
        raise ValueError(f"unknown slot order {slot_order!r}; choose one of {SLOT_ORDERS}")
    if table_slots is not None and table_slots < 1:
        raise ValueError(f"table_slots must be >= 1 or None, got {table_slots}")
    if slots < 1 or not 0 <= conflict_probability <= 1 or max_retries < 0:
        raise ValueError("need slots >= 1, 0 <= conflict_probability <= 1 and max_retries >= 0")
    if estimate_error is not None and not 0 <= estimate_error < 1:
        raise ValueError(f"estimate_error must be within [0, 1) or None, got {estimate_error}")
    started = time.perf_counter()
    sim = _Sim(stream, slots)
    failed_writes = 0
    decide_fn = decide or MemoDecide()
    calls_before, hits_before = decide_fn.calls, decide_fn.hits
    writes = sim.writes

    if strategy == "one_slot_pools":
        queues: dict[str, deque[int]] = {}
        busy: set[str] = set()

        def arrive_pool(i: int) -> None:
            table = writes[i].table
            if table in busy:
                queues.setdefault(table, deque()).append(i)
            else:
                busy.add(table)
                sim.make_ready(i)

        def end_pool(i: int) -> None:
            sim.end_attempt(i, True)
            table = writes[i].table
            queue = queues.get(table)
            if queue:
                sim.make_ready(queue.popleft())
            else:
                busy.discard(table)

        sim.run(arrive_pool, end_pool)

    elif strategy == "optimistic":
        conflict = conflicts or model_conflicts(stream.workload, profile)
        rng = random.Random(seed)
        commits: dict[str, list[tuple[float, int]]] = {}  # per table, (commit time, write), time-ordered
        active: dict[str, int] = {}
        tries = [0] * len(writes)
        failed_box = [0]

        def arrive_opt(i: int) -> None:
            sim.make_ready(i)

        def end_opt(i: int) -> None:
            write = writes[i]
            start = sim.running_start[i]
            log = commits.setdefault(write.table, [])
            lo = bisect.bisect_right(log, (start, len(writes)))
            clash = any(conflict(write, writes[j]) for _, j in log[lo:])
            if clash and rng.random() < conflict_probability:
                sim.end_attempt(i, False)
                tries[i] += 1
                if tries[i] > max_retries:
                    failed_box[0] += 1
                else:
                    delay = min(max_retry_delay_s, retry_delay_s * 2 ** (tries[i] - 1))
                    sim.push(sim.now + delay, sim.READY, i)
            else:
                sim.end_attempt(i, True)
                log.append((sim.now, i))
            # keep only commits some running attempt on this table could still collide with
            active[write.table] = active.get(write.table, 1) - 1
            if active[write.table] <= 0:
                log.clear()
                active.pop(write.table, None)

        def start_opt(i: int) -> None:
            active[writes[i].table] = active.get(writes[i].table, 0) + 1

        sim.on_start = start_opt
        sim.run(arrive_opt, end_opt)
        failed_writes = failed_box[0]

    else:
        tables = {t.name: t for t in stream.workload.tables}
        configs = {name: t.config() for name, t in tables.items()}
        granted: dict[str, dict[int, Holder]] = {}
        waiting: dict[str, dict[int, Holder]] = {}  # re-admitted in rank order
        holders: dict[int, Holder] = {}
        in_pool: dict[str, int] = {}  # writes of a table holding one of its pool slots
        pool_queue: dict[str, deque[int]] = {}

        def start_when_pool_allows(i: int) -> None:
            table = writes[i].table
            if table_slots is not None and in_pool.get(table, 0) >= table_slots:
                pool_queue.setdefault(table, deque()).append(i)
                return
            in_pool[table] = in_pool.get(table, 0) + 1
            sim.make_ready(i)

        # The policy never sees a true duration: only a seeded, noisy estimate of it.
        noise = random.Random(seed)
        estimates: list[float | None] = [
            None
            if estimate_error is None
            else w.duration_s * noise.uniform(1 - estimate_error, 1 + estimate_error)
            for w in writes
        ]
        operations = [operation(w, tables[w.table]) for w in writes]
        if lease_priority not in ("none", "phase"):
            raise ValueError(f"unknown lease priority {lease_priority!r}; choose none or phase")
        # what the dag_policy gives each write: slot weights and lease priorities, one table at a time
        weights, bonuses = [0] * len(writes), [0] * len(writes)
        if slot_order == "priority" or lease_priority == "phase":
            for table_name, members in _members_by_table(writes).items():
                ranked = table_priorities(
                    [operations[i] for i in members],
                    [estimates[i] for i in members],
                    configs[table_name],
                    profile,
                )
                for i, weight, bonus in zip(members, ranked.weights, ranked.phase_bonus, strict=True):
                    weights[i], bonuses[i] = weight, bonus
        priorities = bonuses if lease_priority == "phase" else [0] * len(writes)

        def holder(i: int, is_granted: bool) -> Holder:
            found = holders.get(i)
            if found is None or found.granted != is_granted:
                found = Holder(
                    id=str(i),
                    owner=Owner(name=writes[i].id),
                    operation=operations[i],
                    granted=is_granted,
                    rank=queue_rank(sim.arrivals[i], priorities[i], DEFAULT_AGEING_S),
                    since=sim.now if is_granted else sim.arrivals[i],
                    expected_duration_s=estimates[i],
                )
                holders[i] = found
            return found

        def view_of(i: int) -> TableView:
            table = writes[i].table
            return TableView(
                uri=table,
                operation=operations[i],
                config=configs[table],
                profile=profile,
                granted=tuple(granted.get(table, {}).values()),
                waiting=tuple(waiting.get(table, {}).values()),
            )

        def try_admit(i: int) -> bool:
            write = writes[i]
            mine = holder(i, False)
            view = view_of(i)
            verdict = admit(
                str(i),
                mine.rank,
                [view],
                decide_fn,
                now=sim.now,
                expected_duration_s=estimates[i],
                max_overtake_s=max_overtake_s,
                backfill_slack=backfill_slack,
            )
            queue = waiting.setdefault(write.table, {})
            if verdict.granted:
                queue.pop(i, None)
                granted.setdefault(write.table, {})[i] = holder(i, True)
                start_when_pool_allows(i)
                return True
            if i not in queue:
                queue[i] = mine
            return False

        def arrive_dg(i: int) -> None:
            try_admit(i)

        def end_dg(i: int) -> None:
            sim.end_attempt(i, True)
            table = writes[i].table
            granted[table].pop(i, None)
            holders.pop(i, None)
            in_pool[table] -= 1
            queued = pool_queue.get(table)
            if queued:
                start_when_pool_allows(queued.popleft())
            # A release changes what is running and every reservation on the table: ask its queue again
            # in rank order (the lease trigger's polling does the same, without the polling delay).
            for j in sorted(waiting.get(table, {}), key=lambda j: (holders[j].rank, j)):
                if j in waiting[table]:
                    try_admit(j)

        if slot_order == "chain":

            def choose(ready: Sequence[int]) -> int:
                candidates = [
                    ReadyWrite(
                        str(i),
                        sim.ready_since[i],
                        chain_weight(str(i), [view_of(i)], decide_fn, estimates[i]),
                    )
                    for i in ready
                ]
                return next_for_slot(candidates, sim.now, max_overtake_s)

            sim.choose = choose
        elif slot_order == "priority":

            def choose_by_priority(ready: Sequence[int]) -> int:
                return min(
                    range(len(ready)), key=lambda k: (-weights[ready[k]], sim.ready_since[ready[k]], k)
                )

            sim.choose = choose_by_priority
        sim.run(arrive_dg, end_dg)
        stuck = sum(len(q) for q in waiting.values())
        if stuck:
            raise RuntimeError(f"deltaguard simulation ended with {stuck} requests still waiting")

    result = SimResult(
        strategy=strategy,
        attempts=sim.attempts,
        first_start=sim.first_start,
        finish=sim.finish,
        failed_writes=failed_writes,
        decisions=decide_fn.calls - calls_before,
        decision_cache_hits=decide_fn.hits - hits_before,
    )
    result.wall_s = time.perf_counter() - started
    return result


def _members_by_table(writes: Sequence[BenchWrite]) -> dict[str, list[int]]:
    members: dict[str, list[int]] = {}
    for i, write in enumerate(writes):
        members.setdefault(write.table, []).append(i)
    return members


def stream_lower_bound(stream: Stream, slots: int, conflicts: ConflictFn) -> dict[str, Any]:
    """The workload's lower bound (:func:`lab.simulation.workload.lower_bound`) plus the arrival bound.

    With arrivals, no write can finish before it arrived and ran: ``max(arrival + duration)`` is a bound
    too, and at a day's scale usually the largest.
    """
    bound: dict[str, Any] = lower_bound(stream.workload, slots, conflicts).to_json()
    start = min(stream.arrivals, default=0.0)
    arrival_s = max(
        (a + w.duration_s - start for a, w in zip(stream.arrivals, stream.workload.writes, strict=True)),
        default=0.0,
    )
    bound["arrival_s"] = round(arrival_s, 1)
    bound["value_s"] = round(max(bound["value_s"], arrival_s), 1)
    bound.pop("chain_writes", None)
    return bound


def admission_cost(
    profile: EngineProfile,
    table_counts: Sequence[int] = (10, 100, 1_000, 10_000),
    running_counts: Sequence[int] = (0, 1, 4, 16),
    decisions: int = 200,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Wall-clock cost of one real, unmemoised :func:`admit` call (with :func:`model.decide`).

    For each number of tables and of running writes per table, the state holds that many granted leases
    on every table; each measured decision asks for a random table with a random partition-scoped write.
    Admission only reads the asking request's tables, so the cost should stay flat as tables grow.

    :return: one row per (tables, running) with ``us_per_decision``.
    """
    from deltaguard.core.model import decide

    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    kinds = ["append", "merge", "update", "delete"]
    for n_tables in table_counts:
        for n_running in running_counts:
            table_list = [BenchTable(f"t{i}", partitions=64) for i in range(n_tables)]
            state: dict[str, list[Holder]] = {}
            for t in table_list:
                state[t.name] = [
                    Holder(
                        id=f"{t.name}-{r}",
                        owner=Owner(name=f"{t.name}-{r}"),
                        operation=operation(BenchWrite(f"g{r}", t.name, "merge", f"p{r}", 1.0, r), t),
                        granted=True,
                    )
                    for r in range(n_running)
                ]
            configs = {t.name: t.config() for t in table_list}
            timings: list[float] = []
            for d in range(decisions):
                t = table_list[rng.randrange(n_tables)]
                kind = kinds[d % len(kinds)]
                write = BenchWrite(f"c{d}", t.name, kind, f"p{rng.randrange(64)}", 1.0, d)
                view = TableView(t.name, operation(write, t), configs[t.name], profile, state[t.name], ())
                began = time.perf_counter()
                admit(f"c{d}", float(d), [view], decide)
                timings.append(time.perf_counter() - began)
            rows.append(
                {
                    "tables": n_tables,
                    "running_per_table": n_running,
                    "us_per_decision": round(statistics.median(timings) * 1e6, 1),
                    "us_p95": round(sorted(timings)[int(0.95 * len(timings))] * 1e6, 1),
                }
            )
    return rows


@dataclass
class SimulationReport:
    """Everything ``python -m lab.simulation`` writes."""

    params: dict[str, Any]
    lower_bound: dict[str, Any]
    strategies: dict[str, dict[str, Any]]
    admission_cost: list[dict[str, Any]] = field(default_factory=list)
    machine: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "params": self.params,
            "lower_bound_s": self.lower_bound["value_s"],
            "lower_bound": self.lower_bound,
            **self.strategies,
            "admission_cost": self.admission_cost,
            "machine": self.machine,
        }


def busiest_tables(stream: Stream, count: int) -> list[str]:
    """The ``count`` tables with the most total write time (for charts)."""
    load: dict[str, float] = {}
    for write in stream.workload.writes:
        load[write.table] = load.get(write.table, 0.0) + write.duration_s
    return [name for name, _ in sorted(load.items(), key=lambda item: (-item[1], item[0]))[:count]]


def timeline(
    stream: Stream, result: SimResult, tables: Sequence[str], window_s: float
) -> list[dict[str, Any]]:
    """Attempts on ``tables`` that start within the first ``window_s`` seconds, for a Gantt chart."""
    wanted = set(tables)
    writes = stream.workload.writes
    return [
        {
            "table": writes[a.write].table,
            "start": a.start,
            "end": min(a.end, window_s),
            "outcome": "ok" if a.ok else "conflict",
        }
        for a in result.attempts
        if writes[a.write].table in wanted and a.start < window_s
    ]


def stream_of(workload: Workload) -> Stream:
    """A batch: every write of ``workload`` arrives at time 0."""
    return Stream(workload, tuple(0.0 for _ in workload.writes))


def batch_row(
    stream: Stream,
    *,
    slots: int,
    profile: EngineProfile,
    time_limit_s: float = 10.0,
    decide: MemoDecide | None = None,
) -> dict[str, Any]:
    """Makespans of one workload: its lower bound, the proven optimum (or ``None``) and the three strategies.

    :param stream: the writes and arrivals.
    :param slots: worker slots.
    :param profile: the engine.
    :param time_limit_s: CP-SAT's limit for the optimum.
    """
    from lab.simulation.optimum import optimal_makespan

    conflicts = model_conflicts(stream.workload, profile)
    decide = decide or MemoDecide()
    row: dict[str, Any] = {
        "seed": stream.workload.seed,
        "lower_bound_s": stream_lower_bound(stream, slots, conflicts)["value_s"],
        "optimum_s": optimal_makespan(
            stream.workload.writes, stream.arrivals, conflicts, slots=slots, time_limit_s=time_limit_s
        ),
    }
    for strategy in STRATEGIES:
        result = simulate(
            strategy,
            stream,
            slots=slots,
            profile=profile,
            conflicts=conflicts,
            seed=stream.workload.seed,
            decide=decide,
        )
        row[f"{strategy}_s"] = result.summary(stream.arrivals)["makespan_s"]
    # the same admission without estimates: strict FIFO among conflicting requests, for comparison
    fifo = simulate("deltaguard", stream, slots=slots, profile=profile, decide=decide, estimate_error=None)
    row["deltaguard_fifo_s"] = fifo.summary(stream.arrivals)["makespan_s"]
    variants: dict[str, dict[str, Any]] = {
        # longest conflict chain first at the worker slots, with a looser backfilling licence
        "deltaguard_chain": {"slot_order": "chain", "backfill_slack": CHAIN_BACKFILL_SLACK},
        # what a deployment does: the same admission, worker slots by the dag_policy's weights and lease
        # queue ranks by its phase bonus
        "deltaguard_priority": {"slot_order": "priority", "lease_priority": "phase"},
    }
    summaries = {
        name: simulate(
            "deltaguard",
            stream,
            slots=slots,
            profile=profile,
            decide=decide,
            seed=stream.workload.seed,
            **options,
        ).summary(stream.arrivals)
        for name, options in variants.items()
    }
    for name, summary in summaries.items():
        row[f"{name}_s"] = summary["makespan_s"]
    row["deltaguard_chain_wait_max_s"] = summaries["deltaguard_chain"]["wait_max_s"]
    return row
