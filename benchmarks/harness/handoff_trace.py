"""Where a lease hand-off's Airflow part goes, read from the logs Airflow itself wrote.

:mod:`benchmarks.harness.handoff` measures grant → first byte from the decision log and the timed engine;
this module splits that span at the points Airflow logs on its own, for one kept ``AIRFLOW_HOME/logs``:

1. **grant → trigger fired**: the deferred task's trigger noticed the grant (``Trigger fired event`` in the
   task's ``attempt=N.log.trigger.<id>.log``);
2. **fired → enqueued**: the scheduler handed the task to its executor again (``Trying to enqueue tasks``
   naming it, in ``scheduler.log``);
3. **enqueued → started**: the executor gave it a worker (the next ``::group::Pre Execute`` in the task's
   ``attempt=N.log``); with the LocalExecutor this is the wait for a free one of ``parallelism`` workers;
4. **started → parsed**: the worker parsed the DAG file (``Worker startup parse complete``);
5. **parsed → first byte**: the operator's own work before the write opens the table.

A stage whose log line is missing is ``None``; the stages then do not sum to the whole.

``python -m benchmarks.harness.handoff_trace AIRFLOW_HOME/logs RESULTS_JSON [--seed N]`` prints the split for
a run whose logs were kept: one seed of ``orchestration_sweep.json``, or a single-run results file with its
own ``handoff_pairs`` (``orchestration.json``, ``orchestration_spark.json``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.harness.handoff import quantiles

#: the stages, in order, each named by the event that ends it
STAGES: tuple[str, ...] = (
    "grant_to_trigger_fired",
    "trigger_fired_to_enqueued",
    "enqueued_to_started",
    "started_to_parsed",
    "parsed_to_first_byte",
)

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?)(Z|\+00:00)?")


def _epoch(stamp: str) -> float | None:
    match = _STAMP.match(stamp)
    if not match:
        return None
    return datetime.fromisoformat(match.group(1).replace(" ", "T") + "+00:00").timestamp()


def _json_events(path: Path) -> Iterator[tuple[float, str]]:
    """``(time, event)`` of a structured task or trigger log, skipping lines that are not JSON."""
    for line in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        at = _epoch(str(entry.get("timestamp", "")))
        if at is not None:
            yield at, str(entry.get("event", ""))


def _first_after(events: Sequence[tuple[float, str]], text: str, after: float | None) -> float | None:
    if after is None:
        return None
    return next((at for at, event in events if at >= after and text in event), None)


def enqueue_times(scheduler_log: Path, dag_id: str) -> dict[str, list[float]]:
    """Every time the scheduler tried to enqueue each task of ``dag_id``, from ``scheduler.log``."""
    found: dict[str, list[float]] = {}
    marker = f"<TaskInstance: {dag_id}."
    for line in scheduler_log.read_text(errors="replace").splitlines():
        if "Trying to enqueue tasks" not in line:
            continue
        at = _epoch(line)
        if at is None:
            continue
        for chunk in line.split(marker)[1:]:
            found.setdefault(chunk.split(" ", 1)[0], []).append(at)
    return found


def _task_dirs(logs: Path, dag_id: str, task_id: str) -> list[Path]:
    return sorted((logs / f"dag_id={dag_id}").glob(f"run_id=*/task_id={task_id}"))


def task_log_events(
    logs: Path, dag_id: str, task_id: str
) -> tuple[list[tuple[float, str]], list[tuple[float, str]]]:
    """A task's JSON log events over all its attempts, in time order: ``(task's, its trigger's)``."""
    task_events: list[tuple[float, str]] = []
    trigger_events: list[tuple[float, str]] = []
    for folder in _task_dirs(logs, dag_id, task_id):
        for path in folder.glob("attempt=*.log*"):
            (trigger_events if ".trigger." in path.name else task_events).extend(_json_events(path))
    task_events.sort()
    trigger_events.sort()
    return task_events, trigger_events


def trace(
    logs: Path, dag_id: str, pairs: Sequence[Mapping[str, Any]], enqueued: Mapping[str, list[float]]
) -> list[dict[str, Any]]:
    """The stages of each hand-off.

    :param logs: the kept ``AIRFLOW_HOME/logs``.
    :param dag_id: the DAG whose tasks waited.
    :param pairs: hand-offs as in ``handoff_pairs`` (``task_id``, ``granted_at``, ``first_byte_at``).
    :param enqueued: :func:`enqueue_times` of that DAG.
    """
    out: list[dict[str, Any]] = []
    for pair in pairs:
        task_id, granted, first_byte = (
            str(pair["task_id"]),
            float(pair["granted_at"]),
            float(pair["first_byte_at"]),
        )
        task_events, trigger_events = task_log_events(logs, dag_id, task_id)
        fired = _first_after(trigger_events, "Trigger fired event", granted)
        queued = next(
            (at for at in sorted(enqueued.get(task_id, [])) if fired is not None and at >= fired), None
        )
        started = _first_after(task_events, "Pre Execute", queued)
        parsed = _first_after(task_events, "Worker startup parse complete", started)
        points = (granted, fired, queued, started, parsed, first_byte)
        stages = {
            name: (round(end - start, 2) if start is not None and end is not None else None)
            for name, start, end in zip(STAGES, points, points[1:], strict=False)
        }
        out.append({"task_id": task_id, "grant_to_first_byte_s": round(first_byte - granted, 2), **stages})
    return out


def summarize_stages(traced: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Quantiles of each stage over the traced hand-offs (stages with a missing log line left out)."""
    return {name: quantiles([t[name] for t in traced if t[name] is not None]) for name in STAGES}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", type=Path, help="the kept AIRFLOW_HOME/logs of one seed")
    parser.add_argument("results", type=Path, help="orchestration_sweep.json or a single-run results file")
    parser.add_argument("--seed", type=int, help="the sweep's seed whose logs these are")
    parser.add_argument("--dag-id", default="bench_deltaguard")
    args = parser.parse_args(argv)
    document = json.loads(args.results.read_text())
    if args.seed is not None:
        rows = [r for r in document.get("runs", []) if r["seed"] == args.seed]
        pairs = rows[0].get("handoff_pairs", []) if rows else []
    else:
        pairs = document.get("handoff_pairs", [])
    if not pairs:
        print(f"no hand-off pairs in {args.results} (seed {args.seed})", file=sys.stderr)
        return 1
    traced = trace(args.logs, args.dag_id, pairs, enqueue_times(args.logs / "scheduler.log", args.dag_id))
    print(json.dumps({"handoffs": traced, "stages": summarize_stages(traced)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
