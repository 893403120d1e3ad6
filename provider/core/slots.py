"""The slot gate: a queued write is granted only when a worker slot is free for it (ADR 0028, "Deployment").

A granted write that cannot start holds its lease, and so its tables, while it waits for a worker. Airflow
hands a resumed task a slot by its static ``priority_weight``, behind fresh tasks of more weight, so one
release that grants more writes than there are free slots leaves the surplus holding leases for a whole
write's length (measured in docs/benchmarks.md, "Hand-offs": release to grant p95 0.5 s, grant to first
byte p95 34 s). The gate counts the writes that hold a lease, each of which runs in a worker slot or waits
for one: while they fill the slots, a request the conflict model would admit keeps its queue place instead.

Pure and total. It only ever turns a grant into a wait, never the reverse, so it cannot grant what the
conflict model refuses.
"""

from __future__ import annotations


def free_slots(slots: int | None, held: int) -> int | None:
    """How many more leases may be granted: ``slots - held`` (never below 0), or ``None`` without a gate.

    :param slots: the worker slots every leased write runs in (``None``: no gate).
    :param held: the leases held now (each a write running in a slot or waiting for one).
    :raises ValueError: ``slots`` below 1 or ``held`` below 0.
    """
    if held < 0:
        raise ValueError(f"held must not be negative, got {held}")
    if slots is None:
        return None
    if slots < 1:
        raise ValueError(f"slots must be at least 1, got {slots}")
    return max(0, slots - held)


def slot_open(slots: int | None, held: int) -> bool:
    """Whether one more lease may be granted (:func:`free_slots` is ``None`` or above 0)."""
    left = free_slots(slots, held)
    return left is None or left > 0
