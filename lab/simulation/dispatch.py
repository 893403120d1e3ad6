"""Which granted write gets the next free worker slot: longest conflict chain first, with a wait bound.

A granted write may still wait for a worker slot (Airflow's executor slots, a pool). Served first come,
first served, the slot queue can start a write that nothing waits for while a write that heads a chain of
conflicting queued writes (each of which can only start after it) stays behind it; the chain then ends
late. List schedulers order ready jobs by the length of the path they head (critical path first); here the
path is the conflict chain a write holds up:

* :func:`chain_weight`: the request's own expected duration plus the expected durations of the requests
  queued on its tables that conflict with it (they cannot run beside it, so at best they run after it);
* :func:`next_for_slot`: the ready write with the largest weight, except that a write which has waited for
  a slot longer than ``max_wait_s`` goes first (first come, first served among those).

Pure, like :mod:`deltaguard.core.admission`: it sees estimates (never true durations) and what is queued.

**Wait bound.** A write ready at ``r`` is *overdue* from ``r + max_wait_s`` on; overdue writes are served
before any other, in order of readiness, so once it is overdue only the writes that became ready before it
can be served ahead of it: it gets a slot within ``max_wait_s`` plus the time for the writes running at
``r + max_wait_s`` and the earlier-ready writes to free enough slots, however many heavier writes arrive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from deltaguard.core.admission import DecideFn, TableView

#: Default longest slot wait after which a ready write is served in arrival order, whatever its weight.
DEFAULT_MAX_SLOT_WAIT_S = 600.0


def chain_weight(
    request_id: str, tables: Sequence[TableView], decide: DecideFn, expected_duration_s: float | None
) -> float:
    """The expected length of the conflict chain a request heads: its own estimate plus, on the table where
    it is largest, the estimates of the queued requests that conflict with it.

    A request without an estimate counts 0 (it neither gains nor gives weight): only estimates order slots.

    :param request_id: the request (skipped among the queued requests).
    :param tables: the tables it names, with what is queued on them (granted leases are ignored: they
        already run).
    :param decide: the conflict model.
    :param expected_duration_s: the request's estimate.
    """
    behind = 0.0
    for view in tables:
        queued = [w for w in view.waiting if w.id != request_id]
        if not queued:
            continue
        decision = decide(view.operation, [w.operation for w in queued], view.config, view.profile)
        if not decision.conflict:
            continue
        # A conflict of the combination without named members: every queued request takes part.
        hit = decision.conflicts_with or tuple(range(len(queued)))
        behind = max(behind, sum(queued[i].expected_duration_s or 0.0 for i in hit))
    return (expected_duration_s or 0.0) + behind


@dataclass(frozen=True)
class ReadyWrite:
    """A granted write waiting for a worker slot.

    :param id: its id.
    :param ready_since: when it became ready (was granted).
    :param weight: its :func:`chain_weight` (larger first).
    """

    id: str
    ready_since: float
    weight: float


def next_for_slot(
    ready: Sequence[ReadyWrite], now: float, max_wait_s: float = DEFAULT_MAX_SLOT_WAIT_S
) -> int:
    """The index in ``ready`` of the write that gets the next free slot.

    :param ready: the writes waiting for a slot, in the order they became ready.
    :param now: the current time, on the clock of ``ready_since``.
    :param max_wait_s: a write that has waited longer than this is served before any other (first come,
        first served among such writes), which bounds every slot wait.
    :raises ValueError: when nothing is ready.
    """
    if not ready:
        raise ValueError("no write is waiting for a slot")
    if not max_wait_s >= 0:
        raise ValueError(f"max_wait_s must be >= 0, got {max_wait_s}")

    def key(index: int) -> tuple[bool, float, float, int]:
        write = ready[index]
        overdue = now - write.ready_since > max_wait_s
        # overdue: the earliest ready first; otherwise the heaviest chain first (ties: the earliest ready)
        return (
            not overdue,
            write.ready_since if overdue else -_finite(write.weight),
            write.ready_since,
            index,
        )

    return min(range(len(ready)), key=key)


def _finite(value: float) -> float:
    return value if math.isfinite(value) else 0.0
