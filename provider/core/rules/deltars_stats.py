"""File statistics in the delta-rs profile: two rewrites whose files provably stay apart (ADR 0020).

Measured on deltalake 1.6.6 and read in ``crates/core/src/kernel/transaction/conflict_checker.rs``: a stale
UPDATE, DELETE, MERGE or REPLACE WHERE commits over a concurrent commit unless

* a file the other commit *added* is kept by the stale write's read predicate when pruned on that file's
  min/max statistics (``ConcurrentAppend``),
* a file the other commit *removed* is one of the stale snapshot's files the read predicate keeps on
  statistics (``ConcurrentDeleteRead``), or both removed the same file (``ConcurrentDeleteDelete``).

So on an unpartitioned table clustered by date, UPDATEs of different dates both commit in either order.
:func:`stats_disjoint` admits a pair only when, for the snapshot's statistics:

1. no file may be kept by both read predicates (each write removes only files its predicate keeps);
2. every file either write may add is pruned by the other's predicate: an added file holds rows copied out
   of the files it rewrites (their hull, per column, unless a column is assigned), assigned literals, and
   the rows it inserts (bounded only where its declared insert scope or REPLACE WHERE predicate bounds
   them); a file range the engine cannot know (missing statistics, a column the table does not index)
   counts as "anywhere". Nulls do not widen a range: a new file records the range of its non-null values,
   and one whose column is all null is pruned by every understood comparison (measured).

Anything outside the understood forms returns ``None``: the caller keeps its predicate-only rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from deltaguard.core.closed_world import property_flag, table_property
from deltaguard.core.facts import OpFacts, TableContext
from deltaguard.core.file_stats import (
    EMPTY,
    FileStatsSummary,
    Interval,
    constraints,
    fully_matched,
    is_empty,
    recorded_range,
    rewritten_range,
    touched,
    union_hull,
    value_bounds,
)
from deltaguard.core.operations import OperationKind

#: the kinds whose read predicate delta-rs checks against file statistics (``DeltaOperation::read_predicate``)
STATS_KINDS: frozenset[OperationKind] = frozenset(
    {OperationKind.UPDATE, OperationKind.DELETE, OperationKind.MERGE, OperationKind.REPLACE_WHERE}
)


#: kinds that write back only the rows their predicate does *not* match (a DELETE keeps them, a REPLACE WHERE
#: keeps them beside its new rows): a file every row of which matches contributes no copied row
_DROPS_MATCHED: frozenset[OperationKind] = frozenset({OperationKind.DELETE, OperationKind.REPLACE_WHERE})


@dataclass(frozen=True)
class _Footprint:
    facts: OpFacts
    reads: Mapping[str, Interval]
    touched: frozenset[str]
    #: the touched files whose rows may be copied into a file the write adds
    copied: frozenset[str]


def usable_summary(ctx: TableContext) -> tuple[FileStatsSummary | None, str]:
    """The table's statistics when the rule may use them, else ``None`` and why not."""
    table = ctx.table
    summary = table.file_stats
    if summary is None:
        return None, "no file statistics were read for this table"
    if table.version is None or summary.version != table.version:
        return None, "the file statistics are not from the snapshot the configuration describes"
    mode = table_property(table, "delta.columnMapping.mode")
    if mode is not None and mode.strip().lower() != "none":
        return None, "column mapping renames the columns statistics are recorded under"
    deletion_vectors = table_property(table, "delta.enableDeletionVectors")
    if deletion_vectors is not None and property_flag(table, "delta.enableDeletionVectors") is not False:
        return None, "deletion vectors were not measured with statistics"
    return summary, ""


def fallback_note(ctx: TableContext) -> str:
    """Why file statistics did not separate a conflicting pair (for its reason)."""
    summary, why = usable_summary(ctx)
    if summary is None:
        return why
    return (
        "the file statistics do not prove it (a predicate beyond AND-ed column/literal comparisons, files both "
        "may touch, or a file either may add that the other's predicate cannot prune)"
    )


def _read_constraints(
    f: OpFacts, summary: FileStatsSummary, partition: frozenset[str]
) -> dict[str, Interval] | None:
    op = f.op
    if f.kind not in STATS_KINDS or f.unknown or f.limitations or op.reads_target:
        return None
    if f.kind is OperationKind.MERGE:
        if op.predicate or not op.merge_condition:
            return None
        found = constraints(op.merge_condition, summary.types, qualifier=op.target_alias or "t")
    else:
        found = constraints(op.predicate, summary.types)
    if not found:
        return None
    # Partition values carry no min/max statistics; dropping their conjuncts only widens the scope.
    narrowed = {c: i for c, i in found.items() if c not in partition}
    return narrowed or None


def _inserted(f: OpFacts, column: str, summary: FileStatsSummary) -> Interval | None:
    """Where the non-null values of ``column`` of the rows ``f`` inserts lie (``EMPTY``: it inserts none;
    ``None``: anywhere)."""
    op = f.op
    if f.kind is OperationKind.REPLACE_WHERE:
        # delta-rs validates every new row against the replaceWhere predicate before writing; the source's
        # own range (``inserts``, read from the source the engine writes and checked again there) bounds
        # the rows further
        bounds = [value_bounds(op.predicate, summary.types).get(column)]
        if op.inserts:
            bounds.append(value_bounds(op.inserts, summary.types).get(column))
    elif f.kind is OperationKind.MERGE:
        if op.inserts == "":
            return EMPTY
        # ``None``: the rows come from a source whose values the operation does not state
        bounds = [value_bounds(op.inserts, summary.types).get(column)] if op.inserts else []
    else:
        return EMPTY
    known = [b for b in bounds if b is not None]
    if not known:
        return None
    found = known[0]
    for other in known[1:]:
        found = found.intersect(other)
    return EMPTY if found.empty() else found


def _assigned(f: OpFacts, column: str, summary: FileStatsSummary) -> list[Interval | None] | None:
    """Values an assignment gives ``column`` (``[]``: not assigned; ``None``: the column is replaced by
    values that are not a literal of its type)."""
    found: list[Interval | None] = []
    for target, expression in f.op.assignments:
        name = target.strip().strip("`").lower()
        if name == "*":
            return None
        if name.split(".")[0].strip("`") != column:
            continue
        literal = constraints(f"`{column}` = ({expression})", summary.types)
        if literal is None or column not in literal:
            return None
        found.append(literal[column])
    return found


def added_range(fp: _Footprint, column: str, summary: FileStatsSummary) -> Interval | None:
    """The values of ``column`` any file ``fp``'s write adds may hold (``None``: any)."""
    assigned = _assigned(fp.facts, column, summary)
    if assigned is None:
        return None
    base = rewritten_range(summary, fp.copied, column)
    # bounded by what the engine will *record* for the new file, not by the values it writes: a long
    # string's statistics are cut (measured, ADR 0020)
    return recorded_range(union_hull([base, *assigned, _inserted(fp.facts, column, summary)]))


def _prunes(adder: _Footprint, reader: _Footprint, summary: FileStatsSummary) -> str | None:
    """A column on which every file ``adder`` may add falls outside ``reader``'s predicate (``None``: none)."""
    for column, wanted in reader.reads.items():
        if column not in summary.indexed:
            continue  # a new file records no statistics for it: the engine keeps the file
        rng = added_range(adder, column, summary)
        if rng is None:
            continue
        if is_empty(rng) or not rng.overlaps(wanted):
            return column
    return None


def _copied(
    f: OpFacts,
    reads: Mapping[str, Interval],
    kept: frozenset[str],
    summary: FileStatsSummary,
    partition: frozenset[str],
) -> frozenset[str]:
    """The files of ``kept`` whose rows ``f`` may copy into a file it adds.

    A DELETE or REPLACE WHERE copies only the rows its predicate does not match; when ``reads`` is its whole
    predicate (every conjunct understood, none on a partition column), a file whose statistics show every
    row matching copies none. Everything else (an UPDATE's and a MERGE's rows stay, only changed) may copy
    every row of every file it keeps.
    """
    if f.kind not in _DROPS_MATCHED:
        return kept
    whole = constraints(f.op.predicate, summary.types)
    if whole is None or set(whole) & partition or whole != dict(reads):
        return kept
    return frozenset(p for p in kept if not fully_matched(summary.by_path[p], whole))


def stats_disjoint(a: OpFacts, b: OpFacts, ctx: TableContext) -> str | None:
    """Why delta-rs commits ``a`` and ``b`` side by side in either order, judged on file statistics, or
    ``None`` when that is not proven.

    :param a: one write's facts.
    :param b: the other's.
    :param ctx: the table (its :attr:`~deltaguard.core.table_config.TableConfig.file_stats`).
    """
    summary, _ = usable_summary(ctx)
    if summary is None:
        return None
    partition = frozenset(ctx.table.partition_columns)
    prints: list[_Footprint] = []
    for f in (a, b):
        reads = _read_constraints(f, summary, partition)
        if reads is None:
            return None
        kept = touched(summary, reads)
        prints.append(_Footprint(f, reads, kept, _copied(f, reads, kept, summary, partition)))
    first, second = prints
    if first.touched & second.touched:
        return None
    by_first = _prunes(first, second, summary)
    by_second = _prunes(second, first, summary)
    if by_first is None or by_second is None:
        return None
    return (
        f"the file statistics of version {summary.version} show their predicates keep disjoint files "
        f"({len(first.touched)} and {len(second.touched)} of {len(summary.files)}), and every file either may "
        f"add is pruned by the other's predicate (on {by_first!r} and {by_second!r})"
    )
