"""A write's time in its worker slot outside its write, read from a run of the orchestration benchmark kept
with ``--keep --work-dir WORK_DIR`` (what ``deltaguard plan`` takes as ``--start-s`` and ``--end-s``).

For every write that committed:

* **start-up**: from the worker start of its task (``::group::Pre Execute`` in its task log) to its first
  lease question (the lease store's decision log) under deltaguard, or to its first byte (the timed
  engine's attempt) under one-slot pools, which ask no lease;
* **end**: from its commit to the end of the worker stint in which it wrote (the stint's last log line).

Each is given per write, with the median over the writes and over the writes that started together with
the run's first tasks (within one second of the first start) and the others.

Run: ``python -m benchmarks.slot_times WORK_DIR``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness.handoff_trace import task_log_events
from benchmarks.harness.write_timeline import read_run

#: a task started within this many seconds of the run's first start started with the first tasks
TOGETHER_S = 1.0


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    origin = min(r["start"] for r in rows)
    first = [r for r in rows if r["start"] - origin <= TOGETHER_S]
    later = [r for r in rows if r["start"] - origin > TOGETHER_S]
    return {
        "writes": len(rows),
        "start_up_s": _median([r["start_up_s"] for r in rows]),
        "end_s": _median([r["end_s"] for r in rows]),
        "first_round": {
            "writes": len(first),
            "start_up_s": _median([r["start_up_s"] for r in first]),
            "end_s": _median([r["end_s"] for r in first]),
        },
        "later": {
            "writes": len(later),
            "start_up_s": _median([r["start_up_s"] for r in later]),
            "end_s": _median([r["end_s"] for r in later]),
        },
        "per_write": [
            {**r, "start": round(r["start"] - origin, 2)} for r in sorted(rows, key=lambda r: r["start"])
        ],
    }


def deltaguard_rows(work: Path) -> list[dict[str, Any]]:
    rows = []
    for p in read_run(work, "bench_deltaguard"):
        stint = max(i for i, s in enumerate(p.starts) if s <= p.first_byte)
        rows.append(
            {
                "write": p.write,
                "start": p.starts[0],
                "start_up_s": round(p.asked - p.starts[0], 2),
                "end_s": round(p.worker_ends[stint] - p.commit, 2),
                "deferred": p.waited,
            }
        )
    return rows


def pool_rows(work: Path, dag_id: str = "bench_one_slot_pools") -> list[dict[str, Any]]:
    logs = work / "airflow" / "logs"
    plan = json.loads((work / "bench" / f"{dag_id}.json").read_text())
    attempts = [
        a
        for a in (json.loads(line) for line in Path(plan["attempt_log"]).read_text().splitlines() if line)
        if a["outcome"] == "ok"
    ]
    rows = []
    for attempt in attempts:
        events, _ = task_log_events(logs, dag_id, attempt["write"])
        starts = [t for t, e in events if "Pre Execute" in e]
        start = max(s for s in starts if s <= attempt["start"])
        rows.append(
            {
                "write": attempt["write"],
                "start": start,
                "start_up_s": round(attempt["start"] - start, 2),
                "end_s": round(max(t for t, _ in events) - attempt["end"], 2),
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", type=Path, help="the kept work directory of one benchmark run")
    args = parser.parse_args(argv)
    out: dict[str, Any] = {"deltaguard": _summary(deltaguard_rows(args.work))}
    if (args.work / "bench" / "bench_one_slot_pools.json").exists():
        out["one_slot_pools"] = _summary(pool_rows(args.work))
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
