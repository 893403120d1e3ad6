"""The guard the Spark engine's MERGE reads its source through, and the statement it runs (ADR 0019); pure,
no JVM: the SQL is parsed back with sqlglot, the error texts are the shapes Spark and Spark Connect raise."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from deltaguard.core.merge_scope import ColumnScope, MergeScope
from deltaguard.engines.spark.errors import source_check_message, to_conflict_error
from deltaguard.engines.spark.ops import merge_sql
from deltaguard.engines.spark.source_scope import guard_expression, source_guards
from deltaguard.engines.spark.target import SparkTarget
from deltaguard.engines.specs import MergeSpec

SCOPE = MergeScope(
    matched=(ColumnScope("date", "day", ("2024-01-01", "x' OR '1'='1")),),
    inserted=(ColumnScope("date", "day", ("2024-01-01", "x' OR '1'='1"), has_null=True),),
)


def _upsert(**kwargs: object) -> MergeSpec:
    return MergeSpec(
        source=None,
        condition="t.id = s.id AND t.date = s.day",
        matched_update_all=True,
        not_matched_insert_all=True,
        **kwargs,  # type: ignore[arg-type]
    )


def test_a_source_scope_guards_each_source_column_with_what_the_claim_covers() -> None:
    guards, why = source_guards(_upsert(source_scope=SCOPE))
    assert guards == {
        "day": (
            "`day` IN ('2024-01-01', 'x\\' OR \\'1\\'=\\'1')",
            "(`day` IS NULL OR `day` IN ('2024-01-01', 'x\\' OR \\'1\\'=\\'1'))",
        )
    }
    assert "changed since it was read" in why
    ranged = MergeScope(inserted=(ColumnScope("n", "n", None, 1, 9),))
    assert source_guards(_upsert(source_scope=ranged))[0] == {"n": ("`n` BETWEEN 1 AND 9",)}


def test_declared_partitions_guard_copied_rows_only_without_a_scope() -> None:
    declared = _upsert(target_partition_values={"date": "2024-01-01", "flag": True, "none": None})
    assert source_guards(declared)[0] == {
        "date": ("CAST(`date` AS STRING) = '2024-01-01'",),
        "flag": ("CAST(`flag` AS STRING) = 'true'",),
        "none": ("`none` IS NULL",),
    }
    # explicit insert expressions are claimed anywhere (no guard needed); a scope replaces the declaration
    explicit = MergeSpec(
        source=None,
        condition="t.id = s.id",
        target_partition_values={"date": "2024-01-01"},
        not_matched_insert={"id": "s.id", "date": "s.day"},
    )
    assert source_guards(explicit)[0] == {}
    assert set(source_guards(_upsert(target_partition_values={"date": "d"}, source_scope=SCOPE))[0]) == {
        "day"
    }


def test_the_guard_keeps_the_column_and_raises_for_anything_else() -> None:
    text = guard_expression("we`ird", ("`we``ird` IN (1)",), "outside x")
    tree = sqlglot.parse_one(f"SELECT {text} FROM s", read="spark")
    (alias,) = tree.expressions
    assert isinstance(alias, exp.Alias) and alias.alias == "we`ird"
    case = alias.this
    assert isinstance(case, exp.Case) and case.args["ifs"][0].args["true"] == exp.column(
        "we`ird", quoted=True
    )
    assert "raise_error" in case.args["default"].sql(dialect="spark").lower()


def test_the_guards_error_is_recognised_in_classic_and_connect_shapes() -> None:
    classic = RuntimeError(
        "[USER_RAISED_EXCEPTION] deltaguard source check: the source holds date = 2024-01-02, outside the "
        "partitions target_partition_values declares SQLSTATE: P0001"
    )
    connect = RuntimeError(
        "(org.apache.spark.SparkRuntimeException) [USER_RAISED_EXCEPTION] deltaguard source check: the "
        "source holds date = NULL, outside the scope SQLSTATE: P0001\n\nJVM stacktrace:\n..."
    )
    assert source_check_message(classic) == (
        "the source holds date = 2024-01-02, outside the partitions target_partition_values declares"
    )
    assert source_check_message(connect) == "the source holds date = NULL, outside the scope"
    assert to_conflict_error(classic, "/t") is None
    assert source_check_message(RuntimeError("[DELTA_CONCURRENT_APPEND] ...")) is None


def test_the_statement_carries_the_claims_conjunct_unless_told_not_to() -> None:
    target = SparkTarget.parse("/tables/sales")
    scope = MergeScope(matched=(ColumnScope("date", "day", ("2024-01-01",)),))
    statement = merge_sql(target, _upsert(source_scope=scope), "v")
    assert "ON (t.id = s.id AND t.date = s.day) AND (t.date IN ('2024-01-01'))" in statement
    plain = merge_sql(target, _upsert(source_scope=scope, explicit_scope=False), "v")
    assert "ON t.id = s.id AND t.date = s.day\nWHEN" in plain
