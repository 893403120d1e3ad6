"""Cost of judging two data-aware MERGE claims (ADR 0019): ``pair_verdict`` of two MERGEs whose
``t.date IN (...)`` lists hold N disjoint dates each, N = 10, 100, 1,000; 7 pairs per N, cold (parse caches
cleared) and warm (the lease manager's memo keeps parsed claims). Dates fixed before measuring.

    .venv/bin/python -m benchmarks.bench_merge_scope_model   # writes benchmarks/results/merge_scope_model.json
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import time
from pathlib import Path

from deltaguard.core.merge_scope import KeySummary, ScopeLimits, plan_merge_scope
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.sql import columns, literal_columns, predicates, row_level
from deltaguard.core.table_config import TableConfig

TABLE = TableConfig(partition_columns=("date",))
PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")
PAIRS = 7


def _merge(start: int, count: int) -> Operation:
    days = tuple((dt.date(2000, 1, 1) + dt.timedelta(days=start + i)).isoformat() for i in range(count))
    scope = plan_merge_scope(
        matched={"date": "date"},
        inserted={"date": "date"},
        partition_columns=("date",),
        summaries={"date": KeySummary("date", days)},
        limits=ScopeLimits(),
    )
    return Operation(
        OperationKind.MERGE,
        merge_condition=f"(t.id = s.id AND t.date = s.date) AND ({scope.conjunct('t')})",
        inserts=scope.inserted_predicate(),
    )


def _ms(runs: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(runs) * 1e3, 3), "worst_ms": round(max(runs) * 1e3, 3)}


def main() -> None:
    results = {}
    for count in (10, 100, 1000):
        cold, warm = [], []
        for k in range(PAIRS):
            a, b = _merge(k * 3 * count, count), _merge(k * 3 * count + count, count)
            for module in (predicates, columns, literal_columns, row_level):
                for name in dir(module):
                    if name.endswith("_cached"):
                        getattr(module, name).cache_clear()
            started = time.perf_counter()
            verdict = pair_verdict(a, b, TABLE, PROFILE)
            cold.append(time.perf_counter() - started)
            started = time.perf_counter()
            pair_verdict(a, b, TABLE, PROFILE)
            warm.append(time.perf_counter() - started)
            assert not verdict.conflict
        results[str(count)] = {"cold": _ms(cold), "warm": _ms(warm)}
    out = {
        "command": ".venv/bin/python -m benchmarks.bench_merge_scope_model",
        "pairs": PAIRS,
        "results": results,
    }
    Path("benchmarks/results/merge_scope_model.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
