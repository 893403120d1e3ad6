"""Engine-neutral checks of a write spec, run before anything is written or any lease is taken.

Everything here raises :class:`~deltaguard.engines.errors.InvalidWriteError` with a message that says
what to fix. SQL snippets (predicates, MERGE conditions, update expressions) are parsed with sqlglot in
the dialect the engine will execute them in; only syntax (and, when the table's columns are known,
unqualified column names) is checked -- the engine remains the final judge of semantics.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

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
    UpdateSpec,
    WriteContext,
    WriteSpec,
    write_name,
)

#: Specs that may run against a table that does not exist yet (they create it).
CREATING_SPECS = (AppendSpec, OverwriteSpec, CreateSpec)

#: commitInfo keys the engine sets itself; caller metadata must not use them.
RESERVED_COMMIT_KEYS: frozenset[str] = frozenset(
    {
        "timestamp",
        "operation",
        "operationParameters",
        "operationMetrics",
        "readVersion",
        "isolationLevel",
        "isBlindAppend",
        "engineInfo",
        "clientVersion",
        "version",
        "userId",
        "userName",
    }
)

#: Prefix of the commit metadata keys deltaguard itself records.
DELTAGUARD_KEY_PREFIX = "deltaguard."


def validate_context(context: WriteContext) -> None:
    """Check the idempotency pair and the commit metadata.

    :raises InvalidWriteError: for half an idempotency pair, a negative version, or reserved/non-string
        metadata.
    """
    if (context.app_id is None) != (context.app_version is None):
        raise InvalidWriteError("app_id and app_version go together: give both or neither")
    if context.app_id is not None and not context.app_id.strip():
        raise InvalidWriteError("app_id must not be empty")
    if context.app_version is not None and (
        isinstance(context.app_version, bool)
        or not isinstance(context.app_version, int)
        or context.app_version < 0
    ):
        raise InvalidWriteError(f"app_version must be an integer >= 0, got {context.app_version!r}")
    if context.max_commit_retries is not None and context.max_commit_retries < 0:
        raise InvalidWriteError("max_commit_retries must be >= 0")
    for key, value in context.commit_metadata.items():
        if not isinstance(key, str) or not key:
            raise InvalidWriteError(f"commit metadata keys must be non-empty strings, got {key!r}")
        if key in RESERVED_COMMIT_KEYS or key.startswith(DELTAGUARD_KEY_PREFIX):
            raise InvalidWriteError(f"commit metadata key {key!r} is reserved")
        if not isinstance(value, str):
            raise InvalidWriteError(
                f"commit metadata value for {key!r} must be a string, got {type(value).__name__}"
            )


def validate_spec(
    spec: WriteSpec, config: TableConfig, columns: Collection[str] | None = None, dialect: str = "postgres"
) -> None:
    """Check a spec against the table it will write.

    :param spec: the write.
    :param config: the table's configuration (``exists=False`` for a table that does not exist yet).
    :param columns: the table's column names when known (enables column-name checks).
    :param dialect: sqlglot dialect of the executing engine (``postgres`` for DataFusion, ``spark``).
    :raises InvalidWriteError: describing the first problem found.
    """
    if not config.exists and not isinstance(spec, CREATING_SPECS):
        raise InvalidWriteError(
            f"{write_name(spec, capital=True)} needs an existing table, but {config.uri or 'the table'} does "
            "not exist"
        )
    partitions = config.partition_columns if config.exists else getattr(spec, "partition_by", ())
    checker = _CHECKERS.get(type(spec))
    if checker is None:
        raise InvalidWriteError(f"{write_name(spec, capital=True)} is not supported here")
    checker(spec, config, tuple(partitions), columns, dialect)


def parse_sql(text: Any, what: str, dialect: str, columns: Collection[str] | None = None) -> exp.Expr:
    """Parse one SQL expression (not a statement), checking unqualified column names when known.

    :raises InvalidWriteError: when ``text`` is empty, does not parse, is several statements or a query/DDL.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidWriteError(f"{what} must be a non-empty SQL expression, got {text!r}")
    try:
        parsed = sqlglot.parse(text, read=dialect)
    except SqlglotError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidWriteError(f"{what} does not parse: {text!r} ({reason})") from exc
    if len(parsed) != 1 or parsed[0] is None:
        raise InvalidWriteError(f"{what} must be one SQL expression, not several statements: {text!r}")
    expression: exp.Expr = parsed[0]
    if isinstance(expression, exp.Query | exp.DDL | exp.DML | exp.Command):
        raise InvalidWriteError(f"{what} must be an expression, not a statement: {text!r}")
    if columns is not None:
        known = {c.lower() for c in columns}
        for column in expression.find_all(exp.Column):
            if not column.table and column.name.lower() not in known:
                raise InvalidWriteError(f"{what} references unknown column {column.name!r}: {text!r}")
    return expression


def check_partition_keys(values: Mapping[str, Any], partitions: tuple[str, ...], what: str) -> None:
    """Every key of ``values`` must be a partition column (Delta names are case-insensitive)."""
    lowered = {p.lower() for p in partitions}
    for key in values:
        if key.lower() not in lowered:
            raise InvalidWriteError(
                f"{what} names {key!r}, which is not a partition column (partition columns: {list(partitions)})"
            )


def _check_append(
    spec: Any, config: TableConfig, partitions: tuple[str, ...], columns: Any, dialect: str
) -> None:
    if spec.source is None:
        raise InvalidWriteError("an append needs a source")
    if (
        config.exists
        and spec.partition_by
        and [c.lower() for c in spec.partition_by] != [c.lower() for c in config.partition_columns]
    ):
        raise InvalidWriteError(
            f"partition_by {list(spec.partition_by)} differs from the table's {list(config.partition_columns)}"
        )
    check_partition_keys(spec.partition_values, partitions, "partition_values")


def _check_merge(
    spec: Any, config: TableConfig, partitions: tuple[str, ...], columns: Any, dialect: str
) -> None:
    if spec.source is None:
        raise InvalidWriteError("a MERGE needs a source")
    if not isinstance(spec.condition, str) or not spec.condition.strip():
        raise InvalidWriteError("a MERGE needs an ON condition")
    parse_sql(spec.condition, "MERGE condition", dialect)
    if spec.matched_condition is not None:
        parse_sql(spec.matched_condition, "MERGE matched condition", dialect)
    check_partition_keys(spec.target_partition_values, partitions, "target_partition_values")
    if spec.matched_update is not None and spec.matched_update_all:
        raise InvalidWriteError("give matched_update or matched_update_all, not both")
    if spec.not_matched_insert is not None and spec.not_matched_insert_all:
        raise InvalidWriteError("give not_matched_insert or not_matched_insert_all, not both")
    clauses = (
        spec.matched_update is not None,
        spec.matched_update_all,
        spec.matched_delete,
        spec.not_matched_insert is not None,
        spec.not_matched_insert_all,
        spec.not_matched_by_source_delete,
    )
    if not any(clauses):
        raise InvalidWriteError("a MERGE needs at least one WHEN clause")
    for mapping, what in (
        (spec.matched_update, "matched_update"),
        (spec.not_matched_insert, "not_matched_insert"),
    ):
        if mapping is not None:
            if not mapping:
                raise InvalidWriteError(f"{what} must set at least one column")
            for column, expression in mapping.items():
                parse_sql(expression, f"{what}[{column!r}]", dialect)
    if not spec.source_alias or not spec.target_alias or spec.source_alias == spec.target_alias:
        raise InvalidWriteError("source_alias and target_alias must be two different, non-empty aliases")


def _check_update(
    spec: Any, config: TableConfig, partitions: tuple[str, ...], columns: Any, dialect: str
) -> None:
    if not spec.updates:
        raise InvalidWriteError("an UPDATE must set at least one column")
    known = {c.lower() for c in columns} if columns is not None else None
    for column, expression in spec.updates.items():
        if known is not None and column.lower() not in known:
            raise InvalidWriteError(f"UPDATE sets unknown column {column!r}")
        parse_sql(expression, f"UPDATE expression for {column!r}", dialect, columns)
    if spec.predicate is not None:
        parse_sql(spec.predicate, "UPDATE predicate", dialect, columns)


def _check_delete(
    spec: Any, config: TableConfig, partitions: tuple[str, ...], columns: Any, dialect: str
) -> None:
    if spec.predicate is not None:
        parse_sql(spec.predicate, "DELETE predicate", dialect, columns)


def _check_replace_where(
    spec: Any, config: TableConfig, partitions: tuple[str, ...], columns: Any, dialect: str
) -> None:
    if spec.source is None:
        raise InvalidWriteError("a replace-where needs a source")
    if not isinstance(spec.predicate, str) or not spec.predicate.strip():
        raise InvalidWriteError("a replace-where needs a predicate (use an overwrite to replace everything)")
    parse_sql(spec.predicate, "replace-where predicate", dialect, columns)


def _check_overwrite(
    spec: Any, config: TableConfig, partitions: tuple[str, ...], columns: Any, dialect: str
) -> None:
    if spec.source is None:
        raise InvalidWriteError("an overwrite needs a source")


def _check_optimize(
    spec: Any, config: TableConfig, partitions: tuple[str, ...], columns: Any, dialect: str
) -> None:
    check_partition_keys(spec.partition_filters, partitions, "partition_filters")
    for key, value in spec.partition_filters.items():
        if value is None:
            raise InvalidWriteError(f"partition filter {key!r} needs a value, not None")
    if any(not isinstance(c, str) or not c.strip() for c in spec.zorder_by):
        raise InvalidWriteError(f"zorder_by must be column names, got {list(spec.zorder_by)}")
    if columns is not None:
        known = {c.lower() for c in columns}
        for column in spec.zorder_by:
            if column.lower() not in known:
                raise InvalidWriteError(f"zorder_by names unknown column {column!r}")
    if spec.target_size is not None and spec.target_size <= 0:
        raise InvalidWriteError("target_size must be a positive number of bytes")


def _check_set_properties(
    spec: Any, config: TableConfig, partitions: tuple[str, ...], columns: Any, dialect: str
) -> None:
    if not spec.properties:
        raise InvalidWriteError("set properties needs at least one property")
    for key, value in spec.properties.items():
        if not isinstance(key, str) or not key.strip() or not isinstance(value, str):
            raise InvalidWriteError(f"table properties are string -> string, got {key!r}: {value!r}")


def _check_add_columns(
    spec: Any, config: TableConfig, partitions: tuple[str, ...], columns: Any, dialect: str
) -> None:
    from deltaguard.engines.spark.schema_types import spark_type_to_delta

    if not spec.columns:
        raise InvalidWriteError("add columns needs at least one column")
    known = {c.lower() for c in columns} if columns is not None else set()
    for name, type_name in spec.columns.items():
        if not isinstance(name, str) or not name.strip():
            raise InvalidWriteError(f"column names must be non-empty strings, got {name!r}")
        if name.lower() in known:
            raise InvalidWriteError(f"column {name!r} already exists")
        spark_type_to_delta(type_name)


def _check_create(
    spec: Any, config: TableConfig, partitions: tuple[str, ...], columns: Any, dialect: str
) -> None:
    from deltaguard.engines.spark.schema_types import schema_from_spark_types

    if config.exists and not spec.replace:
        raise InvalidWriteError(f"table {config.uri or ''} already exists; set replace=True to replace it")
    if spec.schema is None and spec.source is None:
        raise InvalidWriteError("create needs a schema or a source")
    if spec.schema is not None:
        schema_from_spark_types(dict(spec.schema))
        names = {n.lower() for n in spec.schema}
        missing = [p for p in spec.partition_by if p.lower() not in names]
        if missing:
            raise InvalidWriteError(f"partition_by names columns not in the schema: {missing}")
    _check_set_properties_if_any(spec.properties)


def _check_set_properties_if_any(properties: Mapping[str, Any]) -> None:
    for key, value in properties.items():
        if not isinstance(key, str) or not key.strip() or not isinstance(value, str):
            raise InvalidWriteError(f"table properties are string -> string, got {key!r}: {value!r}")


_CHECKERS: dict[type, Any] = {
    AppendSpec: _check_append,
    MergeSpec: _check_merge,
    UpdateSpec: _check_update,
    DeleteSpec: _check_delete,
    ReplaceWhereSpec: _check_replace_where,
    OverwriteSpec: _check_overwrite,
    OptimizeSpec: _check_optimize,
    SetPropertiesSpec: _check_set_properties,
    AddColumnsSpec: _check_add_columns,
    CreateSpec: _check_create,
}
