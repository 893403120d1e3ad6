"""When a waiting write's blockers are expected to leave within seconds, it waits in its worker (ADR 0024).

A deferred write needs the triggerer's event, the scheduler, a free worker and a DAG parse before its first
byte (docs/benchmarks.md, "Hand-offs"). A blocker's end can be foreseen: its lease was granted at a known
time and its request carries its expected duration. So a write whose blockers are all granted leases
expected to end within :func:`imminent_limit_s` does not defer but waits in the worker, asking every
:data:`IMMINENT_POLL_S`. An estimate only moves *where* the write waits, never whether it may write: the
lease manager still grants. A blocker overdue by more than :data:`IMMINENT_S` counts as unknown again (the
write defers), which bounds how long a wrong estimate holds a worker slot.

The limit follows what a deferral costs here (:func:`imminent_limit_s`): the time this task's own start took
to reach its first question is a lower bound of what deferring would cost it again; when it is longer than
:data:`IMMINENT_S` the write waits for blockers expected to end within it, up to :data:`MAX_IMMINENT_S`.

A deferred write can instead come back :data:`WAKE_LEAD_S` before its blockers are expected to leave
(:func:`wake_in_s`, the trigger's ``early_wake``); it is off by default: measured worse (ADR 0024, "The early
wake, again"; docs/benchmarks.md, "Sweep with the early wake"). A write held by the slot gate, behind a
queued request, or while every worker slot is held by a lease (:func:`worker_slot_free`) is never woken early:
its wait cannot be foreseen.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deltaguard.core.admission import Blocker
    from deltaguard.leases.manager import LeaseManager

#: A wait expected to end within this many seconds stays in the worker.
IMMINENT_S = 15.0
#: A deferred write's trigger fires this many seconds before its blockers are expected to leave: Airflow's
#: resume of a deferred task (2-3 s on two loaded cores) plus a margin for an estimate that comes true early
#: (holds measured 11 s either side of their estimate, docs/benchmarks.md). Below :data:`IMMINENT_S`, so the
#: resumed task waits in its worker rather than deferring again.
WAKE_LEAD_S = 6.0
#: Seconds between questions while a write waits in the worker for an imminent release.
IMMINENT_POLL_S = 0.5
#: The longest expected wait a write spends in its worker however slow its own start was: a worker slot held
#: while waiting is a slot no other task can start in, and the blockers may themselves need one.
MAX_IMMINENT_S = 60.0


def expected_wait_s(
    blockers: Iterable[Blocker], ends: Callable[[Blocker], float | None], now: float
) -> float | None:
    """Seconds until the last blocker is expected to leave, or ``None`` when that cannot be foreseen.

    :param blockers: what the write waits for.
    :param ends: a blocker's expected end (seconds since the epoch), ``None`` when unknown.
    :param now: the current time.
    :return: ``None`` when any blocker is a queued request (it has not started), has no estimate, or is
        overdue by more than :data:`IMMINENT_S`; else the largest remaining time (may be slightly negative).
    """
    latest: float | None = None
    seen = False
    for blocker in blockers:
        seen = True
        if blocker.kind != "lease":
            return None
        end = ends(blocker)
        if end is None or end < now - IMMINENT_S:
            return None
        latest = end if latest is None else max(latest, end)
    if not seen or latest is None:
        return None
    return latest - now


def wake_in_s(wait_s: float | None, lead_s: float = WAKE_LEAD_S) -> float | None:
    """Seconds until a deferred write's trigger should fire to bring it back to its worker ahead of an
    expected release: ``wait_s - lead_s``, ``0`` when that is already due, ``None`` when the wait cannot be
    foreseen (:func:`expected_wait_s` gave ``None``).

    :param wait_s: seconds until the blockers are expected to leave (:func:`expected_wait_s`).
    :param lead_s: how long before that end the trigger fires (:data:`WAKE_LEAD_S`).
    :raises ValueError: ``lead_s`` negative or not below :data:`IMMINENT_S` (the resumed task would defer
        again at once).
    """
    if not 0.0 <= lead_s < IMMINENT_S:
        raise ValueError(f"lead_s must be in [0, {IMMINENT_S}), got {lead_s}")
    if wait_s is None or not math.isfinite(wait_s):
        return None
    return max(0.0, wait_s - lead_s)


def expected_wait_in(manager: LeaseManager, blockers: Iterable[Blocker]) -> float | None:
    """:func:`expected_wait_s` of ``blockers`` from ``manager``'s store, now (blocking: the triggers run it in
    a thread)."""
    return expected_wait_s(blockers, lease_end_reader(manager), manager.clock())


def worker_slot_free(manager: LeaseManager) -> bool:
    """Whether a worker slot is free of lease holders now (the slot gate's count, unlocked): an early wake
    takes a slot while it waits, and a woken task that finds none waits in the scheduler with nobody asking
    for its request (blocking: the triggers run it in a thread).

    Without a gate (``worker_slots`` unset) every wake may go; a failed read lets none go (an optimisation
    only: the write then waits as without it).
    """
    from deltaguard.core.slots import slot_open

    if manager.worker_slots is None:
        return True
    try:
        held = manager.store.live_leases(manager.clock())
    except Exception:
        return False
    return slot_open(manager.worker_slots, len({row.lease_id for row in held}))


def imminent_limit_s(startup_s: float | None) -> float:
    """The longest expected wait spent in the worker: :data:`IMMINENT_S`, or the task's own start-up time when
    that is longer (a deferral costs at least one more start), never above :data:`MAX_IMMINENT_S`.

    :param startup_s: seconds from the task's process start to its first question (``None``: unknown).
    """
    if startup_s is None or not math.isfinite(startup_s):
        return IMMINENT_S
    return min(MAX_IMMINENT_S, max(IMMINENT_S, startup_s))


def is_imminent(wait_s: float | None, limit_s: float = IMMINENT_S) -> bool:
    """Whether an expected wait (from :func:`expected_wait_s`) is short enough to wait in the worker.

    :param limit_s: the longest such wait (:func:`imminent_limit_s`).
    """
    return wait_s is not None and wait_s <= limit_s


def process_age_s(now: float) -> float | None:
    """Seconds since this process started (``None`` when it cannot be read): for a task, what its start cost
    before it asked for a lease."""
    try:
        import psutil

        return now - float(psutil.Process().create_time())
    except Exception:  # an optimisation only: unknown keeps the fixed limit
        return None


def lease_end_reader(manager: LeaseManager) -> Callable[[Blocker], float | None]:
    """A blocker's expected end from the store: its lease's grant time plus its request's estimate.

    Reads are cached per call site (one ask); a failed read gives ``None`` (unknown: defer as before).
    """
    from deltaguard.leases import codec

    granted: dict[str, dict[str, float]] = {}

    def end(blocker: Blocker) -> float | None:
        try:
            if blocker.table not in granted:
                granted[blocker.table] = {i.lease_id: i.granted_at for i in manager.leases(blocker.table)}
            started = granted[blocker.table].get(blocker.id)
            row = manager.store.read_request(blocker.id) if started is not None else None
        except Exception:  # an optimisation only: unknown means "defer", exactly as without it
            return None
        duration = codec.payload_duration(row.payload) if row is not None else None
        return None if started is None or duration is None else started + duration

    return end
