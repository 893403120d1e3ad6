"""Hand-off latency of a benchmark run: how long a table sits idle between one write and the next one that
had to wait for it.

Two measurements, from evidence outside the tasks:

* **lease hand-offs** (deltaguard): from the lease store's decision log, every request that logged ``wait``
  and was later granted, paired with the last ``release`` on its table between its wait and its grant. The
  hand-off runs from that release to the waiter's first byte (the timed engine's attempt start), and is
  split into the store's part (release to grant) and Airflow's part (grant to first byte: the trigger event,
  the scheduler queueing the task again, a worker starting it, the operator opening the table). A waiter
  the slot gate held (a ``wait`` entry behind ``slot`` blockers: every worker slot taken by a lease, ADR
  0028) was freed by a slot, not only by its table: its hand-off runs from the last release on any of the
  benchmark's tables before its grant, if that is later; ``table_released_at`` keeps its table's own
  release, and the summary gives both.
* **pool hand-offs** (one-slot pools): Airflow's own overhead for the same thing, the gap between one
  write's commit and the next write's first byte in the same 1-slot pool (every task of the benchmark is
  ready when the run starts, so the next one was waiting).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LeaseHandoff:
    """One lease hand-off, in seconds since the epoch.

    :param task_id: the waiter's task.
    :param uri: the table.
    :param released_at: the release that freed the table for it.
    :param granted_at: when its lease was granted.
    :param first_byte_at: when its write opened the table.
    :param slot_wait: whether the slot gate held it after its table was free.
    :param table_released_at: the last release on its table between its wait and its grant (``None``: its
        table was free when it asked, only the slot gate held it).
    """

    task_id: str
    uri: str
    released_at: float
    granted_at: float
    first_byte_at: float
    slot_wait: bool = False
    table_released_at: float | None = None

    @property
    def total_s(self) -> float:
        return self.first_byte_at - self.released_at

    @property
    def store_s(self) -> float:
        return self.granted_at - self.released_at

    @property
    def airflow_s(self) -> float:
        return self.first_byte_at - self.granted_at


def _slot_wait(detail: str) -> bool:
    """Whether a ``wait`` entry's detail names ``slot`` blockers (the slot gate, not a conflict)."""
    try:
        blockers = json.loads(detail).get("blockers", [])
    except (ValueError, AttributeError, TypeError):
        return False
    return any(isinstance(b, dict) and b.get("kind") == "slot" for b in blockers)


def _task_id(owner_key: str) -> str:
    try:
        return str(json.loads(owner_key).get("task_id", ""))
    except (ValueError, AttributeError):
        return ""


def lease_handoffs(
    decisions: Iterable[Any], first_bytes: Mapping[str, float], uris: Iterable[str] | None = None
) -> list[LeaseHandoff]:
    """The lease hand-offs found in a decision log.

    :param decisions: :class:`~deltaguard.leases.store.DecisionRow`-like entries (``at``, ``kind``,
        ``request_id``, ``uri``, ``owner_key``), in any order.
    :param first_bytes: each task's first write attempt start (seconds since the epoch).
    :param uris: only these tables (default: all).
    """
    wanted = set(uris) if uris is not None else None
    rows = sorted(
        (d for d in decisions if wanted is None or d.uri in wanted), key=lambda d: (d.at, d.kind != "release")
    )
    releases: dict[str, list[float]] = {}
    any_release: list[float] = []
    waiting_since: dict[tuple[str, str], float] = {}
    slot_waited: set[tuple[str, str]] = set()
    found: list[LeaseHandoff] = []
    for row in rows:
        key = (row.request_id, row.uri)
        if row.kind == "release":
            releases.setdefault(row.uri, []).append(row.at)
            any_release.append(row.at)
        elif row.kind == "wait":
            waiting_since.setdefault(key, row.at)
            if _slot_wait(getattr(row, "detail", "")):
                slot_waited.add(key)
        elif row.kind == "grant" and key in waiting_since:
            since = waiting_since.pop(key)
            slot = key in slot_waited
            slot_waited.discard(key)
            freeing = [at for at in releases.get(row.uri, []) if since <= at <= row.at]
            # a slot-gated waiter was also freed by a release on another table (a write leaving its slot)
            slots = [at for at in any_release if since <= at <= row.at] if slot else []
            task_id = _task_id(row.owner_key)
            if (freeing or slots) and task_id in first_bytes:
                table_release = freeing[-1] if freeing else None
                released = max([*freeing[-1:], *slots[-1:]])
                found.append(
                    LeaseHandoff(
                        task_id, row.uri, released, row.at, first_bytes[task_id], slot, table_release
                    )
                )
    return found


def pool_handoffs(attempts: Sequence[Mapping[str, Any]]) -> list[float]:
    """Gaps between consecutive writes of one table run one at a time (a 1-slot pool), in seconds."""
    by_table: dict[str, list[Mapping[str, Any]]] = {}
    for attempt in attempts:
        by_table.setdefault(str(attempt["table"]), []).append(attempt)
    gaps: list[float] = []
    for runs in by_table.values():
        runs.sort(key=lambda a: a["start"])
        gaps.extend(nxt["start"] - prev["end"] for prev, nxt in itertools.pairwise(runs))
    return gaps


def quantiles(values: Sequence[float]) -> dict[str, Any]:
    """``{count, p50_s, p95_s, max_s}`` (nearest-rank), or ``None`` figures when there are no values."""
    ordered = sorted(values)
    if not ordered:
        return {"count": 0, "p50_s": None, "p95_s": None, "max_s": None}

    def rank(q: float) -> float:
        return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)], 2)

    return {"count": len(ordered), "p50_s": rank(0.5), "p95_s": rank(0.95), "max_s": round(ordered[-1], 2)}


def first_bytes(attempts: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each write's first attempt start."""
    starts: dict[str, float] = {}
    for attempt in attempts:
        write = str(attempt["write"])
        starts[write] = min(starts.get(write, attempt["start"]), attempt["start"])
    return starts


def summarize(handoffs: Sequence[LeaseHandoff]) -> dict[str, Any]:
    """Quantiles of the whole hand-off and of its store and Airflow parts."""
    return {
        **quantiles([h.total_s for h in handoffs]),
        "release_to_grant": quantiles([h.store_s for h in handoffs]),
        "grant_to_first_byte": quantiles([h.airflow_s for h in handoffs]),
        # the slot gate's waits counted from the table's own release, as before the gate
        "table_release_to_first_byte": quantiles(
            [h.first_byte_at - h.table_released_at for h in handoffs if h.table_released_at is not None]
        ),
        "slot_waits": sum(1 for h in handoffs if h.slot_wait),
    }
