"""The representative slice of the delta-rs conformance run: zero unsound cells and every measured fact.

It runs through the real CLI (``python -m lab.conformance``) on real Delta tables, once per test session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deltaguard.core.decision import PairVerdict
from deltaguard.core.operations import Operation
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig
from lab.conformance.__main__ import exit_code, main
from lab.conformance.cells import Cell, Observed, summarize
from lab.conformance.runner import Group, run_cells, run_group
from lab.conformance.scenarios import Layout, ProbeOp


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any]]:
    out = tmp_path_factory.mktemp("conformance") / "results.json"
    code = main(["--slice", "representative", "--jobs", "2", "--quiet", "--json", str(out)])
    return code, json.loads(out.read_text(encoding="utf-8"))


def cell(
    data: dict[str, Any], a: str, b: str, layout: Layout, isolation: str | None = None
) -> dict[str, Any]:
    for c in data["cells"]:
        if {c["a"], c["b"]} == {a, b} and c["layout"] == layout.value and c["isolation"] == isolation:
            return c
    raise AssertionError(f"cell {a} x {b} {layout} {isolation} not in the slice")


def test_no_unsound_cell_and_exit_code_zero(run: tuple[int, dict[str, Any]]) -> None:
    code, data = run
    summary = data["summary"]
    assert summary["cells"] == len(data["cells"]) > 100
    assert summary["unsound"] == 0, [c for c in data["cells"] if c["unsound"]]
    assert summary["inconclusive"] == 0
    assert code == 0


def test_precision_is_measured_on_engine_allowed_cells(run: tuple[int, dict[str, Any]]) -> None:
    summary = run[1]["summary"]
    assert summary["engine_allowed"] > 0
    assert summary["precision"] == pytest.approx(
        summary["both_allowed"] / summary["engine_allowed"], abs=1e-4
    )
    assert summary["precision"] >= 0.9


def test_every_issue_fact_holds(run: tuple[int, dict[str, Any]]) -> None:
    facts = {f["name"]: f for f in run[1]["meta"]["facts"]}
    assert set(facts) >= {
        "optimize_optimize_duplicates",
        "optimize_then_overwrite_keeps_rows",
        "constraint_over_violating_append",
        "isolation_camel_case_only",
        "appends_never_blind",
        "disjoint_partitions_commit",
        "merge_without_target_filter_reads_all",
        "conflicts_are_commit_failed",
        "silent_rebase",
        "optimize_ignores_max_commit_retries",
    }
    assert all(f["holds"] is True for f in facts.values()), [
        f for f in facts.values() if f["holds"] is not True
    ]


def test_corrupting_pairs_are_predicted_as_conflicts(run: tuple[int, dict[str, Any]]) -> None:
    data = run[1]
    corrupt = [c for c in data["cells"] if any(o["observed"] == "corrupt" for o in c["orders"])]
    assert corrupt, "the slice must contain the silent-corruption cells"
    assert all(c["predicted"] == "conflict" for c in corrupt)


def test_isolation_spelling_changes_the_outcome(run: tuple[int, dict[str, Any]]) -> None:
    data = run[1]
    honoured = cell(data, "INSERT", "UPDATE", Layout.PARTITIONED_SAME, "snapshotIsolation")
    ignored = cell(data, "INSERT", "UPDATE", Layout.PARTITIONED_SAME, "SnapshotIsolation")
    absent = cell(data, "INSERT", "UPDATE", Layout.PARTITIONED_SAME)
    first_insert = next(o for o in honoured["orders"] if o["order"] == "A,B")
    assert first_insert["observed"] == "commit"  # snapshot isolation: the stale UPDATE ignores the append
    assert [o["observed"] for o in ignored["orders"]] == [o["observed"] for o in absent["orders"]]
    assert [o["kind"] for o in absent["orders"]] == ["ConcurrentAppend", "ConcurrentDeleteRead"]


def test_two_optimizes_of_one_partition_duplicate_rows(tmp_path: Path) -> None:
    (result,) = run_group(
        Group(ProbeOp.OPTIMIZE_COMPACT, ProbeOp.OPTIMIZE_COMPACT, Layout.PARTITIONED_SAME, (None,))
    )
    assert [o.observed for o in result.orders] == [Observed.CORRUPT, Observed.CORRUPT]
    assert "12 rows vs 8 rows" in result.orders[0].detail  # partition a's four rows are there twice
    assert result.prediction.conflict is True and not result.unsound


def allow_everything(a: Operation, b: Operation, table: TableConfig, profile: EngineProfile) -> PairVerdict:
    """A deliberately wrong model (module level, so worker processes can load it)."""
    return PairVerdict(conflict=False, rule="test.allow_everything")


def test_a_model_that_allows_everything_is_caught() -> None:
    cells = [
        Cell(ProbeOp.OPTIMIZE_COMPACT, ProbeOp.OPTIMIZE_ZORDER, Layout.UNPARTITIONED, None),
        Cell(ProbeOp.INSERT, ProbeOp.UPDATE, Layout.PARTITIONED_DISJOINT, "snapshotIsolation"),
        Cell(ProbeOp.INSERT, ProbeOp.INSERT, Layout.PARTITIONED_SAME, None),
    ]
    results = run_cells(cells, jobs=1, predictor=allow_everything)
    assert [r.cell for r in results] == cells
    assert [r.unsound for r in results] == [True, True, False]
    assert summarize(results).unsound == 2
    assert exit_code(summarize(results)) == 1
    assert exit_code(summarize(results[2:])) == 0
