"""The heaviest chain of pairwise-conflicting writes: the work that must run one write after another.

Pure: callers give weights (durations) and a conflict test. The benchmark's lower bound and the scheduling
priority of write tasks both use it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def heaviest_clique(
    weights: Sequence[float],
    conflicts: Callable[[int, int], bool],
    budget: int = 50_000,
    exact_up_to: int = 40,
) -> tuple[float, tuple[int, ...], bool]:
    """The maximum-weight set of pairwise-conflicting items (a weighted clique of the conflict graph).

    Up to ``exact_up_to`` items: branch and bound over items sorted by weight, stopping after ``budget``
    search nodes. More items: greedy, heaviest first. A set not proven maximal is still pairwise
    conflicting, so still a lower bound on any serial order; ``exact`` says which.

    :param weights: each item's weight (``>= 0``).
    :param conflicts: whether items ``i`` and ``j`` conflict (symmetric).
    :return: (total weight, the chosen items' indexes in ascending order, exact).
    """
    items = sorted(range(len(weights)), key=lambda i: (-weights[i], i))
    n = len(items)
    if n > exact_up_to:
        chosen: list[int] = []
        for i in items:
            if all(conflicts(i, other) for other in chosen):
                chosen.append(i)
        return sum(weights[i] for i in chosen), tuple(sorted(chosen)), False
    adjacent = [[a != b and conflicts(items[a], items[b]) for b in range(n)] for a in range(n)]
    best: list[float] = [0.0]
    best_set: list[tuple[int, ...]] = [()]
    nodes = [0]

    def grow(picked: tuple[int, ...], weight: float, candidates: list[int]) -> None:
        nodes[0] += 1
        if weight > best[0]:
            best[0], best_set[0] = weight, picked
        if nodes[0] > budget:
            return
        for position, a in enumerate(candidates):
            rest = candidates[position:]
            if weight + sum(weights[items[b]] for b in rest) <= best[0]:
                return  # even taking everything left cannot beat the best
            grow((*picked, a), weight + weights[items[a]], [b for b in rest[1:] if adjacent[a][b]])

    grow((), 0.0, list(range(n)))
    return best[0], tuple(sorted(items[a] for a in best_set[0])), nodes[0] <= budget
