"""``deltaguard check`` asks delta-rs what partition predicates select, as the operators do (ADR 0037).

The hand reading's check of a fraction on an integer partition is taken out (a planted hole): ``k = 1.5``
beside ``k = 1`` is then kept apart by the hand reading, and only the engine can say that delta-rs' DELETE
of ``k = 1.5`` rewrites ``k = 1``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deltaguard.commands.check import check_documents
from deltaguard.core.rules import deltars


def _document(column: str = "k") -> dict[str, Any]:
    quoted = column if column.isidentifier() else f"`{column}`"
    return {
        "engine": {"name": "delta-rs", "version": "1.6.6"},
        "table": {"partition_columns": [column], "column_types": {column: "integer", "note": "string"}},
        "running": [{"operation": "DELETE", "predicate": f"{quoted} = 1"}],
        "candidate": {"operation": "DELETE", "predicate": f"{quoted} = 1.5"},
    }


DOCUMENT = _document()


@pytest.fixture
def fraction_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deltars, "fractional_columns", lambda p: frozenset())


@pytest.mark.usefixtures("fraction_unread")
@pytest.mark.parametrize("column", ["k", "Sale Hour"])
def test_the_engine_refutes_what_the_hand_reading_keeps_apart(column: str) -> None:
    document = _document(column)
    judged = check_documents(document)
    assert judged["verdict"] == "conflict"
    assert "deltars.engine_unconfirmed" in judged["rules"]
    assert check_documents(document, hand_only=True)["verdict"] == "no_conflict"  # the planted hole
    apart = {
        **document,
        "candidate": {
            **document["candidate"],
            "predicate": document["running"][0]["predicate"].replace("1", "2"),
        },
    }
    assert check_documents(apart)["verdict"] == "no_conflict"  # the engine confirms what is apart


def test_the_hand_reading_itself_says_conflict() -> None:
    assert check_documents(DOCUMENT, hand_only=True)["verdict"] == "conflict"


@pytest.mark.usefixtures("fraction_unread")
def test_disjoint_partitions_stay_apart_and_other_engines_are_judged_as_before() -> None:
    apart = {**DOCUMENT, "candidate": {"operation": "DELETE", "predicate": "k = 2"}}
    assert check_documents(apart)["verdict"] == "no_conflict"
    # without partition types there is no witness to ask about: the hand reading decides alone
    untyped = {**DOCUMENT, "table": {"partition_columns": ["k"]}}
    assert check_documents(untyped)["verdict"] == "conflict"  # a number on a partition of unknown type
    # Spark compares an INT column with 1.5 exactly: DataFusion's reading is not asked for Spark's rules
    spark = {**DOCUMENT, "engine": {"name": "delta-spark", "version": "4.4.0"}}
    assert check_documents(spark)["verdict"] == "no_conflict"


def test_the_command_takes_hand_only(tmp_path: Path) -> None:
    path = tmp_path / "check.json"
    path.write_text(json.dumps(DOCUMENT))
    binary = Path(sys.executable).with_name("deltaguard")
    for extra in ([], ["--hand-only"]):
        done = subprocess.run(
            [str(binary), "check", str(path), *extra],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["verdict"] == "conflict"
