"""Cost of the Spark engine's MERGE scope (ADR 0019): the key read before the lease and the in-job guard.

A Delta table of TABLE_ROWS rows over 30 dates (partitioned by date) and a Parquet source of SOURCE_ROWS
rows over 3 of them (half updates, half inserts). Local Spark with Delta's jars (``local[2]``). Median and
worst of REPEATS runs of (a) the key summary of the source in Spark (``_spark_summaries``), (b) the scoped
MERGE reading the source through its guard, (c) the same MERGE (same conjunct) reading it unguarded.
(b) and (c) alternate on one table, so both meet the same file layout growth. Fixed data (numpy state 23).

    .venv/bin/python -m benchmarks.bench_spark_merge_guard   # writes benchmarks/results/spark_merge_guard.json
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from deltaguard.core.merge_scope import ScopeLimits
from deltaguard.engines.merge_scope import scoped_merge
from deltaguard.engines.sources import _spark_summaries
from deltaguard.engines.spark.engine import SparkEngine
from deltaguard.engines.spark.ops import merge_sql
from deltaguard.engines.spark.source_scope import guarded_source
from deltaguard.engines.spark.target import SparkTarget
from deltaguard.engines.specs import MergeSpec

TABLE_ROWS = 1_000_000
SOURCE_ROWS = 200_000
REPEATS = 5
RNG_STATE = 23
CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.memory": "1g",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
}


def _table(rows: int, dates: list[str], start: int, rng: np.random.Generator) -> pa.Table:
    return pa.table(
        {
            "id": np.arange(start, start + rows),
            "date": np.array(dates)[rng.integers(0, len(dates), rows)],
            "n": rng.normal(size=rows),
            "s": np.char.add("customer-", rng.integers(0, 10**6, rows).astype(str)),
        }
    )


def _stats(samples: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(samples), 3), "worst_s": round(max(samples), 3)}


def main() -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from deltaguard.engines.spark.session import worker_session

    rng = np.random.default_rng(RNG_STATE)
    days = [f"2024-01-{d:02d}" for d in range(1, 31)]
    spark = worker_session(master="local[2]", conf=CONF, app_name="deltaguard-bench")
    engine = SparkEngine(spark)
    with tempfile.TemporaryDirectory() as tmp:
        uri, source_path = str(Path(tmp) / "t"), str(Path(tmp) / "source.parquet")
        spark.createDataFrame(_table(TABLE_ROWS, days, 0, rng).to_pandas()).write.format("delta").partitionBy(
            "date"
        ).save(uri)
        # half the source updates existing ids, half inserts new ones
        source = _table(SOURCE_ROWS, days[:3], TABLE_ROWS - SOURCE_ROWS // 2, rng)
        pq.write_table(source, source_path)
        spec = MergeSpec(
            source=source_path,
            condition="t.id = s.id AND t.date = s.date",
            matched_update_all=True,
            not_matched_insert_all=True,
        )
        scoped, _ = scoped_merge(spec, engine.table_config(uri), engine, limits=ScopeLimits())
        assert scoped.scope_conjunct() == f"t.date IN ({', '.join(repr(d) for d in days[:3])})"
        summary: list[float] = []
        runs: dict[str, list[float]] = {"guarded": [], "unguarded": []}
        for _ in range(REPEATS):
            started = time.perf_counter()
            _spark_summaries(spark.read.parquet(source_path), ["date"], ScopeLimits())
            summary.append(time.perf_counter() - started)
            for kind in ("guarded", "unguarded"):
                df = spark.read.parquet(source_path)
                view = f"source_{uuid.uuid4().hex}"
                (guarded_source(df, scoped) if kind == "guarded" else df).createOrReplaceTempView(view)
                started = time.perf_counter()
                spark.sql(merge_sql(SparkTarget.parse(uri), scoped, view)).collect()
                runs[kind].append(time.perf_counter() - started)
                spark.catalog.dropTempView(view)
    spark.stop()
    out: dict[str, Any] = {
        "table_rows": TABLE_ROWS,
        "source_rows": SOURCE_ROWS,
        "repeats": REPEATS,
        "key_summary_in_spark": _stats(summary),
        "merge_guarded": _stats(runs["guarded"]),
        "merge_unguarded": _stats(runs["unguarded"]),
        "samples": {"summary": summary, **runs},
    }
    Path("benchmarks/results/spark_merge_guard.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
