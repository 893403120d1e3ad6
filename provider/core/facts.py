"""Per-operation facts and per-table context the conflict rules work on.

The model turns every :class:`~deltaguard.core.operations.Operation` into one :class:`OpFacts` (parsed
predicates, role, row-level limitations) once per ``decide()`` call, and the engine profile turns the
table into one :class:`TableContext`. Rule functions then only compare precomputed facts, which keeps a
decision against a thousand running operations cheap.

Every engine rule module (``rules.databricks``, ``rules.delta_spark``, ``rules.deltars``) exposes the
same two functions:

``table_context(table: TableConfig, profile: EngineProfile) -> TableContext``
    how the engine reads the table's properties (isolation level, row-level concurrency, ...).
``pair(a: OpFacts, b: OpFacts, ctx: TableContext) -> PairVerdict``
    whether ``a`` and ``b`` can conflict in either commit order. It is only called after the shared
    rules of ``rules.common`` (identity columns, metadata changes, table creation, streaming checkpoints,
    conservative configuration) found nothing, so it may assume two data writes on an existing table.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from enum import StrEnum

from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.sql.columns import assigned_column, column_text, referenced_columns
from deltaguard.core.sql.literal_columns import ZonedLiterals, zoned_literals
from deltaguard.core.sql.parser_settings import parser_dependent_literals
from deltaguard.core.sql.predicates import (
    EVERYTHING,
    Predicate,
    PredicateError,
    conjoin,
    merge_target_predicate,
    parse_predicate,
    partition_conjuncts,
    project_out,
    provably_disjoint,
)
from deltaguard.core.sql.row_level import SUBQUERY, row_level_limitations
from deltaguard.core.table_config import TableConfig
from deltaguard.core.time_zones import zone_mismatch


class Role(StrEnum):
    """What an operation does to the table's files, which is what conflict detection looks at."""

    #: adds files without reading the table (blind INSERT, streaming append)
    APPEND = "append"
    #: reads rows, then removes/rewrites files and adds files (UPDATE, DELETE, MERGE, INSERT ... SELECT
    #: from the same table)
    READ_WRITE = "read_write"
    #: rewrites files without changing data (OPTIMIZE, REORG ... APPLY (PURGE))
    COMPACTION = "compaction"
    #: removes whole files and adds new ones (OVERWRITE, REPLACE_WHERE)
    REWRITE = "rewrite"
    #: changes metadata or protocol, or (re)creates the table
    METADATA = "metadata"


class IsolationLevel(StrEnum):
    SERIALIZABLE = "Serializable"
    WRITE_SERIALIZABLE = "WriteSerializable"


_ROLES: dict[OperationKind, Role] = {
    OperationKind.INSERT: Role.APPEND,
    OperationKind.STREAMING_WRITE: Role.APPEND,
    OperationKind.UPDATE: Role.READ_WRITE,
    OperationKind.DELETE: Role.READ_WRITE,
    OperationKind.MERGE: Role.READ_WRITE,
    OperationKind.OPTIMIZE: Role.COMPACTION,
    OperationKind.REORG_PURGE: Role.COMPACTION,
    OperationKind.OVERWRITE: Role.REWRITE,
    OperationKind.REPLACE_WHERE: Role.REWRITE,
    OperationKind.SET_TBLPROPERTIES: Role.METADATA,
    OperationKind.ADD_COLUMNS: Role.METADATA,
    OperationKind.ALTER_SCHEMA: Role.METADATA,
    OperationKind.REORG_UPGRADE: Role.METADATA,
    OperationKind.CREATE_OR_REPLACE: Role.METADATA,
}


@dataclass(frozen=True)
class OpFacts:
    """One operation, pre-digested for the rules.

    :param op: the operation itself.
    :param role: what it does to files (see :class:`Role`).
    :param scope: the rows it reads/rewrites; for an append the rows it adds (its ``predicate``, e.g. the
        partition values it writes), for a MERGE only the explicit target-side conjuncts of its ``ON``
        condition, for OVERWRITE the whole table.
    :param limitations: reasons its conditions defeat row-level concurrency (complex types,
        non-deterministic expressions, subqueries); empty when none.
    :param has_zorder: an OPTIMIZE ... ZORDER BY.
    :param writes: rows it adds outside ``scope`` (its write scope beyond its read scope): rows an UPDATE
        or MERGE moves by setting a column, rows a MERGE inserts. Empty when it writes only where it reads.
    :param unknown: what was not understood about it (it is then judged as reading and writing the whole
        table); shown in reasons.
    :param zoned: its literals whose meaning depends on the session time zone (see
        :func:`zone_neutral`).
    :param parser_read: its string literals whose meaning depends on the Spark session's parser settings
        (see :func:`parser_neutral`).
    """

    op: Operation
    role: Role
    scope: Predicate
    limitations: tuple[str, ...] = ()
    has_zorder: bool = False
    writes: tuple[Predicate, ...] = ()
    unknown: tuple[str, ...] = ()
    zoned: ZonedLiterals = field(default_factory=ZonedLiterals)
    parser_read: tuple[str, ...] = ()

    @property
    def kind(self) -> OperationKind:
        return self.op.kind

    @property
    def reads(self) -> bool:
        """It reads table data before committing (so files added or removed under it matter)."""
        return self.role in (Role.READ_WRITE, Role.REWRITE)

    def name(self) -> str:
        return str(self.op.describe())

    @functools.cached_property
    def order_key(self) -> tuple[object, ...]:
        """A total order on operations, so pair rules can see every pair in one canonical order."""
        op = self.op
        return (
            tuple(Role).index(self.role),
            op.kind.value,
            self.scope.sql or "",
            op.merge_condition or "",
            op.zorder_by,
            op.reads_target,
            op.checkpoint_location or "",
            op.label or "",
            op.predicate or "",
            op.target_alias,
            op.assignments,
            "\0" if op.inserts is None else op.inserts,
            op.engine.describe() if op.engine is not None else "",
        )


@dataclass(frozen=True)
class TableContext:
    """How one engine interprets one table.

    :param table: the table configuration.
    :param profile: the engine profile.
    :param isolation: the effective write isolation level.
    :param row_level_kinds: operation kinds that get row-level conflict detection on this table (empty
        when row-level concurrency does not apply).
    :param notes: how the profile read the table, for reasons (e.g. why row-level does not apply).
    :param conservative: reasons the model must treat every pair on this table as conflicting (an
        unrecognised isolation level, unknown properties or features).
    :param multi_reader_append: the 3-way rule applies (WriteSerializable: a blind append conflicts when
        more than one concurrent UPDATE/DELETE/MERGE may read the appended rows).
    :param caveats: what every verdict on this table must say about how it was reached (e.g. the engine
        version was never measured, so the strictest profile of its family judged it); ADR 0036.
    """

    table: TableConfig
    profile: EngineProfile
    isolation: IsolationLevel
    row_level_kinds: frozenset[OperationKind] = frozenset()
    notes: tuple[str, ...] = ()
    conservative: tuple[str, ...] = ()
    multi_reader_append: bool = False
    caveats: tuple[str, ...] = ()

    @property
    def row_level(self) -> bool:
        return bool(self.row_level_kinds)


def _and(first: Predicate, second: str | None) -> Predicate:
    """``first AND second`` (either may be "everything")."""
    if second is None or not second.strip():
        return first
    if first.is_everything or first.sql is None:
        return parse_predicate(second)
    return parse_predicate(f"({first.sql}) AND ({second})")


def with_generated_columns(op: Operation, table: TableConfig) -> Operation:
    """``op`` with the generated columns its assignments change added to its assignments.

    ``d DATE GENERATED ALWAYS AS (CAST(ts AS DATE))``: ``SET ts = ...`` rewrites ``d`` too, so a row read
    in ``d = '2024-01-01'`` may be written into any partition (measured on delta-spark 4.4.0: a concurrent
    ``DELETE WHERE d = '2024-02-01'`` fails with ConcurrentAppendException). The generated column is added
    with its generation expression as the value, which the model does not read as a literal: the column
    may take any value (:func:`_moved_rows`). Where the new value could be computed it is not; that only
    costs precision.

    An assignment whose column does not resolve to a column of the table's schema (when the schema's
    columns are known) is not understood, and becomes ``SET *``: every column may change.

    :param op: an operation on ``table``.
    :param table: the table's configuration (its generated columns, its columns).
    """
    if not op.assignments:
        return op
    op = _resolved_assignments(op, table)
    if not table.generated_columns:
        return op
    assigned = {assigned_column(column).column for column, _ in op.assignments}
    extra = tuple(
        (column, expression)
        for column, expression in table.generated_by([column for column, _ in op.assignments])
        if column.lower() not in assigned
    )
    return replace(op, assignments=op.assignments + extra) if extra else op


def _resolved_assignments(op: Operation, table: TableConfig) -> Operation:
    """``op`` with every assignment the table's columns do not positively resolve turned into ``SET *``.

    One identifier resolves when it names a column (case-insensitively); a path when its first part is a
    column (a struct field) or its dotted whole is one (a spec's key ``a.b``). Unknown columns: unchanged.
    """
    if table.column_types is None:
        return op
    columns = {name.lower() for name, _ in table.column_types}
    resolved: list[tuple[str, str]] = []
    for column, expression in op.assignments:
        assigned = assigned_column(column)
        if "*" in assigned.names or (
            assigned.column in columns if assigned.column is not None else assigned.names & columns
        ):
            resolved.append((column, expression))
        else:
            resolved.append(("*", "*"))
    found = tuple(resolved)
    return op if found == op.assignments else replace(op, assignments=found)


def build_facts(op: Operation) -> OpFacts:
    """Digest one operation (memoised: a scheduler re-checks the same running operations again and again).

    :param op: the operation.
    :raises deltaguard.core.sql.predicates.PredicateError: if a predicate or MERGE condition cannot be parsed
        (a ``ValueError`` with a one-line message).
    """
    # The label is not part of Operation equality, but it is shown in reasons: key on it too.
    return _build_facts(op, op.label)


@functools.lru_cache(maxsize=16384)
def _build_facts(op: Operation, label: str | None) -> OpFacts:
    del label  # only part of the cache key
    role = _ROLES[op.kind]
    if op.kind is OperationKind.INSERT and op.reads_target:
        role = Role.READ_WRITE
    if op.evolves_schema:
        # Its commit carries a metaData action: a metadata change whatever rows it touches (ADR 0035).
        role = Role.METADATA
    try:
        return _digest(op, role)
    except RecursionError:
        # A valid but pathologically deep expression: judged as reading and writing the whole table.
        why = "an expression nested too deeply to analyse"
        return OpFacts(
            op=op, role=role, scope=EVERYTHING, limitations=(why,), writes=(EVERYTHING,), unknown=(why,)
        )


def _digest(op: Operation, role: Role) -> OpFacts:
    limitations: tuple[str, ...] = ()
    given = parse_predicate(op.predicate)
    if role is Role.METADATA or op.kind is OperationKind.OVERWRITE:
        # A metadata change or a full overwrite concerns the whole table whatever its predicate says.
        reads = EVERYTHING
    elif op.kind is OperationKind.MERGE:
        if op.merge_condition is None or not op.merge_condition.strip():
            reads = _and(EVERYTHING, op.predicate)
        else:
            target = merge_target_predicate(op.merge_condition, op.target_alias)
            reads = _and(target, op.predicate)
            limitations = row_level_limitations(parse_predicate(op.merge_condition), table_qualifiers=True)
    elif op.kind is OperationKind.INSERT and op.reads_target:
        # What an INSERT ... SELECT reads from its own table is not described; only its predicate (the
        # rows it adds) is known, so it is treated as reading the whole table.
        reads = EVERYTHING
    else:
        reads = given
    if op.kind is not OperationKind.MERGE and role is not Role.METADATA:
        limitations = row_level_limitations(given)
    writes = _writes(op, reads)
    if op.reads_target and role is not Role.METADATA:
        # A subquery, CTE or MERGE source over the table itself reads it wherever it likes: the whole table.
        reads = EVERYTHING
        limitations = tuple(dict.fromkeys((*limitations, SUBQUERY)))
    unknown = tuple(
        dict.fromkeys(
            f"{p.unknown} ({_short(p.sql)})" for p in (given, reads, *writes) if p.unknown and p.sql
        )
    )
    parts = [zoned_literals(p) for p in (given, reads, *writes)]
    if op.merge_condition and op.merge_condition.strip():
        parts.append(zoned_literals(parse_predicate(op.merge_condition)))
    zoned = ZonedLiterals(
        frozenset().union(*(z.columns for z in parts)),
        tuple(dict.fromkeys(t for z in parts for t in z.local_times)),
    )
    texts = (op.predicate, op.merge_condition, op.inserts, op.sql, *(e for _, e in op.assignments))
    return OpFacts(
        op=op,
        role=role,
        scope=reads,
        limitations=limitations,
        has_zorder=bool(op.zorder_by),
        writes=writes,
        unknown=unknown,
        zoned=zoned,
        parser_read=tuple(dict.fromkeys(t for text in texts for t in parser_dependent_literals(text))),
    )


def _short(text: str, limit: int = 80) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."


def _writes(op: Operation, reads: Predicate) -> tuple[Predicate, ...]:
    """Where the operation adds rows outside ``reads`` (see :attr:`OpFacts.writes`)."""
    found: list[Predicate] = []
    if op.kind in (OperationKind.UPDATE, OperationKind.MERGE) and op.assignments:
        found.append(_moved_rows(reads, op.assignments))
    if op.kind is OperationKind.MERGE and op.inserts is None:
        found.append(EVERYTHING)  # source rows: any partition, any key
    elif op.kind is OperationKind.MERGE and op.inserts:
        found.append(parse_predicate(op.inserts))
    return tuple(found)


def _moved_rows(reads: Predicate, assignments: tuple[tuple[str, str], ...]) -> Predicate:
    """The rows an assignment list turns the rows of ``reads`` into.

    The assigned columns no longer restrict anything, except where the new value is a literal
    (``SET date = '2024-01-03'`` writes into partition 2024-01-03).
    """
    columns: set[str] = set()
    fixed = EVERYTHING
    for column, expression in assignments:
        if column.strip() == "*":
            return EVERYTHING
        # `a.b` (quoted) is the column named a.b; meta.date changes struct column meta, or a column named
        # "meta.date" when a spec's key spells it so: every reading of a path moves (assigned_column).
        assigned = assigned_column(column)
        columns.update(assigned.names)
        if assigned.column is None:
            continue
        try:
            value = parse_predicate(f"{column_text([assigned.column])} = ({expression})")
        except PredicateError:
            continue  # not a plain value: the column may take any value
        fixed = conjoin(fixed, value)
    return conjoin(project_out(reads, columns), fixed)


def zone_neutral(
    a: OpFacts, b: OpFacts, zone_a: str | None, zone_b: str | None, timestamp_columns: Collection[str]
) -> tuple[OpFacts, OpFacts, str | None]:
    """The pair as the model may compare it when the writes' session time zones may not agree.

    A Spark session reads a ``TIMESTAMP`` literal without zone, and a date compared with a timestamp
    column, in its own time zone (:mod:`deltaguard.core.time_zones`). Unless both writes are known to read
    them in one zone that maps each of their literals to one instant, every restriction of the columns
    such literals are compared with (and of the table's timestamp columns) is dropped from both: the
    literals may name the same instant, so they separate nothing.

    :param a: one operation.
    :param b: the other.
    :param zone_a: the session time zone ``a`` commits from (``None``: unknown).
    :param zone_b: the one ``b`` commits from.
    :param timestamp_columns: the table's ``TIMESTAMP``/``TIMESTAMP_NTZ`` columns.
    :returns: both facts (unchanged when nothing depends on the zone) and, when columns were dropped, why.
    """
    columns = a.zoned.columns | b.zoned.columns | {c.lower() for c in timestamp_columns}
    if not columns:
        return a, b, None
    used = frozenset().union(*(referenced_columns(p) for f in (a, b) for p in (f.scope, *f.writes)))
    touched = columns & used
    if not touched:
        return a, b, None
    why = zone_mismatch(zone_a, zone_b, (*a.zoned.local_times, *b.zoned.local_times))
    if why is None:
        return a, b, None
    hidden = sorted(touched)

    def neutral(f: OpFacts) -> OpFacts:
        return replace(
            f, scope=project_out(f.scope, hidden), writes=tuple(project_out(w, hidden) for w in f.writes)
        )

    return neutral(a), neutral(b), f"{', '.join(hidden)} not compared: {why}"


def parser_neutral(f: OpFacts, profile: EngineProfile) -> OpFacts:
    """The operation as the model may judge it when the session that runs it may read its string literals
    otherwise than the model does (:mod:`deltaguard.core.sql.parser_settings`).

    A Spark engine runs the text it was given. Unless the session is known to run with the parser settings
    the model reads with (``session_default_parser``; with ANSI mode known off, a double-quoted literal is
    text whatever ``spark.sql.ansi.doubleQuotedIdentifiers`` says), an operation with such a literal is
    judged as reading and writing the whole table, without row-level concurrency. delta-rs runs the model's
    own parse, rendered for DataFusion, and is never affected.

    :param f: the operation.
    :param profile: the engine that commits it.
    :returns: ``f``, or ``f`` as the whole table with the reason among its ``unknown``.
    """
    if not f.parser_read or profile.name is EngineName.DELTA_RS or profile.session_default_parser is True:
        return f
    unsure = [
        t for t in f.parser_read if "\\" in t or not (t.startswith('"') and profile.session_ansi is False)
    ]
    if not unsure:
        return f
    state = "on" if profile.session_default_parser is False else "not known to be off"
    why = (
        f"{', '.join(unsure[:3])} may not be the text it reads as: spark.sql.ansi.doubleQuotedIdentifiers or "
        f"spark.sql.parser.escapedStringLiterals is {state} in the session that runs it"
    )
    return replace(
        f,
        scope=EVERYTHING,
        writes=(EVERYTHING,),
        limitations=tuple(dict.fromkeys((*f.limitations, why))),
        unknown=tuple(dict.fromkeys((*f.unknown, why))),
    )


#: column types Spark compares a text literal with without reading it as a number
_TEXT_TYPES: tuple[str, ...] = ("string", "char", "varchar", "date", "timestamp", "boolean", "binary")


def coercion_neutral(
    a: OpFacts, b: OpFacts, profiles: Collection[EngineProfile], table: TableConfig
) -> tuple[OpFacts, OpFacts, str | None]:
    """The pair as the model may compare it when a Spark session may read numeric text by truncating it.

    With ``spark.sql.ansi.enabled`` off, Spark casts text compared with a numeric column leniently:
    ``k = '1.5'`` on an INT partition selects ``k = 1`` (measured on delta-spark 4.4.0). Unless every Spark
    engine that commits one of the two is known to run with ANSI on (where such a cast fails the write),
    the columns compared with such text (:func:`~deltaguard.core.sql.literal_columns.coercible_text_columns`)
    are dropped from both, unless the table's schema says they hold text.

    :param a: one operation.
    :param b: the other.
    :param profiles: the engines that commit them.
    :param table: the table (its column types).
    :returns: both facts (unchanged when nothing depends on the mode) and, when columns were dropped, why.
    """
    from deltaguard.core.sql.literal_columns import coercible_text_columns

    unsure = [p for p in profiles if p.name is not EngineName.DELTA_RS and p.session_ansi is not True]
    if not unsure:
        return a, b, None
    found = frozenset().union(*(coercible_text_columns(p) for f in (a, b) for p in (f.scope, *f.writes)))
    hidden = sorted(c for c in found if not (table.column_type(c) or "").startswith(_TEXT_TYPES))
    if not hidden:
        return a, b, None

    def neutral(f: OpFacts) -> OpFacts:
        return replace(
            f, scope=project_out(f.scope, hidden), writes=tuple(project_out(w, hidden) for w in f.writes)
        )

    mode = "off" if any(p.session_ansi is False for p in unsure) else "not known"
    why = (
        f"{', '.join(hidden)} not compared: numeric text may be truncated when cast, as spark.sql.ansi.enabled "
        f"is {mode}"
    )
    return neutral(a), neutral(b), why


def may_overlap(
    a: OpFacts,
    b: OpFacts,
    columns: Collection[str] | None,
    conjuncts_only: bool = False,
    text: Collection[str] = (),
) -> bool:
    """Whether one operation may add, remove or read rows the other reads, reasoning only over ``columns``
    (``None``: any column).

    Sound: whatever the predicate analysis does not understand counts as overlapping.

    :param a: one operation.
    :param b: the other.
    :param columns: the columns whose conditions may separate them (the partition columns for file-level
        rules).
    :param conjuncts_only: the engine narrows what a reader read only by its top-level conjuncts on
        ``columns`` (delta-spark, see :func:`~deltaguard.core.sql.predicates.partition_conjuncts`).
    :param text: the columns the table's schema says are STRINGs (``TableConfig.string_columns``), compared
        with string literals as text; others compare ``'01'`` as possibly the number 1.
    """
    read_a, read_b = _read_scope(a, columns, conjuncts_only), _read_scope(b, columns, conjuncts_only)
    pairs = [(read_a, read_b), *((w, read_b) for w in a.writes), *((read_a, w) for w in b.writes)]
    return any(_scopes_overlap(x, y, columns, text) for x, y in pairs)


def _read_scope(f: OpFacts, columns: Collection[str] | None, conjuncts_only: bool) -> Predicate:
    # An append's scope is the rows it adds: exact partition values, never narrowed by the engine.
    if conjuncts_only and columns is not None and f.role is not Role.APPEND:
        return partition_conjuncts(f.scope, columns)
    return f.scope


def _scopes_overlap(
    x: Predicate, y: Predicate, columns: Collection[str] | None, text: Collection[str]
) -> bool:
    if x.is_everything or y.is_everything:
        return True
    return not provably_disjoint(x, y, columns, text)
