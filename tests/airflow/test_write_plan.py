"""Pure helpers behind the operators: pre-lease validation, messages, SQL translation, lease requests."""

from __future__ import annotations

import pytest

from deltaguard.core.admission import Owner
from deltaguard.core.operations import OperationKind
from deltaguard.core.table_config import TableConfig
from deltaguard.engines import specs
from deltaguard.engines.base import validate_spec
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.sql_translate import translate
from deltaguard.hooks.lease import task_owner, task_request_id
from deltaguard.leases.waiting import wait_reason
from deltaguard.writes.prepared import decision_line

PARTITIONED = TableConfig(partition_columns=("country",), uri="/t")


@pytest.mark.parametrize(
    ("spec", "config", "message"),
    [
        (specs.MergeSpec(source=None, condition="  "), PARTITIONED, "MERGE needs an ON condition"),
        (
            specs.MergeSpec(source=None, condition="t.id = = s.id"),
            PARTITIONED,
            "MERGE condition .* cannot be parsed",
        ),
        (
            specs.MergeSpec(source=None, condition="t.id = s.id", target_partition_values={"day": 1}),
            PARTITIONED,
            "'day', but /t is partitioned by country",
        ),
        (specs.AppendSpec(source=None, partition_values={"x": 1}), TableConfig(), "not partitioned"),
        (specs.DeleteSpec(predicate="id = = 3"), PARTITIONED, "DELETE predicate"),
        (specs.UpdateSpec(updates={}), PARTITIONED, "at least one column"),
        (specs.ReplaceWhereSpec(source=None, predicate=""), PARTITIONED, "needs a predicate"),
        (
            specs.DeleteSpec(predicate="id = 1"),
            TableConfig(exists=False, uri="/t"),
            "needs an existing table",
        ),
    ],
)
def test_check_spec_rejects_bad_input(spec, config, message) -> None:
    with pytest.raises(InvalidWriteError, match=message):
        validate_spec(spec, config)


def test_check_spec_accepts_good_input() -> None:
    validate_spec(
        specs.MergeSpec(
            source="/s",
            condition="t.id = s.id",
            target_partition_values={"COUNTRY": "DE"},
            matched_delete=True,
        ),
        PARTITIONED,
    )
    validate_spec(specs.AppendSpec(source="/s"), TableConfig(exists=False))  # an append may create the table


def test_decision_lines() -> None:
    assert "granted at once" in decision_line(0.2, [])
    reason = wait_reason(
        ["MERGE on the same partition can conflict."],
        ["ConcurrentAppendException"],
        ["Add t.date = ... to ON."],
    )
    line = decision_line(42.4, ["daily_sales.merge_de", "daily_sales.merge_de"], reason)
    assert line == (
        "deltaguard: waited 42 s behind daily_sales.merge_de (MERGE on the same partition can conflict. "
        "(can raise ConcurrentAppendException); advice: Add t.date = ... to ON.)"
    )


def test_sql_translation() -> None:
    assert translate("DELETE FROM t WHERE d = '2024-01-01'") == specs.DeleteSpec(predicate="d = '2024-01-01'")
    assert translate("UPDATE t SET a = a + 1 WHERE c > 2") == specs.UpdateSpec(
        updates={"a": "a + 1"}, predicate="c > 2"
    )
    assert translate("OPTIMIZE t WHERE d = '2024-01-01' ZORDER BY (a, b)") == specs.OptimizeSpec(
        zorder_by=("a", "b"), partition_filters={"d": "2024-01-01"}
    )
    assert translate("OPTIMIZE t WHERE d > '2024-01-01'") is None  # not a partition equality
    assert translate("ALTER TABLE t SET TBLPROPERTIES ('k' = 'v')") == specs.SetPropertiesSpec(
        properties={"k": "v"}
    )
    assert translate("ALTER TABLE t ADD COLUMNS (x STRING)") == specs.AddColumnsSpec(columns={"x": "string"})
    appended = translate("INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y')")
    assert isinstance(appended, specs.AppendSpec) and appended.source.to_pylist() == [
        {"a": 1, "b": "x"},
        {"a": 2, "b": "y"},
    ]
    assert translate("INSERT INTO t SELECT * FROM u") is None
    assert translate("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE") is None
    assert (
        translate("ALTER TABLE t SET TBLPROPERTIES ('k' = 'v')").operation().kind
        is OperationKind.SET_TBLPROPERTIES
    )


def test_request_ids_follow_the_try() -> None:
    first = task_owner("d", "r", "t", -1, 1)
    assert task_request_id(first) == task_request_id(task_owner("d", "r", "t", None, 1))
    assert task_request_id(first) != task_request_id(task_owner("d", "r", "t", -1, 2))  # a retry asks anew
    assert task_request_id(first) != task_request_id(
        Owner(dag_id="d", run_id="r", task_id="t", map_index=0, try_number=1)
    )


def test_sql_operator_hands_untranslatable_sql_to_spark_only() -> None:
    from types import SimpleNamespace

    from deltaguard.operators.sql import DeltaSqlOperator

    merge = "MERGE INTO t USING updates s ON t.id = s.id WHEN MATCHED THEN UPDATE SET *"
    op = DeltaSqlOperator(task_id="sql", table="/t", sql=merge)
    op.resolved_engine = SimpleNamespace(name="spark")
    spec = op.build_spec(PARTITIONED)
    assert isinstance(spec, specs.SqlSpec) and spec.sql == merge
    assert spec.operation().kind is OperationKind.MERGE
    op.resolved_engine = SimpleNamespace(name="delta-rs")
    with pytest.raises(InvalidWriteError, match="engine='spark'"):
        op.build_spec(PARTITIONED)
