"""delta-rs (the ``deltalake`` Python package) conflict rules: the measured delta-rs profile.

Every rule was measured with ``python -m lab.conformance`` against deltalake 1.6.6: two handles open the
same version, one commits, the other commits from its stale snapshot, in both orders (the measured facts
and the method: ADR 0003; results in ``benchmarks/results/conformance_deltars.json``). Where delta-rs lets
two writes both commit but the table matches neither serial order (silent corruption), the rule says
``conflict``, because deltaguard must serialize those writes itself. File statistics may keep two rewrites
of an unpartitioned table apart (:mod:`deltaguard.core.rules.deltars_stats`, ADR 0020).

Its ``table_context`` and ``pair`` are the interface every engine rule module has (:mod:`deltaguard.core.facts`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import replace
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from deltaguard.core.closed_world import table_property, version_caveat
from deltaguard.core.decision import DeltaException, PairVerdict
from deltaguard.core.facts import IsolationLevel, Role, TableContext, may_overlap
from deltaguard.core.meaning import engine_refutes
from deltaguard.core.operations import OperationKind
from deltaguard.core.profiles import EngineName
from deltaguard.core.rules.deltars_stats import STATS_KINDS, fallback_note, stats_disjoint
from deltaguard.core.sql.columns import referenced_columns
from deltaguard.core.sql.literal_columns import fractional_columns, numeric_columns, numeric_order_columns
from deltaguard.core.sql.literals import SPARK
from deltaguard.core.sql.predicates import (
    Predicate,
    null_widened_terms,
    parse_predicate,
    project_out,
    provably_disjoint_terms,
)

if TYPE_CHECKING:
    from deltaguard.core.facts import OpFacts
    from deltaguard.core.profiles import EngineProfile
    from deltaguard.core.table_config import TableConfig

#: where the evidence comes from, quoted in every reason
EVIDENCE = "delta-rs 1.6.6 conformance"

#: ``delta.isolationLevel`` values delta-rs 1.6.6 honours (measured; the value is case-sensitive)
HONOURED_SPELLINGS: frozenset[str] = frozenset({"Serializable", "writeSerializable", "snapshotIsolation"})
#: spellings measured to be silently ignored (delta-rs then behaves as Serializable)
IGNORED_SPELLINGS: frozenset[str] = frozenset({"WriteSerializable", "SnapshotIsolation"})

#: operation kinds delta-rs can execute and the harness measured; the rest stay conservative
_MEASURED: frozenset[OperationKind] = frozenset(
    {
        OperationKind.INSERT,
        OperationKind.UPDATE,
        OperationKind.DELETE,
        OperationKind.MERGE,
        OperationKind.OPTIMIZE,
        OperationKind.OVERWRITE,
        OperationKind.REPLACE_WHERE,
    }
)


def _snapshot(ctx: TableContext) -> bool:
    """``delta.isolationLevel = 'snapshotIsolation'`` (camelCase): delta-rs then only checks the files the
    winning commit removed. The shared ``IsolationLevel`` has no such level (``ctx.isolation`` stays
    Serializable), so the rules read the property itself."""
    if version_caveat(ctx.profile) is not None:
        return False  # the strictest profile: an unmeasured version is not trusted to skip checks
    return table_property(ctx.table, "delta.isolationLevel") == "snapshotIsolation"


def column_mapping(ctx: TableContext) -> str | None:
    """The table's ``delta.columnMapping.mode`` when it is anything but absent or ``none``.

    Measured on deltalake 1.6.6 with ``name`` and ``id``: two appends commit side by side, but a stale
    DELETE/UPDATE/MERGE beside any concurrent commit either panics (``PanicException``: ``Option::unwrap()``
    on ``None`` in the conflict checker) or fails, whatever partitions the two touch, and OPTIMIZE is
    refused. A mode not measured (any other spelling) is judged the same way.
    """
    value: str | None = table_property(ctx.table, "delta.columnMapping.mode")
    if value is None or value == "none":
        return None
    return value


def table_context(table: TableConfig, profile: EngineProfile) -> TableContext:
    """How delta-rs reads the table: its isolation level (camelCase only), never row-level concurrency.

    :param table: the table configuration.
    :param profile: the delta-rs profile.
    """
    raw = table_property(table, "delta.isolationLevel")
    notes: tuple[str, ...] = ()
    conservative: tuple[str, ...] = ()
    isolation = IsolationLevel.SERIALIZABLE
    caveat = version_caveat(profile)
    if caveat is not None:
        # The strictest delta-rs profile: no measured relaxation (snapshotIsolation, file statistics).
        table = replace(table, file_stats=None)
    if raw == "writeSerializable":
        isolation = IsolationLevel.WRITE_SERIALIZABLE
    elif raw is None or raw in HONOURED_SPELLINGS:
        pass
    elif raw in IGNORED_SPELLINGS:
        notes = (
            f"{EVIDENCE}: delta.isolationLevel = {raw!r} is silently ignored (only camelCase "
            "'writeSerializable'/'snapshotIsolation' are honoured), so the table behaves as Serializable",
        )
    else:
        conservative = (f"delta.isolationLevel = {raw!r} was not measured with delta-rs",)
    return TableContext(
        table=table,
        profile=profile,
        isolation=isolation,
        notes=notes,
        conservative=conservative,
        caveats=(caveat,) if caveat else (),
    )


def _verdict(
    conflict: bool,
    reason: str,
    rule: str,
    ctx: TableContext,
    exceptions: tuple[DeltaException, ...] = (),
    advice: tuple[str, ...] = (),
) -> PairVerdict:
    text = f"{EVIDENCE}: {reason}"
    if ctx.notes:
        text += " (" + "; ".join(ctx.notes) + ")"
    return PairVerdict(conflict=conflict, exceptions=exceptions, reason=text, advice=advice, rule=rule)


def _is_blind_append(f: OpFacts) -> bool:
    return f.role is Role.APPEND and f.kind is OperationKind.INSERT


def _is_reading_insert(f: OpFacts) -> bool:
    return f.kind is OperationKind.INSERT and f.op.reads_target


def _partitions_disjoint(a: OpFacts, b: OpFacts, ctx: TableContext) -> bool:
    """Both scopes name provably different partitions (never on an unpartitioned table)."""
    columns = ctx.table.partition_columns
    return bool(columns) and not may_overlap(a, b, columns, text=ctx.table.string_columns)


def _reads_disjoint(a: OpFacts, b: OpFacts, ctx: TableContext) -> bool:
    """Neither write removes a file the other one *read*, as delta-rs counts what a stale write read.

    Measured on deltalake 1.6.6 (ADR 0003 fact 11): the files of the stale snapshot a write read are its
    read predicate pruned on partition values in which NULL compares as unknown, so the files of a
    ``p = NULL`` partition count as read by every comparison on ``p`` (on DATE and BIGINT partitions even
    by ``=`` and ``IN``; an empty-string value is logged as null and read alike), and ``p IS NULL`` /
    ``IS NOT NULL`` count every file as read. Files a concurrent
    commit *added* are pruned exactly (NULL is only matched by ``IS NULL``), which :func:`may_overlap`
    already judges. A write removes only files holding rows of its scope; the other's read is widened by
    :func:`~deltaguard.core.sql.predicates.null_widened_terms`.
    """
    columns = ctx.table.partition_columns
    if not _partitions_disjoint(a, b, ctx):
        return False
    key, text = frozenset(column.lower() for column in columns), ctx.table.string_columns
    for reader, remover in ((a, b), (b, a)):
        read = null_widened_terms(reader.scope, key, text)
        removed = remover.scope
        if removed.is_everything or not provably_disjoint_terms(read, removed.terms_over(key, text)):
            return False
    return True


#: partition types delta-rs compares numbers with exactly (as numbers, or not at all)
_EXACT_TYPES: frozenset[str] = frozenset(
    {"byte", "short", "integer", "long", "date", "timestamp", "timestamp_ntz", "boolean"}
)


def _typed_partitions(a: OpFacts, b: OpFacts, ctx: TableContext) -> tuple[OpFacts, OpFacts, str]:
    """The pair without the partition restrictions delta-rs does not read as the model does, by type.

    Measured on deltalake 1.6.6 (ADR 0003 fact 13), stale rewrites of partitions the model calls disjoint:

    * STRING: DataFusion compares the column with a number as *text*: on partitions ``'2'``, ``'12'``,
      ``WHERE p < 5`` and ``WHERE p > 10`` both read ``'2'`` and the second to commit fails. Numeric ranges
      (``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``) separate nothing; equality and ``IN`` stay (one text per number).
    * DECIMAL: the stale commit fails evaluating its read predicate on the partition values ("Error evaluating
      predicate", or ConcurrentDeleteRead) even for ``p = 1.5`` x ``p = 10.25``: the column separates nothing.
    * FLOAT / DOUBLE: with partitions ``-0.0`` and ``0.0``, ``p = 0`` x ``p < 0`` fail (``-0.0`` is below
      ``0.0`` for one comparison and equal to it for the other): the column separates nothing.
    * unknown type (no ``TableConfig.column_types``): any of these, so a column compared with a number in
      any way separates nothing.
    * BYTE / SHORT / INTEGER / LONG compared with a number that is not a whole number: DataFusion casts the
      literal to the column's type, truncating it, so ``p = 1.5`` and ``p >= 1.5`` rewrite ``p = 1`` and
      ``p <= -0.5`` rewrites ``p = 0``, while the model reads them exactly (Spark's reading): the column
      separates nothing for that pair. A whole number (``1.0``, ``1e0``) keeps its value.
    * BOOLEAN in a MERGE's target condition: ``ON t.id = s.id AND t.p = false`` reads every partition (a stale
      MERGE fails with ConcurrentDeleteRead after a DELETE of ``p = true``; found by the meaning fuzzer,
      ``lab/fuzz/meaning_regressions/boolean-merge-*.json``): the column separates nothing for that pair.

    :returns: both facts (unchanged when nothing is dropped) and, when columns were dropped, why.
    """
    partitions = {column.lower() for column in ctx.table.partition_columns}
    if not partitions:
        return a, b, ""
    predicates = [p for f in (a, b) for p in (f.scope, *f.writes)]
    hidden: dict[str, str] = {}
    for column in sorted(partitions):
        kind = ctx.table.column_type(column)
        if kind == "boolean" and any(
            f.kind is OperationKind.MERGE and column in referenced_columns(f.scope) for f in (a, b)
        ):
            hidden[column] = (
                "a MERGE's condition on a BOOLEAN partition, with which delta-rs reads every partition"
            )
            continue
        if kind in _INTEGER_TYPES and any(column in fractional_columns(p) for p in predicates):
            hidden[column] = (
                f"compared with a number that is not a whole number on a {kind.upper()} partition "
                "(delta-rs casts it to the column's type: 1.5 reads as 1)"
            )
            continue
        if kind in _EXACT_TYPES:
            continue
        if kind is not None and (kind.startswith("decimal") or kind in ("float", "double")):
            if any(column in referenced_columns(p) for p in predicates):
                hidden[column] = f"a {kind.upper()} partition, whose values delta-rs does not compare exactly"
        elif kind == "string":
            if any(column in numeric_order_columns(p) for p in predicates):
                hidden[column] = "a numeric range on a STRING partition, which delta-rs compares as text"
        elif any(column in numeric_columns(p) for p in predicates):
            hidden[column] = (
                "compared with a number on a partition of unknown type (delta-rs compares a STRING as text, "
                "fails on a DECIMAL)"
                if kind is None
                else f"compared with a number on a {kind.upper()} partition"
            )
    if not hidden:
        return a, b, ""

    def neutral(f: OpFacts) -> OpFacts:
        return replace(
            f, scope=project_out(f.scope, hidden), writes=tuple(project_out(w, hidden) for w in f.writes)
        )

    note = "; not compared: " + "; ".join(f"{column} ({why})" for column, why in hidden.items())
    return neutral(a), neutral(b), note


#: integer partition types, whose values delta-rs compares with integer text as numbers
_INTEGER_TYPES: frozenset[str] = frozenset({"byte", "short", "integer", "long"})
_INTEGER_TEXT = re.compile(r"[+-]?\d+")


def _integer_text_as_numbers(a: OpFacts, b: OpFacts, ctx: TableContext) -> tuple[OpFacts, OpFacts]:
    """The pair with ``p = '01'`` read as ``p = 1`` on integer partitions, as delta-rs reads it.

    Measured on deltalake 1.6.6 (tests/engines/test_deltars_integer_text.py): on an INT partition
    ``DELETE WHERE k = '01'`` deletes the rows of ``k = 1``, and ``k = '01'`` and ``k = 2`` both commit from
    one snapshot. The model cannot tell a column's type from a literal, so it compares ``'01'`` with numbers
    only where the table's column types say the partition is an integer.
    """
    table = ctx.table
    columns = frozenset(c.lower() for c in table.partition_columns if table.column_type(c) in _INTEGER_TYPES)
    if not columns:
        return a, b

    def retyped(p: Predicate) -> Predicate:
        if p.sql is None or p.is_everything or p.tree is None:
            return p
        text = _numbers_for_integer_text(p.sql, columns)
        return p if text is None else parse_predicate(text)

    def facts(f: OpFacts) -> OpFacts:
        scope, writes = retyped(f.scope), tuple(retyped(w) for w in f.writes)
        return f if scope is f.scope and writes == f.writes else replace(f, scope=scope, writes=writes)

    return facts(a), facts(b)


@functools.lru_cache(maxsize=4096)
def _numbers_for_integer_text(sql: str, columns: frozenset[str]) -> str | None:
    """``sql`` with every ``column = '<integer text>'`` on ``columns`` turned into a number (``None``: none)."""
    try:
        tree = sqlglot.parse_one(sql, read=SPARK)
    except SqlglotError:
        return None
    changed = False

    def swap(node: exp.Expr) -> exp.Expr:
        nonlocal changed
        if not isinstance(node, exp.EQ):
            return node
        for column, value in ((node.this, node.expression), (node.expression, node.this)):
            if (
                isinstance(column, exp.Column)
                and column.name.lower() in columns
                and isinstance(value, exp.Literal)
                and value.is_string
                and _INTEGER_TEXT.fullmatch(value.this)
            ):
                changed = True
                return exp.EQ(this=column.copy(), expression=exp.Literal.number(int(value.this)))
        return node

    rewritten = tree.transform(swap)
    return rewritten.sql(dialect=SPARK) if changed else None


def _engine_refutes(a: OpFacts, b: OpFacts, ctx: TableContext) -> str | None:
    """Why the engine at hand does not confirm the partitions the model keeps apart (``None``: it does, or
    no engine is at hand and the hand-written reading decides alone, ADR 0037)."""
    oracle = ctx.table.meaning
    if oracle is None:
        return None
    speaks_for = getattr(oracle, "engine", None)
    if speaks_for is not None and speaks_for != EngineName.DELTA_RS.value:
        # closed world: another engine's evaluator says nothing of how delta-rs selects partitions
        return f"the evaluator at hand is {speaks_for}'s, not delta-rs'"
    return engine_refutes(a, b, ctx.table.partition_columns, oracle)


def _engine_verdict(a: OpFacts, b: OpFacts, ctx: TableContext, refuted: str) -> PairVerdict:
    return _verdict(
        True,
        f"{a.kind.value} x {b.kind.value}: the model reads their partition predicates as disjoint, but delta-rs' "
        f"own evaluator does not confirm it: {refuted}",
        "deltars.engine_unconfirmed",
        ctx,
        (DeltaException.CONCURRENT_DELETE_READ, DeltaException.CONCURRENT_APPEND),
        ("run these writes one after the other, or select partitions with = or IN of plain values",),
    )


def _stats_kinds(a: OpFacts, b: OpFacts) -> bool:
    return a.kind in STATS_KINDS and b.kind in STATS_KINDS


def pair(a: OpFacts, b: OpFacts, ctx: TableContext) -> PairVerdict:
    """Whether two data writes can conflict (or silently corrupt data) under delta-rs, in either order.

    :param a: one operation's facts.
    :param b: the other operation's facts.
    :param ctx: the table as delta-rs reads it.
    """
    for f in (a, b):
        if f.kind not in _MEASURED:
            return _verdict(
                True,
                f"{f.kind.value} cannot be executed by delta-rs, so its pairs are unmeasured and treated as "
                "conflicting",
                "deltars.unmeasured",
                ctx,
                (DeltaException.CONCURRENT_APPEND, DeltaException.CONCURRENT_DELETE_READ),
                ("run these writes one after the other",),
            )
    a, b = _integer_text_as_numbers(a, b, ctx)
    a, b, text_note = _typed_partitions(a, b, ctx)
    roles = {a.role, b.role}

    if _is_blind_append(a) and _is_blind_append(b):
        return _verdict(
            False, "two appends both commit and keep both sets of rows", "deltars.append_append", ctx
        )
    mapping = column_mapping(ctx)
    if mapping is not None:
        return _verdict(
            True,
            f"delta.columnMapping.mode = {mapping!r}: a stale UPDATE/DELETE/MERGE beside a concurrent commit "
            "panics in delta-rs' conflict checker (any partitions, either order) and OPTIMIZE fails; only two "
            "appends were measured to commit side by side",
            "deltars.column_mapping",
            ctx,
            (DeltaException.CONCURRENT_APPEND, DeltaException.CONCURRENT_DELETE_READ),
            ("run these writes one after the other",),
        )
    if Role.APPEND in roles and Role.COMPACTION in roles:
        return _verdict(
            False,
            "an append and an OPTIMIZE both commit in either order (OPTIMIZE leaves the new files alone)",
            "deltars.append_optimize",
            ctx,
        )
    if _snapshot(ctx):
        verdict = _snapshot_isolation_pair(a, b, ctx)
        if verdict is not None:
            return verdict
    if Role.APPEND in roles:
        reader = b if a.role is Role.APPEND else a
        return _verdict(
            True,
            f"appends are never blind: an append and a concurrent {reader.kind.value} that reads or rewrites "
            "files conflict anywhere in the table, even in another partition (ConcurrentDeleteRead when the "
            "append commits second, ConcurrentAppend when the other does)",
            "deltars.append_not_blind",
            ctx,
            (DeltaException.CONCURRENT_APPEND, DeltaException.CONCURRENT_DELETE_READ),
            ("run the append before or after the other write; delta-rs gives no partition-level isolation",),
        )
    if roles == {Role.COMPACTION}:
        if _partitions_disjoint(a, b, ctx):
            refuted = _engine_refutes(a, b, ctx)
            if refuted is not None:
                return _engine_verdict(a, b, ctx, refuted)
            return _verdict(
                False,
                "OPTIMIZEs of provably different partitions both commit without touching each other's files",
                "deltars.optimize_disjoint",
                ctx,
            )
        return _verdict(
            True,
            "OPTIMIZE x OPTIMIZE on the same files both commit and duplicate every compacted row (delta-rs does "
            "not detect it; deltaguard must serialize them)",
            "deltars.optimize_optimize_duplicates",
            ctx,
            (DeltaException.CONCURRENT_DELETE_DELETE,),
            (
                "never run two OPTIMIZEs of the same partitions at once; give each a disjoint partition filter",
            ),
        )
    if Role.COMPACTION in roles:
        other = b if a.role is Role.COMPACTION else a
        corrupt = other.kind is OperationKind.OVERWRITE
        return _verdict(
            True,
            (
                "OPTIMIZE followed by a concurrent full OVERWRITE commits and keeps the compacted rows beside "
                "the new ones (silent corruption)"
                if corrupt
                else f"OPTIMIZE checks the whole table at commit, so it conflicts with a concurrent "
                f"{other.kind.value} even in another partition (ConcurrentDeleteRead)"
            )
            + (
                "; under snapshotIsolation the rewrite even commits over the compaction and duplicates rows"
                if _snapshot(ctx)
                else ""
            ),
            "deltars.optimize_rewrite",
            ctx,
            (DeltaException.CONCURRENT_DELETE_READ, DeltaException.CONCURRENT_APPEND),
            ("run OPTIMIZE when no other write on the table is running",),
        )
    # Both read and rewrite files (UPDATE, DELETE, MERGE, INSERT reading the target, REPLACE WHERE, OVERWRITE).
    if _reads_disjoint(a, b, ctx):
        refuted = _engine_refutes(a, b, ctx)
        if refuted is not None:
            return _engine_verdict(a, b, ctx, refuted)
        return _verdict(
            False,
            f"{a.kind.value} and {b.kind.value} on provably different partitions both commit (delta-rs checks "
            "the files of the partitions each one read)",
            "deltars.disjoint_partitions",
            ctx,
        )
    if _partitions_disjoint(a, b, ctx):
        return _verdict(
            True,
            f"{a.kind.value} x {b.kind.value} conflict although their partitions differ: delta-rs decides what "
            "a stale write read by pruning its predicate on partition values, where NULL compares as unknown, "
            "so the files of a NULL (or empty-string, which delta-rs logs as null) partition count as read by "
            "any comparison on that column but a top-level = or IN of plain strings, and IS NULL / IS NOT NULL "
            "read every partition",
            "deltars.null_partition_read",
            ctx,
            (DeltaException.CONCURRENT_DELETE_READ,),
            (
                "select partitions with = or IN of the values on a STRING partition column, and run writes of "
                "the NULL partition (IS NULL) one after the others",
            ),
        )
    proof = stats_disjoint(a, b, ctx)
    if proof is not None:
        return _verdict(
            False,
            f"{a.kind.value} and {b.kind.value} both commit in either order: delta-rs checks read predicates "
            f"against file statistics, and {proof}",
            "deltars.file_stats_disjoint",
            ctx,
        )
    return _verdict(
        True,
        f"{a.kind.value} x {b.kind.value} conflict: "
        + (
            "the table is unpartitioned, so both rewrite files holding rows of either predicate"
            + (
                f" unless file statistics keep them apart, and {fallback_note(ctx)}"
                if _stats_kinds(a, b)
                else ""
            )
            if not ctx.table.partition_columns
            else "their partition predicates may overlap (a MERGE without an explicit target filter, an "
            "INSERT reading the table and an OVERWRITE read every partition; rows an UPDATE or MERGE moves or "
            "inserts count where they land)"
        )
        + text_note,
        "deltars.rewrite_rewrite",
        ctx,
        (DeltaException.CONCURRENT_APPEND, DeltaException.CONCURRENT_DELETE_READ),
        (
            "partition the table by the column the writes filter on and give each write an explicit partition "
            "predicate (for MERGE: a t.<partition column> = <value> conjunct in the ON condition)",
        ),
    )


def _snapshot_isolation_pair(a: OpFacts, b: OpFacts, ctx: TableContext) -> PairVerdict | None:
    """Pairs only ``snapshotIsolation`` makes compatible (delta-rs then checks removed files only).

    An INSERT that reads the table adds files and removes none, so under snapshot isolation it no longer
    conflicts with a blind append (the serial order "reader first" explains the result) nor with an OPTIMIZE
    (which changes no rows). Two such INSERTs stay conflicting: both may insert the same absent key.
    """
    reading = a if _is_reading_insert(a) else b if _is_reading_insert(b) else None
    if reading is None:
        return None
    other = b if reading is a else a
    if _is_blind_append(other) or other.role is Role.COMPACTION:
        return _verdict(
            False,
            f"under delta.isolationLevel = 'snapshotIsolation' an INSERT reading the table and a "
            f"{other.kind.value} both commit and the result equals the serial order with the reading INSERT first",
            "deltars.snapshot_isolation_reading_insert",
            ctx,
        )
    return None
