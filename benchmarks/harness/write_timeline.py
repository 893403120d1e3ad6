"""Where each write of a kept deltaguard benchmark run spent its time, from queued to release.

:mod:`benchmarks.harness.handoff_trace` splits one hand-off; this module follows every write of a run through
the points the run leaves behind, outside the tasks' own timing:

* **queued**: the scheduler first tried to enqueue it (``scheduler.log``);
* **start 1 / start 2**: a worker started it (``::group::Pre Execute`` in its task log), the second time
  after a deferral;
* **asked, granted, released**: its request's first decision, its grant and its release (the lease store's
  decision log, matched by the owner's ``task_id``);
* **deferred, fired**: it paused as deferred (task log), its trigger fired (trigger log);
* **first byte, commit**: the timed engine's attempt (the benchmark's attempt log).

Each write's span from queued to release is cut into five parts that sum to it:

a. ``write_s``: first byte to commit, the write itself;
b. ``conflict_s``: asked to granted, waiting for a conflicting holder (the deferral's exit included);
c. ``slot_s``: queued to first start, waiting for a worker slot before any lease;
d. ``granted_s``: granted to the second start, holding a lease while the trigger, the scheduler and a free
   worker bring the task back (zero for a write that waited in its worker);
e. ``overhead_s``: the rest: process start and DAG parse to the first question, the resumed start to the
   first byte, commit to release.

``python -m benchmarks.harness.write_timeline WORK_DIR [--slots N]`` prints the table, the sums and the
occupancy of the worker slots for a run kept with ``--keep --work-dir WORK_DIR``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.harness.handoff_trace import enqueue_times, task_log_events

#: the five parts of a write's span, in the order they are reported
PARTS: tuple[str, ...] = ("write_s", "conflict_s", "slot_s", "granted_s", "overhead_s")


@dataclass(frozen=True)
class WritePoints:
    """What the run recorded of one write, in seconds since the epoch (``None``: not recorded).

    :param write: the write (its task id).
    :param queued: first enqueue by the scheduler.
    :param starts: every worker start of the task, in order.
    :param worker_ends: the end of each worker stint (its last log line), one per start.
    :param asked: the request's first decision.
    :param waited: whether the request was ever told to wait.
    :param deferred: when the task paused as deferred.
    :param granted: when its lease was granted.
    :param fired: when its trigger fired.
    :param enqueued_again: the scheduler's first enqueue after the trigger fired.
    :param first_byte: the write's attempt start.
    :param commit: the write's attempt end.
    :param released: the lease's release.
    """

    write: str
    queued: float
    starts: tuple[float, ...]
    worker_ends: tuple[float, ...]
    asked: float
    waited: bool
    deferred: float | None
    granted: float
    fired: float | None
    enqueued_again: float | None
    first_byte: float
    commit: float
    released: float


def parts(p: WritePoints) -> dict[str, float]:
    """The five parts of a write's span (see the module docstring); they sum to ``released - queued``."""
    start1 = p.starts[0]
    resumed = p.starts[1] if p.waited and len(p.starts) > 1 else None
    write = p.commit - p.first_byte
    slot = start1 - p.queued
    conflict = (p.granted - p.asked) if p.waited else 0.0
    granted = (resumed - p.granted) if resumed is not None else 0.0
    if resumed is not None:
        overhead = (p.asked - start1) + (p.first_byte - resumed)
    elif p.waited:  # waited in its worker
        overhead = (p.asked - start1) + (p.first_byte - p.granted)
    else:
        overhead = p.first_byte - start1
    overhead += p.released - p.commit
    return {
        "write_s": write,
        "conflict_s": conflict,
        "slot_s": slot,
        "granted_s": granted,
        "overhead_s": overhead,
    }


def granted_split(p: WritePoints) -> dict[str, float | None]:
    """A resumed write's granted part split at the trigger's event and the scheduler's enqueue."""

    def gap(a: float | None, b: float | None) -> float | None:
        return round(b - a, 2) if a is not None and b is not None else None

    resumed = p.starts[1] if p.waited and len(p.starts) > 1 else None
    return {
        "grant_to_fired_s": gap(p.granted, p.fired),
        "fired_to_enqueued_s": gap(p.fired, p.enqueued_again),
        "enqueued_to_started_s": gap(p.enqueued_again, resumed),
    }


def occupancy(points: Sequence[WritePoints], slots: int, origin: float, end: float) -> dict[str, float]:
    """Worker slot-seconds from ``origin`` to ``end``: the capacity, spent writing, spent otherwise by a
    task (starting, parsing, asking, deferring, waiting in its worker, releasing), and idle."""
    busy = sum(
        max(0.0, min(e, end) - max(s, origin))
        for p in points
        for s, e in zip(p.starts, p.worker_ends, strict=True)
    )
    writing = sum(p.commit - p.first_byte for p in points)
    capacity = slots * (end - origin)
    return {
        "capacity": round(capacity, 1),
        "writing": round(writing, 1),
        "other_busy": round(busy - writing, 1),
        "idle": round(capacity - busy, 1),
    }


def points_of(
    write: str,
    task_events: Sequence[tuple[float, str]],
    trigger_events: Sequence[tuple[float, str]],
    enqueued: Sequence[float],
    decisions: Sequence[tuple[float, str]],
    attempt: Mapping[str, Any],
) -> WritePoints:
    """One write's points from its sorted task and trigger log events, the scheduler's enqueue times, its
    request's decision-log rows ``(at, kind)`` and its successful attempt (``start``, ``end``)."""
    starts = [t for t, e in task_events if "Pre Execute" in e]
    ends = [t for t, e in task_events if e == "::endgroup::"]
    worker_ends = []
    for i, s in enumerate(starts):
        nxt = starts[i + 1] if i + 1 < len(starts) else float("inf")
        worker_ends.append(max([t for t in ends if s <= t < nxt] or [s]))
    fired = next((t for t, e in trigger_events if "Trigger fired event" in e), None)
    kinds = sorted(decisions)
    grant = next(t for t, k in kinds if k == "grant")
    releases = [t for t, k in kinds if k == "release"]
    return WritePoints(
        write=write,
        queued=min([*enqueued, starts[0]]),
        starts=tuple(starts),
        worker_ends=tuple(worker_ends),
        asked=kinds[0][0],
        waited=any(k == "wait" for _, k in kinds),
        deferred=next((t for t, e in task_events if "Pausing task as DEFERRED" in e), None),
        granted=grant,
        fired=fired,
        enqueued_again=next((t for t in sorted(enqueued) if fired is not None and t >= fired), None),
        first_byte=float(attempt["start"]),
        commit=float(attempt["end"]),
        released=releases[-1] if releases else float(attempt["end"]),
    )


def read_run(work: Path, dag_id: str = "bench_deltaguard") -> list[WritePoints]:
    """Every committed write of a kept run (``--keep --work-dir``) on an SQLite lease store."""
    logs = work / "airflow" / "logs"
    plan = json.loads((work / "bench" / f"{dag_id}.json").read_text())
    attempts = {
        a["write"]: a
        for a in (json.loads(line) for line in Path(plan["attempt_log"]).read_text().splitlines() if line)
        if a["outcome"] == "ok"
    }
    enqueued = enqueue_times(logs / "scheduler.log", dag_id)
    decisions: dict[str, list[tuple[float, str]]] = {}
    store = work / "airflow" / "deltaguard_leases.db"
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        for at, kind, owner_key in db.execute("select at, kind, owner_key from dg_decisions"):
            try:
                task = json.loads(owner_key).get("task_id")
            except (ValueError, AttributeError):
                continue
            decisions.setdefault(str(task), []).append((float(at), str(kind)))
    out = []
    for write in sorted(attempts):
        task_events, trigger_events = task_log_events(logs, dag_id, write)
        out.append(
            points_of(
                write, task_events, trigger_events, enqueued.get(write, []), decisions[write], attempts[write]
            )
        )
    return out


def report(points: Sequence[WritePoints], slots: int) -> dict[str, Any]:
    """The per-write table (times from the first worker start), the sums of the parts, and occupancy."""
    origin = min(p.starts[0] for p in points)
    end = max(p.commit for p in points)
    rows = []
    for p in sorted(points, key=lambda p: p.first_byte):
        rel = {k: (round(v - origin, 1) if isinstance(v, float) else v) for k, v in asdict(p).items()}
        rel["starts"] = [round(s - origin, 1) for s in p.starts]
        rel.pop("worker_ends")
        rows.append({**rel, **{k: round(v, 1) for k, v in parts(p).items()}, **granted_split(p)})
    sums = {k: round(sum(parts(p)[k] for p in points), 1) for k in PARTS}
    return {
        "makespan_s": round(end - origin, 1),
        "writes": rows,
        "sums_s": sums,
        "slot_seconds": occupancy(points, slots, origin, end),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("work", type=Path, help="the kept work directory of one deltaguard run")
    parser.add_argument("--slots", type=int, default=8, help="the run's [core] parallelism")
    parser.add_argument("--dag-id", default="bench_deltaguard")
    args = parser.parse_args(argv)
    json.dump(report(read_run(args.work, args.dag_id), args.slots), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
