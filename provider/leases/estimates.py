"""Duration estimates learned from the decision log: how long a task's recent leases on a table were held.

The admission rule backfills only requests that carry an estimate (ADR 0017, 0024). A task that states none
gets the median of its last few hold durations on the table: the time from each ``grant`` to the
``release`` of the same request, for leases its owner released itself (an ``expiry`` means the holder
died, so it says nothing about how long the write takes). The median shrugs off one slow or fast run; a
wrong estimate only changes the order of conflicting writes, never lets them overlap.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from deltaguard.core.admission import Owner
from deltaguard.leases.codec import owner_from_text
from deltaguard.leases.store import DecisionRow, LeaseStore

#: how many recent holds the median is taken over
DEFAULT_SAMPLES = 5
#: how many recent grants and releases of the table are read to find them (one indexed read; the larger
#: wait entries are left out)
DEFAULT_SCAN = 500


def same_task(owner: Owner, other: Owner) -> bool:
    """Whether two owners are runs of the same task (any run, try or map index; or the same free name)."""
    if owner.dag_id or owner.task_id:
        return (owner.dag_id, owner.task_id) == (other.dag_id, other.task_id)
    return owner.name == other.name


def hold_durations(rows: Sequence[DecisionRow], owner: Owner) -> list[float]:
    """How long ``owner``'s task held the leases it released, newest first.

    :param rows: decision-log entries of one table, in any order.
    :param owner: any run of the task.
    """
    granted_at: dict[str, float] = {}
    holds: list[tuple[float, float]] = []  # (release time, held seconds)
    for row in sorted(rows, key=lambda r: r.at):
        if row.kind == "grant" and same_task(owner, owner_from_text(row.owner_key)):
            granted_at[row.request_id] = row.at
        elif row.kind == "release" and row.request_id in granted_at:
            start = granted_at.pop(row.request_id)
            holds.append((row.at, max(0.0, row.at - start)))
    return [held for _, held in sorted(holds, reverse=True)]


def learned_duration(
    store: LeaseStore, owner: Owner, uri: str, *, samples: int = DEFAULT_SAMPLES, scan: int = DEFAULT_SCAN
) -> float | None:
    """The median of the task's last ``samples`` hold durations on ``uri``; ``None`` when it has none
    among the table's last ``scan`` grants and releases (then the request stays FIFO).

    :param store: the lease store (one unlocked read of the log by table).
    :param owner: any run of the task.
    :param uri: the table.
    """
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    rows = store.decisions(uri=uri, limit=scan, kinds=("grant", "release"))
    durations = hold_durations(rows, owner)[:samples]
    return float(statistics.median(durations)) if durations else None
