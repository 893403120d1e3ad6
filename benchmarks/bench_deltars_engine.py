"""Overhead of DeltaRsEngine over a bare ``write_deltalake`` append, on a small local table.

Run as a script (writes ``benchmarks/results/deltars_engine.json``)::

    .venv/bin/python benchmarks/bench_deltars_engine.py

or through pytest-benchmark::

    .venv/bin/python -m pytest benchmarks/bench_deltars_engine.py --benchmark-only

The engine adds a table load, validation, an idempotency check and a history lookup of its commit id to
every write; this measures what that costs on a table with a short and with a longer log, and what a
recognised duplicate (a retried task) costs.
"""

from __future__ import annotations

import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
from deltalake import write_deltalake

from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.specs import AppendSpec, WriteContext

RESULTS = Path(__file__).with_name("results") / "deltars_engine.json"
ROWS = pa.table({"id": pa.array(range(100), pa.int64()), "day": ["2024-01-01"] * 100})


def _table(root: Path, name: str, history: int) -> str:
    uri = str(root / name)
    for _ in range(history):
        write_deltalake(uri, ROWS, mode="append")
    return uri


def _median_ms(action: Callable[[int], None], repeats: int) -> float:
    samples = []
    for i in range(repeats):
        start = time.perf_counter()
        action(i)
        samples.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(samples), 2)


def measure(history: int, repeats: int = 15) -> dict[str, Any]:
    engine = DeltaRsEngine()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bare_uri, engine_uri = _table(root, "bare", history), _table(root, "engine", history)
        bare = _median_ms(lambda i: write_deltalake(bare_uri, ROWS, mode="append"), repeats)
        plain = _median_ms(lambda i: engine.write(engine_uri, AppendSpec(ROWS)), repeats)
        idem = _median_ms(
            lambda i: engine.write(engine_uri, AppendSpec(ROWS), WriteContext(app_id="bench", app_version=i)),
            repeats,
        )
        duplicate = _median_ms(
            lambda i: engine.write(engine_uri, AppendSpec(ROWS), WriteContext(app_id="bench", app_version=0)),
            repeats,
        )
    return {
        "log_versions_before": history,
        "bare_write_deltalake_ms": bare,
        "engine_append_ms": plain,
        "engine_append_with_app_transaction_ms": idem,
        "engine_duplicate_noop_ms": duplicate,
        "overhead_ms": round(plain - bare, 2),
    }


def main() -> None:
    results = {
        "deltalake": deltalake.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cases": [measure(5), measure(100)],
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


# ----------------------------------------------------------------------------- pytest-benchmark entry


def test_engine_append(benchmark: Any, tmp_path: Path) -> None:
    engine = DeltaRsEngine()
    uri = _table(tmp_path, "t", 5)
    result = benchmark(lambda: engine.write(uri, AppendSpec(ROWS)))
    assert result.committed


def test_engine_duplicate(benchmark: Any, tmp_path: Path) -> None:
    engine = DeltaRsEngine()
    uri = _table(tmp_path, "t", 5)
    engine.write(uri, AppendSpec(ROWS), WriteContext(app_id="b", app_version=1))
    result = benchmark(lambda: engine.write(uri, AppendSpec(ROWS), WriteContext(app_id="b", app_version=1)))
    assert result.duplicate


if __name__ == "__main__":
    main()
