"""Parse the ``deltaguard check`` JSON document into engine profile, table and operations.

Type checks are strict (a boolean must be a JSON boolean, a version a string) and unknown keys are
rejected, because a misspelt ``reads_target`` silently ignored would turn a conflict into "no_conflict".
Every error is a :class:`RequestError` with a one-line message naming the offending field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from deltaguard.core.closed_world import unknown_settings
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import (
    DELTA_RS_TIME_ZONE,
    STORAGE_COORDINATION,
    EngineName,
    EngineProfile,
    parse_version,
)
from deltaguard.core.table_config import TableConfig


class RequestError(ValueError):
    """Invalid ``check`` input (one-line message)."""


@dataclass(frozen=True)
class CheckRequest:
    """One ``check`` document.

    :param profile: the engine.
    :param table: the table.
    :param running: operations already running on the table.
    :param candidate: the operation that wants to start.
    """

    profile: EngineProfile
    table: TableConfig
    running: tuple[Operation, ...]
    candidate: Operation


_ENGINE_KEYS: dict[EngineName, dict[str, type]] = {
    EngineName.DATABRICKS: {
        "name": str,
        "runtime": str,
        "photon": bool,
        "row_level_preview": bool,
        "row_level_off": bool,
        "commit_coordination": str,
        "session_time_zone": str,
        "ansi": bool,
        "default_parser": bool,
        "settings": dict,
    },
    EngineName.DELTA_SPARK: {
        "name": str,
        "version": str,
        "commit_coordination": str,
        "session_time_zone": str,
        "ansi": bool,
        "default_parser": bool,
        "settings": dict,
    },
    EngineName.DELTA_RS: {"name": str, "version": str, "commit_coordination": str, "session_time_zone": str},
}
_TABLE_KEYS: dict[str, type] = {
    "partition_columns": list,
    "properties": dict,
    "clustering_columns": list,
    "identity_columns": list,
    "generated_columns": dict,
    "timestamp_columns": list,
    "column_types": dict,
    "exists": bool,
    "unknown": list,
    "uri": str,
}
_OPERATION_KEYS: dict[str, type] = {
    "operation": str,
    "predicate": str,
    "merge_condition": str,
    "target_alias": str,
    "zorder_by": list,
    "reads_target": bool,
    "checkpoint_location": str,
    "assignments": dict,
    "inserts": str,
    "evolves_schema": bool,
    "engine": dict,
    "sql": str,
    "label": str,
}
#: fields that only make sense for some operations (a misplaced one is a mistake worth reporting)
_ONLY_FOR: dict[str, frozenset[OperationKind]] = {
    "merge_condition": frozenset({OperationKind.MERGE}),
    "target_alias": frozenset({OperationKind.MERGE}),
    "zorder_by": frozenset({OperationKind.OPTIMIZE}),
    "reads_target": frozenset(
        {
            OperationKind.INSERT,
            OperationKind.UPDATE,
            OperationKind.DELETE,
            OperationKind.MERGE,
            OperationKind.REPLACE_WHERE,
            OperationKind.OVERWRITE,
        }
    ),
    "inserts": frozenset({OperationKind.MERGE}),
    # the writes that can add columns as they commit (ADR 0035)
    "evolves_schema": frozenset(
        {OperationKind.INSERT, OperationKind.MERGE, OperationKind.REPLACE_WHERE, OperationKind.OVERWRITE}
    ),
    "assignments": frozenset({OperationKind.UPDATE, OperationKind.MERGE}),
    "checkpoint_location": frozenset({OperationKind.STREAMING_WRITE}),
}
_TYPE_NAMES = {str: "a string", bool: "a boolean", list: "a list", dict: "an object"}


def _check_fields(where: str, value: Any, allowed: Mapping[str, type]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestError(f"{where}: expected a JSON object, got {_json_type(value)}")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise RequestError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
    for key, item in value.items():
        expected = allowed[key]
        if item is None and expected is not bool and key not in ("operation", "name"):
            continue  # null means "not given" for optional strings and lists
        # bool is a subclass of int, and no field here takes a number, so isinstance is exact enough.
        if not isinstance(item, expected):
            raise RequestError(f"{where}.{key}: expected {_TYPE_NAMES[expected]}, got {_json_type(item)}")
    return {k: v for k, v in value.items() if v is not None}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _string_list(where: str, value: list[Any]) -> tuple[str, ...]:
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise RequestError(f"{where}[{i}]: expected a non-empty string, got {_json_type(item)}")
    return tuple(value)


def parse_engine(value: Any, where: str = "engine") -> EngineProfile:
    """``{"name": "databricks", "runtime": "14.3", "photon": false}`` and friends.

    :param value: the decoded JSON value.
    :param where: the field path for messages.
    :raises RequestError: on any problem.
    """
    if not isinstance(value, dict):
        raise RequestError(f"{where}: expected a JSON object, got {_json_type(value)}")
    raw_name = value.get("name")
    if not isinstance(raw_name, str):
        raise RequestError(f"{where}.name: required, one of {', '.join(e.value for e in EngineName)}")
    try:
        name = EngineName(raw_name.strip().lower())
    except ValueError:
        raise RequestError(
            f"{where}.name: unknown engine {raw_name!r}; expected one of {', '.join(e.value for e in EngineName)}"
        ) from None
    fields = _check_fields(where, value, _ENGINE_KEYS[name])
    version_key = "runtime" if name is EngineName.DATABRICKS else "version"
    version = fields.get(version_key)
    if version is None:
        raise RequestError(f'{where}.{version_key}: required for {name.value} (a string such as "14.3")')
    try:
        parse_version(version)
    except ValueError:
        raise RequestError(f"{where}.{version_key}: not a version: {version!r}") from None
    return EngineProfile(
        name=name,
        version=version,
        photon=fields.get("photon", False),
        row_level_preview=fields.get("row_level_preview", False),
        row_level_off=fields.get("row_level_off", False),
        commit_coordination=fields.get("commit_coordination", STORAGE_COORDINATION),
        # delta-rs reads zone-less literals as UTC (ADR 0001); a Spark session's zone is unknown unless given
        session_time_zone=fields.get(
            "session_time_zone", DELTA_RS_TIME_ZONE if name is EngineName.DELTA_RS else None
        ),
        # spark.sql.ansi.enabled of the Spark session; unknown unless given
        session_ansi=fields.get("ansi"),
        # spark.sql.ansi.doubleQuotedIdentifiers and spark.sql.parser.escapedStringLiterals both off
        session_default_parser=fields.get("default_parser"),
        # the session's Spark SQL and Delta settings, read as the Spark engine reads them
        session_unknown_settings=unknown_settings(
            {str(k): str(v) for k, v in fields.get("settings", {}).items()}
        ),
    )


def parse_table(value: Any, where: str = "table") -> TableConfig:
    """The table object of a ``check`` document.

    :param value: the decoded JSON value.
    :param where: the field path for messages.
    :raises RequestError: on any problem.
    """
    fields = _check_fields(where, value, _TABLE_KEYS)
    properties: dict[str, str] = {}
    for key, item in fields.get("properties", {}).items():
        # Delta stores every property as a string; a JSON boolean is accepted as its lower-case spelling.
        if isinstance(item, bool):
            item = "true" if item else "false"
        if not isinstance(item, str):
            raise RequestError(f"{where}.properties.{key}: expected a string, got {_json_type(item)}")
        properties[key] = item
    partition_columns = _string_list(f"{where}.partition_columns", fields.get("partition_columns", []))
    clustering_columns = _string_list(f"{where}.clustering_columns", fields.get("clustering_columns", []))
    if partition_columns and clustering_columns:
        raise RequestError(
            f"{where}: a Delta table cannot have both partition_columns and clustering_columns"
        )
    return TableConfig(
        partition_columns=partition_columns,
        properties=properties,
        clustering_columns=clustering_columns,
        identity_columns=_string_list(f"{where}.identity_columns", fields.get("identity_columns", [])),
        generated_columns=_generated(f"{where}.generated_columns", fields.get("generated_columns", {})),
        timestamp_columns=_string_list(f"{where}.timestamp_columns", fields.get("timestamp_columns", [])),
        column_types=(
            _column_types(f"{where}.column_types", fields["column_types"])
            if "column_types" in fields
            else None
        ),
        exists=fields.get("exists", True),
        unknown=_string_list(f"{where}.unknown", fields.get("unknown", [])),
        uri=fields.get("uri"),
    )


def _column_types(where: str, value: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """``{"p": "string", "n": "decimal(5,2)"}``: column -> Delta type."""
    for column, kind in value.items():
        if not isinstance(kind, str) or not kind.strip():
            raise RequestError(f"{where}.{column}: expected a non-empty string, got {_json_type(kind)}")
    return tuple((str(column), kind) for column, kind in value.items())


def _generated(where: str, value: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """``{"d": "CAST(ts AS DATE)"}``: generated column -> generation expression."""
    pairs = []
    for column, expression in value.items():
        if not isinstance(expression, str) or not expression.strip():
            raise RequestError(
                f"{where}.{column}: expected a generation expression, got {_json_type(expression)}"
            )
        pairs.append((column, expression))
    return tuple(pairs)


def parse_operation(value: Any, where: str = "operation") -> Operation:
    """One operation: ``{"operation": "MERGE", "merge_condition": ...}`` or ``{"sql": "..."}``.

    :param value: the decoded JSON value.
    :param where: the field path for messages.
    :raises RequestError: on any problem (an SQL statement that cannot be classified included).
    """
    return _parse_operation(value, where)[0]


def _parse_operation(value: Any, where: str) -> tuple[Operation, str | None]:
    """The operation and, when given as SQL, the table the statement writes to."""
    fields = _check_fields(where, value, _OPERATION_KEYS)
    engine = parse_engine(fields["engine"], f"{where}.engine") if "engine" in fields else None
    if "sql" in fields:
        extra = sorted(set(fields) - {"sql", "label", "engine"})
        if extra:
            raise RequestError(
                f"{where}: give either sql or operation fields, not both (also got {', '.join(extra)})"
            )
        operation, table = _classify(fields["sql"], fields.get("label"), where)
        return replace(operation, engine=engine), table
    raw_kind = fields.get("operation")
    if raw_kind is None:
        raise RequestError(f"{where}: needs operation (or sql)")
    try:
        kind = OperationKind(raw_kind.strip().upper())
    except ValueError:
        raise RequestError(
            f"{where}.operation: unknown operation {raw_kind!r}; expected one of "
            + ", ".join(k.value for k in OperationKind)
        ) from None
    for key, kinds in _ONLY_FOR.items():
        if (
            key in fields
            and kind not in kinds
            and not (key == "zorder_by" and kind is OperationKind.REORG_PURGE)
        ):
            raise RequestError(
                f"{where}.{key}: only applies to {', '.join(k.value for k in kinds)}, not {kind.value}"
            )
    operation = Operation(
        kind=kind,
        predicate=fields.get("predicate"),
        merge_condition=fields.get("merge_condition"),
        target_alias=fields.get("target_alias", "t"),
        zorder_by=_string_list(f"{where}.zorder_by", fields.get("zorder_by", [])),
        reads_target=fields.get("reads_target", False),
        checkpoint_location=fields.get("checkpoint_location"),
        assignments=_assignment_pairs(f"{where}.assignments", fields.get("assignments", {})),
        inserts=_inserts(kind, fields),
        evolves_schema=fields.get("evolves_schema", False),
        engine=engine,
        label=fields.get("label"),
    )
    _validate(operation, where)
    return operation, None


def _assignment_pairs(where: str, value: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """``{"date": "'2024-01-03'"}``: column -> SQL expression an UPDATE / MERGE sets."""
    for key, item in value.items():
        if not isinstance(item, str) or not item.strip():
            raise RequestError(f"{where}.{key}: expected a SQL expression string, got {_json_type(item)}")
    return tuple(value.items())


def _inserts(kind: OperationKind, fields: dict[str, Any]) -> str | None:
    """A MERGE's inserted rows: ``""`` means none, ``null`` or absent means anywhere, text is a predicate.

    Absent is read as anywhere because a ``WHEN NOT MATCHED THEN INSERT`` adds the source's rows wherever
    their values put them, whatever the ON condition names; a document that says nothing about them has
    not ruled that out. Only a MERGE inserts rows this way.
    """
    if kind is not OperationKind.MERGE:
        return ""
    inserts: str | None = fields.get("inserts")
    return inserts


def _validate(operation: Operation, where: str) -> None:
    """Parse predicates now, so a bad one is reported with the field that holds it."""
    from deltaguard.core.facts import build_facts

    try:
        build_facts(operation)
    except ValueError as error:
        raise RequestError(f"{where}: {_one_line(error)}") from None


def _classify(sql: str, label: str | None, where: str) -> tuple[Operation, str | None]:
    from deltaguard.core.sql.classify import classify_sql

    try:
        classified = classify_sql(sql)
    except ValueError as error:
        raise RequestError(f"{where}.sql: {_one_line(error)}") from None
    operation: Operation = classified.operation
    if label:
        operation = replace(operation, label=f"{label}: {operation.label}" if operation.label else label)
    _validate(operation, where)
    return operation, classified.table


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


_DOCUMENT_KEYS: dict[str, type] = {"engine": dict, "table": dict, "running": list, "candidate": dict}


def parse_request(value: Any, where: str = "document") -> CheckRequest:
    """A whole ``check`` document.

    :param value: the decoded JSON value.
    :param where: the path for messages (``document`` or ``document[3]``).
    :raises RequestError: on any problem.
    """
    fields = _check_fields(where, value, _DOCUMENT_KEYS)
    for required in ("engine", "candidate"):
        if required not in fields:
            raise RequestError(f"{where}: missing {required}")
    profile = parse_engine(fields["engine"], f"{where}.engine")
    table = parse_table(fields.get("table", {}), f"{where}.table")
    parsed = [
        _parse_operation(item, f"{where}.running[{i}]") for i, item in enumerate(fields.get("running", []))
    ]
    candidate = _parse_operation(fields["candidate"], f"{where}.candidate")
    _same_table(where, [*parsed, candidate])
    return CheckRequest(
        profile=profile, table=table, running=tuple(op for op, _ in parsed), candidate=candidate[0]
    )


def _table_identity(name: str) -> str:
    """One spelling per table (:func:`~deltaguard.core.locations.table_identity`): scheme aliases and path
    spellings of one location are one table, a name is compared without backticks and case."""
    from deltaguard.core.locations import table_identity

    return table_identity(name.replace("`", ""))


def _same_table(where: str, operations: list[tuple[Operation, str | None]]) -> None:
    """SQL statements in one document must all write to the same table (the document describes one)."""
    targets = {_table_identity(name): name for _, name in operations if name is not None}
    if len(targets) > 1:
        raise RequestError(
            f"{where}: the SQL statements write to different tables ({', '.join(sorted(targets.values()))}); "
            "one document describes one table"
        )
