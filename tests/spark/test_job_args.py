"""The spark-submit job module's argument handling and the spec JSON it carries (no JVM)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.spark import job as spark_job
from deltaguard.engines.spec_json import context_from_json, spec_from_json, spec_to_json
from deltaguard.engines.specs import (
    AddColumnsSpec,
    AppendSpec,
    CreateSpec,
    DeleteSpec,
    MergeSpec,
    OptimizeSpec,
    OverwriteSpec,
    ReplaceWhereSpec,
    SetPropertiesSpec,
    UpdateSpec,
    WriteContext,
)

SPECS = [
    AppendSpec(
        source="/landing/a.parquet", partition_by=("day",), partition_values={"day": dt.date(2024, 1, 1)}
    ),
    MergeSpec(
        source="delta+/data/changes",
        condition="t.id = s.id",
        target_partition_values={"day": "2024-01-01", "amount": Decimal("1.50")},
        matched_update={"v": "s.v"},
        matched_delete=True,
        matched_condition="s.op = 'D'",
        not_matched_insert_all=True,
    ),
    UpdateSpec(updates={"v": "v + 1"}, predicate="day = '2024-01-01'"),
    DeleteSpec(predicate=None),
    ReplaceWhereSpec(source="/landing/b.csv", predicate="day = '2024-01-02'"),
    OverwriteSpec(source="/landing/c", partition_by=("day",)),
    OptimizeSpec(
        zorder_by=("id",), partition_filters={"ts": dt.datetime(2024, 1, 1, 12, 30)}, target_size=1024
    ),
    SetPropertiesSpec(properties={"delta.appendOnly": "true"}),
    AddColumnsSpec(columns={"note": "string"}),
    CreateSpec(
        schema={"id": "bigint", "day": "string"}, partition_by=("day",), properties={"a": "b"}, replace=True
    ),
]


@pytest.mark.parametrize("spec", SPECS, ids=[type(s).__name__ for s in SPECS])
def test_specs_round_trip_through_json_text(spec: object) -> None:
    text = json.dumps(spec_to_json(spec))  # type: ignore[arg-type]
    assert spec_from_json(text) == spec


def test_in_memory_sources_cannot_cross_the_process_boundary() -> None:
    with pytest.raises(InvalidWriteError, match="URI string"):
        spec_to_json(AppendSpec(source=pa.table({"id": [1]})))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ('{"kind": "truncate"}', "unknown spec kind"),
        ('{"kind": "delete", "predicat": "x = 1"}', "unknown fields"),
        ('{"kind": "update"}', "bad update spec"),
        ("[1, 2]", "JSON object"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_spec_json(payload: str, message: str) -> None:
    with pytest.raises(InvalidWriteError, match=message):
        spec_from_json(payload)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ('{"app_version": "7"}', "integer"),
        ('{"app_version": true}', "integer"),
        ('{"who": 1}', "unknown context"),
    ],
)
def test_bad_context_json(payload: str, message: str) -> None:
    with pytest.raises(InvalidWriteError, match=message):
        context_from_json(payload)


def test_build_args_and_parse_are_inverse(tmp_path: Path) -> None:
    context = WriteContext(app_id="dag.task", app_version=42, commit_metadata={"lease": "L1"})
    argv = spark_job.build_args("/data/orders", SPECS[1], context, result_file=str(tmp_path / "r.json"))
    table, spec, parsed_context, args = spark_job.parse_job_args(argv)
    assert (table, spec, parsed_context) == ("/data/orders", SPECS[1], context)
    assert args.result_file == str(tmp_path / "r.json")


def test_spec_and_context_from_files(tmp_path: Path) -> None:
    (tmp_path / "spec.json").write_text(json.dumps({"kind": "delete", "predicate": "id = 3"}))
    (tmp_path / "ctx.json").write_text(json.dumps({"app_id": "a", "app_version": 1}))
    _, spec, context, _ = spark_job.parse_job_args(
        [
            "--table-uri",
            "t",
            "--spec-json",
            f"@{tmp_path / 'spec.json'}",
            "--context-json",
            f"@{tmp_path / 'ctx.json'}",
        ]
    )
    assert spec == DeleteSpec(predicate="id = 3")
    assert (context.app_id, context.app_version) == ("a", 1)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--table-uri", "/t"],
        ["--table-uri", " ", "--spec-json", '{"kind": "delete"}'],
        ["--table-uri", "/t", "--spec-json", '{"kind": "nope"}'],
        ["--table-uri", "/t", "--spec-json", "@/nonexistent/spec.json"],
        ["--table-uri", "/t", "--spec-json", '{"kind": "delete"}', "--unknown-flag"],
    ],
)
def test_bad_arguments_exit_2_before_spark_starts(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    class NeverCalled:
        def write(self, *args: object) -> None:
            raise AssertionError("the engine must not run on bad arguments")

    assert spark_job.run(argv, engine=NeverCalled()) == spark_job.EXIT_BAD_ARGS
    assert "bad arguments" in capsys.readouterr().err


def test_sql_spec_travels_with_its_classification() -> None:
    from deltaguard.core.operations import Operation, OperationKind
    from deltaguard.engines.specs import SqlSpec

    spec = SqlSpec(
        sql="DELETE FROM delta.`/t` WHERE day = '2024-01-01'",
        classified=Operation(OperationKind.DELETE, predicate="day = '2024-01-01'", zorder_by=("id",)),
    )
    back = spec_from_json(json.dumps(spec_to_json(spec)))
    assert back == spec and back.classified.kind is OperationKind.DELETE
