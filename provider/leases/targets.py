"""What a leased task declares it writes: tables and operations, for work deltaguard does not run itself.

A wrapped operator (``DatabricksSqlOperator``, ``SparkSubmitOperator``, a TaskFlow function, ...) commits
through its own engine, so deltaguard learns what it writes only from the DAG author: an operation kind
with an optional predicate (as deltaguard's own operators build them), a whole
:class:`~deltaguard.core.operations.Operation`, or one SQL write statement classified exactly as
:class:`~deltaguard.operators.sql.DeltaSqlOperator` classifies it
(:func:`deltaguard.core.sql.classify.classify_sql`). Pure: no Airflow import, so it is checked at DAG
parse time and tested without a scheduler.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.exceptions import InvalidWriteError

#: what one table's operation may be given as: a kind name, a kind, or a whole operation
OperationLike = str | OperationKind | Operation


@dataclass(frozen=True)
class LeaseTarget:
    """One table a leased task writes, and how.

    :param table: the table as the author named it (URI, absolute path, or a name relative to the
        ``delta`` connection's base URI), resolved to a URI when the task runs.
    :param operation: what the task does to it, as the conflict model sees it.
    """

    table: str
    operation: Operation

    def describe(self) -> str:
        return f"{self.operation.describe()} on {self.table}"


def as_operation(operation: OperationLike, predicate: str | None = None) -> Operation:
    """An :class:`Operation` from a kind (``"MERGE"``, ``OperationKind.DELETE``) and predicate, or as given.

    :param operation: the kind (case-insensitive name) or a whole operation.
    :param predicate: the rows it touches (``date = '2024-01-01'``); not allowed with a whole operation,
        which carries its own.
    :raises InvalidWriteError: for an unknown kind, or a predicate beside a whole operation.
    """
    if isinstance(operation, Operation):
        if predicate is not None:
            raise InvalidWriteError("give the predicate inside the Operation, not beside it")
        return operation
    name = operation.value if isinstance(operation, OperationKind) else str(operation).strip().upper()
    try:
        kind = OperationKind(name.replace(" ", "_"))
    except ValueError:
        known = ", ".join(k.value for k in OperationKind)
        raise InvalidWriteError(f"unknown operation {operation!r}; known: {known}") from None
    if kind is OperationKind.MERGE:
        # a MERGE's reads are its ON condition, which a kind and a predicate cannot state: without it the
        # MERGE reads the whole table (the conservative reading)
        return Operation(kind, merge_condition=predicate, inserts=None)
    return Operation(kind, predicate=predicate)


def sql_operation(sql: str) -> tuple[Operation, str | None]:
    """Classify one SQL write statement; return its operation and the table it names (if any).

    :raises InvalidWriteError: when the statement is not exactly one Delta write the model understands.
    """
    from deltaguard.core.sql.classify import classify_sql

    if not isinstance(sql, str) or not sql.strip():
        raise InvalidWriteError("the SQL statement is empty")
    try:
        classified = classify_sql(sql)
    except ValueError as exc:  # SqlClassificationError
        raise InvalidWriteError(f"the conflict model cannot classify this statement: {exc}") from None
    return classified.operation, classified.table


def lease_targets(
    tables: str | Sequence[str] | Mapping[str, OperationLike] | None = None,
    *,
    operation: OperationLike | None = None,
    predicate: str | None = None,
    sql: str | Sequence[str] | None = None,
) -> tuple[LeaseTarget, ...]:
    """The tables and operations one leased task declares; checked before any lease is asked for.

    Forms, one per call:

    * ``tables="s3://b/sales", operation="DELETE", predicate="date < '2024-01-01'"``: one table;
    * ``tables=[a, b], operation="INSERT"``: the same operation on several tables;
    * ``tables={a: "MERGE", b: Operation(OperationKind.INSERT)}``: an operation per table;
    * ``sql="MERGE INTO ..."`` (one statement, or a list, one per table): classified; the table is the one
      the statement names unless ``tables`` gives it (a single table, or one per statement).

    :raises InvalidWriteError: for no table, a table twice, an operation missing or given twice, or a
        statement the model cannot classify.
    """
    if sql is not None and (operation is not None or predicate is not None):
        raise InvalidWriteError("give either sql or operation/predicate, not both")
    if sql is not None:
        targets = _sql_targets(tables, sql)
    elif isinstance(tables, Mapping):
        if operation is not None or predicate is not None:
            raise InvalidWriteError("with a mapping of tables to operations, give no operation beside it")
        targets = [LeaseTarget(_table(t), as_operation(op)) for t, op in tables.items()]
    else:
        if operation is None:
            raise InvalidWriteError("declare the operation (e.g. operation='MERGE') or give the sql")
        op = as_operation(operation, predicate)
        targets = [LeaseTarget(_table(t), op) for t in _table_list(tables)]
    if not targets:
        raise InvalidWriteError("a leased task must declare at least one table")
    seen = [t.table for t in targets]
    if len(set(seen)) != len(seen):
        raise InvalidWriteError(f"a table is declared twice: {seen}")
    return tuple(targets)


def _sql_targets(tables: Any, sql: str | Sequence[str]) -> list[LeaseTarget]:
    statements = [sql] if isinstance(sql, str) else list(sql)
    if isinstance(tables, Mapping):
        raise InvalidWriteError("with sql, give tables as a name or a list (one per statement)")
    names = _table_list(tables) if tables is not None else []
    if names and len(names) != len(statements):
        raise InvalidWriteError(f"{len(statements)} statement(s) but {len(names)} table(s)")
    targets = []
    for i, statement in enumerate(statements):
        operation, named = sql_operation(statement)
        table = names[i] if names else named
        if not table:
            raise InvalidWriteError(f"the statement names no table; pass tables=: {statement[:80]!r}")
        targets.append(LeaseTarget(_table(table), operation))
    return targets


def _table_list(tables: str | Sequence[str] | None) -> list[str]:
    if tables is None:
        return []
    return [tables] if isinstance(tables, str) else list(tables)


def _table(table: Any) -> str:
    if not isinstance(table, str) or not table.strip():
        raise InvalidWriteError(f"a table must be a non-empty string, got {table!r}")
    return table.strip()


def unreadable_config(uri: str, why: str) -> TableConfig:
    """The configuration of a table deltaguard cannot read: unknown, so every pair on it conflicts.

    A wrapped engine may write a table deltaguard has no credentials for; the lease still serializes its
    writers, it only cannot let any of them overlap (unknown => conflict).
    """
    return TableConfig(unknown=(f"configuration not readable here ({why})",), uri=uri)


def databricks_profile(runtime: str, photon: bool = False) -> EngineProfile:
    """The profile of writes a Databricks cluster or SQL warehouse commits (deltaguard cannot ask it).

    :param runtime: the Databricks Runtime version (``"15.4"``); a SQL warehouse reports it in
        ``SELECT current_version()``.
    :param photon: the compute runs Photon.
    :raises InvalidWriteError: for a version that does not parse.
    """
    try:
        return EngineProfile(EngineName.DATABRICKS, str(runtime), photon=photon)
    except ValueError as exc:
        raise InvalidWriteError(f"databricks_runtime: {exc}") from None
