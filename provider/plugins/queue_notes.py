"""What a table's queue says beyond its blockers: when each wait is expected to end, and why a later write
went ahead of an earlier one.

The expected end of a wait is the admission rule's own *reservation* of the waiting request
(:func:`deltaguard.core.admission.expected_start`): when its conflicting holders, and the conflicting
requests queued ahead of it, are expected to end. Each write's duration is the estimate its request
carries, else the median of its task's recent holds on the table (:mod:`deltaguard.leases.manager`), the
same estimates the admission rule backfills with. They are estimates, never promises: an unknown one makes
the end unknown, and a holder past its estimate makes the wait "overdue".

A later write ahead of an earlier one is either ranked ahead (a higher priority: the queue rank is
``enqueued_at - priority * ageing_s``, ADR 0017) or was granted after the earlier one queued, which the
rule allows only beside holders it does not conflict with and, past a conflicting earlier request, only
when its estimate ends before that request's reservation (backfilling, ADR 0017; ADR 0009 for the grant
beside a compatible holder).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from deltaguard.core.admission import DEFAULT_AGEING_S, TableView, expected_start
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.codec import owner_from_text, payload_duration
from deltaguard.leases.manager import DEFAULT_SAMPLES, hold_durations
from deltaguard.leases.store import DecisionRow, LeaseRow, RequestRow, WaiterRow
from deltaguard.leases.views import lease_holder, waiter_holder


def _iso(ts: float) -> str:
    from deltaguard.plugins.views import iso

    return str(iso(ts))


def _priority(request: RequestRow | None) -> int:
    if request is None:
        return 0
    try:
        return int(json.loads(request.payload).get("priority", 0))
    except (ValueError, TypeError, AttributeError):
        return 0


def duration_estimate(
    request: RequestRow | None, owner_text: str, history: Sequence[DecisionRow]
) -> tuple[float | None, str]:
    """A write's expected hold time and where it comes from (``stated``, ``learned`` or ``unknown``).

    :param request: the write's request row (its payload may state an estimate).
    :param owner_text: the lease owner (JSON or key) of the write.
    :param history: the table's recent ``grant`` and ``release`` entries.
    """
    stated = payload_duration(request.payload) if request is not None else None
    if stated is not None:
        return stated, "stated"
    durations = hold_durations(history, owner_from_text(owner_text))[:DEFAULT_SAMPLES]
    if durations:
        return float(statistics.median(durations)), f"learned (median of {len(durations)} recent holds)"
    return None, "unknown"


def first_positions(decisions: Sequence[DecisionRow]) -> dict[str, int]:
    """The queue position of each request's first logged wait."""
    first: dict[str, tuple[float, int]] = {}
    for row in decisions:
        if row.kind != "wait":
            continue
        try:
            position = int(json.loads(row.detail).get("position"))
        except (ValueError, TypeError, AttributeError):
            continue
        if row.request_id not in first or row.at < first[row.request_id][0]:
            first[row.request_id] = (row.at, position)
    return {rid: position for rid, (_, position) in first.items()}


def annotate_queue(
    summary: dict[str, Any],
    *,
    config: TableConfig | None,
    profile: EngineProfile,
    leases: Sequence[LeaseRow],
    waiters: Sequence[WaiterRow],
    requests: Mapping[str, RequestRow],
    history: Sequence[DecisionRow],
    positions: Mapping[str, int],
    now: float,
) -> None:
    """Add ``expected_end`` to each lease and ``expected_start`` and ``overtaken`` to each waiter of a
    table summary (:func:`deltaguard.plugins.views.table_summary`).

    :param requests: request rows of the table's holders and waiters, by id.
    :param history: the table's recent ``grant`` and ``release`` entries (for learned durations).
    :param positions: each waiter's first logged queue position.
    """
    lease_est = {
        r.lease_id: duration_estimate(requests.get(r.lease_id), r.owner_json, history) for r in leases
    }
    wait_est = {
        w.request_id: duration_estimate(requests.get(w.request_id), w.owner_json, history) for w in waiters
    }
    rows = {r.lease_id: r for r in leases}
    for view in summary["leases"]:
        seconds, source = lease_est.get(view["lease_id"], (None, "unknown"))
        row = rows.get(view["lease_id"])
        end = row.granted_at + seconds if row is not None and seconds is not None else math.inf
        view["expected_end"] = _when(end, now, source)
    granted = [lease_holder(r, lease_est[r.lease_id][0]) for r in leases if r.expires_at > now]
    queued = {
        w.request_id: waiter_holder(
            w,
            requests[w.request_id].enqueued_at if w.request_id in requests else None,
            wait_est[w.request_id][0],
        )
        for w in waiters
    }
    for view in summary["waiting"]:
        holder = queued.get(view["request_id"])
        if holder is None:
            continue
        table = TableView(
            summary["uri"], holder.operation, config or TableConfig(), profile, granted, list(queued.values())
        )
        view["expected_start"] = _when(expected_start(table, holder.id), now, "estimates")
        view["overtaken"] = overtaken(view, requests, positions)


def _when(at: float, now: float, source: str) -> dict[str, Any]:
    """An expected time as ``state`` (``known``, ``overdue``, ``unknown`` or ``any_moment``) and words."""
    if at == -math.inf:
        return {
            "state": "any_moment",
            "at": None,
            "in_s": 0.0,
            "source": source,
            "text": "may start any moment (nothing it conflicts with holds this table)",
        }
    if not math.isfinite(at):
        return {
            "state": "unknown",
            "at": None,
            "in_s": None,
            "source": source,
            "text": "no estimate (a write ahead of it has no recorded or stated duration)",
        }
    if at < now:
        return {
            "state": "overdue",
            "at": _iso(at),
            "in_s": round(at - now, 1),
            "source": source,
            "text": f"expected {now - at:.0f} s ago: a write ahead of it runs past its estimate",
        }
    return {
        "state": "known",
        "at": _iso(at),
        "in_s": round(at - now, 1),
        "source": source,
        "text": f"in about {_duration(at - now)} (at {_iso(at)[11:19]} UTC)",
    }


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def overtaken(
    waiter: Mapping[str, Any], requests: Mapping[str, RequestRow], positions: Mapping[str, int]
) -> dict[str, Any] | None:
    """Why writes that asked after ``waiter`` are ahead of it (``None`` when none is).

    :param waiter: a waiter view with its explained blockers.
    :param requests: request rows of the waiter and its blockers, by id.
    :param positions: each request's first logged queue position.
    """
    mine = requests.get(str(waiter["request_id"]))
    if mine is None:
        return None
    my_priority = _priority(mine)
    reasons = []
    for blocker in waiter.get("blockers", ()):
        other = requests.get(str(blocker.get("id")))
        if other is None or other.enqueued_at <= mine.enqueued_at:
            continue
        later = other.enqueued_at - mine.enqueued_at
        name = str(blocker.get("owner"))
        if blocker.get("kind") == "waiting":
            text = f"{name} asked {later:.0f} s later, priority {_priority(other)} against {my_priority}"
            how = "priority"
        else:
            text = f"{name} asked {later:.0f} s later and was granted first"
            how = "backfill"
        reasons.append(
            {"id": blocker.get("id"), "owner": name, "how": how, "later_s": round(later, 1), "text": text}
        )
    if not reasons:
        return None
    was, now_at = positions.get(str(waiter["request_id"])), waiter.get("position")
    moved = f"moved from position {was} to {now_at}: " if was is not None and now_at and now_at != was else ""
    parts = []
    for how, why in _WHY.items():
        mine_how = [r["text"] for r in reasons if r["how"] == how]
        if mine_how:
            parts.append(f"{'; '.join(mine_how)} ({why})")
    return {"position_was": was, "text": moved + "; ".join(parts), "by": reasons}


#: why a later write can be ahead, once per kind (ADR 0017, ADR 0009)
_WHY = {
    "priority": f"a priority point ranks a request ahead of those queued up to ageing_s "
    f"({DEFAULT_AGEING_S:.0f} s by default) before it",
    "backfill": "it conflicts with no write holding the table then, and its estimate ended before this "
    "write's expected turn: backfilling",
}
