"""How fast the UI's JSON layer answers on a lease store with 10,000 decisions (SQLite, one table).

Run as a script (writes ``benchmarks/results/ui.json``)::

    .venv/bin/python benchmarks/bench_ui.py

or through pytest-benchmark::

    .venv/bin/python -m pytest benchmarks/bench_ui.py --benchmark-only

Measures :mod:`deltaguard.plugins.service` (store reads plus view models, what every endpoint and page
does before rendering), not the HTTP layer. The store holds the example scenario of ``tests/ui`` plus
10,000 ``wait`` decisions of one task on the busiest table, 200 tables and their configurations.
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from deltaguard.leases.store import DecisionRow
from deltaguard.plugins import service
from deltaguard.plugins.reads import UiReader
from tests.ui.scenario import CUSTOMERS, RUN, build

RESULTS = Path(__file__).with_name("results") / "ui.json"
DECISIONS = 10_000
EXTRA_TABLES = 200


def filled_reader(directory: Path) -> UiReader:
    scenario = build(directory)
    store = scenario.manager.store
    owner_key = scenario.manager.leases(CUSTOMERS)[0].owner.key
    start = time.time() - DECISIONS
    with store.transaction([CUSTOMERS]) as txn:
        txn.log(
            [
                DecisionRow(start + i, "wait", f"bulk-{i}", CUSTOMERS, owner_key, '{"explain": "bulk"}')
                for i in range(DECISIONS)
            ]
        )
    with store.transaction([f"file:///data/extra_{i:03d}" for i in range(EXTRA_TABLES)]):
        pass
    return UiReader(store)


def workloads(reader: UiReader) -> dict[str, Callable[[], Any]]:
    return {
        "tables_page_50": lambda: service.tables(reader, limit=50),
        "table_detail_busy_table": lambda: service.table_detail(reader, CUSTOMERS),
        "decisions_page_500": lambda: service.decisions(reader, limit=500),
        "decisions_page_500_of_table": lambda: service.decisions(reader, uri=CUSTOMERS, limit=500),
        "task_decision_10000_logged": lambda: service.task_instance_decision(
            reader, dag_id="daily_sales", run_id=RUN, task_id="merge_a"
        ),
    }


def _time(fn: Callable[[], Any], repeat: int = 15) -> dict[str, float]:
    fn()  # warm caches (SQLite pages, the model's parsers)
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": round(statistics.median(samples), 2), "max_ms": round(max(samples), 2)}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        reader = filled_reader(Path(tmp))
        try:
            results = {
                "what": f"deltaguard.plugins.service on SQLite with {DECISIONS} decisions, {EXTRA_TABLES + 3} tables",
                "python": platform.python_version(),
                "machine": platform.machine(),
                "workloads": {name: _time(fn) for name, fn in workloads(reader).items()},
            }
        finally:
            reader.store.close()
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


def test_ui_service_with_10000_decisions(benchmark: Any, tmp_path: Path) -> None:
    reader = filled_reader(tmp_path)
    try:
        fns = workloads(reader)
        answer = benchmark(fns["task_decision_10000_logged"])
        assert sum(len(a["log"]) for a in answer["attempts"]) <= 500
    finally:
        reader.store.close()


if __name__ == "__main__":
    main()
