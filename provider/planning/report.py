"""A plan as JSON for tools (stable keys) and as text for a terminal."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from deltaguard.core.table_config import TableConfig
from deltaguard.planning.analysis import POLICIES, Plan, TableReport
from deltaguard.planning.schedule import Because, Schedule

#: the JSON document's format version: a tool reading it checks this first
FORMAT_VERSION = 1

_POLICY_TEXT = {
    "one_slot_pools": "one-slot pools (one write per table at a time)",
    "all_at_once": "everything at once (ignores conflicts: conflicting writes would fail)",
    "deltaguard": "deltaguard (serializes exactly the conflicting writes)",
}


def _config_json(config: TableConfig) -> dict[str, Any]:
    return {
        "partition_columns": list(config.partition_columns),
        "clustering_columns": list(config.clustering_columns),
        "properties": dict(sorted(config.properties.items())),
        "version": config.version,
    }


def _schedule_json(schedule: Schedule) -> dict[str, Any]:
    return {
        "makespan_s": round(schedule.makespan_s, 3),
        "critical_path": [
            {
                "task": step.job,
                "start_s": round(step.start_s, 3),
                "end_s": round(step.end_s, 3),
                "because": step.because.value,
                "after": step.after,
            }
            for step in schedule.critical_path
        ],
        "tasks": [
            {"task": job, "start_s": round(schedule.starts[job], 3), "end_s": round(schedule.ends[job], 3)}
            for job in schedule.starts
        ],
    }


def _table_json(report: TableReport) -> dict[str, Any]:
    return {
        "table": report.table,
        "config_source": report.setting.source,
        "config_note": report.setting.note,
        "engine": report.setting.profile.describe(),
        "config": _config_json(report.setting.config),
        "writes": list(report.writes),
        "side_by_side": [[p.a, p.b] for p in report.side_by_side],
        "serializing": [p.to_json() for p in report.serializing],
        "chain": {
            "tasks": list(report.chain.tasks),
            "seconds": round(report.chain.seconds, 3),
            "exact": report.chain.exact,
        },
    }


def plan_json(plan: Plan) -> dict[str, Any]:
    """The plan as one JSON object (keys are stable across versions of the same ``format``)."""
    return {
        "format": FORMAT_VERSION,
        "dag_id": plan.dag_id,
        "assumptions": list(plan.assumptions),
        "tasks": [
            {
                "task": task.id,
                "task_id": task.task_id,
                "map_index": task.map_index,
                "writes": [
                    {
                        "table": t.table,
                        # described without the label the plan gives it (the task is named beside it)
                        "operation": replace(t.operation, label=None).describe()
                        if t.operation is not None
                        else None,
                        "unknown": t.unknown or None,
                    }
                    for t in task.targets
                ],
                "duration_s": round(task.duration_s, 3),
                "duration_source": task.duration_source,
                "upstream": list(task.upstream),
            }
            for task in plan.tasks
        ],
        "tables": [_table_json(report) for report in plan.tables],
        "makespan": {policy: _schedule_json(plan.schedules[policy]) for policy in POLICIES},
        "lower_bound_s": round(plan.lower_bound_s, 3),
        "all_at_once_conflicting_overlaps": [list(item) for item in plan.unsafe_overlaps],
        "deltaguard_range": _range_json(plan),
    }


def _range_json(plan: Plan) -> dict[str, Any] | None:
    race = plan.race
    if race is None:
        return None
    return {
        "best_s": round(race.best.makespan_s, 3),
        "worst_s": round(race.worst.makespan_s, 3),
        "mean_s": round(race.mean_s, 3),
        "first_to_ask": {table: list(writes) for table, writes in race.candidates.items()},
        "best_first": list(race.best_first),
        "worst_first": list(race.worst_first),
        "best_last": list(race.best_last),
        "worst_last": list(race.worst_last),
        "best_slot_waiters_first": race.best_slot_waiters_first,
        "worst_slot_waiters_first": race.worst_slot_waiters_first,
        "plays": race.plays,
        "exhaustive": race.exhaustive,
    }


def serializing_keys(document: dict[str, Any]) -> set[str]:
    """``table: a <-> b`` of every serializing pair of a plan's JSON (for comparing plans)."""
    return {
        f"{table['table']}: {' <-> '.join(sorted((pair['a'], pair['b'])))}"
        for table in document.get("tables", [])
        for pair in table.get("serializing", [])
    }


def render_text(plan: Plan) -> str:
    """The plan for a terminal: per table the pairs, chains and changes; then the three makespans."""
    lines = [
        f"DAG {plan.dag_id}: {sum(1 for t in plan.tasks if t.targets)} deltaguard writes, {len(plan.tables)} tables"
    ]
    for report in plan.tables:
        setting = report.setting
        config = setting.config
        shape = (
            f"partitioned by {', '.join(config.partition_columns)}"
            if config.partition_columns
            else f"clustered by {', '.join(config.clustering_columns)}"
            if config.clustering_columns
            else "unpartitioned"
        )
        lines += ["", f"Table {report.table}", f"  configuration: {setting.source} ({shape}; {setting.note})"]
        lines.append(f"  rules: {setting.profile.describe()}")
        lines.append(f"  writes: {', '.join(report.writes)}")
        if report.side_by_side:
            lines.append("  may run side by side:")
            lines += [f"    {p.a} + {p.b}" for p in report.side_by_side]
        if report.serializing:
            lines.append("  serialize:")
            for pair in report.serializing:
                exceptions = f" [{', '.join(pair.exceptions)}]" if pair.exceptions else ""
                lines.append(f"    {pair.a} <-> {pair.b}: {pair.why}")
                lines.append(f"      rule {pair.rule}{exceptions}")
                for change in pair.offered:
                    lines.append(f"      would run together if: {change.text}")
                for advice in pair.sequence_advice:
                    lines.append(f"      {advice}")
                if not pair.offered:
                    lines.append(
                        "      no change the model confirms lets them overlap: they run one after the other"
                    )
        if len(report.chain.tasks) > 1:
            bound = "" if report.chain.exact else " (not proven the heaviest)"
            lines.append(
                f"  conflict chain: {' -> '.join(report.chain.tasks)} = {report.chain.seconds:g} s run one after another{bound}"
            )
    lines += ["", "Expected makespan of one run:"]
    for policy in POLICIES:
        lines.append(f"  {_POLICY_TEXT[policy]}: {plan.makespan_s(policy):g} s")
    if plan.unsafe_overlaps:
        shown = ", ".join(f"{a} + {b}" for _, a, b in plan.unsafe_overlaps[:5])
        more = f" and {len(plan.unsafe_overlaps) - 5} more" if len(plan.unsafe_overlaps) > 5 else ""
        lines.append(f"    (everything at once would overlap conflicting writes: {shown}{more})")
    race = plan.race
    if race is not None and race.candidates:
        racing = "; ".join(f"{table}: {', '.join(writes)}" for table, writes in race.candidates.items())
        every = "" if race.exhaustive else ", one table at a time"
        lines.append(
            f"    deltaguard, whichever write asks first for a table ({racing}): "
            f"{race.best.makespan_s:g}-{race.worst.makespan_s:g} s ({race.plays} plays{every})"
        )
    lines.append(f"  lower bound (dependencies, heaviest conflict chain): {plan.lower_bound_s:g} s")
    lines.append("Critical path under deltaguard:")
    for step in plan.schedules["deltaguard"].critical_path:
        waited = {
            Because.START: "starts the run",
            Because.DEPENDENCY: f"after {step.after} (dependency)",
            Because.CONFLICT: f"waits for {step.after} (conflict)",
            Because.WORKER: "waits for a worker slot",
        }[step.because]
        lines.append(f"  {step.start_s:g}-{step.end_s:g} s  {step.job}  {waited}")
    if plan.assumptions:
        lines += ["", "Assumed:"] + [f"  - {a}" for a in plan.assumptions]
    return "\n".join(lines) + "\n"
