"""Where each write of a kept Spark orchestration run spent its engine time: before, in and after its hold.

A write of :mod:`benchmarks.spark_workload` holds its planned duration inside its Spark job, counted from the
moment the job's first row reached the hold function; that moment is in the attempt's marker file
(``bench/holds/<write>-<uuid>``, which holds the deadline: first row + planned duration). With the attempt log
(start and end of the engine's write) each committed attempt splits into three parts that sum to its engine
time:

* ``before_s``: the attempt's start to the first row (table version read, the write's Spark Connect session,
  the hold function's registration, planning, the job's start and its Python worker);
* ``hold_s``: the planned duration;
* ``after_s``: the deadline to the attempt's end (the rest of the job, the commit, finding the commit).

``python -m benchmarks.harness.hold_split WORK_DIR`` prints them per strategy for a run kept with
``--keep --work-dir WORK_DIR``. The strategies run one after another on one Connect server, so the first
writes of the first strategy also carry the server's warm-up.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.bench_dags import STRATEGIES, dag_id_for
from benchmarks.workload_tables import read_attempts


def hold_deadlines(holds: Path) -> dict[str, list[float]]:
    """Every marker's deadline, by write id (a marker is named ``<write>-<uuid>``)."""
    found: dict[str, list[float]] = {}
    if not holds.is_dir():
        return found
    for marker in holds.iterdir():
        write, sep, _ = marker.name.partition("-")
        text = marker.read_text().strip()
        if sep and text:
            found.setdefault(write, []).append(float(text))
    return found


def split(
    attempts: Sequence[Mapping[str, Any]],
    planned_s: Mapping[str, float],
    deadlines: Mapping[str, Sequence[float]],
) -> list[dict[str, Any]]:
    """Each committed attempt cut into before/hold/after its hold, in order of start.

    An attempt's deadline is the one of its write whose hold started within the attempt; an attempt without
    one (no marker: the job never reached its rows) gets ``None`` parts.

    :param planned_s: each write's planned duration.
    """
    rows = []
    for attempt in sorted(attempts, key=lambda a: float(a["start"])):
        if attempt["outcome"] != "ok":
            continue
        write = str(attempt["write"])
        start, end, planned = float(attempt["start"]), float(attempt["end"]), planned_s[write]
        inside = [d for d in deadlines.get(write, ()) if start <= d - planned <= end]
        row: dict[str, Any] = {"write": write, "engine_s": round(end - start, 2)}
        if len(inside) == 1:
            first_row = inside[0] - planned
            row.update(
                before_s=round(first_row - start, 2), hold_s=planned, after_s=round(end - inside[0], 2)
            )
        else:
            row.update(before_s=None, hold_s=planned, after_s=None)
        rows.append(row)
    return rows


def read_run(work: Path, strategies: Sequence[str] = STRATEGIES) -> dict[str, list[dict[str, Any]]]:
    """:func:`split` of every strategy of a kept run."""
    bench = work / "bench"
    deadlines = hold_deadlines(bench / "holds")
    out: dict[str, list[dict[str, Any]]] = {}
    for strategy in strategies:
        plan = bench / f"{dag_id_for(strategy)}.json"
        if not plan.exists():
            continue
        writes = json.loads(plan.read_text())["workload"]["writes"]
        planned = {str(w["id"]): float(w["duration_s"]) for w in writes}
        out[strategy] = split(read_attempts(bench / f"{strategy}.jsonl"), planned, deadlines)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", type=Path, help="the kept work directory of one Spark orchestration run")
    args = parser.parse_args(argv)
    print(json.dumps(read_run(args.work), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
