"""The lease's own cost per write under deltaguard's operators: acquire, MERGE scope read, release.

Evidence from outside the lease code: the timed engine's events (``validated``: the operator's last step
before it asks for the lease; ``scope_read``: the MERGE source's key read, with its start; the attempt log's
write start and end) and the lease store's decision log (``grant``, ``release``). Per write:

* ``acquire_s``: from the end of the validation that preceded the write to the engine's write start (opening
  the lease store, the request and its decision, starting the keeper). After a deferral this is the resumed
  try's ask only: the wait itself is the hand-off, measured in :mod:`benchmarks.harness.handoff`;
* ``waited_s``: the part of ``acquire_s`` a write spent waiting *in its worker* for a conflicting holder (a
  blocker expected to leave within seconds, :mod:`deltaguard.leases.imminent`): from its first ``wait`` in the
  decision log to its grant. That is the conflict's wait, which one-slot pools pay as well, not the lease's
  cost, so it is reported apart and left out of ``total_s`` and the share (measured: seed 0 at commit
  ``8ce3b6b``, ``w000`` waited 18.5 s of its 19.0 s acquire for the MERGE of the same partition ahead of it);
* ``ask_s``: the part of ``acquire_s`` up to the grant in the decision log (the wait included);
* ``scope_s``: every scope read of the write (a try resumed after waiting keeps its scope and reads none);
* ``release_s``: from the engine's write end (the commit found) to the ``release`` in the decision log;
* ``share``: their sum over the engine's write time (write start to end).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.harness.handoff import quantiles


@dataclass(frozen=True)
class WriteOverhead:
    """The lease's cost around one write, in seconds."""

    write: str
    acquire_s: float
    ask_s: float | None
    scope_s: float
    release_s: float | None
    write_s: float
    waited_s: float = 0.0

    @property
    def total_s(self) -> float:
        """The lease's own cost: acquiring without the wait for a conflicting holder, scope read, release."""
        return self.acquire_s - self.waited_s + self.scope_s + (self.release_s or 0.0)

    @property
    def share(self) -> float:
        return self.total_s / self.write_s if self.write_s > 0 else float("inf")


def _task_id(owner_key: str) -> str:
    try:
        return str(json.loads(owner_key).get("task_id", ""))
    except (ValueError, AttributeError):
        return ""


def lease_overheads(
    events: Iterable[Mapping[str, Any]], attempts: Iterable[Mapping[str, Any]], decisions: Iterable[Any]
) -> list[WriteOverhead]:
    """One :class:`WriteOverhead` per write that committed (``outcome == "ok"``).

    :param events: the engine's ``validated`` / ``scope_read`` events (``write``, ``event``, ``at``,
        ``started`` for scope reads).
    :param attempts: the attempt log (``write``, ``start``, ``end``, ``outcome``).
    :param decisions: decision-log rows (``at``, ``kind``, ``owner_key``).
    :raises ValueError: when a committed write has no ``validated`` event before its start (the evidence is
        incomplete, so no figure).
    """
    events = list(events)
    grants: dict[str, list[float]] = {}
    releases: dict[str, list[float]] = {}
    waits: dict[str, list[float]] = {}
    for row in decisions:
        task = _task_id(row.owner_key)
        if row.kind == "grant":
            grants.setdefault(task, []).append(row.at)
        elif row.kind == "release":
            releases.setdefault(task, []).append(row.at)
        elif row.kind == "wait":
            waits.setdefault(task, []).append(row.at)
    out = []
    for attempt in sorted((a for a in attempts if a["outcome"] == "ok"), key=lambda a: a["write"]):
        write, start, end = str(attempt["write"]), float(attempt["start"]), float(attempt["end"])
        validated = [e["at"] for e in events if e["write"] == write and e["event"] == "validated"]
        before = [at for at in validated if at <= start]
        if not before:
            raise ValueError(f"write {write}: no validation logged before its write started")
        ready = max(before)
        granted = [at for at in grants.get(write, []) if ready <= at <= start]
        # a wait logged by this try before its grant: it waited in its worker, not deferred
        waited = [at for at in waits.get(write, []) if granted and ready <= at <= granted[-1]]
        released = [at for at in releases.get(write, []) if at >= end]
        scope = sum(
            e["at"] - e["started"] for e in events if e["write"] == write and e["event"] == "scope_read"
        )
        out.append(
            WriteOverhead(
                write=write,
                acquire_s=start - ready,
                ask_s=(granted[-1] - ready) if granted else None,
                scope_s=scope,
                release_s=(min(released) - end) if released else None,
                write_s=end - start,
                waited_s=(granted[-1] - min(waited)) if waited else 0.0,
            )
        )
    return out


def summarize_overheads(rows: Sequence[WriteOverhead], planned_s: Mapping[str, float]) -> dict[str, Any]:
    """Quantiles of each part and of the share, over the engine's write time and over the planned duration.

    :param planned_s: each write's planned duration.
    """
    planned_share = [r.total_s / planned_s[r.write] for r in rows if planned_s.get(r.write)]
    return {
        "writes": len(rows),
        "acquire_s": quantiles([r.acquire_s for r in rows]),
        "ask_s": quantiles([r.ask_s for r in rows if r.ask_s is not None]),
        "waited_in_worker_s": quantiles([r.waited_s for r in rows]),
        "scope_s": quantiles([r.scope_s for r in rows]),
        "release_s": quantiles([r.release_s for r in rows if r.release_s is not None]),
        "releases_missing": sorted(r.write for r in rows if r.release_s is None),
        "total_s": quantiles([r.total_s for r in rows]),
        "share_of_write": quantiles([r.share for r in rows]),
        "share_of_planned_duration": quantiles(planned_share),
        "per_write": [
            {
                "write": r.write,
                "acquire_s": round(r.acquire_s, 3),
                "ask_s": None if r.ask_s is None else round(r.ask_s, 3),
                "waited_in_worker_s": round(r.waited_s, 3),
                "scope_s": round(r.scope_s, 3),
                "release_s": None if r.release_s is None else round(r.release_s, 3),
                "write_s": round(r.write_s, 2),
                "share": round(r.share, 4),
            }
            for r in rows
        ],
    }
