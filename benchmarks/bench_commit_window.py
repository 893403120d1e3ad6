"""The unchecked window of a fenced delta-rs write: from its last lease check to its commit (ADR 0018).

A writer that stops inside this window (a frozen process, a VM pause) and resumes after its lease expired
commits late. The window is measured two ways from the wall-clock time of the fence's last ``check()``: to the commit
file's modification time (``_delta_log/<v>.json``, the instant the commit landed; the file system's
timestamp granularity, a few milliseconds here, can make it slightly negative), and to the return of the
delta-rs call that committed (an upper bound: it includes delta-rs' post-commit work).

Writes, each on a fresh local table of ``--rows`` rows (default 1 M, modest because the machine is
shared), ``--repeats`` times:

* ``append``: ``--rows`` new rows; ``overwrite``: ``--rows`` rows replacing the table;
* ``merge``: a MERGE updating 10 % of the rows (no split exists for it in deltalake 1.6.6: the window is
  detected after the commit instead, so ``before`` and ``after`` take the same path).

``before`` forces the single ``write_deltalake`` call whose source stream runs the check when delta-rs
pulls the last batch (the path before staged commits); ``after`` is the engine as it is (appends and
overwrites staged: files, check, commit).

Run: ``.venv/bin/python -m benchmarks.bench_commit_window --rows 1000000 --repeats 3``
Writes ``benchmarks/results/commit_window.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

from deltaguard.engines.deltars import engine as engine_module
from deltaguard.engines.deltars import ops
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.specs import AppendSpec, MergeSpec, OverwriteSpec, WriteContext

RESULTS = Path(__file__).parent / "results" / "commit_window.json"


class TimedFence:
    """A fence that always holds and notes the wall-clock time of each check."""

    def __init__(self) -> None:
        self.checks: list[float] = []

    def check(self) -> None:
        self.checks.append(time.time())

    def on_lost(self, cancel: Callable[[], None]) -> Callable[[], None]:
        return lambda: None


def _rows(n: int, start: int = 0) -> pa.Table:
    ids = pa.array(range(start, start + n), pa.int64())
    return pa.table(
        {
            "id": ids,
            "country": pc.if_else(pc.equal(pc.bit_wise_and(ids, 1), 0), "DE", "FR"),
            "amount": pc.multiply(ids, 3),
        }
    )


def _spec(case: str, rows: int) -> Any:
    if case == "append":
        return AppendSpec(source=_rows(rows, start=rows))
    if case == "overwrite":
        return OverwriteSpec(source=_rows(rows, start=rows))
    changed = _rows(rows // 10)  # 10 % of the target's ids
    return MergeSpec(source=changed, condition="t.id = s.id", matched_update={"amount": "s.amount + 1"})


def _window(uri: str, version: int, fence: TimedFence) -> float:
    commit = Path(uri) / "_delta_log" / f"{version:020d}.json"
    return os.stat(commit).st_mtime_ns / 1e9 - fence.checks[-1]


def run_once(case: str, rows: int, staged: bool, workdir: str) -> tuple[float, float]:
    """One write; ``(to the commit file, to the call's return)`` in seconds after the last check."""
    uri = tempfile.mkdtemp(dir=workdir)
    write_deltalake(uri, _rows(rows))
    spec = _spec(case, rows)
    fence = TimedFence()
    returned: list[float] = []
    runner = engine_module.RUNNERS.runner(spec)

    def timed(spec: Any, ctx: Any) -> Any:
        metrics = runner.run(spec, ctx)
        returned.append(time.time())
        return metrics

    original = ops.OpContext.staged
    # the runner for this spec type, replaced by the timed one for this write only
    registered = engine_module.RUNNERS._runners
    if not staged:
        ops.OpContext.staged = lambda self, data, partition_by, mode: False  # type: ignore[method-assign]
    try:
        registered[type(spec)] = dataclasses.replace(runner, run=timed)
        result = DeltaRsEngine().write(uri, spec, WriteContext(fence=fence))
    finally:
        registered[type(spec)] = runner
        ops.OpContext.staged = original  # type: ignore[method-assign]
    assert result.version is not None and result.version == DeltaTable(uri).version()
    return _window(uri, result.version, fence), returned[0] - fence.checks[-1]


def _stats(values: list[float]) -> dict[str, Any]:
    return {
        "min_s": round(min(values), 4),
        "median_s": round(statistics.median(values), 4),
        "max_s": round(max(values), 4),
        "all_s": [round(v, 4) for v in values],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    out: dict[str, Any] = {
        "rows": args.rows,
        "repeats": args.repeats,
        "deltalake": deltalake.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)",
        "window": {
            "to_commit_file": "commit file mtime - wall time of the fence's last check (s)",
            "to_call_return": "return of the committing delta-rs call - last check (s), an upper bound",
        },
        "cases": {},
    }
    with tempfile.TemporaryDirectory() as workdir:
        for case in ("append", "overwrite", "merge"):
            entry: dict[str, Any] = {}
            for label, staged in (("before", False), ("after", True)):
                runs = [run_once(case, args.rows, staged, workdir) for _ in range(args.repeats)]
                entry[label] = {
                    "to_commit_file": _stats([r[0] for r in runs]),
                    "to_call_return": _stats([r[1] for r in runs]),
                }
                shown = " ".join(f"{a:.4f}/{b:.4f}" for a, b in runs)
                print(f"{case:9} {label:6} {shown}", flush=True)
            out["cases"][case] = entry
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
