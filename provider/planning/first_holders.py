"""Which write asks first for a table: a race the plan plays every way it can go.

Airflow starts together the ready tasks it has worker slots for, highest ``priority_weight`` first, and each
asks for its lease when its own process gets there (start-up, DAG parse, the operator's checks). Tasks
started in the same scheduler loop therefore ask in an order no plan can know, and the first to ask for a
table holds it first: a Z-order OPTIMIZE that asks before the MERGEs on its table makes them wait for it,
after them it waits for them.

The order of the questions after the first is the same race. The lease queue ranks a request by its
priority (the phase bonus of the ``dag_policy``) and then by when it asked, and a request that conflicts with
one queued ahead of it waits for it: an OPTIMIZE that asks a moment after a MERGE of a higher phase queues
behind it, and every write of a lower phase that asked before either of them then waits behind the
OPTIMIZE too, where asking a moment earlier it would have run beside the first holders. A run of the
orchestration benchmark (seed 0 of ``orchestration_sweep_0b94420.json``) lost two rounds of writes on a
table that way: its decision log has the MERGE asking at 5.07 s and the OPTIMIZE at 5.07 s, after it.

The plan's nominal run asks in Airflow's start order. Then, for every table, each write that asks for it at
the same instant as the table's first question in the nominal run is played as the first to ask (the
others keep the nominal order behind it). The fastest and slowest of these plays bound what the race can
do to the run: the plan's range. With more combinations than :data:`MAX_PLAYS`, each table's first asker is
varied alone, the other tables keeping the nominal one, and the range is marked as not exhaustive. The
range then also plays, one table at a time, each racing write asking last with each other one asking first
(tables with three racing writes or more; with more such pairs than :data:`MAX_PLAYS`, each racing write
asking last behind the nominal order). The mean stays the mean over the first askers alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from deltaguard.planning.schedule import Schedule

#: most plays of the race before only one table at a time is varied
MAX_PLAYS = 64

#: plays one run with the first writes winning the race of simultaneous questions and the second losing it
Play = Callable[[Collection[str], Collection[str]], Schedule]


@dataclass(frozen=True)
class RaceRange:
    """The planned makespan over the plausible first askers of each table.

    :param best: the fastest play.
    :param worst: the slowest play.
    :param best_first: the writes asking first in the fastest play (empty: Airflow's start order).
    :param worst_first: the writes asking first in the slowest play.
    :param candidates: per table whose first question is a race, the writes that may ask first.
    :param plays: how many runs were played (the nominal one included).
    :param exhaustive: every combination of first askers was played.
    :param mean_s: the mean makespan over the plays: with every combination played, the expected makespan
        when each write racing for a table is as likely as the others to ask first.
    :param best_slot_waiters_first: the fastest play decides the writes waiting for a slot of the gate first
        after a release (:func:`with_slot_race`).
    :param worst_slot_waiters_first: the same, of the slowest play.
    :param best_last: the writes asking last in the fastest play (empty: none made to).
    :param worst_last: the writes asking last in the slowest play.
    """

    best: Schedule
    worst: Schedule
    best_first: tuple[str, ...]
    worst_first: tuple[str, ...]
    candidates: dict[str, tuple[str, ...]]
    plays: int
    exhaustive: bool
    mean_s: float = 0.0
    best_slot_waiters_first: bool = False
    worst_slot_waiters_first: bool = False
    best_last: tuple[str, ...] = ()
    worst_last: tuple[str, ...] = ()


def racing_first_askers(
    nominal: Schedule, tables_of: Mapping[str, Collection[str]]
) -> dict[str, tuple[str, ...]]:
    """Per table, the writes that ask for it at the instant of its first question in ``nominal`` (only
    tables where two or more do).

    :param nominal: the nominal play (its ``asks``).
    :param tables_of: each write's tables.
    """
    found: dict[str, tuple[str, ...]] = {}
    for table in sorted({t for tables in tables_of.values() for t in tables}):
        asks = {
            job: nominal.asks[job]
            for job, tables in tables_of.items()
            if table in tables and job in nominal.asks
        }
        if not asks:
            continue
        first = min(asks.values())
        racing = tuple(sorted(job for job, at in asks.items() if at == first))
        if len(racing) > 1:
            found[table] = racing
    return found


def first_holder_range(play: Play, nominal: Schedule, tables_of: Mapping[str, Collection[str]]) -> RaceRange:
    """Play the run once per plausible combination of first askers, then with a racing write asking last
    behind each other one of its table, and keep the fastest and slowest.

    :param play: plays one run with the first writes given asking first and the second ones asking last.
    :param nominal: the run played in Airflow's start order.
    :param tables_of: each write's tables.
    """
    candidates = racing_first_askers(nominal, tables_of)
    choices = list(candidates.values())
    combinations = 1
    for racing in choices:
        combinations *= len(racing)
    exhaustive = combinations <= MAX_PLAYS
    if exhaustive:
        winners = [frozenset(c) for c in itertools.product(*choices)] if choices else []
    else:
        winners = [frozenset((job,)) for racing in choices for job in racing]
    # the nominal run is one of the combinations when all are played; else it stands beside them
    played: list[tuple[Schedule, tuple[str, ...], tuple[str, ...]]] = (
        [] if exhaustive and winners else [(nominal, (), ())]
    )
    played += [(play(first, ()), tuple(sorted(first)), ()) for first in winners]
    mean = sum(p[0].makespan_s for p in played) / len(played)
    # the order behind the first question: one table at a time, a racing write asking last (of two racing
    # writes, the one asking last is the other's play as the first)
    behind = [racing for racing in choices if len(racing) > 2]
    pairs: list[tuple[str | None, str]] = [
        (first, last) for racing in behind for first in racing for last in racing if last != first
    ]
    if len(pairs) > MAX_PLAYS:
        exhaustive = False
        pairs = [(None, last) for racing in behind for last in racing]
    for first, last in pairs:
        ask_first = () if first is None else (first,)
        played.append((play(ask_first, (last,)), ask_first, (last,)))
    best = min(played, key=lambda p: p[0].makespan_s)
    worst = max(played, key=lambda p: p[0].makespan_s)
    return RaceRange(
        best[0],
        worst[0],
        best[1],
        worst[1],
        candidates,
        1 + len(winners) + len(pairs),
        exhaustive,
        mean,
        best_last=best[2],
        worst_last=worst[2],
    )


def with_slot_race(queue_order: RaceRange, slot_waiters_first: RaceRange) -> RaceRange:
    """The range over both ways the race for a slot freed by a release can go, each as likely: the queue
    decided in rank order (``queue_order``), or the writes waiting only for a slot of the gate first
    (``slot_waiters_first``; each played over the same race of first questions)."""
    a, b = queue_order, slot_waiters_first
    best = (
        (a.best, a.best_first, False, a.best_last)
        if a.best.makespan_s <= b.best.makespan_s
        else (b.best, b.best_first, True, b.best_last)
    )
    worst = (
        (a.worst, a.worst_first, False, a.worst_last)
        if a.worst.makespan_s >= b.worst.makespan_s
        else (b.worst, b.worst_first, True, b.worst_last)
    )
    return RaceRange(
        best[0],
        worst[0],
        best[1],
        worst[1],
        {**a.candidates, **b.candidates},
        a.plays + b.plays,
        a.exhaustive and b.exhaustive,
        (a.mean_s + b.mean_s) / 2,
        best[2],
        worst[2],
        best[3],
        worst[3],
    )
