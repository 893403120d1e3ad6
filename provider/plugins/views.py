"""View models of the deltaguard UI: lease-store rows in, plain JSON-ready dicts out.

Pure and Airflow-free: the plugin's endpoints read rows through :mod:`deltaguard.plugins.reads`, pass them here,
and return the result as JSON, which the React app only lays out. Everything a view says about the conflict
model (isolation level, row-level concurrency, the matrix, which rule made a task wait) comes from
:mod:`deltaguard.core`, never from the app.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from deltaguard.core.admission import Owner
from deltaguard.core.closed_world import table_unknowns
from deltaguard.core.matrix import ABBREVIATIONS, conflict_matrix
from deltaguard.core.model import pair_verdict, table_context
from deltaguard.core.operations import Operation
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.remedies import explain_verdict
from deltaguard.core.table_config import TableConfig
from deltaguard.leases import codec
from deltaguard.leases.store import DecisionRow, LeaseRow, RequestRow, TableRow, WaiterRow
from deltaguard.leases.wait_texts import wait_detail, waiting_from_json

#: The profile shown when nothing in the store says which engine writes a table.
DEFAULT_PROFILE = EngineProfile(EngineName.DELTA_RS, "1.0")


def iso(ts: float | None) -> str | None:
    """A UTC timestamp as ISO 8601 with seconds (``None`` stays ``None``)."""
    if ts is None:
        return None
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat(timespec="seconds")


def short_name(uri: str) -> str:
    """The last path segment of a table URI (``file:///data/sales_fact`` -> ``sales_fact``)."""
    return uri.rstrip("/").rsplit("/", 1)[-1] or uri


def owner_view(owner_json: str | Mapping[str, Any]) -> dict[str, Any]:
    """An owner as stored, plus its short description."""
    data = json.loads(owner_json) if isinstance(owner_json, str) else dict(owner_json)
    try:
        owner = Owner.from_json(data)
    except ValueError:
        return {"describe": "unknown owner", **data}
    return {"describe": owner.describe(), **owner.to_json()}


def config_from_row(row: TableRow | None) -> TableConfig | None:
    """The table configuration the store shares for a table (``None`` when not known yet)."""
    if row is None or not row.config_json:
        return None
    return codec.config_from_json(json.loads(row.config_json))


def profile_for_table(uri: str, requests: Iterable[RequestRow]) -> EngineProfile | None:
    """The engine of the newest request (by ``updated_at``) that claims ``uri``."""
    for request in sorted(requests, key=lambda r: r.updated_at, reverse=True):
        claim = _claim(request, uri)
        if claim is not None:
            return codec.profile_from_json(claim["profile"])
    return None


def _claim(request: RequestRow, uri: str) -> dict[str, Any] | None:
    try:
        payload = json.loads(request.payload)
    except ValueError:
        return None
    for claim in payload.get("claims", ()):
        if claim.get("uri") == uri:
            return dict(claim)
    return None


def config_words(config: TableConfig | None, profile: EngineProfile) -> dict[str, Any]:
    """The table's configuration in words, as ``profile`` reads it.

    :param config: the table configuration (``None``: unknown, nothing is claimed).
    :param profile: the engine that writes the table.
    """
    if config is None:
        return {
            "known": False,
            "engine": profile.describe(),
            "summary": "configuration not known yet (no write has been admitted with one)",
        }
    ctx = table_context(config, profile)
    if ctx.row_level:
        kinds = ", ".join(sorted(k.value for k in ctx.row_level_kinds))
        row_level = {"enabled": True, "why": f"applies to {kinds}. " + " ".join(ctx.notes)}
    else:
        why = " ".join(ctx.notes) or f"{profile.describe()} has no row-level conflict detection"
        row_level = {"enabled": False, "why": why}
    partitions = list(config.partition_columns)
    return {
        "known": True,
        "engine": profile.describe(),
        "isolation_level": ctx.isolation.value,
        "isolation_source": (
            "table property delta.isolationLevel"
            if config.get_property("delta.isolationLevel") is not None
            else "engine default"
        ),
        "partitions": partitions,
        "partitions_text": ", ".join(partitions) if partitions else "not partitioned",
        "clustering": list(config.clustering_columns),
        "deletion_vectors": config.deletion_vectors_enabled,
        "row_level_concurrency": row_level,
        # The pair rules treat unknown settings conservatively too (rule common.conservative).
        "conservative": list(dict.fromkeys([*ctx.conservative, *table_unknowns(config)])),
        "version": config.version,
        "summary": (
            f"{ctx.isolation.value}; "
            + (f"partitioned by {', '.join(partitions)}" if partitions else "not partitioned")
            + f"; deletion vectors {'on' if config.deletion_vectors_enabled else 'off'}"
            + f"; row-level concurrency {'yes' if row_level['enabled'] else 'no'}"
        ),
    }


def _operation(op_json: str) -> Operation | None:
    try:
        return codec.operation_from_json(json.loads(op_json))
    except (ValueError, KeyError):
        return None


def _describe_op(op_json: str) -> str:
    """The operation's kind and scope (``MERGE (t.id = s.id)``), without the label an operator gives it.

    Operators label an operation with the task's app id for their own messages; the UI names the task
    beside the operation already, so the label would hide which kind of write it is.
    """
    op = _operation(op_json)
    return dataclasses.replace(op, label=None).describe() if op is not None else "unknown operation"


def _op_fields(op_json: str) -> dict[str, Any]:
    """``operation`` (kind and scope), ``operation_kind`` and ``operation_label`` (the app id, if any)."""
    op = _operation(op_json)
    return {
        "operation": _describe_op(op_json),
        "operation_kind": op.kind.value if op is not None else None,
        "operation_label": op.label if op is not None else None,
    }


def lease_view(row: LeaseRow, now: float) -> dict[str, Any]:
    """A granted lease: owner, operation, age, and whether it is stale (expired, not yet reclaimed)."""
    return {
        "lease_id": row.lease_id,
        "uri": row.uri,
        "owner": owner_view(row.owner_json),
        **_op_fields(row.op_json),
        "granted_at": iso(row.granted_at),
        "age_s": round(max(0.0, now - row.granted_at), 1),
        "expires_at": iso(row.expires_at),
        "expires_in_s": round(row.expires_at - now, 1),
        "stale": row.expires_at <= now,
        "fencing": row.fencing,
    }


def latest_waits(
    decisions: Iterable[DecisionRow], requests: Mapping[str, RequestRow] | None = None
) -> dict[str, dict[str, Any]]:
    """The current wait answer per request id: the request row's ``last_wait`` (rewritten on every poll)
    when there is one, else the newest logged ``wait`` (logged when queued and when a new blocker appears).
    """
    latest: dict[str, tuple[float, dict[str, Any]]] = {}
    for row in decisions:
        if row.kind != "wait":
            continue
        if row.request_id not in latest or latest[row.request_id][0] < row.at:
            latest[row.request_id] = (row.at, _detail(row))
    waits = {rid: detail for rid, (_, detail) in latest.items()}
    for rid, request in (requests or {}).items():
        if request.status == "waiting" and request.last_wait:
            try:
                waits[rid] = wait_detail(waiting_from_json(rid, request.expires_at, request.last_wait))
            except (ValueError, KeyError, TypeError):
                continue  # an unreadable stored answer: the logged one stands
    return waits


def _detail(row: DecisionRow) -> dict[str, Any]:
    try:
        detail = json.loads(row.detail)
    except ValueError:
        return {}
    return detail if isinstance(detail, dict) else {}


def waiter_view(
    row: WaiterRow, now: float, wait: Mapping[str, Any] | None, request: RequestRow | None
) -> dict[str, Any]:
    """A queued request with its blockers and the model's reasons (from its newest wait decision)."""
    wait = wait or {}
    enqueued = request.enqueued_at if request is not None else None
    return {
        "request_id": row.request_id,
        "uri": row.uri,
        "owner": owner_view(row.owner_json),
        **_op_fields(row.op_json),
        "waiting_s": round(now - enqueued, 1) if enqueued is not None else None,
        "position": wait.get("position"),
        "blockers": list(wait.get("blockers", ())),
        "reasons": list(wait.get("reasons", ())),
        "advice": list(wait.get("advice", ())),
        "exceptions": list(wait.get("exceptions", ())),
        "explain": wait.get("explain"),
        "abandoned": row.expires_at <= now,
    }


def table_summary(
    row: TableRow,
    profile: EngineProfile,
    leases: Sequence[LeaseRow],
    waiters: Sequence[WaiterRow],
    waits: Mapping[str, Mapping[str, Any]],
    requests: Mapping[str, RequestRow],
    now: float,
) -> dict[str, Any]:
    """One table for the Tables page."""
    return {
        "uri": row.uri,
        "name": short_name(row.uri),
        "fencing": row.fencing,
        "config": config_words(config_from_row(row), profile),
        "leases": [lease_view(lease, now) for lease in leases],
        "waiting": [
            waiter_view(w, now, waits.get(w.request_id), requests.get(w.request_id)) for w in waiters
        ],
    }


def matrix_view(config: TableConfig | None, profile: EngineProfile) -> dict[str, Any]:
    """The operation x operation grid for the table's configuration and engine (a default table if unknown)."""
    matrix = conflict_matrix(config or TableConfig(), profile)
    labels = matrix.labels()
    rows = []
    for i, row in enumerate(matrix.cells):
        cells = []
        for j, cell in enumerate(row):
            cells.append(
                {
                    "a": labels[i],
                    "b": labels[j],
                    "conflict": cell.conflict,
                    "text": "X " + ",".join(ABBREVIATIONS[e] for e in cell.exceptions)
                    if cell.conflict
                    else "ok",
                    "exceptions": [e.value for e in cell.exceptions],
                    "reason": cell.reason,
                    "rule": cell.rule,
                }
            )
        rows.append({"label": labels[i], "cells": cells})
    return {
        "engine": profile.describe(),
        "assumed_config": config is None,
        "notes": list(matrix.notes),
        "labels": labels,
        "rows": rows,
        "legend": {abbr: exc.value for exc, abbr in ABBREVIATIONS.items()},
    }


def decision_summary(kind: str, detail: Mapping[str, Any]) -> str:
    """One line for a decision-log entry."""
    if kind == "grant":
        waited = detail.get("waited_s")
        text = f"granted {detail.get('operation', '')}".rstrip()
        return text + (f" after waiting {waited:.1f} s" if isinstance(waited, int | float) and waited else "")
    if kind == "wait":
        return str(detail.get("explain") or "waiting")
    if kind == "release":
        if detail.get("stale"):
            return f"stale lease released by {detail.get('by', '?')} via {detail.get('via', '?')}"
        return "withdrawn from the queue" if detail.get("withdrawn") else "released"
    if kind == "expiry":
        return "lease expired (its holder stopped heartbeating) and was reclaimed"
    if kind == "abandon":
        return "queue entry abandoned (its owner stopped asking)"
    if kind == "refuse":
        return str(detail.get("reason") or "refused")
    if kind == "unfenced_overrun":
        return f"possibly written outside its lease: {detail.get('reason') or 'the lease was lost'}"
    return kind


def decision_view(row: DecisionRow) -> dict[str, Any]:
    detail = _detail(row)
    return {
        "at": row.at,
        "at_iso": iso(row.at),
        "kind": row.kind,
        "request_id": row.request_id,
        "uri": row.uri,
        "table": short_name(row.uri),
        "owner": owner_view(row.owner_key),
        "summary": decision_summary(row.kind, detail),
        "detail": detail,
    }


def timeline(decisions: Iterable[DecisionRow], now: float) -> dict[str, Any]:
    """Recent writes on a table: one row per writer (request), a waiting bar and a writing bar.

    Waiting runs from the first logged wait (or ``grant.at - waited_s``) to the grant; writing from the
    grant to the release or expiry, or to ``now`` while the lease is held. Positions are percentages of the
    window from the earliest start to the latest end.
    """
    per: dict[str, dict[str, Any]] = {}
    for row in sorted(decisions, key=lambda r: r.at):
        entry = per.setdefault(
            row.request_id,
            {
                "request_id": row.request_id,
                "owner": owner_view(row.owner_key),
                "wait_from": None,
                "granted": None,
                "ended": None,
                "end_kind": None,
            },
        )
        detail = _detail(row)
        if row.kind == "wait" and entry["wait_from"] is None and entry["granted"] is None:
            entry["wait_from"] = row.at
        elif row.kind == "grant":
            entry["granted"] = row.at
            waited = detail.get("waited_s")
            if isinstance(waited, int | float) and waited > 0:
                start = row.at - float(waited)
                entry["wait_from"] = min(entry["wait_from"] or start, start)
        elif row.kind in ("release", "expiry", "abandon") and entry["ended"] is None:
            entry["ended"] = row.at
            entry["end_kind"] = row.kind
    rows = []
    for entry in per.values():
        start = entry["wait_from"] if entry["wait_from"] is not None else entry["granted"]
        if start is None:
            continue
        end = entry["ended"] if entry["ended"] is not None else now
        rows.append({**entry, "start": start, "end": end})
    if not rows:
        return {"rows": [], "window": None}
    t0 = min(r["start"] for r in rows)
    t1 = max(max(r["end"] for r in rows), t0 + 1.0)
    span = t1 - t0

    def pct(a: float, b: float) -> dict[str, float]:
        return {"left": round(100 * (a - t0) / span, 2), "width": round(max(0.3, 100 * (b - a) / span), 2)}

    out = []
    for r in sorted(rows, key=lambda r: r["start"]):
        granted = r["granted"]
        wait_end = granted if granted is not None else r["end"]
        bars = []
        if r["wait_from"] is not None and wait_end > r["wait_from"]:
            bars.append(
                {
                    "kind": "waiting",
                    "seconds": round(wait_end - r["wait_from"], 1),
                    **pct(r["wait_from"], wait_end),
                }
            )
        if granted is not None:
            bars.append(
                {
                    "kind": "writing",
                    "seconds": round(r["end"] - granted, 1),
                    **pct(granted, r["end"]),
                    "open": r["ended"] is None,
                }
            )
        out.append(
            {"request_id": r["request_id"], "owner": r["owner"], "bars": bars, "end_kind": r["end_kind"]}
        )
    return {"rows": out, "window": {"from": iso(t0), "to": iso(t1), "seconds": round(span, 1)}}


def claims_of(request: RequestRow | None) -> dict[str, dict[str, Any]]:
    """The tables a request claims, by URI (empty for a missing or unreadable request)."""
    if request is None:
        return {}
    try:
        return {c["uri"]: c for c in json.loads(request.payload).get("claims", ())}
    except (ValueError, KeyError, TypeError):
        return {}


def _blocker_rules(
    mine: Mapping[str, Any] | None,
    blockers: Sequence[Mapping[str, Any]],
    blocker_requests: Mapping[str, RequestRow],
    table_configs: Mapping[str, TableConfig | None],
) -> list[dict[str, Any]]:
    """Each blocker with who it is and why it conflicts with this request, from the conflict model.

    Adds ``who`` (the blocking task's identity: ``dag_id``, ``run_id``, ``task_id``, ``map_index``,
    ``try_number``, when its request is still in the store), and, when both requests' claims are known,
    ``rule``, ``rule_reason`` (the full reason), ``rule_advice`` (the rule's advice as written), ``why``
    (one line) and ``changes`` (``kind`` and ``text``) from :func:`deltaguard.core.remedies.explain_verdict`.
    """
    out = []
    for b in blockers:
        entry = dict(b)
        uri = str(b.get("table", ""))
        other = blocker_requests.get(str(b.get("id", "")))
        entry["who"] = owner_view(other.owner_key) if other is not None else None
        other_claim = _claim(other, uri) if other is not None else None
        my_claim = (mine or {}).get(uri)
        if my_claim is not None and other_claim is not None:
            config = table_configs.get(uri)
            if config is None and my_claim.get("config"):
                config = codec.config_from_json(my_claim["config"])
            profile = codec.profile_from_json(my_claim["profile"])
            # without the operators' labels, so the texts name each write by its kind and scope
            mine_op = dataclasses.replace(codec.operation_from_json(my_claim["operation"]), label=None)
            other_full = codec.operation_from_json(other_claim["operation"])
            other_op = dataclasses.replace(other_full, label=None)
            verdict = pair_verdict(mine_op, other_op, config or TableConfig(), profile)
            explained = explain_verdict(verdict, mine_op, other_op, config or TableConfig(), profile)
            entry.update(
                {
                    # the stored text names the operator's label; the kind is what the reader needs
                    "operation": other_op.describe(),
                    "operation_label": other_full.label,
                    "rule": verdict.rule,
                    "rule_reason": verdict.reason,
                    "rule_advice": list(verdict.advice),
                    "conflict": verdict.conflict,
                    "engine": profile.describe(),
                    "why": explained.why,
                    "changes": [c.to_json() for c in explained.changes],
                }
            )
        out.append(entry)
    return out


def explain_blockers(
    request: RequestRow | None,
    blockers: Sequence[Mapping[str, Any]],
    blocker_requests: Mapping[str, RequestRow],
    table_configs: Mapping[str, TableConfig | None],
) -> list[dict[str, Any]]:
    """:func:`_blocker_rules` for a waiting request given by its row (the Tables page's queue)."""
    return _blocker_rules(claims_of(request), blockers, blocker_requests, table_configs)


#: when the log kept no wait entry naming the blockers (pruned, or the task waited before logging them)
_UNNAMED = "writers the decision log no longer names"


def _blocker_name(blocker: Mapping[str, Any]) -> str:
    """A blocker as ``dag.task[map] (run)``, or its stored description when its request is gone."""
    who = blocker.get("who")
    if isinstance(who, Mapping) and who.get("task_id"):
        return f"{who.get('describe')} ({who.get('run_id')})"
    return str(blocker.get("owner", "?"))


def task_decision(
    task: Mapping[str, Any],
    decisions: Sequence[DecisionRow],
    requests: Mapping[str, RequestRow],
    table_configs: Mapping[str, TableConfig | None],
    now: float,
) -> dict[str, Any]:
    """What deltaguard decided for one task instance: granted or waited, how long, behind whom, why.

    :param task: ``dag_id``, ``run_id``, ``task_id``, ``map_index`` (and ``try_number`` if known).
    :param decisions: the decision-log entries of the task instance's tries (any order).
    :param requests: request rows of this task's requests and of its blockers, by id.
    :param table_configs: the shared configuration of each table involved.
    :param now: the current time.
    """
    by_request: dict[str, list[DecisionRow]] = {}
    for row in sorted(decisions, key=lambda r: r.at):
        by_request.setdefault(row.request_id, []).append(row)
    attempts: list[dict[str, Any]] = []
    for request_id, rows in by_request.items():
        owner = owner_view(rows[0].owner_key)
        request = requests.get(request_id)
        mine: dict[str, Any] = {}
        if request is not None:
            try:
                mine = {c["uri"]: c for c in json.loads(request.payload).get("claims", ())}
            except ValueError:
                mine = {}
        waits = [r for r in rows if r.kind == "wait"]
        grants = [r for r in rows if r.kind == "grant"]
        ends = [r for r in rows if r.kind in ("release", "expiry", "abandon", "refuse")]
        grant_detail = _detail(grants[0]) if grants else {}
        waited_s = grant_detail.get("waited_s")
        if waited_s is None and waits:
            waited_s = round((grants[0].at if grants else now) - waits[0].at, 1)
        status = (
            "granted"
            if grants
            else ("waiting" if request is not None and request.status == "waiting" else "not granted")
        )
        wait_steps = []
        for w in waits:
            detail = _detail(w)
            blockers = _blocker_rules(mine, detail.get("blockers", ()), requests, table_configs)
            wait_steps.append(
                {
                    "at": iso(w.at),
                    "table": short_name(w.uri),
                    "uri": w.uri,
                    "position": detail.get("position"),
                    "explain": detail.get("explain"),
                    "blockers": blockers,
                    "reasons": list(detail.get("reasons", ())),
                    "advice": list(detail.get("advice", ())),
                    "exceptions": list(detail.get("exceptions", ())),
                }
            )
        attempts.append(
            {
                "request_id": request_id,
                "try_number": owner.get("try_number"),
                "owner": owner,
                "status": status,
                "request_status": request.status if request is not None else None,
                "waited": bool(waits),
                "waited_s": waited_s,
                "granted_at": iso(grants[0].at) if grants else None,
                "ended": [decision_view(e) for e in ends],
                "operations": {
                    uri: dataclasses.replace(codec.operation_from_json(c["operation"]), label=None).describe()
                    for uri, c in mine.items()
                },
                "waits": wait_steps,
                "log": [decision_view(r) for r in rows],
            }
        )
    attempts.sort(key=lambda a: (a["try_number"] or 0, a["granted_at"] or ""))
    latest: dict[str, Any] | None = attempts[-1] if attempts else None
    if latest is None:
        headline = (
            "no deltaguard decision recorded for this task instance (it took no lease, or the log was pruned)"
        )
    elif latest["status"] == "granted" and latest["waited"]:
        behind = sorted({_blocker_name(b) for w in latest["waits"] for b in w["blockers"]})
        headline = f"granted after waiting {latest['waited_s']:.1f} s behind {', '.join(behind) or _UNNAMED}"
    elif latest["status"] == "granted":
        headline = "granted at once: nothing running or queued could conflict"
    elif latest["status"] == "waiting":
        behind = sorted(
            {_blocker_name(b) for b in (latest["waits"][-1]["blockers"] if latest["waits"] else [])}
        )
        headline = f"waiting behind {', '.join(behind) or _UNNAMED}"
    else:
        headline = f"not granted ({latest['request_status'] or 'unknown'})"
    return {"task": dict(task), "headline": headline, "attempts": attempts}


def _cause_key(blocker: Mapping[str, Any]) -> str:
    return str(
        blocker.get("why") or blocker.get("rule_reason") or f"{blocker.get('operation', '?')} runs first"
    )


def group_by_cause(waiting: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The queue's blockers grouped by cause, so each cause is said once for all the writes it holds back.

    A cause is the model's one-line reason (``why``) a blocker conflicts with a waiter; its group names
    the blockers that give it and the waiters it holds back, with the changes the model checked (the same
    for every pair of the group, since the pairs are judged alike).

    :param waiting: waiter views whose blockers went through :func:`explain_blockers`.
    """
    groups: dict[str, dict[str, Any]] = {}
    for waiter in waiting:
        for blocker in waiter.get("blockers", ()):
            key = _cause_key(blocker)
            group = groups.setdefault(
                key,
                {
                    "why": key,
                    "rule": blocker.get("rule"),
                    "rule_reason": blocker.get("rule_reason"),
                    "changes": list(blocker.get("changes", ())),
                    "blockers": {},
                    "waiters": {},
                },
            )
            group["blockers"].setdefault(
                str(blocker.get("id")),
                {
                    "id": blocker.get("id"),
                    "owner": blocker.get("owner"),
                    "who": blocker.get("who"),
                    "kind": blocker.get("kind"),
                    "operation": blocker.get("operation"),
                    "operation_label": blocker.get("operation_label"),
                    "table": short_name(str(blocker.get("table", ""))),
                },
            )
            group["waiters"].setdefault(
                str(waiter.get("request_id")),
                {
                    "request_id": waiter.get("request_id"),
                    "owner": waiter.get("owner"),
                    "operation": waiter.get("operation"),
                },
            )
    out = [
        {**g, "blockers": list(g["blockers"].values()), "waiters": list(g["waiters"].values())}
        for g in groups.values()
    ]
    out.sort(key=lambda g: -len(g["waiters"]))
    return out
