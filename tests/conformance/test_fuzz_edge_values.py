"""Differential fuzzing on the edge rows (NULL, empty and long multi-byte ``p``, negative ``v``, NULL ``s``):
the two classes a Delta expert found by hand -- NULL partition values read by every comparison on delta-rs
(ADR 0003 fact 11) and string statistics delta-rs records cut (ADR 0020) -- and derandomized generated cases
of both generators, run on real delta-rs tables in every commit order.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.fuzz.cases import (
    LONG_BOUND,
    LONG_TEXT,
    FuzzCase,
    FuzzLayout,
    FuzzStatement,
)
from lab.fuzz.check import CaseResult, DifferentialRun
from lab.fuzz.engine import DeltaRsDifferentialEngine
from lab.fuzz.strategies import edge_cases, edge_stats_cases

REGRESSIONS = Path(__file__).parent / "fuzz_regressions"
KNOWN_CLASSES = frozenset(
    json.loads(path.read_text(encoding="utf-8"))["class"] for path in sorted(REGRESSIONS.glob("*.json"))
)
CI_EXAMPLES = 12


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> DifferentialRun:
    return DifferentialRun(DeltaRsDifferentialEngine(), tmp_path_factory.mktemp("edge"))


@pytest.fixture(scope="module")
def stats_run(tmp_path_factory: pytest.TempPathFactory) -> DifferentialRun:
    return DifferentialRun(DeltaRsDifferentialEngine(file_stats=True), tmp_path_factory.mktemp("edge_stats"))


@pytest.mark.parametrize(
    "other",
    [
        "UPDATE t SET v = v + 1 WHERE p = 'b'",
        "DELETE FROM t WHERE p <> 'a'",
        "UPDATE t SET v = v + 1 WHERE p > 'a'",
        "UPDATE t SET v = v + 1 WHERE p IS NOT NULL",
    ],
)
def test_null_partition_pairs(run: DifferentialRun, other: str) -> None:
    case = FuzzCase(
        FuzzLayout(("p",), edge_rows=True),
        (FuzzStatement(other), FuzzStatement("DELETE FROM t WHERE p IS NULL")),
    )
    result = run.check(case)
    assert not result.unsound, json.dumps(result.to_json(), indent=2)
    assert result.views["sql"].verdict == "conflict"


@pytest.mark.parametrize(
    ("update", "delete"),
    [
        (
            f"UPDATE t SET p = '{LONG_TEXT}' WHERE d = '2024-01-01'",
            f"DELETE FROM t WHERE p >= '{LONG_BOUND}'",
        ),
        (f"UPDATE t SET p = '{LONG_TEXT}' WHERE d = '2024-01-01'", f"DELETE FROM t WHERE p > '{LONG_TEXT}'"),
    ],
)
def test_long_string_statistics_pairs(stats_run: DifferentialRun, update: str, delete: str) -> None:
    case = FuzzCase(
        FuzzLayout((), clustered=True, edge_rows=True), (FuzzStatement(update), FuzzStatement(delete))
    )
    result = stats_run.check(case)
    assert not result.unsound, json.dumps(result.to_json(), indent=2)


def _generated(runner: DifferentialRun, strategy: st.SearchStrategy[FuzzCase]) -> list[CaseResult]:
    seen: list[CaseResult] = []

    @settings(
        max_examples=CI_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def probe(case: FuzzCase) -> None:
        result = runner.check(case)
        seen.append(result)
        assert not result.crashed, result.to_json()
        if result.unsound and result.explained_by(KNOWN_CLASSES) is None:
            pytest.fail("unsound verdict:\n" + json.dumps(result.to_json(), indent=2))

    probe()
    return seen


@pytest.mark.slow
def test_generated_edge_cases_are_sound(run: DifferentialRun) -> None:
    seen = _generated(run, edge_cases(triples=False))
    assert all(r.case.layout.edge_rows for r in seen)
    assert sum(r.executed for r in seen) >= 1


@pytest.mark.slow
def test_generated_edge_statistics_cases_are_sound(stats_run: DifferentialRun) -> None:
    seen = _generated(stats_run, edge_stats_cases())
    assert sum(r.executed for r in seen) >= 1
