"""When a LocalExecutor worker saw each task process end, read from a kept Airflow home.

The Task SDK's supervisor logs ``Workload finished`` (``supervisor.py``) once it has reaped the task
process; if the process's sockets closed before it could be reaped, its one check fails and it sleeps
``[workers] min_heartbeat_interval`` (5 s by default) first, and the worker takes no new task meanwhile
(``benchmarks.task_exit_window`` measures that race). Per DAG (strategy), for each task instance that ended
in success: the seconds from its ``end_date`` to the last ``Workload finished`` of its id, listed when at
least ``--late`` seconds; and each task instance whose first start came ``--late`` seconds or more after
it was queued (a worker slot was not free).

Run: ``python -m benchmarks.harness.worker_exit WORK`` (``WORK`` the benchmark's ``--work-dir``, kept with
``--keep``; its ``airflow`` home is read).
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_FINISHED = re.compile(r"^(\S+Z) .*Workload finished .*workload_id=([0-9a-f-]+)")


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=UTC)


def finished_at(log_dir: Path) -> dict[str, datetime]:
    """The last ``Workload finished`` time of each task instance id (hex, no dashes)."""
    seen: dict[str, datetime] = {}
    for log in sorted(log_dir.glob("*.log")):
        with log.open(errors="replace") as fh:
            for line in fh:
                match = _FINISHED.match(line)
                if match:
                    seen[match.group(2).replace("-", "")] = _utc(match.group(1))
    return seen


def worker_exit(home: Path, late_s: float = 1.0) -> dict[str, Any]:
    """Per DAG: stints, ``exit_seen_late`` and ``first_start_waited_for_a_worker`` (see the module)."""
    finished = finished_at(home / "logs")
    db = sqlite3.connect(f"file:{home / 'airflow.db'}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT id, dag_id, task_id, state, queued_dttm, start_date, end_date FROM task_instance"
        ).fetchall()
    finally:
        db.close()
    out: dict[str, Any] = {}
    for ti_id, dag_id, task_id, state, queued, start, end in sorted(rows, key=lambda r: (r[1], r[2])):
        entry = out.setdefault(
            dag_id, {"stints": 0, "exit_seen_late": [], "first_start_waited_for_a_worker": []}
        )
        if state == "success" and end and ti_id in finished:
            entry["stints"] += 1
            late = (finished[ti_id] - _utc(end)).total_seconds()
            if late >= late_s:
                entry["exit_seen_late"].append({"task": task_id, "late_s": round(late, 2)})
        if queued and start:
            waited = (_utc(start) - _utc(queued)).total_seconds()
            if waited >= late_s:
                entry["first_start_waited_for_a_worker"].append({"task": task_id, "s": round(waited, 2)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path, help="the benchmark's kept --work-dir")
    parser.add_argument("--late", type=float, default=1.0)
    args = parser.parse_args(argv)
    print(json.dumps(worker_exit(args.work / "airflow", args.late), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
