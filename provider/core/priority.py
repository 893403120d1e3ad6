"""How much work must run one write after another: the scheduling priority of a table's writes (ADR 0028).

Each write's weight is the heaviest chain of pairwise-conflicting writes *through that write* (the
critical-path rule of list scheduling: long chains bound the run's makespan, so their writes start first).
A greedy colouring of the conflict graph splits a table's writes into phases of pairwise compatible writes;
an earlier phase gets a slightly higher weight and lease queue priority, so writes that can run together ask
for their leases together. Pure: the model and the chain search only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from deltaguard.core.admission import MAX_PRIORITY
from deltaguard.core.chains import heaviest_clique
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig

#: Seconds assumed for a write without an expected duration.
DEFAULT_EXPECTED_S = 60.0
#: Above this many writes on one table, pairs are not judged (a DAG file is parsed often): all of the
#: table's work counts as serial.
MAX_JUDGED_WRITES = 60


class TablePriorities(NamedTuple):
    """What the priority policy gives the writes of one table, in the order of the writes."""

    #: Airflow ``priority_weight``: the heaviest chain through the write plus its phase bonus
    weights: list[int]
    #: lease queue priority: the phase bonus alone (earlier phases rank ahead, bounded by ageing)
    phase_bonus: list[int]
    #: seconds of the heaviest set of pairwise-conflicting writes that contains the write; the largest is
    #: the table's serial work (its heaviest chain)
    chains_s: list[float]
    #: the writes of earlier phases it conflicts with (their positions), which it lets ask first
    after: list[tuple[int, ...]]


def table_priorities(
    operations: Sequence[Operation | None],
    expected_s: Sequence[float | None],
    table: TableConfig,
    profile: EngineProfile,
) -> TablePriorities:
    """The worker-slot weights and lease queue priorities of one table's writes (one judgement of the
    table's pairs for both).

    Chains: for each write, the seconds of the heaviest set of pairwise-conflicting writes that contains
    it: the write itself and the heaviest chain among the writes it conflicts with. Weights: the chain,
    plus the write's phase bonus, so that writes which can run together ask first together.

    Phases: writes in descending expected duration, each put in the first phase whose writes are all
    compatible with it; phase ``k`` of ``n`` has the bonus ``n - 1 - k``. Writes that start within seconds
    of each other reach the lease manager in no useful order; as a lease priority the bonus ranks a phase
    ahead of the later phases that conflict with it, so a write that conflicts with all (a Z-order
    OPTIMIZE) queues behind the writes that can run beside the first holder instead of in front of them.
    A queue rank orders only writes that wait, though: on a free table the first question is granted, so
    each write also names the conflicting writes of earlier phases (``after``), which the lease hook lets
    ask first (``[deltaguard] phase_wait``, :meth:`deltaguard.hooks.lease.DeltaLeaseHook.let_earlier_ask`).
    A table whose writes are not judged (more than :data:`MAX_JUDGED_WRITES`) counts all its work as
    serial and has one phase.

    :param operations: the writes; ``None`` for one whose operation is not known (conflicts with all).
    :param expected_s: each write's expected duration; ``None``: :data:`DEFAULT_EXPECTED_S`.
    :param table: the table's configuration, as far as it is known.
    :param profile: the engine whose rules judge the pairs.
    :raises ValueError: when the two sequences differ in length.
    """
    weights, conflicts = _graph(operations, expected_s, table, profile)
    count = len(operations)
    if count > MAX_JUDGED_WRITES:
        total = sum(weights)
        return TablePriorities([max(1, round(total))] * count, [0] * count, [total] * count, [()] * count)
    chains = [_chain_through(i, weights, conflicts) for i in range(count)]
    phase_of, bonus = _phases(weights, conflicts)
    after = [
        tuple(j for j in range(count) if phase_of[j] < phase_of[i] and conflicts(i, j)) for i in range(count)
    ]
    return TablePriorities([max(1, round(chains[i]) + bonus[i]) for i in range(count)], bonus, chains, after)


def _phases(weights: Sequence[float], conflicts: Callable[[int, int], bool]) -> tuple[list[int], list[int]]:
    """Each write's phase (greedy colouring, heaviest first) and its phase bonus."""
    phases: list[list[int]] = []
    phase_of = [0] * len(weights)
    for i in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        for k, members in enumerate(phases):
            if not any(conflicts(i, j) for j in members):
                members.append(i)
                phase_of[i] = k
                break
        else:
            phase_of[i] = len(phases)
            phases.append([i])
    # a lease priority: within MAX_PRIORITY already, since at most MAX_JUDGED_WRITES writes are phased
    return phase_of, [min(MAX_PRIORITY, len(phases) - 1 - phase_of[i]) for i in range(len(weights))]


def _chain_through(i: int, weights: Sequence[float], conflicts: Callable[[int, int], bool]) -> float:
    rivals = [j for j in range(len(weights)) if j != i and conflicts(i, j)]
    if not rivals:
        return weights[i]
    rest = heaviest_clique([weights[j] for j in rivals], lambda a, b: conflicts(rivals[a], rivals[b]))[0]
    return weights[i] + rest


def _graph(
    operations: Sequence[Operation | None],
    expected_s: Sequence[float | None],
    table: TableConfig,
    profile: EngineProfile,
) -> tuple[list[float], Callable[[int, int], bool]]:
    if len(operations) != len(expected_s):
        raise ValueError("one expected duration per operation")
    weights = [DEFAULT_EXPECTED_S if e is None else max(0.0, float(e)) for e in expected_s]
    judged: dict[tuple[int, int], bool] = {}

    def conflicts(i: int, j: int) -> bool:
        key = (min(i, j), max(i, j))
        if key not in judged:
            a, b = operations[i], operations[j]
            judged[key] = a is None or b is None or pair_verdict(a, b, table, profile).conflict
        return judged[key]

    return weights, conflicts
