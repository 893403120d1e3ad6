"""Speed of predicate reasoning: one candidate against 1,000 running operations' predicates.

Run: ``.venv/bin/python -m pytest benchmarks/bench_predicates.py --benchmark-only``.
The conflict model's target is well under a millisecond per pair; these numbers are the predicate share.
"""

from __future__ import annotations

import datetime as dt

from deltaguard.core.sql.classify import classify_sql
from deltaguard.core.sql.predicates import (
    _parse_cached,
    merge_target_predicate,
    parse_predicate,
    provably_disjoint,
)

RUNNING = 1000
DAY = dt.date(2024, 1, 1)


def _running_texts(tag: str) -> list[str]:
    """Distinct partition predicates, as a DAG of daily per-country writes would produce."""
    countries = ["DE", "FR", "US", "JP", "BR"]
    return [
        f"date = '{DAY + dt.timedelta(days=i // 5)}' AND country = '{countries[i % 5]}' AND id > {i} -- {tag}"
        for i in range(RUNNING)
    ]


def test_disjointness_against_1000_running_parsed_predicates(benchmark) -> None:  # type: ignore[no-untyped-def]
    running = [parse_predicate(text) for text in _running_texts("warm")]
    candidate = merge_target_predicate("s.id = t.id AND t.date = '2025-06-01' AND t.country IN ('DE', 'FR')")
    columns = ["date", "country"]

    def check() -> int:
        return sum(provably_disjoint(candidate, other, columns) for other in running)

    assert benchmark(check) == RUNNING


def test_disjointness_with_or_and_ranges_over_all_columns(benchmark) -> None:  # type: ignore[no-untyped-def]
    running = [
        parse_predicate(f"(a = {i} OR a = {i + 1}) AND b BETWEEN {i} AND {i + 10}") for i in range(RUNNING)
    ]
    candidate = parse_predicate("a < 0 OR (b > 5000 AND a IN (1, 2, 3))")

    def check() -> int:
        return sum(provably_disjoint(candidate, other, None) for other in running)

    assert benchmark(check) == RUNNING


def test_parse_and_check_1000_new_predicates(benchmark) -> None:  # type: ignore[no-untyped-def]
    texts = _running_texts("cold")
    candidate = parse_predicate("date = '2025-06-01'")
    columns = ["date"]

    def cold() -> int:
        _parse_cached.cache_clear()  # every round parses all 1,000 texts again
        return sum(provably_disjoint(candidate, parse_predicate(text), columns) for text in texts)

    assert benchmark.pedantic(cold, rounds=3, iterations=1) == RUNNING


def test_classify_sql(benchmark) -> None:  # type: ignore[no-untyped-def]
    sql = "MERGE INTO t USING s ON s.id = t.id AND t.date = '2024-01-01' WHEN MATCHED THEN UPDATE SET *"
    assert benchmark(classify_sql, sql).operation.merge_condition is not None
