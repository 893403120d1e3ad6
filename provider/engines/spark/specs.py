"""Spark-side rules for write specs, with no Spark needed: validation, MERGE clause order, SQL pieces.

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
    AppendSpec,
    CreateSpec,
    DeleteSpec,
    MergeSpec,
    OptimizeSpec,
    OverwriteSpec,
    ReplaceWhereSpec,
    SetPropertiesSpec,
    SqlSpec,
    UpdateSpec,
    WriteSpec,
    write_name,
)

#: The Delta log operation names each spec commits (the first is the one usually recorded).
OPERATION_NAMES: Mapping[type, tuple[str, ...]] = {
    AppendSpec: ("WRITE", "CREATE TABLE AS SELECT"),
    ReplaceWhereSpec: ("WRITE",),
    OverwriteSpec: ("WRITE", "CREATE OR REPLACE TABLE AS SELECT", "CREATE TABLE AS SELECT"),
    MergeSpec: ("MERGE",),
    UpdateSpec: ("UPDATE",),
    DeleteSpec: ("DELETE",),
    OptimizeSpec: ("OPTIMIZE",),
    SetPropertiesSpec: ("SET TBLPROPERTIES",),
    AddColumnsSpec: ("ADD COLUMNS",),
    SqlSpec: (),
    CreateSpec: (
        "CREATE TABLE",
        "REPLACE TABLE",
        "CREATE OR REPLACE TABLE",
        "CREATE TABLE AS SELECT",
        "REPLACE TABLE AS SELECT",
        "CREATE OR REPLACE TABLE AS SELECT",
    ),
}
#: Specs that may create the table they write.
CREATING_SPECS = (AppendSpec, OverwriteSpec, CreateSpec)


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
    OperationKind.CREATE_OR_REPLACE: OPERATION_NAMES[CreateSpec],
}


def operation_names(spec: WriteSpec) -> tuple[str, ...]:
    """The Delta log operation names ``spec`` may commit (empty: unknown, any commit may be it)."""
    if isinstance(spec, SqlSpec):
        return SQL_OPERATION_NAMES.get(spec.classified.kind, ())
    return OPERATION_NAMES[type(spec)]


def may_create(spec: WriteSpec) -> bool:
    """Whether ``spec`` may create the table it writes."""
    if isinstance(spec, SqlSpec):
        return spec.classified.kind is OperationKind.CREATE_OR_REPLACE
    return isinstance(spec, CREATING_SPECS)


def merge_clauses(spec: MergeSpec) -> list[tuple[Any, ...]]:
    """The MERGE clauses in execution order: ``(kind, condition[, assignments])``.

    ``matched_condition`` guards the first WHEN MATCHED clause. With both a delete and an update, the
    delete comes first and takes the condition (``WHEN MATCHED AND <cond> THEN DELETE WHEN MATCHED THEN
    UPDATE``), the usual change-data-capture shape; :func:`validate_spec` requires the condition then,
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


def _check_sql(text: str | None, what: str) -> None:
    if text is None:
        return
    if not text.strip():
        raise InvalidWriteError(f"{what} is empty")
    try:
        sqlglot.parse_one(text, dialect="spark")
    except sqlglot.errors.ParseError as exc:
        raise InvalidWriteError(
            f"{what} is not valid Spark SQL: {text!r} ({exc.errors[0]['description']})"
        ) from exc


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


def validate_spec(spec: WriteSpec, config: TableConfig | None) -> None:
    """Reject a malformed spec before anything runs.

    :param spec: the write.
    :param config: the table's configuration when known (checks partition columns and existence).
    :raises InvalidWriteError: naming what is wrong.
    """
    if type(spec) not in OPERATION_NAMES:
        raise InvalidWriteError(f"the Spark engine cannot run {write_name(spec)}")
    exists = config.exists if config is not None else None
    partitions = set(config.partition_columns) if config is not None and config.exists else None
    if exists is False and not may_create(spec):
        raise InvalidWriteError(
            f"{write_name(spec, capital=True)} needs an existing table; {config and config.uri} has none"
        )
    if config is not None and config.exists:
        check_isolation_level(spec, config)
    if isinstance(spec, AppendSpec | OverwriteSpec | ReplaceWhereSpec | MergeSpec) and spec.source is None:
        raise InvalidWriteError(f"{write_name(spec, capital=True)} needs a source")
    if isinstance(spec, MergeSpec):
        _check_sql(spec.condition, "MERGE condition")
        _check_sql(spec.matched_condition, "MERGE matched condition")
        clauses = merge_clauses(spec)
        if not clauses:
            raise InvalidWriteError("MERGE needs at least one WHEN clause")
        if spec.matched_update is not None and spec.matched_update_all:
            raise InvalidWriteError("MERGE: give matched_update or matched_update_all, not both")
        if spec.not_matched_insert is not None and spec.not_matched_insert_all:
            raise InvalidWriteError("MERGE: give not_matched_insert or not_matched_insert_all, not both")
        both = spec.matched_delete and (spec.matched_update is not None or spec.matched_update_all)
        if both and spec.matched_condition is None:
            raise InvalidWriteError(
                "MERGE with both matched delete and matched update needs matched_condition "
                "(it guards the delete; otherwise the update is unreachable)"
            )
        for column, expression in {**(spec.matched_update or {}), **(spec.not_matched_insert or {})}.items():
            _check_sql(expression, f"MERGE expression for {column}")
        _check_partitions(spec.target_partition_values, partitions, "MERGE target partition")
    elif isinstance(spec, UpdateSpec):
        if not spec.updates:
            raise InvalidWriteError("UPDATE needs at least one column assignment")
        _check_sql(spec.predicate, "UPDATE predicate")
        for column, expression in spec.updates.items():
            _check_sql(expression, f"UPDATE expression for {column}")
    elif isinstance(spec, DeleteSpec):
        _check_sql(spec.predicate, "DELETE predicate")
    elif isinstance(spec, ReplaceWhereSpec):
        if not spec.predicate or not spec.predicate.strip():
            raise InvalidWriteError("replaceWhere needs a predicate")
        _check_sql(spec.predicate, "replaceWhere predicate")
    elif isinstance(spec, OptimizeSpec):
        _check_partitions(spec.partition_filters, partitions, "OPTIMIZE partition filter")
        if partitions is not None and set(spec.zorder_by) & partitions:
            raise InvalidWriteError(
                f"OPTIMIZE cannot ZORDER BY partition columns: {sorted(set(spec.zorder_by) & partitions)}"
            )
        if spec.target_size is not None and spec.target_size <= 0:
            raise InvalidWriteError("OPTIMIZE target_size must be positive")
    elif isinstance(spec, SetPropertiesSpec):
        if not spec.properties:
            raise InvalidWriteError("SET TBLPROPERTIES needs at least one property")
    elif isinstance(spec, AddColumnsSpec):
        if not spec.columns:
            raise InvalidWriteError("ADD COLUMNS needs at least one column")
        columns_sql(spec.columns)
    elif isinstance(spec, SqlSpec):
        if not spec.sql.strip():
            raise InvalidWriteError("the SQL statement is empty")
    elif isinstance(spec, CreateSpec):
        if spec.schema is None and spec.source is None:
            raise InvalidWriteError("create needs a schema or a source")
        if spec.schema is not None:
            columns_sql(spec.schema)
            missing = [c for c in spec.partition_by if c not in spec.schema]
            if missing:
                raise InvalidWriteError(f"partition columns {missing} are not in the schema")
        if exists and not spec.replace:
            raise InvalidWriteError(
                f"table {config and config.uri} already exists; set replace=True to replace it"
            )


def _check_partitions(values: Mapping[str, Any], partitions: set[str] | None, what: str) -> None:
    if partitions is None or not values:
        return
    unknown = sorted(set(values) - partitions)
    if unknown:
        raise InvalidWriteError(f"{what} columns {unknown} are not partition columns ({sorted(partitions)})")
