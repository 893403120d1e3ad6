"""``deltaguard check`` and ``deltaguard matrix`` run as real subprocesses; core purity."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BIN = Path(sys.executable).with_name("deltaguard")

README_EXAMPLE: dict[str, Any] = {
    "engine": {"name": "databricks", "runtime": "14.3", "photon": False},
    "table": {
        "partition_columns": ["date"],
        "properties": {"delta.enableDeletionVectors": "true"},
        "clustering_columns": [],
        "identity_columns": [],
    },
    "running": [{"operation": "UPDATE", "predicate": "date = '2024-01-01'"}],
    "candidate": {
        "operation": "MERGE",
        "merge_condition": "t.id = s.id AND t.date = '2024-01-02'",
        "inserts": "date = '2024-01-02'",
    },
}


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN), *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def with_changes(**changes: Any) -> dict[str, Any]:
    document = json.loads(json.dumps(README_EXAMPLE))
    document.update(changes)
    return document


def test_check_readme_example_from_stdin() -> None:
    result = run("check", "-", stdin=json.dumps(README_EXAMPLE))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["verdict"] == "no_conflict"
    assert out["exceptions"] == [] and out["conflicts_with"] == []
    assert out["reasons"] and isinstance(out["advice"], list)


def test_check_array_keeps_order(tmp_path: Path) -> None:
    overlapping = with_changes(
        candidate={"operation": "MERGE", "merge_condition": "t.id = s.id AND t.date = '2024-01-01'"}
    )
    path = tmp_path / "checks.json"
    path.write_text(json.dumps([README_EXAMPLE, overlapping, README_EXAMPLE]))
    result = run("check", str(path))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert [o["verdict"] for o in out] == ["no_conflict", "conflict", "no_conflict"]
    assert out[1]["conflicts_with"] == [0]
    assert "ConcurrentAppendException" in out[1]["exceptions"]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (with_changes(engine={"name": "snowflake", "runtime": "1"}), "unknown engine"),
        (with_changes(engine={"name": "databricks", "runtime": "14.3", "photon": "yes"}), "photon"),
        (with_changes(engine={"name": "databricks", "runtime": 14.3}), "runtime"),
        (with_changes(candidate={"operation": "UPSERT"}), "unknown operation"),
        (with_changes(candidate={"operation": "UPDATE", "predicat": "x = 1"}), "predicat"),
        (with_changes(candidate={"operation": "UPDATE", "predicate": "date = = 'x'"}), "candidate"),
        (with_changes(running=[{"operation": "DELETE", "predicate": 5}]), "running[0].predicate"),
        (with_changes(candidate={"operation": "UPDATE", "merge_condition": "t.a = s.a"}), "merge_condition"),
        (with_changes(table={"partition_columns": "date"}), "partition_columns"),
        ({"engine": README_EXAMPLE["engine"]}, "candidate"),
    ],
)
def test_check_invalid_input_is_one_line_error(document: dict[str, Any], message: str) -> None:
    # In-process (the same function the CLI runs); the exit code is tested through subprocesses below.
    from deltaguard.commands.check import check_documents

    with pytest.raises(ValueError) as caught:
        check_documents(document)
    text = str(caught.value)
    assert "\n" not in text and message in text, text


def test_check_invalid_input_exits_2_with_nothing_on_stdout() -> None:
    result = run("check", "-", stdin=json.dumps(with_changes(candidate={"operation": "UPSERT"})))
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown operation" in lines[0], result.stderr


def test_check_invalid_document_in_array_names_its_index() -> None:
    bad = with_changes(candidate={"operation": "UPSERT"})
    result = run("check", "-", stdin=json.dumps([README_EXAMPLE, bad]))
    assert result.returncode == 2 and result.stdout == ""
    assert "document[1]" in result.stderr


def test_check_rejects_broken_json_and_missing_file(tmp_path: Path) -> None:
    assert run("check", "-", stdin="{not json").returncode == 2
    missing = run("check", str(tmp_path / "missing.json"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr


def test_matrix_text_subprocess() -> None:
    text = run("matrix", "--engine", "databricks", "--runtime", "14.3", "--partitioned", "date")
    assert text.returncode == 0, text.stderr
    assert "Conflict matrix: Databricks Runtime 14.3" in text.stdout and "MERGE" in text.stdout


def main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The CLI in-process (same entry point as the console script), to keep the suite fast."""
    from deltaguard.cli import main as cli_main

    code = cli_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_matrix_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = main(
        capsys,
        "matrix",
        "--runtime",
        "14.3",
        "--property",
        "delta.enableDeletionVectors=true",
        "--format",
        "json",
    )
    assert code == 0, err
    cells = {(c["a"], c["b"]): c for c in json.loads(out)["cells"]}
    # Row-level table: OPTIMIZE vs UPDATE cannot conflict, OPTIMIZE ZORDER vs UPDATE can.
    assert cells[("UPDATE", "OPTIMIZE")]["verdict"] == "no_conflict"
    assert cells[("UPDATE", "OPTIMIZE ZORDER")]["verdict"] == "conflict"
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"partition_columns": ["date"]}))
    code, out, err = main(
        capsys, "matrix", "--engine", "delta-spark", "--table", str(table), "--format", "json"
    )
    assert code == 0, err
    assert json.loads(out)["table"]["partition_columns"] == ["date"]


@pytest.mark.parametrize(
    "argv",
    [
        ("--engine", "delta-spark", "--photon"),
        ("--property", "novalue"),
        ("--engine", "oracle"),
        ("--runtime", "x"),
    ],
)
def test_matrix_invalid_flags_exit_2(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]) -> None:
    code, out, err = main(capsys, "matrix", *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err


def test_core_imports_without_airflow_or_engines() -> None:
    code = (
        "import sys, deltaguard.core, deltaguard.core.model, deltaguard.core.matrix, deltaguard.core.check_request; "
        "print(','.join(m for m in ('airflow', 'deltalake', 'pyspark', 'sqlalchemy') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == ""


def test_check_accepts_sql_statements() -> None:
    from deltaguard.commands.check import check_documents

    document = with_changes(
        running=[{"sql": "UPDATE sales SET qty = 0 WHERE date = '2024-01-01'", "label": "fix_qty"}],
        candidate={
            "sql": "MERGE INTO sales t USING src s ON t.id = s.id AND t.date = '2024-01-01' "
            "WHEN MATCHED THEN UPDATE SET *"
        },
    )
    out = check_documents(document)
    assert out["verdict"] == "conflict" and out["conflicts_with"] == [0]
    assert "fix_qty" in out["reasons"][0]
    document["candidate"] = {"sql": "DELETE FROM sales WHERE date = '2024-01-05'"}
    assert check_documents(document)["verdict"] == "no_conflict"


@pytest.mark.parametrize(
    ("candidate", "message"),
    [
        ({"sql": "SELECT * FROM sales"}, "candidate.sql"),
        ({"sql": "DELETE FROM other WHERE date = '2024-01-05'"}, "different tables"),
        ({"sql": "DELETE FROM sales", "operation": "DELETE"}, "either sql or operation"),
    ],
)
def test_check_rejects_bad_sql(candidate: dict[str, Any], message: str) -> None:
    from deltaguard.commands.check import check_documents

    document = with_changes(
        running=[{"sql": "UPDATE sales SET qty = 0 WHERE date = '2024-01-01'"}], candidate=candidate
    )
    with pytest.raises(ValueError, match=message):
        check_documents(document)
