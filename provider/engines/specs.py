"""Engine-neutral descriptions of the writes an engine executes.

A spec is what an operator (or the spark-submit job module) hands to an engine. Each spec knows the
:class:`~deltaguard.core.operations.Operation` it is for the conflict model, so the lease manager and the
engine can never disagree about what is being written.

``source`` fields take a ``pyarrow.Table``, a ``pandas.DataFrame``, a ``pyarrow.RecordBatchReader`` or a
URI string (Parquet/CSV/Delta), resolved by :mod:`deltaguard.engines.sources`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from deltaguard.core.operations import Operation, OperationKind

if TYPE_CHECKING:
    from deltaguard.core.merge_scope import MergeScope
    from deltaguard.engines.fencing import CommitFence


@dataclass(frozen=True)
class WriteContext:
    """Who writes and how to make the write idempotent.

    :param app_id: application transaction id (``dag_id/task_id[/map_index]@run_id`` under Airflow, :func:`deltaguard.writes.task_identity.app_id`).
    :param app_version: application transaction version; a second write with the same
        ``(app_id, app_version)`` or a lower version is a no-op that reports the original commit.
    :param commit_metadata: free-form key/values recorded in the commit (who wrote it, lease id, ...).
    :param max_commit_retries: how many times the engine may rebase a non-conflicting commit.
    :param fence: the writer's commit fence: the engine checks it as late before its commit as it can and
        cancels its work when the fence reports the lease lost (ADR 0018). ``None``: no lease, no fence.
    """

    app_id: str | None = None
    app_version: int | None = None
    commit_metadata: Mapping[str, str] = field(default_factory=dict)
    max_commit_retries: int | None = None
    fence: CommitFence | None = field(default=None, compare=False)


@dataclass(frozen=True)
class AppendSpec:
    #: its name in JSON (``{"kind": "append"}``, :mod:`deltaguard.engines.spec_json`)
    json_name: ClassVar[str] = "append"
    source: Any
    partition_by: tuple[str, ...] = ()
    #: the partition values the appended rows carry, if known (narrows the conflict model's view)
    partition_values: Mapping[str, Any] = field(default_factory=dict)

    def operation(self) -> Operation:
        return Operation(OperationKind.INSERT, predicate=_partition_predicate(self.partition_values))


@dataclass(frozen=True)
class MergeSpec:
    """``MERGE INTO target t USING source s ON condition``.

    :param condition: the ON condition (``t`` = target alias, ``s`` = source alias).
    :param target_partition_values: partition values of the target rows this MERGE touches; the engine
        adds ``t.<col> = <literal>`` conjuncts to the condition itself (safely quoted).
    :param matched_update: column -> SQL expression for ``WHEN MATCHED THEN UPDATE``; ``None`` with
        ``matched_update_all`` false means no matched-update clause.
    :param matched_update_all: ``WHEN MATCHED THEN UPDATE SET *``.
    :param matched_delete: ``WHEN MATCHED THEN DELETE``.
    :param matched_condition: optional extra condition for the matched clause.
    :param not_matched_insert: column -> SQL expression for ``WHEN NOT MATCHED THEN INSERT``.
    :param not_matched_insert_all: ``WHEN NOT MATCHED THEN INSERT *``.
    :param not_matched_by_source_delete: ``WHEN NOT MATCHED BY SOURCE THEN DELETE``.
    """

    #: its name in JSON (``{"kind": "merge"}``, :mod:`deltaguard.engines.spec_json`)
    json_name: ClassVar[str] = "merge"

    source: Any
    condition: str
    target_partition_values: Mapping[str, Any] = field(default_factory=dict)
    matched_update: Mapping[str, str] | None = None
    matched_update_all: bool = False
    matched_delete: bool = False
    matched_condition: str | None = None
    not_matched_insert: Mapping[str, str] | None = None
    not_matched_insert_all: bool = False
    not_matched_by_source_delete: bool = False
    source_alias: str = "s"
    target_alias: str = "t"
    #: the scope computed from the source's key values (ADR 0019); the engine refuses a source outside it
    source_scope: MergeScope | None = None
    #: add the scope's conjunct to the ON condition the engine runs (``explicit_partitions``)
    explicit_scope: bool = True

    def scope_conjunct(self, dialect: str = "spark") -> str | None:
        """The source-derived conjunct both the claim (Spark SQL) and the engine's ON condition (its
        ``dialect``) carry, or ``None``."""
        if self.source_scope is None or not self.explicit_scope:
            return None
        return self.source_scope.conjunct(self.target_alias, dialect)

    def operation(self) -> Operation:
        from deltaguard.core.sql.literals import merge_condition_with_partitions

        # Without the conjunct in the executed condition the engine reads the whole table for conflict
        # detection, so the claim's read scope must not be narrowed either (only its inserted rows are).
        condition: str | None = merge_condition_with_partitions(
            self.condition, self.target_partition_values, self.target_alias, extra=self.scope_conjunct()
        )
        if self.not_matched_by_source_delete:
            # WHEN NOT MATCHED BY SOURCE ranges over every target row whatever the ON condition says. Declared
            # target partitions scope what it deletes, not what the engine reads for conflict detection:
            # measured on delta-rs, such a MERGE declared for p = 'b' fails with ConcurrentDeleteRead after a
            # concurrent DELETE of p = 'a'. So it reads the whole table, as the SQL classifier says too.
            condition = None
        assignments: tuple[tuple[str, str], ...] = ()
        if self.matched_update_all and not (self.copies_checked_rows or self._copies_scoped_rows):
            assignments = (("*", "*"),)  # UPDATE SET * copies the source row, partition columns included
        elif self.matched_update is not None:
            assignments = tuple(self.matched_update.items())
        return Operation(
            OperationKind.MERGE,
            merge_condition=condition,
            target_alias=self.target_alias,
            assignments=assignments,
            inserts=self.inserted_rows(),
        )

    @property
    def copies_checked_rows(self) -> bool:
        """``INSERT *`` / ``UPDATE SET *`` with declared target partitions: the engine refuses a source with
        rows outside them (:func:`check_source_partitions`), so copied rows stay in the declared partitions."""
        return (
            bool(self.target_partition_values)
            and (self.not_matched_insert_all or self.matched_update_all)
            # with a source scope the engine checks the source against that instead (ADR 0019)
            and self.source_scope is None
        )

    @property
    def _copies_scoped_rows(self) -> bool:
        """``UPDATE SET *`` copies partition values the source scope covers (checked at write time)."""
        return self.source_scope is not None and self.source_scope.copies_all_keys

    def inserted_rows(self) -> str | None:
        """Where ``WHEN NOT MATCHED THEN INSERT`` (and ``UPDATE SET *``) adds rows (the write scope, ADR 0012).

        ``""`` without an insert clause; the declared target partitions when the engine checks the source
        rows carry them (:attr:`copies_checked_rows`); otherwise ``None``: inserted source values can land
        in any partition (measured on delta-rs: a concurrent DELETE there fails with ConcurrentAppend).
        """
        if self.copies_checked_rows:
            return _partition_predicate(self.target_partition_values)
        inserts = self.not_matched_insert is not None or self.not_matched_insert_all
        if self.source_scope is not None and (inserts or self._copies_scoped_rows):
            scoped = self.source_scope.inserted_predicate()
            if scoped is not None:
                return scoped
        if not inserts:
            return ""
        return None


@dataclass(frozen=True)
class UpdateSpec:
    #: its name in JSON (``{"kind": "update"}``, :mod:`deltaguard.engines.spec_json`)
    json_name: ClassVar[str] = "update"
    updates: Mapping[str, str]
    predicate: str | None = None

    def operation(self) -> Operation:
        return Operation(
            OperationKind.UPDATE, predicate=self.predicate, assignments=tuple(self.updates.items())
        )


@dataclass(frozen=True)
class DeleteSpec:
    #: its name in JSON (``{"kind": "delete"}``, :mod:`deltaguard.engines.spec_json`)
    json_name: ClassVar[str] = "delete"
    predicate: str | None = None

    def operation(self) -> Operation:
        return Operation(OperationKind.DELETE, predicate=self.predicate)


@dataclass(frozen=True)
class ReplaceWhereSpec:
    """Replace the rows matching ``predicate`` with ``source`` (every source row must satisfy it).

    :param source_scope: the ranges the source's columns were read to hold (its ``inserted`` column scopes,
        :func:`deltaguard.engines.replace_scope.scoped_replace_where`): the operation states them as the rows
        it writes, and the engine refuses a source that has left them.
    """

    #: its name in JSON (``{"kind": "replace_where"}``, :mod:`deltaguard.engines.spec_json`)
    json_name: ClassVar[str] = "replace_where"

    source: Any
    predicate: str
    source_scope: MergeScope | None = None

    def operation(self) -> Operation:
        scoped = self.source_scope.inserted_predicate() if self.source_scope is not None else None
        return Operation(OperationKind.REPLACE_WHERE, predicate=self.predicate, inserts=scoped or "")


@dataclass(frozen=True)
class OverwriteSpec:
    #: its name in JSON (``{"kind": "overwrite"}``, :mod:`deltaguard.engines.spec_json`)
    json_name: ClassVar[str] = "overwrite"
    source: Any
    partition_by: tuple[str, ...] = ()

    def operation(self) -> Operation:
        return Operation(OperationKind.OVERWRITE)


@dataclass(frozen=True)
class OptimizeSpec:
    #: its name in JSON (``{"kind": "optimize"}``, :mod:`deltaguard.engines.spec_json`)
    json_name: ClassVar[str] = "optimize"
    zorder_by: tuple[str, ...] = ()
    partition_filters: Mapping[str, Any] = field(default_factory=dict)
    target_size: int | None = None

    def operation(self) -> Operation:
        return Operation(
            OperationKind.OPTIMIZE,
            predicate=_partition_predicate(self.partition_filters),
            zorder_by=tuple(self.zorder_by),
        )


@dataclass(frozen=True)
class SetPropertiesSpec:
    #: its name in JSON (``{"kind": "set_properties"}``, :mod:`deltaguard.engines.spec_json`)
    json_name: ClassVar[str] = "set_properties"
    properties: Mapping[str, str]

    def operation(self) -> Operation:
        return Operation(OperationKind.SET_TBLPROPERTIES)


@dataclass(frozen=True)
class AddColumnsSpec:
    #: its name in JSON (``{"kind": "add_columns"}``, :mod:`deltaguard.engines.spec_json`)
    json_name: ClassVar[str] = "add_columns"
    #: column name -> Spark SQL type name (``string``, ``bigint``, ``decimal(10,2)``, ...)
    columns: Mapping[str, str]

    def operation(self) -> Operation:
        return Operation(OperationKind.ADD_COLUMNS)


@dataclass(frozen=True)
class CreateSpec:
    """Create (or replace) the table, optionally with initial data.

    :param schema: column name -> Spark SQL type name; optional when ``source`` is given.
    """

    #: its name in JSON (``{"kind": "create"}``, :mod:`deltaguard.engines.spec_json`)
    json_name: ClassVar[str] = "create"

    schema: Mapping[str, str] | None = None
    source: Any = None
    partition_by: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    replace: bool = False

    def operation(self) -> Operation:
        return Operation(OperationKind.CREATE_OR_REPLACE)


@dataclass(frozen=True)
class SqlSpec:
    """One Spark SQL write statement executed as written (Spark engine only; delta-rs refuses it).

    Used by ``DeltaSqlOperator`` for statements no plain spec expresses (``MERGE ... USING other_table``,
    ``INSERT ... SELECT``); the statement must write the table the operator names.

    :param sql: the statement.
    :param classified: the conflict model's view of it (from ``deltaguard.core.sql.classify``).
    """

    #: its name in JSON (``{"kind": "sql"}``, :mod:`deltaguard.engines.spec_json`)
    json_name: ClassVar[str] = "sql"

    sql: str
    classified: Operation

    def operation(self) -> Operation:
        return self.classified


WriteSpec = (
    AppendSpec
    | MergeSpec
    | UpdateSpec
    | DeleteSpec
    | ReplaceWhereSpec
    | OverwriteSpec
    | OptimizeSpec
    | SetPropertiesSpec
    | AddColumnsSpec
    | CreateSpec
    | SqlSpec
)


def _partition_predicate(values: Mapping[str, Any]) -> str | None:
    from deltaguard.core.sql.literals import partition_predicate

    return partition_predicate(values) if values else None


#: every spec type by its JSON name: the one list of spec types
SPEC_TYPES: Mapping[str, type[WriteSpec]] = {
    cls.json_name: cls
    for cls in (
        AppendSpec,
        MergeSpec,
        UpdateSpec,
        DeleteSpec,
        ReplaceWhereSpec,
        OverwriteSpec,
        OptimizeSpec,
        SetPropertiesSpec,
        AddColumnsSpec,
        CreateSpec,
        SqlSpec,
    )
}


#: what each write is called in messages to DAG authors: the statement it is, never the class name
_WRITE_NAMES: dict[str, str] = {
    "AppendSpec": "an INSERT",
    "MergeSpec": "a MERGE",
    "UpdateSpec": "an UPDATE",
    "DeleteSpec": "a DELETE",
    "ReplaceWhereSpec": "an overwrite with replaceWhere",
    "OverwriteSpec": "an overwrite",
    "OptimizeSpec": "OPTIMIZE",
    "SetPropertiesSpec": "ALTER TABLE SET TBLPROPERTIES",
    "AddColumnsSpec": "ALTER TABLE ADD COLUMNS",
    "CreateSpec": "CREATE TABLE",
    "SqlSpec": "the SQL statement",
}


def write_name(spec: object, *, capital: bool = False) -> str:
    """The write ``spec`` describes, in the user's terms (``an UPDATE``), for error messages.

    :param spec: a write spec.
    :param capital: start with a capital letter (at the start of a sentence).
    """
    name = _WRITE_NAMES.get(type(spec).__name__, "this write")
    return name[:1].upper() + name[1:] if capital else name
