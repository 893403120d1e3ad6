"""How late the scheduler hears that a deferring task's process ended, read from kept scheduler logs.

When a task defers, its process ends and the executor reports the try as a *success*; Airflow 3.3 fails the
task if that report reaches the scheduler after the task was queued again (the trigger fired first:
``deltaguard.leases.waiting.first_event_after_s``). Under the LocalExecutor each task supervisor logs into
the scheduler's log, so one file holds both ends: the task's ``Pausing task as DEFERRED`` record and the
scheduler's ``Received executor event with state success`` for the same task instance and try. This prints,
over every deferral found, the seconds between the two: count, median, 90th and 99th percentiles, worst, and
how many took longer than 5 s (Airflow's default ``[workers] min_heartbeat_interval``).

Run: ``python -m benchmarks.harness.exit_reports LOG [LOG ...] [--out FILE]`` (``LOG`` a ``scheduler.log``
or a folder searched for them, e.g. a benchmark's ``--work-dir`` kept with ``--keep``).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\.\d+)")
_FIELD = re.compile(r"\b(dag_id|task_id|run_id|try_number)=(\S+)")
_EVENT = re.compile(r"dag_id='([^']+)', task_id='([^']+)', run_id='([^']+)', try_number=(\d+)")


def _seconds(line: str) -> float | None:
    match = _STAMP.match(line)
    return datetime.fromisoformat(match.group(1).replace(" ", "T")).timestamp() if match else None


def report_delays(log: Path) -> list[float]:
    """Seconds from each deferral in ``log`` to the scheduler's receipt of its try's exit report."""
    deferred: dict[tuple[str, ...], float] = {}
    delays: list[float] = []
    for line in log.read_text(errors="replace").splitlines():
        at = _seconds(line)
        if at is None:
            continue
        if "Pausing task as DEFERRED" in line:
            fields = dict(_FIELD.findall(line))
            key = tuple(fields.get(k, "") for k in ("dag_id", "task_id", "run_id", "try_number"))
            deferred[key] = at
        elif "Received executor event with state success" in line and (match := _EVENT.search(line)):
            started = deferred.pop(match.groups(), None)
            if started is not None:
                delays.append(at - started)
    return delays


def summary(delays: list[float]) -> dict[str, Any]:
    """Count, median, 90th/99th percentile and worst of ``delays``, and how many exceed 5 s."""
    ordered = sorted(delays)
    if not ordered:
        return {"deferrals": 0}

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "deferrals": len(ordered),
        "median_s": round(statistics.median(ordered), 2),
        "p90_s": round(rank(0.9), 2),
        "p99_s": round(rank(0.99), 2),
        "worst_s": round(ordered[-1], 2),
        "over_5_s": sum(1 for d in ordered if d > 5.0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("logs", nargs="+", type=Path, help="scheduler.log files, or folders holding them")
    parser.add_argument("--out", type=Path, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    files = sorted(
        {f for p in args.logs for f in ([p] if p.is_file() else p.rglob("scheduler.log")) if f.is_file()}
    )
    per_file = {str(f): report_delays(f) for f in files}
    result = {
        "logs": {name: len(delays) for name, delays in per_file.items()},
        **summary([d for delays in per_file.values() for d in delays]),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
