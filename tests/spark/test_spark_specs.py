"""Spec checks and SQL pieces of the Spark engine (pure: no JVM)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from deltaguard.core.table_config import TableConfig
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.spark.runners import validate_spec
from deltaguard.engines.spark.specs import (
    columns_sql,
    merge_clauses,
    properties_sql,
    spark_type_sql,
)
from deltaguard.engines.spark.target import SparkTarget
from deltaguard.engines.specs import (
    AddColumnsSpec,
    AppendSpec,
    CreateSpec,
    DeleteSpec,
    MergeSpec,
    OptimizeSpec,
    ReplaceWhereSpec,
    SetPropertiesSpec,
    UpdateSpec,
)

PARTITIONED = TableConfig(partition_columns=("day",), uri="/t")
MISSING = TableConfig(exists=False, uri="/t")


@pytest.mark.parametrize(
    ("spec", "config", "message"),
    [
        (MergeSpec(source="/s", condition="t.id = s.id"), PARTITIONED, "at least one WHEN"),
        (
            MergeSpec(source="/s", condition="t.id = = s.id", matched_delete=True),
            PARTITIONED,
            "does not parse",
        ),
        (MergeSpec(source=None, condition="t.id = s.id", matched_delete=True), PARTITIONED, "needs a source"),
        (
            MergeSpec(
                source="/s", condition="t.id = s.id", matched_update_all=True, matched_update={"v": "s.v"}
            ),
            PARTITIONED,
            "not both",
        ),
        (
            MergeSpec(source="/s", condition="t.id = s.id", matched_delete=True, matched_update_all=True),
            PARTITIONED,
            "needs matched_condition",
        ),
        (
            MergeSpec(
                source="/s", condition="t.id = s.id", matched_delete=True, target_partition_values={"x": 1}
            ),
            PARTITIONED,
            "not a partition column",
        ),
        (UpdateSpec(updates={}), PARTITIONED, "at least one column"),
        (UpdateSpec(updates={"v": "v +"}, predicate="day = '1'"), PARTITIONED, "does not parse"),
        (DeleteSpec(predicate="  "), PARTITIONED, "is empty"),
        (ReplaceWhereSpec(source="/s", predicate=""), PARTITIONED, "needs a predicate"),
        (OptimizeSpec(zorder_by=("day",)), PARTITIONED, "partition columns"),
        (OptimizeSpec(partition_filters={"id": 1}), PARTITIONED, "not a partition column"),
        (OptimizeSpec(target_size=0), PARTITIONED, "positive"),
        (SetPropertiesSpec(properties={}), PARTITIONED, "at least one property"),
        (AddColumnsSpec(columns={"x": "not a type at all"}), PARTITIONED, "not a Spark SQL type"),
        (CreateSpec(), MISSING, "schema or a source"),
        (CreateSpec(schema={"id": "bigint"}, partition_by=("day",)), MISSING, "not in the schema"),
        (CreateSpec(schema={"id": "bigint"}), PARTITIONED, "already exists"),
        (DeleteSpec(predicate="id = 1"), MISSING, "needs an existing table"),
    ],
)
def test_bad_specs_are_rejected_before_anything_runs(spec: object, config: TableConfig, message: str) -> None:
    with pytest.raises(InvalidWriteError, match=message):
        validate_spec(spec, config)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "spec",
    [
        AppendSpec(source="/s.parquet"),
        MergeSpec(source="/s", condition="t.id = s.id", matched_update_all=True, not_matched_insert_all=True),
        MergeSpec(
            source="/s",
            condition="t.id = s.id",
            matched_delete=True,
            matched_condition="s.op = 'D'",
            matched_update={"v": "s.v"},
            target_partition_values={"day": "2024-01-01"},
        ),
        UpdateSpec(updates={"v": "v + 1"}, predicate="day = '2024-01-01'"),
        DeleteSpec(predicate="day = '2024-01-01' AND id > 3"),
        OptimizeSpec(zorder_by=("id",), partition_filters={"day": "2024-01-01"}),
        AddColumnsSpec(columns={"note": "string", "amount": "decimal(10,2)"}),
        CreateSpec(schema={"id": "bigint", "day": "string"}, partition_by=("day",), replace=True),
    ],
)
def test_good_specs_pass(spec: object) -> None:
    validate_spec(spec, PARTITIONED)  # type: ignore[arg-type]


def test_merge_clause_order_puts_the_guarded_delete_first() -> None:
    spec = MergeSpec(
        source="/s",
        condition="t.id = s.id",
        matched_delete=True,
        matched_condition="s.op = 'D'",
        matched_update={"v": "s.v"},
        not_matched_insert_all=True,
        not_matched_by_source_delete=True,
    )
    assert merge_clauses(spec) == [
        ("delete", "s.op = 'D'"),
        ("update", None, {"v": "s.v"}),
        ("insert_all", None),
        ("by_source_delete", None),
    ]


def test_a_single_matched_clause_takes_the_condition() -> None:
    spec = MergeSpec(
        source="/s", condition="t.id = s.id", matched_update_all=True, matched_condition="s.v > t.v"
    )
    assert merge_clauses(spec) == [("update_all", "s.v > t.v")]


def test_properties_sql_quotes_keys_and_values() -> None:
    rendered = properties_sql({"delta.appendOnly": "true", "owner": "x' OR '1'='1"})
    assert rendered.startswith("'delta.appendOnly' = 'true', 'owner' = ")
    # The hostile value stays one literal: its quotes are escaped, never closing the string.
    assert "'1'='1'" not in rendered.replace("\\'", "")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("string", "STRING"),
        ("bigint", "BIGINT"),
        ("decimal(10,2)", "DECIMAL(10, 2)"),
        ("array<int>", "ARRAY<INT>"),
    ],
)
def test_spark_types_are_normalised(given: str, expected: str) -> None:
    assert spark_type_sql(given) == expected


@pytest.mark.parametrize("bad", ["string) ; DROP TABLE x --", "", "foo"])
def test_bad_types_are_rejected(bad: str) -> None:
    with pytest.raises(InvalidWriteError):
        spark_type_sql(bad)


def test_columns_sql_quotes_names() -> None:
    assert columns_sql({"a`b": "int"}) == "`a``b` INT"


@pytest.mark.parametrize(
    ("uri", "reference"),
    [
        ("/data/orders", "delta.`/data/orders`"),
        ("s3a://bucket/t`x", "delta.`s3a://bucket/t``x`"),
        ("main.sales.orders", "`main`.`sales`.`orders`"),
        ("orders", "`orders`"),
        ("`main`.`odd.name`", "`main`.`odd.name`"),
    ],
)
def test_table_references(uri: str, reference: str) -> None:
    assert SparkTarget.parse(uri).sql_reference() == reference


@pytest.mark.parametrize("uri", ["", "  ", "main..orders"])
def test_bad_table_uris(uri: str) -> None:
    with pytest.raises(InvalidWriteError):
        SparkTarget.parse(uri)


def test_partition_values_of_any_literal_type_validate() -> None:
    spec = OptimizeSpec(partition_filters={"day": dt.date(2024, 1, 1)})
    validate_spec(spec, PARTITIONED)


def test_sql_specs_need_a_statement_and_know_their_log_names() -> None:
    from deltaguard.core.operations import Operation, OperationKind
    from deltaguard.engines.spark.runners import operation_names
    from deltaguard.engines.specs import SqlSpec

    merge = SqlSpec(
        sql="MERGE INTO x USING y ON x.id = y.id WHEN MATCHED THEN DELETE",
        classified=Operation(OperationKind.MERGE),
    )
    assert operation_names(merge) == ("MERGE",) and not merge.may_create()
    create = SqlSpec(
        sql="CREATE OR REPLACE TABLE x AS SELECT 1", classified=Operation(OperationKind.CREATE_OR_REPLACE)
    )
    assert create.may_create()
    validate_spec(create, MISSING)
    with pytest.raises(InvalidWriteError, match="needs an existing table"):
        validate_spec(merge, MISSING)
    with pytest.raises(InvalidWriteError, match="empty"):
        validate_spec(SqlSpec(sql="  ", classified=Operation(OperationKind.DELETE)), PARTITIONED)


def test_merge_sql_scopes_the_by_source_delete_to_the_leased_partitions() -> None:
    """``WHEN NOT MATCHED BY SOURCE`` ranges over the whole target: unscoped, a MERGE leased for one partition
    deletes every row of every other partition."""
    from deltaguard.engines.spark.ops import merge_sql
    from deltaguard.engines.spark.target import SparkTarget
    from deltaguard.engines.specs import MergeSpec

    spec = MergeSpec(
        source=None,
        condition="t.id = s.id",
        target_partition_values={"day": "d1"},
        matched_update_all=True,
        not_matched_by_source_delete=True,
    )
    statement = merge_sql(SparkTarget.parse("/data/t"), spec, "src")
    assert statement.splitlines()[-1] == "WHEN NOT MATCHED BY SOURCE AND (t.day = 'd1') THEN DELETE"
    assert "ON (t.id = s.id) AND t.day = 'd1'" in statement
    unscoped = merge_sql(
        SparkTarget.parse("/data/t"), dataclasses.replace(spec, target_partition_values={}), "s"
    )
    assert unscoped.splitlines()[-1] == "WHEN NOT MATCHED BY SOURCE THEN DELETE"


@pytest.mark.parametrize(
    "spec",
    [
        AppendSpec(source="/s"),
        UpdateSpec(updates={"v": "v + 1"}, predicate="day = 'a'"),
        DeleteSpec(predicate="day = 'a'"),
        OptimizeSpec(),
        SetPropertiesSpec(properties={"delta.checkpointInterval": "5"}),
    ],
)
def test_a_table_delta_spark_cannot_commit_to_is_refused_before_writing(spec: object) -> None:
    # Measured: delta-spark 4.4.0 fails every write to a table whose delta.isolationLevel it cannot parse.
    bad = dataclasses.replace(PARTITIONED, properties={"delta.isolationLevel": "nonsense"})
    with pytest.raises(InvalidWriteError, match="fails every write"):
        validate_spec(spec, bad)  # type: ignore[arg-type]  # every spec kind


@pytest.mark.parametrize(
    "isolation", ["Serializable", "WriteSerializable", "writeserializable", "SnapshotIsolation"]
)
def test_isolation_levels_delta_spark_knows_pass(isolation: str) -> None:
    table = dataclasses.replace(PARTITIONED, properties={"delta.isolationLevel": isolation})
    validate_spec(AppendSpec(source="/s"), table)


def test_the_repair_of_an_unknown_isolation_level_is_left_to_the_engine() -> None:
    bad = dataclasses.replace(PARTITIONED, properties={"delta.isolationLevel": "nonsense"})
    validate_spec(SetPropertiesSpec(properties={"delta.isolationLevel": "Serializable"}), bad)
