"""Spark-side rules for write specs, with no Spark needed: Spark's own checks, MERGE clause order, SQL pieces.

Everything here is pure, so it is unit-tested without a JVM and runs before any lease is taken.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import sqlglot
from sqlglot import exp

from deltaguard.core.operations import OperationKind
from deltaguard.core.rules.delta_spark import read_isolation
from deltaguard.core.sql.literals import partition_predicate, sql_literal
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.specs import (
    AddColumnsSpec,
    CreateSpec,
    MergeSpec,
    OptimizeSpec,
    SetPropertiesSpec,
    SpecCheck,
    SqlSpec,
    WriteSpec,
)

#: the log operation names CREATE TABLE may commit
CREATE_OPERATION_NAMES = (
    "CREATE TABLE",
    "REPLACE TABLE",
    "CREATE OR REPLACE TABLE",
    "CREATE TABLE AS SELECT",
    "REPLACE TABLE AS SELECT",
    "CREATE OR REPLACE TABLE AS SELECT",
)

#: Log operation names of a SQL statement, by the kind it was classified as (empty: any name).
SQL_OPERATION_NAMES: Mapping[OperationKind, tuple[str, ...]] = {
    OperationKind.INSERT: ("WRITE",),
    OperationKind.OVERWRITE: ("WRITE",),
    OperationKind.REPLACE_WHERE: ("WRITE",),
    OperationKind.UPDATE: ("UPDATE",),
    OperationKind.DELETE: ("DELETE",),
    OperationKind.MERGE: ("MERGE",),
    OperationKind.OPTIMIZE: ("OPTIMIZE",),
    OperationKind.SET_TBLPROPERTIES: ("SET TBLPROPERTIES",),
    OperationKind.ADD_COLUMNS: ("ADD COLUMNS",),
    OperationKind.CREATE_OR_REPLACE: CREATE_OPERATION_NAMES,
}


def sql_operation_names(spec: SqlSpec) -> tuple[str, ...]:
    """The log operation names a SQL statement may commit, by the kind it was classified as."""
    return SQL_OPERATION_NAMES.get(spec.classified.kind, ())


def merge_clauses(spec: MergeSpec) -> list[tuple[Any, ...]]:
    """The MERGE clauses in execution order: ``(kind, condition[, assignments])``.

    ``matched_condition`` guards the first WHEN MATCHED clause. With both a delete and an update, the
    delete comes first and takes the condition (``WHEN MATCHED AND <cond> THEN DELETE WHEN MATCHED THEN
    UPDATE``), the usual change-data-capture shape; :func:`check_merge_for_spark` requires the condition then,
    since an unconditional first clause would make the second unreachable.
    """
    clauses: list[tuple[Any, ...]] = []
    condition = spec.matched_condition
    if spec.matched_delete:
        clauses.append(("delete", condition))
        condition = None
    if spec.matched_update_all:
        clauses.append(("update_all", condition))
    elif spec.matched_update is not None:
        clauses.append(("update", condition, spec.matched_update))
    if spec.not_matched_insert_all:
        clauses.append(("insert_all", None))
    elif spec.not_matched_insert is not None:
        clauses.append(("insert", None, spec.not_matched_insert))
    if spec.not_matched_by_source_delete:
        # "Not matched by source" ranges over the whole target whatever the ON condition says (Delta's
        # MergeIntoCommand); the declared target partitions scope it, as in the delta-rs engine, so the MERGE
        # deletes only in the partitions it was leased for.
        scope = (
            partition_predicate(spec.target_partition_values, qualifier=spec.target_alias)
            if spec.target_partition_values
            else None
        )
        clauses.append(("by_source_delete", scope))
    return clauses


def properties_sql(properties: Mapping[str, str]) -> str:
    """``'k1' = 'v1', 'k2' = 'v2'`` with keys and values as safely quoted string literals."""
    return ", ".join(f"{sql_literal(str(k))} = {sql_literal(str(v))}" for k, v in properties.items())


def columns_sql(columns: Mapping[str, str]) -> str:
    """```name` type, ...`` with quoted names and types normalised by sqlglot (so no SQL can ride along)."""
    parts = []
    for name, type_name in columns.items():
        parts.append(f"`{name.replace('`', '``')}` {spark_type_sql(type_name)}")
    return ", ".join(parts)


def spark_type_sql(type_name: str) -> str:
    """A Spark SQL type name, parsed and re-rendered.

    :raises InvalidWriteError: if it is not a type.
    """
    try:
        data_type = exp.DataType.build(type_name, dialect="spark")
    except (sqlglot.errors.ParseError, ValueError) as exc:
        raise InvalidWriteError(f"not a Spark SQL type: {type_name!r}") from exc
    rendered = data_type.sql(dialect="spark")
    # sqlglot stops at the first token it cannot use ("string) ; DROP ..." builds STRING), so the whole
    # input must survive the round trip, up to case, spaces, quotes and Spark's type synonyms.
    if data_type.this == exp.DataType.Type.USERDEFINED or _squash(type_name) != _squash(rendered):
        raise InvalidWriteError(f"not a Spark SQL type: {type_name!r}")
    return rendered


_TYPE_SYNONYMS = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint"}


def _squash(type_text: str) -> str:
    words = re.split(r"(\W)", type_text.lower().replace("`", ""))
    return "".join(_TYPE_SYNONYMS.get(w, w) for w in words if not w.isspace())


def check_isolation_level(spec: WriteSpec, config: TableConfig) -> None:
    """Refuse a write delta-spark would fail at commit: the table's ``delta.isolationLevel`` is no level it knows.

    Measured (:func:`deltaguard.core.rules.delta_spark.read_isolation`): delta-spark 4.4.0 fails every write
    to such a table, after running the write's job. A write that sets the property itself (the repair) or
    replaces the table is left to the engine.

    :param spec: the write.
    :param config: the existing table's configuration.
    :raises InvalidWriteError: naming the value and the fix.
    """
    reading = read_isolation(config.get_property("delta.isolationLevel"))
    if reading.problem is None:
        return
    if isinstance(spec, SetPropertiesSpec) and "delta.isolationLevel" in spec.properties:
        return
    if isinstance(spec, CreateSpec) and spec.replace:
        return
    raise InvalidWriteError(f"{config.uri or 'the table'}: {reading.problem}")


# -- what Spark needs beyond the specs' own checks (registered with the runners, spark/runners.py) --------


def check_merge_for_spark(spec: MergeSpec, check: SpecCheck) -> None:
    """With both a matched delete and a matched update, :func:`merge_clauses` guards the delete with
    ``matched_condition``; without one the update would be unreachable."""
    both = spec.matched_delete and (spec.matched_update is not None or spec.matched_update_all)
    if both and spec.matched_condition is None:
        raise InvalidWriteError(
            "MERGE with both matched delete and matched update needs matched_condition "
            "(it guards the delete; otherwise the update is unreachable)"
        )


def check_optimize_for_spark(spec: OptimizeSpec, check: SpecCheck) -> None:
    """Delta Spark's OPTIMIZE refuses to ZORDER BY a partition column."""
    partitions = set(check.partitions or ()) if check.exists else set()
    if set(spec.zorder_by) & partitions:
        raise InvalidWriteError(
            f"OPTIMIZE cannot ZORDER BY partition columns: {sorted(set(spec.zorder_by) & partitions)}"
        )


def check_add_columns_for_spark(spec: AddColumnsSpec, check: SpecCheck) -> None:
    """The column types render as Spark SQL (:func:`columns_sql`)."""
    columns_sql(spec.columns)


def check_create_for_spark(spec: CreateSpec, check: SpecCheck) -> None:
    """The schema's types render as Spark SQL (:func:`columns_sql`)."""
    if spec.schema is not None:
        columns_sql(spec.schema)
