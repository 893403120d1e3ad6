"""Engine-neutral descriptions of the writes an engine executes, and the checks each carries.

A spec is what an operator hands to an engine. Each spec knows the
:class:`~deltaguard.core.operations.Operation` it is for the conflict model, so the lease manager and the
engine can never disagree about what is being written.

Each spec type is declared once, here: its class carries its name (:attr:`WriteSpec.json_name`, its key in
:data:`SPEC_TYPES`), what it is called in messages (:attr:`WriteSpec.described_as`), whether it may create
its table, and its checks (:meth:`WriteSpec.validate`, run at the one validation point
:func:`deltaguard.engines.base.validate_spec`, with the table it will write in a :class:`SpecCheck`).
Declaring the class registers it (:data:`SPEC_TYPES`); engines only register how they run it
(:class:`deltaguard.engines.base.Runners`). Every problem raises
:class:`~deltaguard.engines.errors.InvalidWriteError` with a message that says what to fix.

SQL snippets are parsed twice: with sqlglot in the dialect the engine runs them in (syntax, one expression,
unqualified column names when the table's columns are known), and with the conflict model's own parser
(:func:`deltaguard.core.sql.predicates.parse_predicate`) for predicates, since a predicate the model cannot
read could only be judged wrong. The engine remains the final judge of semantics.

``source`` fields take a ``pyarrow.Table``, a ``pandas.DataFrame``, a ``pyarrow.RecordBatchReader`` or a
URI string (Parquet/CSV/Delta), resolved by :mod:`deltaguard.engines.sources`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.sql.limits import sql_size_problem
from deltaguard.core.sql.literals import SPARK
from deltaguard.core.sql.predicates import parse_predicate
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.errors import InvalidWriteError

if TYPE_CHECKING:
    from deltaguard.core.merge_scope import MergeScope
    from deltaguard.engines.fencing import CommitFence


@dataclass(frozen=True)
class SpecCheck:
    """The table one spec is checked against.

    :param config: the table's configuration; ``None`` when unknown (a Spark write checks its spec again
        just before it runs, without reading the table): checks that need the table are skipped.
    :param partitions: the partition columns rows will be written under (the table's, or those the spec
        creates it with); ``None`` when unknown.
    :param columns: the table's column names when known (enables column-name checks).
    :param dialect: sqlglot dialect the snippets are written in (Spark SQL, as the conflict model reads them).
    """

    config: TableConfig | None = None
    partitions: tuple[str, ...] | None = None
    columns: Collection[str] | None = None
    dialect: str = SPARK

    @property
    def exists(self) -> bool | None:
        """Whether the table exists (``None``: unknown)."""
        return None if self.config is None else self.config.exists

    @property
    def uri(self) -> str:
        return (self.config.uri if self.config is not None else None) or "the table"

    def known_columns(self) -> set[str] | None:
        """The table's column names, lower-cased (``None``: unknown)."""
        return None if self.columns is None else {c.lower() for c in self.columns}

    def sql(self, text: Any, what: str, *, with_columns: bool = False) -> exp.Expr:
        """Parse one SQL expression in :attr:`dialect` (see :func:`parse_sql`)."""
        return parse_sql(text, what, self.dialect, self.columns if with_columns else None)

    def predicate(self, text: Any, what: str, *, with_columns: bool = True) -> None:
        """A predicate both the engine's dialect and the conflict model can read."""
        self.sql(text, what, with_columns=with_columns)
        try:
            parse_predicate(text)
        except ValueError as exc:  # PredicateError is a ValueError
            raise InvalidWriteError(f"{what} {text!r} cannot be parsed: {exc}") from None

    def partition_keys(self, values: Mapping[str, Any], what: str) -> None:
        """Every key of ``values`` must be a partition column (Delta names are case-insensitive)."""
        if self.partitions is None or not values:
            return
        known = {p.lower() for p in self.partitions}
        unknown = [key for key in values if key.lower() not in known]
        if unknown:
            partitioned = ", ".join(self.partitions) or "no column (the table is not partitioned)"
            raise InvalidWriteError(
                f"{what} name {', '.join(map(repr, unknown))}, but {self.uri} is partitioned by {partitioned}: "
                "not a partition column"
            )


def parse_sql(text: Any, what: str, dialect: str, columns: Collection[str] | None = None) -> exp.Expr:
    """Parse one SQL expression (not a statement), checking unqualified column names when known.

    :raises InvalidWriteError: when ``text`` is empty, does not parse, is several statements or a query/DDL.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidWriteError(f"{what} is empty: it must be a non-empty SQL expression, got {text!r}")
    too_large = sql_size_problem(text, dialect)
    if too_large is not None:
        raise InvalidWriteError(f"{what} {_shown(text)} is too large to parse: {too_large}")
    try:
        parsed = sqlglot.parse(text, read=dialect)
    except RecursionError:
        # sqlglot recurses about a dozen frames per parenthesis: refused, not a crash Airflow would retry.
        raise InvalidWriteError(f"{what} {_shown(text)} is nested too deeply to parse") from None
    except SqlglotError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        language = "Spark SQL" if dialect == SPARK else f"{dialect} SQL"
        raise InvalidWriteError(
            f"{what} {text!r} cannot be parsed: it does not parse as {language} ({reason})"
        ) from exc
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


def _shown(text: str, limit: int = 200) -> str:
    """``text`` for a one-line message, cut at ``limit`` characters."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")


def check_properties(properties: Mapping[str, Any]) -> None:
    """Table properties are non-empty string keys to string values."""
    for key, value in properties.items():
        if not isinstance(key, str) or not key.strip() or not isinstance(value, str):
            raise InvalidWriteError(f"table properties are string -> string, got {key!r}: {value!r}")


# -------------------------------------------------------------------------------------------------- the specs


@dataclass(frozen=True)
class WriteContext:
    """Who writes and how to make the write idempotent.

    :param app_id: application transaction id (``dag_id/task_id[/map_index]@run_id`` under Airflow, :func:`deltaguard.writes.prepared.app_id`).
    :param app_version: application transaction version; a second write with the same
        ``(app_id, app_version)`` or a lower version is a no-op that reports the original commit.
    :param commit_metadata: free-form key/values recorded in the commit (who wrote it, lease id, ...).
    :param max_commit_retries: how many times the engine may rebase a non-conflicting commit.
    :param fence: the writer's commit fence: the engine checks it as late before its commit as it can and
        cancels its work when the fence reports the lease lost (ADR 0018). ``None``: no lease, no fence.
    :param validated_version: the table version this very spec was checked against by the engine's
        ``validate`` (given that version's configuration); an engine that commits from exactly that version
        need not check it again. ``None``: check before writing.
    """

    app_id: str | None = None
    app_version: int | None = None
    commit_metadata: Mapping[str, str] = field(default_factory=dict)
    max_commit_retries: int | None = None
    fence: CommitFence | None = field(default=None, compare=False)
    validated_version: int | None = None


#: every spec type by its JSON name, filled by :meth:`WriteSpec.__init_subclass__`: the one list of spec types
SPEC_TYPES: dict[str, type[WriteSpec]] = {}


@dataclass(frozen=True)
class WriteSpec:
    """A write an engine executes; every spec type derives from it and declares itself once.

    A subclass that sets :attr:`json_name` is registered in :data:`SPEC_TYPES` under that name (two classes
    with one name are refused when the second is declared). Validation is not done at construction: a spec
    is built freely and checked at the one validation point,
    :func:`deltaguard.engines.base.validate_spec`, before any lease is taken, and again before the
    engine writes unless it commits from the very version it was checked against.
    """

    #: its name (``"append"``), its key in :data:`SPEC_TYPES`; unique
    json_name: ClassVar[str]
    #: what the write is called in messages to DAG authors: the statement it is, never the class name
    described_as: ClassVar[str] = "this write"
    #: whether it may run against a table that does not exist yet (it creates it)
    creates_table: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("json_name")
        if name is None:
            return  # a subclass of a spec (a test's, a timed one) is not a spec type of its own
        taken = SPEC_TYPES.get(name)
        if taken is not None and taken.__qualname__ != cls.__qualname__:
            raise TypeError(f"spec JSON name {name!r} is taken by {taken.__qualname__}")
        SPEC_TYPES[name] = cls

    def operation(self) -> Operation:
        """The operation the conflict model judges: exactly what the engine runs.

        Every spec type declares its own (``tests/engines/test_spec_types.py`` checks each registered type);
        the base class has no operation to give, and says which class forgot it.
        """
        raise NotImplementedError(f"{type(self).__qualname__} does not say which operation it runs")

    def may_create(self) -> bool:
        """Whether this write may create the table it writes."""
        return self.creates_table

    def sql_texts(self) -> tuple[str | None, ...]:
        """The user's SQL snippets (conditions, expressions) the engine will run, for engines that render them."""
        return ()

    def validate(self, check: SpecCheck) -> None:
        """Check this spec against the table it will write (``check``), before anything is written.

        :raises InvalidWriteError: naming the first problem found.
        """


@dataclass(frozen=True)
class AppendSpec(WriteSpec):
    json_name: ClassVar[str] = "append"
    described_as: ClassVar[str] = "an INSERT"
    creates_table: ClassVar[bool] = True
    source: Any
    partition_by: tuple[str, ...] = ()
    #: the partition values the appended rows carry, if known (narrows the conflict model's view)
    partition_values: Mapping[str, Any] = field(default_factory=dict)

    def operation(self) -> Operation:
        return Operation(OperationKind.INSERT, predicate=_partition_predicate(self.partition_values))

    def validate(self, check: SpecCheck) -> None:
        check.partition_keys(self.partition_values, "partition_values")
        config = check.config
        if (
            config is not None
            and config.exists
            and self.partition_by
            and [c.lower() for c in self.partition_by] != [c.lower() for c in config.partition_columns]
        ):
            raise InvalidWriteError(
                f"partition_by {list(self.partition_by)} differs from the table's {list(config.partition_columns)}"
            )
        _check_source(self)


@dataclass(frozen=True)
class MergeSpec(WriteSpec):
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

    json_name: ClassVar[str] = "merge"
    described_as: ClassVar[str] = "a MERGE"

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

    def sql_texts(self) -> tuple[str | None, ...]:
        return (
            self.condition,
            self.matched_condition,
            *(self.matched_update or {}).values(),
            *(self.not_matched_insert or {}).values(),
        )

    def validate(self, check: SpecCheck) -> None:
        if not isinstance(self.condition, str) or not self.condition.strip():
            raise InvalidWriteError("MERGE needs an ON condition (the 'condition' argument is empty)")
        # the ON condition names the aliases, not the table's columns
        check.predicate(self.condition, "MERGE condition", with_columns=False)
        if self.matched_condition is not None:
            check.predicate(self.matched_condition, "MERGE matched condition", with_columns=False)
        check.partition_keys(self.target_partition_values, "target_partition_values")
        if self.matched_update is not None and self.matched_update_all:
            raise InvalidWriteError("MERGE: give matched_update or matched_update_all, not both")
        if self.not_matched_insert is not None and self.not_matched_insert_all:
            raise InvalidWriteError("MERGE: give not_matched_insert or not_matched_insert_all, not both")
        clauses = (
            self.matched_update is not None,
            self.matched_update_all,
            self.matched_delete,
            self.not_matched_insert is not None,
            self.not_matched_insert_all,
            self.not_matched_by_source_delete,
        )
        if not any(clauses):
            raise InvalidWriteError("a MERGE needs at least one WHEN clause")
        for mapping, what in (
            (self.matched_update, "matched_update"),
            (self.not_matched_insert, "not_matched_insert"),
        ):
            if mapping is not None:
                if not mapping:
                    raise InvalidWriteError(f"{what} must set at least one column")
                for column, expression in mapping.items():
                    check.sql(expression, f"{what}[{column!r}]")
        if not self.source_alias or not self.target_alias or self.source_alias == self.target_alias:
            raise InvalidWriteError("source_alias and target_alias must be two different, non-empty aliases")
        _check_source(self)


@dataclass(frozen=True)
class UpdateSpec(WriteSpec):
    json_name: ClassVar[str] = "update"
    described_as: ClassVar[str] = "an UPDATE"
    updates: Mapping[str, str]
    predicate: str | None = None

    def operation(self) -> Operation:
        return Operation(
            OperationKind.UPDATE, predicate=self.predicate, assignments=tuple(self.updates.items())
        )

    def sql_texts(self) -> tuple[str | None, ...]:
        return (self.predicate, *self.updates.values())

    def validate(self, check: SpecCheck) -> None:
        if not self.updates:
            raise InvalidWriteError("an UPDATE needs at least one column to set")
        known = check.known_columns()
        for column, expression in self.updates.items():
            if known is not None and column.lower() not in known:
                raise InvalidWriteError(f"UPDATE sets unknown column {column!r}")
            check.sql(expression, f"UPDATE expression for {column!r}", with_columns=True)
        if self.predicate is not None:
            check.predicate(self.predicate, "UPDATE predicate")


@dataclass(frozen=True)
class DeleteSpec(WriteSpec):
    json_name: ClassVar[str] = "delete"
    described_as: ClassVar[str] = "a DELETE"
    predicate: str | None = None

    def operation(self) -> Operation:
        return Operation(OperationKind.DELETE, predicate=self.predicate)

    def sql_texts(self) -> tuple[str | None, ...]:
        return (self.predicate,)

    def validate(self, check: SpecCheck) -> None:
        if self.predicate is not None:
            check.predicate(self.predicate, "DELETE predicate")


@dataclass(frozen=True)
class ReplaceWhereSpec(WriteSpec):
    """Replace the rows matching ``predicate`` with ``source`` (every source row must satisfy it).

    :param source_scope: the ranges the source's columns were read to hold (its ``inserted`` column scopes,
        :func:`deltaguard.engines.merge_scope.scoped_replace_where`): the operation states them as the rows
        it writes, and the engine refuses a source that has left them.
    """

    json_name: ClassVar[str] = "replace_where"
    described_as: ClassVar[str] = "an overwrite with replaceWhere"

    source: Any
    predicate: str
    source_scope: MergeScope | None = None

    def operation(self) -> Operation:
        scoped = self.source_scope.inserted_predicate() if self.source_scope is not None else None
        return Operation(OperationKind.REPLACE_WHERE, predicate=self.predicate, inserts=scoped or "")

    def sql_texts(self) -> tuple[str | None, ...]:
        return (self.predicate,)

    def validate(self, check: SpecCheck) -> None:
        if not isinstance(self.predicate, str) or not self.predicate.strip():
            raise InvalidWriteError(
                "a replace-where needs a predicate; use an overwrite to replace the whole table"
            )
        check.predicate(self.predicate, "replaceWhere predicate")
        _check_source(self)


@dataclass(frozen=True)
class OverwriteSpec(WriteSpec):
    json_name: ClassVar[str] = "overwrite"
    described_as: ClassVar[str] = "an overwrite"
    creates_table: ClassVar[bool] = True
    source: Any
    partition_by: tuple[str, ...] = ()

    def operation(self) -> Operation:
        return Operation(OperationKind.OVERWRITE)

    def validate(self, check: SpecCheck) -> None:
        _check_source(self)


@dataclass(frozen=True)
class OptimizeSpec(WriteSpec):
    json_name: ClassVar[str] = "optimize"
    described_as: ClassVar[str] = "OPTIMIZE"
    zorder_by: tuple[str, ...] = ()
    partition_filters: Mapping[str, Any] = field(default_factory=dict)
    target_size: int | None = None

    def operation(self) -> Operation:
        return Operation(
            OperationKind.OPTIMIZE,
            predicate=_partition_predicate(self.partition_filters),
            zorder_by=tuple(self.zorder_by),
        )

    def validate(self, check: SpecCheck) -> None:
        check.partition_keys(self.partition_filters, "partition_filters")
        for key, value in self.partition_filters.items():
            if value is None:
                raise InvalidWriteError(f"partition filter {key!r} needs a value, not None")
        if any(not isinstance(c, str) or not c.strip() for c in self.zorder_by):
            raise InvalidWriteError(f"zorder_by must be column names, got {list(self.zorder_by)}")
        known = check.known_columns()
        if known is not None:
            unknown = [column for column in self.zorder_by if column.lower() not in known]
            if unknown:
                raise InvalidWriteError(f"zorder_by names unknown column {unknown[0]!r}")
        if self.target_size is not None and self.target_size <= 0:
            raise InvalidWriteError("OPTIMIZE target_size must be a positive number of bytes")


@dataclass(frozen=True)
class SetPropertiesSpec(WriteSpec):
    json_name: ClassVar[str] = "set_properties"
    described_as: ClassVar[str] = "ALTER TABLE SET TBLPROPERTIES"
    properties: Mapping[str, str]

    def operation(self) -> Operation:
        return Operation(OperationKind.SET_TBLPROPERTIES)

    def validate(self, check: SpecCheck) -> None:
        if not self.properties:
            raise InvalidWriteError("ALTER TABLE SET TBLPROPERTIES needs at least one property")
        check_properties(self.properties)


@dataclass(frozen=True)
class AddColumnsSpec(WriteSpec):
    json_name: ClassVar[str] = "add_columns"
    described_as: ClassVar[str] = "ALTER TABLE ADD COLUMNS"
    #: column name -> Spark SQL type name (``string``, ``bigint``, ``decimal(10,2)``, ...)
    columns: Mapping[str, str]
    #: add only the columns the table lacks when the write runs (read under its lease), and commit nothing
    #: when it has them all: overlapping runs of one pipeline then agree instead of failing on "already
    #: exists". Still a metadata change to the conflict model (exclusive), whatever it finds.
    if_not_exists: bool = False

    def operation(self) -> Operation:
        return Operation(OperationKind.ADD_COLUMNS)

    def missing(self, existing: Collection[str]) -> dict[str, str]:
        """The columns to add to a table with ``existing`` columns (all of them unless ``if_not_exists``)."""
        if not self.if_not_exists:
            return dict(self.columns)
        present = {c.lower() for c in existing}
        return {name: kind for name, kind in self.columns.items() if name.lower() not in present}

    def validate(self, check: SpecCheck) -> None:
        # the type names are each engine's to read (its runner checks them: Spark knows more than delta-rs)
        if not self.columns:
            raise InvalidWriteError("ALTER TABLE ADD COLUMNS needs at least one column")
        known = check.known_columns() or set()
        for name in self.columns:
            if not isinstance(name, str) or not name.strip():
                raise InvalidWriteError(f"column names must be non-empty strings, got {name!r}")
            if name.lower() in known and not self.if_not_exists:
                raise InvalidWriteError(f"column {name!r} already exists")


@dataclass(frozen=True)
class CreateSpec(WriteSpec):
    """Create (or replace) the table, optionally with initial data.

    :param schema: column name -> Spark SQL type name; optional when ``source`` is given.
    """

    json_name: ClassVar[str] = "create"
    described_as: ClassVar[str] = "CREATE TABLE"
    creates_table: ClassVar[bool] = True

    schema: Mapping[str, str] | None = None
    source: Any = None
    partition_by: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    replace: bool = False

    def operation(self) -> Operation:
        return Operation(OperationKind.CREATE_OR_REPLACE)

    def validate(self, check: SpecCheck) -> None:
        if check.exists and not self.replace:
            raise InvalidWriteError(f"table {check.uri} already exists; set replace=True to replace it")
        if self.schema is None and self.source is None:
            raise InvalidWriteError("create needs a schema or a source")
        if self.schema is not None:  # its type names are each engine's to read, as for ADD COLUMNS
            names = {n.lower() for n in self.schema}
            missing = [p for p in self.partition_by if p.lower() not in names]
            if missing:
                raise InvalidWriteError(f"partition_by names columns not in the schema: {missing}")
        check_properties(self.properties)


@dataclass(frozen=True)
class SqlSpec(WriteSpec):
    """One Spark SQL write statement executed as written (Spark engine only; delta-rs refuses it).

    Used by ``DeltaSqlOperator`` for statements no plain spec expresses (``MERGE ... USING other_table``,
    ``INSERT ... SELECT``); the statement must write the table the operator names.

    :param sql: the statement.
    :param classified: the conflict model's view of it (from ``deltaguard.core.sql.classify``).
    """

    json_name: ClassVar[str] = "sql"
    described_as: ClassVar[str] = "the SQL statement"

    sql: str
    classified: Operation

    def operation(self) -> Operation:
        return self.classified

    def may_create(self) -> bool:
        return self.classified.kind is OperationKind.CREATE_OR_REPLACE

    def validate(self, check: SpecCheck) -> None:
        if not isinstance(self.sql, str) or not self.sql.strip():
            raise InvalidWriteError("the SQL statement is empty")


def _partition_predicate(values: Mapping[str, Any]) -> str | None:
    from deltaguard.core.sql.literals import partition_predicate

    return partition_predicate(values) if values else None


def _check_source(spec: Any) -> None:
    if spec.source is None:
        raise InvalidWriteError(f"{write_name(spec, capital=True)} needs a source")


def write_name(spec: object, *, capital: bool = False) -> str:
    """The write ``spec`` describes, in the user's terms (``an UPDATE``), for error messages.

    :param spec: a write spec (anything else is ``this write``).
    :param capital: start with a capital letter (at the start of a sentence).
    """
    name = spec.described_as if isinstance(spec, WriteSpec) else WriteSpec.described_as
    return name[:1].upper() + name[1:] if capital else name
