"""The JSON layer of the UI: reads through :class:`~deltaguard.plugins.reads.UiReader`, shapes with
:mod:`deltaguard.plugins.views`. Airflow-free; the plugin's JSON endpoints call these functions.
"""

from __future__ import annotations

from typing import Any

from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.store import DecisionRow, LeaseRow, TableRow, WaiterRow
from deltaguard.plugins.queue_notes import annotate_queue, first_positions
from deltaguard.plugins.reads import MAX_TRIES, UiReader, clamp_limit, owner_keys
from deltaguard.plugins.views import (
    DEFAULT_PROFILE,
    config_from_row,
    decision_view,
    explain_blockers,
    group_by_cause,
    latest_waits,
    matrix_view,
    profile_for_table,
    table_summary,
    task_decision,
    timeline,
)


class NotFoundError(LookupError):
    """The table (or other thing) asked for is not in the store."""


def engine_override(engine: str | None, version: str | None) -> EngineProfile | None:
    """A profile chosen by the user (``?engine=databricks&version=14.3``), or ``None``.

    :raises ValueError: for an unknown engine or a malformed version.
    """
    if not engine:
        return None
    try:
        name = EngineName(engine)
    except ValueError:
        raise ValueError(f"unknown engine {engine!r}: use one of {[e.value for e in EngineName]}") from None
    default = {EngineName.DATABRICKS: "15.4", EngineName.DELTA_SPARK: "4.0", EngineName.DELTA_RS: "1.0"}
    return EngineProfile(name, version or default[name])


def _table_profile(reader: UiReader, uri: str, leases: list[Any], waiters: list[Any]) -> EngineProfile:
    """The engine of the newest request on the table: live ones first, then recent grants in the log."""
    ids = [r.lease_id for r in leases] + [w.request_id for w in waiters]
    if not ids:
        ids = [d.request_id for d in reader.decisions(uri=uri, limit=20) if d.kind in ("grant", "wait")]
    return profile_for_table(uri, reader.requests(ids).values()) or DEFAULT_PROFILE


def _explain_queue(
    reader: UiReader,
    summary: dict[str, Any],
    requests: dict[str, Any],
    config: TableConfig | None,
    *,
    profile: EngineProfile,
    leases: list[LeaseRow],
    waiters: list[WaiterRow],
    logged: list[DecisionRow],
    now: float,
) -> None:
    """Give each queued request's blockers their identity and the model's one-line cause and changes,
    group the queue by cause, and add the expected ends of holds and waits and why a later write is ahead.

    :param logged: decision-log entries of the waiters (their first logged positions).
    """
    ids = sorted({str(b.get("id")) for w in summary["waiting"] for b in w["blockers"] if b.get("id")})
    blocker_requests = reader.requests(ids) if ids else {}
    for waiter in summary["waiting"]:
        waiter["blockers"] = explain_blockers(
            requests.get(waiter["request_id"]), waiter["blockers"], blocker_requests, {summary["uri"]: config}
        )
    summary["causes"] = group_by_cause(summary["waiting"])
    everyone = {**blocker_requests, **requests, **reader.requests([r.lease_id for r in leases])}
    annotate_queue(
        summary,
        config=config,
        profile=profile,
        leases=leases,
        waiters=waiters,
        requests=everyone,
        history=reader.holds(summary["uri"]) if leases or waiters else [],
        positions=first_positions(logged),
        now=now,
    )


def waiting(
    reader: UiReader, *, dag_id: str | None = None, run_id: str | None = None, limit: int = 50
) -> dict[str, Any]:
    """Task instances waiting now (of one DAG run, when given), each with whom it waits for and why.

    Looks at the first :data:`~deltaguard.plugins.reads.MAX_LIMIT` tables of the store.
    """
    found: list[dict[str, Any]] = []
    for table in tables(reader, limit=500)["tables"]:
        for waiter in table["waiting"]:
            owner = waiter["owner"]
            if (dag_id and owner.get("dag_id") != dag_id) or (run_id and owner.get("run_id") != run_id):
                continue
            found.append({**waiter, "table": table["name"]})
    found.sort(key=lambda w: -(w["waiting_s"] or 0))
    size = clamp_limit(limit)
    return {"waiting": found[:size], "more": len(found) > size, "causes": group_by_cause(found[:size])}


def tables(reader: UiReader, *, after: str | None = None, limit: int = 50) -> dict[str, Any]:
    """The Tables page: each table's configuration in words, its leases and its queue with blockers."""
    now = reader.clock()
    page = reader.tables(after=after, limit=limit)
    out = []
    for row in page.tables:
        leases = reader.leases(row.uri)
        waiters = reader.waiters(row.uri)
        profile = _table_profile(reader, row.uri, leases, waiters)
        out.append(_summary_with_queue(reader, row, profile, leases, waiters, now))
    return {"tables": out, "next_after": page.next_after, "limit": clamp_limit(limit)}


def _summary_with_queue(
    reader: UiReader,
    row: TableRow,
    profile: EngineProfile,
    leases: list[LeaseRow],
    waiters: list[WaiterRow],
    now: float,
) -> dict[str, Any]:
    """A table's summary with its queue explained: causes, expected starts and queue jumps."""
    requests = reader.requests([w.request_id for w in waiters])
    logged = reader.decisions(owner_keys=[w.owner_key for w in waiters], limit=500)
    summary = table_summary(row, profile, leases, waiters, latest_waits(logged, requests), requests, now)
    _explain_queue(
        reader,
        summary,
        requests,
        config_from_row(row),
        profile=profile,
        leases=leases,
        waiters=waiters,
        logged=logged,
        now=now,
    )
    return summary


def table_detail(
    reader: UiReader,
    uri: str,
    *,
    engine: str | None = None,
    version: str | None = None,
    limit: int = 50,
    before: float | None = None,
) -> dict[str, Any]:
    """The Table page: summary, conflict matrix, recent decisions (paged) and a timeline of writes.

    :raises NotFoundError: the store has never seen ``uri``.
    :raises ValueError: for a bad engine override.
    """
    row = reader.table(uri)
    if row is None:
        raise NotFoundError(f"deltaguard has not seen table {uri!r}")
    now = reader.clock()
    leases = reader.leases(uri)
    waiters = reader.waiters(uri)
    profile = engine_override(engine, version) or _table_profile(reader, uri, leases, waiters)
    decisions = reader.decisions(uri=uri, before=before, limit=limit)
    size = clamp_limit(limit)
    summary = _summary_with_queue(reader, row, profile, leases, waiters, now)
    return {
        "table": summary,
        "matrix": matrix_view(config_from_row(row), profile),
        "decisions": [decision_view(d) for d in decisions],
        "next_before": decisions[-1].at if len(decisions) == size else None,
        "timeline": timeline(decisions, now),
        # writes that may have committed outside their lease: shown above everything else on the page
        "overruns": [decision_view(d) for d in reader.overruns(uri)],
    }


def decisions(
    reader: UiReader, *, uri: str | None = None, before: float | None = None, limit: int = 50
) -> dict[str, Any]:
    """A page of the decision log, newest first (``next_before`` continues it)."""
    rows = reader.decisions(uri=uri, before=before, limit=limit)
    size = clamp_limit(limit)
    return {
        "decisions": [decision_view(d) for d in rows],
        "next_before": rows[-1].at if len(rows) == size else None,
        "limit": size,
    }


def task_instance_decision(
    reader: UiReader,
    *,
    dag_id: str,
    run_id: str,
    task_id: str,
    map_index: int = -1,
    try_number: int | None = None,
) -> dict[str, Any]:
    """The Decision page of one task instance (all its tries up to ``try_number``)."""
    if not (dag_id and run_id and task_id):
        raise ValueError("dag_id, run_id and task_id are required")
    keys = owner_keys(dag_id, run_id, task_id, map_index, MAX_TRIES if try_number is None else try_number)
    rows = reader.decisions(owner_keys=keys, limit=500)
    ids = {r.request_id for r in rows}
    for row in rows:
        if row.kind == "wait":
            blockers = decision_view(row)["detail"].get("blockers", ())
            ids.update(str(b.get("id")) for b in blockers if b.get("id"))
    requests = reader.requests(sorted(ids))
    configs: dict[str, TableConfig | None] = {
        uri: config_from_row(reader.table(uri)) for uri in {r.uri for r in rows}
    }
    task = {
        "dag_id": dag_id,
        "run_id": run_id,
        "task_id": task_id,
        "map_index": map_index,
        "try_number": try_number,
    }
    return task_decision(task, rows, requests, configs, reader.clock())
