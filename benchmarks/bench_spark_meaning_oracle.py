"""What Spark's evaluator (ADR 0037) adds to one decision on a partitioned delta-spark table.

Run as a script (prints one line per size; nothing is written; a local[1] PySpark session, no Delta jars
needed)::

    .venv/bin/python benchmarks/bench_spark_meaning_oracle.py [--connect]

The same decisions as ``bench_meaning_oracle.py`` (a candidate DELETE of one partition of a table partitioned
by a STRING and an INT column against ``n`` running DELETEs of other partitions; every pair ``no_conflict``,
so every pair is confirmed by the engine). *hand*: without an oracle; *cold*: a fresh oracle per decision
(nothing cached), each question on a ``newSession()`` as the Spark engine's writes get; *warm*: the same
oracle again. Each figure is the median of three decisions with fresh literals. ``--connect`` asks a local
Spark Connect server (``remote("local[1]")``) instead, one new Connect session per question.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import logging
import os
import statistics
import time
from collections.abc import Iterator
from typing import Any

from deltaguard.core import decide
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.spark.meaning import SparkOracle

_fresh = itertools.count()


def _ops(n: int) -> tuple[Operation, list[Operation]]:
    base = next(_fresh) * 1000
    candidate = Operation(OperationKind.DELETE, predicate=f"s = 'c{base}' AND k = {base}")
    running = [
        Operation(
            OperationKind.DELETE, predicate=f"s = 'r{base + i}' AND k IN ({base + i + 1}, {base + i + 2})"
        )
        for i in range(n)
    ]
    return candidate, running


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--connect", action="store_true", help="ask a local Spark Connect server")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.config("spark.ui.enabled", "false").config(
        "spark.sql.session.timeZone", "UTC"
    )
    spark: Any = (builder.remote("local[1]") if args.connect else builder.master("local[1]")).getOrCreate()
    if not args.connect:
        spark.sparkContext.setLogLevel("ERROR")
    logging.getLogger("py4j").setLevel(logging.WARNING)

    @contextlib.contextmanager
    def like_a_write() -> Iterator[Any]:
        if not args.connect:
            yield spark.newSession()
            return
        from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

        own = RemoteSparkSession.builder.remote("sc://localhost:15002").create()
        try:
            yield own
        finally:
            own.client.release_session()
            own.client.close()

    config = TableConfig(
        partition_columns=("s", "k"),
        column_types=(("s", "string"), ("k", "integer"), ("id", "long")),
        exists=True,
        uri="/bench",
    )
    profile = EngineProfile(EngineName.DELTA_SPARK, "4.4.0", session_ansi=True, session_time_zone="UTC")
    hand = config
    first = dataclasses.replace(config, meaning=SparkOracle.for_table(config, like_a_write))
    decide(*_ops(1), first, profile)  # the first query's code generation is not a decision's cost
    for n in (1, 10, 50):
        figures: dict[str, list[float]] = {"hand": [], "cold": [], "warm": []}
        for _ in range(3):
            candidate, running = _ops(n)
            start = time.perf_counter()
            assert not decide(candidate, running, hand, profile).conflict
            figures["hand"].append(time.perf_counter() - start)
            fresh = dataclasses.replace(config, meaning=SparkOracle.for_table(config, like_a_write))
            start = time.perf_counter()
            assert not decide(candidate, running, fresh, profile).conflict
            figures["cold"].append(time.perf_counter() - start)
            start = time.perf_counter()
            decide(candidate, list(running), fresh, profile)
            figures["warm"].append(time.perf_counter() - start)
        print(
            f"{n:>3} running: "
            + ", ".join(f"{name} {1000 * statistics.median(v):.1f} ms" for name, v in figures.items())
            + f", cold per pair {1000 * (statistics.median(figures['cold']) - statistics.median(figures['hand'])) / n:.1f} ms",
            flush=True,
        )
    spark.stop()


if __name__ == "__main__":
    main()
