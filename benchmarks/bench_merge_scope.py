"""Cost of reading a MERGE source's key columns before the lease (ADR 0019).

A Parquet source of ROWS rows and 8 columns with 30 distinct dates: the median and worst of REPEATS runs
of (a) reading the whole source as the write does, (b) the key summary from the Parquet path (column
projection), (c) the key summary of the same data in memory, (d) the write-time check of the source
against the scope. Fixed data (numpy generator state 19), fixed before measuring.

    .venv/bin/python -m benchmarks.bench_merge_scope   # writes benchmarks/results/merge_scope.json
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from deltaguard.core.merge_scope import KeySummary, ScopeLimits, plan_merge_scope
from deltaguard.engines.sources import (
    check_source_in_scope,
    materialize,
    resolve_source,
    source_key_summaries,
)

ROWS = 2_000_000
REPEATS = 7
RNG_STATE = 19


def _data() -> pa.Table:
    rng = np.random.default_rng(RNG_STATE)
    days = np.array([f"2024-01-{d:02d}" for d in range(1, 31)])
    columns: dict[str, Any] = {"id": np.arange(ROWS), "date": days[rng.integers(0, 30, ROWS)]}
    for i in range(3):
        columns[f"n{i}"] = rng.normal(size=ROWS)
        columns[f"s{i}"] = np.char.add("customer-", rng.integers(0, 10**6, ROWS).astype(str))
    return pa.table(columns)


def _time(fn: Any) -> dict[str, float]:
    runs = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return {"median_s": round(statistics.median(runs), 4), "worst_s": round(max(runs), 4)}


def main() -> None:
    data = _data()
    limits = ScopeLimits()
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "source.parquet")
        pq.write_table(data, path)
        summaries = source_key_summaries(path, ["date"], limits)
        scope = plan_merge_scope(
            matched={"date": "date"},
            inserted={"date": "date"},
            partition_columns=("date",),
            summaries=summaries,
            limits=limits,
        )
        assert isinstance(summaries["date"], KeySummary) and (scope.matched or scope.inserted)
        results = {
            "full_read_parquet": _time(lambda: materialize(resolve_source(path))),
            "key_summary_parquet": _time(lambda: source_key_summaries(path, ["date"], limits)),
            "key_summary_in_memory": _time(lambda: source_key_summaries(data, ["date"], limits)),
            "write_time_check": _time(lambda: check_source_in_scope(data, scope)),
        }
    out = {
        "command": ".venv/bin/python -m benchmarks.bench_merge_scope",
        "rows": ROWS,
        "columns": data.num_columns,
        "distinct_dates": 30,
        "repeats": REPEATS,
        "rng_state": RNG_STATE,
        "results": results,
    }
    Path("benchmarks/results/merge_scope.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
