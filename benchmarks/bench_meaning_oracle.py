"""What delta-rs' evaluator (ADR 0037) adds to one decision on a partitioned delta-rs table.

Run as a script (prints one line per size; nothing is written)::

    .venv/bin/python benchmarks/bench_meaning_oracle.py

A table partitioned by a STRING and an INT column; a candidate DELETE of one partition decided against
``n`` running DELETEs of other partitions (every pair is ``no_conflict``, so every pair is confirmed by the
engine). *hand*: the configuration without an oracle; *cold*: a fresh oracle per decision (nothing cached);
*warm*: the same oracle again (the scheduler re-checking a queue). Each figure is the median of a few
decisions (fresh predicates for *cold*: new literals every time).
"""

from __future__ import annotations

import dataclasses
import itertools
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from deltaguard.core import decide
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.deltars.meaning import DataFusionOracle

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
    with tempfile.TemporaryDirectory() as scratch:
        uri = str(Path(scratch) / "t")
        data = pa.table(
            {"s": ["a", "b"], "k": pa.array([1, 2], pa.int32()), "id": pa.array([1, 2], pa.int64())}
        )
        write_deltalake(uri, data, partition_by=["s", "k"])
        engine = DeltaRsEngine()
        config = engine.table_config(uri)
        profile = engine.profile()
        assert config.meaning is not None
        hand = dataclasses.replace(config, meaning=None)
        decide(*_ops(1), config, profile)  # DataFusion's first start is not a decision's cost
        for n in (1, 10, 50):
            figures: dict[str, list[float]] = {"hand": [], "cold": [], "warm": []}
            for _ in range(5):
                candidate, running = _ops(n)
                start = time.perf_counter()
                assert not decide(candidate, running, hand, profile).conflict
                figures["hand"].append(time.perf_counter() - start)
                fresh = dataclasses.replace(config, meaning=DataFusionOracle.for_table(config))
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


if __name__ == "__main__":
    main()
