"""Differential fuzzing with per-file statistics (ADR 0020): generated rewrites on unpartitioned tables
clustered by date, judged by the delta-rs profile with the snapshot's statistics, run on real delta-rs tables
in every commit order (derandomized, so every run sees the same cases).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings

from lab.fuzz.cases import FuzzCase, FuzzLayout, FuzzStatement
from lab.fuzz.check import CaseResult, DifferentialRun
from lab.fuzz.engine import DeltaRsDifferentialEngine
from lab.fuzz.strategies import stats_cases

ENGINE = DeltaRsDifferentialEngine(file_stats=True)
CI_EXAMPLES = 25


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> DifferentialRun:
    return DifferentialRun(ENGINE, tmp_path_factory.mktemp("fuzz_stats"))


def test_per_date_rewrites_on_a_clustered_table_are_admitted_and_commit(run: DifferentialRun) -> None:
    case = FuzzCase(
        FuzzLayout((), clustered=True),
        (
            FuzzStatement("UPDATE t SET v = v + 1 WHERE d = '2024-01-01'"),
            FuzzStatement("DELETE FROM t WHERE d = '2024-01-03' AND id > 2"),
        ),
    )
    result = run.check(case)
    assert result.views["sql"].verdict == "no_conflict"
    assert "deltars.file_stats_disjoint" in result.views["sql"].rules
    assert result.engine_allows and not result.unsound


def test_generated_statistics_cases_are_sound(run: DifferentialRun) -> None:
    seen: list[CaseResult] = []

    @settings(
        max_examples=CI_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(stats_cases())
    def probe(case: FuzzCase) -> None:
        result = run.check(case)
        seen.append(result)
        assert not result.crashed, result.to_json()
        if result.unsound:
            pytest.fail("unsound verdict:\n" + json.dumps(result.to_json(), indent=2))

    probe()
    # the statistics rule decided some generated case, so the run exercised it
    assert any(
        "deltars.file_stats_disjoint" in v.rules
        for r in seen
        for v in r.views.values()
        if v.verdict == "no_conflict"
    )
