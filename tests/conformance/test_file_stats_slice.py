"""The representative slice of the file-statistics conformance run (ADR 0020): real delta-rs tables, both
commit orders, zero unsound cells, and the measured facts the rule rests on.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lab.conformance.__main__ import main


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any]]:
    out = tmp_path_factory.mktemp("stats") / "results.json"
    code = main(
        [
            "--suite",
            "file-stats",
            "--slice",
            "representative",
            "--jobs",
            "1",
            "--quiet",
            "--json",
            str(out),
        ]
    )
    return code, json.loads(out.read_text(encoding="utf-8"))


def cell(document: dict[str, Any], a: str, b: str, layout: str, scopes: str) -> dict[str, Any]:
    (found,) = [
        c for c in document["cells"] if (c["a"], c["b"], c["layout"], c["scopes"]) == (a, b, layout, scopes)
    ]
    return found


def observed(c: dict[str, Any]) -> list[str]:
    return [o["observed"] for o in c["orders"]]


def test_no_unsound_cell(run: tuple[int, dict[str, Any]]) -> None:
    code, document = run
    assert document["summary"]["unsound"] == 0
    assert code == 0
    assert document["summary"]["cells"] == len(document["cells"]) > 0


def test_per_day_rewrites_commit_side_by_side_and_are_admitted(run: tuple[int, dict[str, Any]]) -> None:
    _, document = run
    for a, b, layout, scopes in (
        ("UPDATE", "UPDATE", "per_day_files", "next_day"),
        ("DELETE", "MERGE_UPDATE", "per_day_files", "far_day"),
        ("UPDATE", "UPDATE", "null_day_row", "far_day"),  # a null day does not widen the file's range
        # the source's ranges, read as the operators read them, bound the rows a MERGE or REPLACE WHERE adds
        ("MERGE_INSERT_INSIDE", "UPDATE", "per_day_files", "next_day"),
        ("REPLACE_WHERE", "UPDATE_IDS", "per_day_files", "next_day"),
    ):
        c = cell(document, a, b, layout, scopes)
        assert observed(c) == ["commit", "commit"]
        assert c["predicted"] == "no_conflict"
        assert c["rule"] == "deltars.file_stats_disjoint"


@pytest.mark.parametrize(
    ("a", "b", "layout", "scopes"),
    [
        ("UPDATE", "UPDATE", "spanning_file", "next_day"),  # the spanning file's range covers both days
        ("UPDATE_MOVE", "UPDATE", "per_day_files", "next_day"),  # rows moved into the other's day
        ("MERGE_INSERT_OUTSIDE", "UPDATE", "per_day_files", "far_day"),  # a source row outside the filter
        ("APPEND", "UPDATE", "per_day_files", "far_day"),  # a stale append reads every file
    ],
)
def test_stats_the_engine_contradicts_one_order_for_are_conflicts(
    run: tuple[int, dict[str, Any]], a: str, b: str, layout: str, scopes: str
) -> None:
    _, document = run
    c = cell(document, a, b, layout, scopes)
    assert "conflict" in observed(c)
    assert c["predicted"] == "conflict"


@pytest.mark.parametrize("layout", ["no_stats", "id_only_stats"])
def test_without_statistics_on_the_column_both_orders_conflict(
    run: tuple[int, dict[str, Any]], layout: str
) -> None:
    _, document = run
    (c,) = [c for c in document["cells"] if c["layout"] == layout]
    assert observed(c) == ["conflict", "conflict"]
    assert c["predicted"] == "conflict"
