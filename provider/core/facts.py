"""Per-operation facts and per-table context the conflict rules work on.

The model turns every :class:`~deltaguard.core.operations.Operation` into one :class:`OpFacts` (parsed
predicates, role, row-level limitations) once per ``decide()`` call, and the engine profile turns the
table into one :class:`TableContext`. Rule functions then only compare precomputed facts, which keeps a
decision against a thousand running operations cheap.

Every engine rule module (``rules_databricks``, ``rules_delta_spark``, ``rules_deltars``) exposes the
same two functions:

``table_context(table: TableConfig, profile: EngineProfile) -> TableContext``
    how the engine reads the table's properties (isolation level, row-level concurrency, ...).
``pair(a: OpFacts, b: OpFacts, ctx: TableContext) -> PairVerdict``
    whether ``a`` and ``b`` can conflict in either commit order. It is only called after the shared
    rules of ``rules_common`` (identity columns, metadata changes, table creation, streaming checkpoints,
    conservative configuration) found nothing, so it may assume two data writes on an existing table.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import StrEnum

from deltaguard.core.decision import PairVerdict
from deltaguard.core.operations import DML, Operation, OperationKind
from deltaguard.core.predicates import (
    Predicate,
    merge_target_predicate,
    parse_predicate,
    provably_disjoint,
    row_level_limitations,
)
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig


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
    """

    op: Operation
    role: Role
    scope: Predicate
    limitations: tuple[str, ...] = ()
    has_zorder: bool = False

    @property
    def kind(self) -> OperationKind:
        return self.op.kind

    @property
    def reads(self) -> bool:
        """It reads table data before committing (so files added or removed under it matter)."""
        return self.role in (Role.READ_WRITE, Role.REWRITE)

    @property
    def is_dml_like(self) -> bool:
        """UPDATE/DELETE/MERGE or an INSERT that reads the target (the seed: "same concurrency as MERGE")."""
        return self.role is Role.READ_WRITE

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
    """

    table: TableConfig
    profile: EngineProfile
    isolation: IsolationLevel
    row_level_kinds: frozenset[OperationKind] = frozenset()
    notes: tuple[str, ...] = ()
    conservative: tuple[str, ...] = ()
    multi_reader_append: bool = False

    @property
    def row_level(self) -> bool:
        return bool(self.row_level_kinds)


#: the signature every engine's ``pair`` function has
PairRule = Callable[[OpFacts, OpFacts, TableContext], PairVerdict]
#: the signature every engine's ``table_context`` function has
ContextRule = Callable[[TableConfig, EngineProfile], TableContext]


def _and(first: Predicate, second: str | None) -> Predicate:
    """``first AND second`` (either may be "everything")."""
    if second is None or not second.strip():
        return first
    if first.is_everything or first.sql is None:
        return parse_predicate(second)
    return parse_predicate(f"({first.sql}) AND ({second})")


def build_facts(op: Operation) -> OpFacts:
    """Digest one operation (memoised: a scheduler re-checks the same running operations again and again).

    :param op: the operation.
    :raises deltaguard.core.predicates.PredicateError: if a predicate or MERGE condition cannot be parsed
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
    limitations: tuple[str, ...] = ()
    if role is Role.METADATA or op.kind is OperationKind.OVERWRITE:
        # A metadata change or a full overwrite concerns the whole table whatever its predicate says.
        scope = parse_predicate(None)
    elif op.kind is OperationKind.MERGE:
        if op.merge_condition is None or not op.merge_condition.strip():
            scope = _and(parse_predicate(None), op.predicate)
        else:
            target = merge_target_predicate(op.merge_condition, op.target_alias)
            scope = _and(target, op.predicate)
            limitations = row_level_limitations(parse_predicate(op.merge_condition))
    elif op.kind is OperationKind.INSERT and op.reads_target:
        # What an INSERT ... SELECT reads from its own table is not described; only its predicate (the
        # rows it adds) is known, so it is treated as reading the whole table.
        scope = parse_predicate(None)
    else:
        scope = parse_predicate(op.predicate)
    if op.kind is not OperationKind.MERGE and role is not Role.METADATA:
        limitations = row_level_limitations(scope)
    return OpFacts(op=op, role=role, scope=scope, limitations=limitations, has_zorder=bool(op.zorder_by))


def may_overlap(a: OpFacts, b: OpFacts, columns: Collection[str] | None) -> bool:
    """Whether some row could be in both scopes, reasoning only over ``columns`` (``None``: any column).

    Sound: whatever the predicate analysis does not understand counts as overlapping.
    """
    if a.scope.is_everything or b.scope.is_everything:
        return True
    return not provably_disjoint(a.scope, b.scope, columns)


def is_dml(kind: OperationKind) -> bool:
    return kind in DML
