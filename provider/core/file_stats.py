"""Per-file column statistics of one table snapshot, and the value-range reasoning delta-rs's conflict checker
does with them.

delta-rs (``crates/core/src/kernel/transaction/conflict_checker.rs``, deltalake 1.6.6) checks a stale commit's
*read predicate* against the statistics (min/max per column) of the files a concurrent commit added
(``ConcurrentAppend``), and compares the paths of the files that commit removed with the files of its own
snapshot whose statistics match the read predicate (``ConcurrentDeleteRead``). A file whose statistics cannot
rule the predicate out counts as matching. This module decides, from the snapshot's statistics only, whether
two writes provably stay clear of each other's files. It is deliberately narrow: only predicates made of
``AND``-ed comparisons of one plain column with one literal (``=``, ``<``, ``<=``, ``>``, ``>=``,
``BETWEEN``) on integer, string or date columns are understood -- forms the engine's statistics pruning is
known to evaluate exactly. Anything else yields ``None`` ("not understood") and the caller falls back to its
predicate-only rules.

The engine layer (:mod:`deltaguard.engines.discovery`) builds :class:`FileStatsSummary`; the core only reads it.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

#: a statistics value: an integer, or a string (strings and ISO dates compare as text, byte order = code
#: point order for UTF-8)
Value = int | str

#: Delta primitive types whose statistics the reasoning uses (others: the column has no usable statistics)
INTEGER_TYPES: frozenset[str] = frozenset({"byte", "short", "integer", "long"})
STRING_TYPES: frozenset[str] = frozenset({"string"})
DATE_TYPES: frozenset[str] = frozenset({"date"})
SUPPORTED_TYPES: frozenset[str] = INTEGER_TYPES | STRING_TYPES | DATE_TYPES

#: string statistics at least this long may be truncated by a writer (Delta truncates string statistics to
#: 32 characters), so they are not trusted
MAX_TRUSTED_STRING = 31

#: delta-rs (parquet-rs underneath) records a string statistic of more than this many UTF-8 bytes cut to
#: its longest prefix of whole characters within the limit; a cut maximum then has its last character that
#: can be incremented in place (same UTF-8 length) incremented and the rest dropped, or, when none can be,
#: stays the full value (measured on deltalake 1.6.6, ADR 0020)
STATS_TRUNCATE_BYTES = 64
#: a string of at most this many bytes bounds what the engine records for any value on its side (a cut keeps
#: at least ``STATS_TRUNCATE_BYTES - 3`` bytes, so a difference within the first 60 bytes survives the cut)
SAFE_STRING_BYTES = STATS_TRUNCATE_BYTES - 4

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class ColumnStats:
    """One column's statistics in one file.

    :param min: the smallest non-null value, ``None`` when not recorded.
    :param max: the largest non-null value, ``None`` when not recorded.
    :param null_count: how many values are null, ``None`` when not recorded.
    """

    min: Value | None
    max: Value | None
    null_count: int | None

    @property
    def bounded(self) -> bool:
        return self.min is not None and self.max is not None


@dataclass(frozen=True)
class FileStats:
    """One data file of the snapshot.

    :param path: the file's path as in the log.
    :param num_records: its row count, ``None`` when not recorded.
    :param columns: ``(column, statistics)`` for the supported columns with usable statistics; a column
        missing here has no statistics in this file (the engine then cannot rule any predicate on it out).
    """

    path: str
    columns: tuple[tuple[str, ColumnStats], ...] = ()
    num_records: int | None = None

    @functools.cached_property
    def by_column(self) -> Mapping[str, ColumnStats]:
        return dict(self.columns)

    def all_null(self, column: str) -> bool:
        """Every value of ``column`` in this file is null (known from its null and row counts)."""
        stats = self.by_column.get(column)
        return (
            stats is not None
            and stats.null_count is not None
            and self.num_records is not None
            and stats.null_count == self.num_records
        )


@dataclass(frozen=True)
class FileStatsSummary:
    """The per-file statistics of one snapshot, as plain data.

    :param version: the table version they were read at.
    :param column_types: ``(column, Delta primitive type)`` of the top-level columns.
    :param files: every live data file.
    :param indexed: the columns a file written now records statistics for (``delta.dataSkippingNumIndexedCols``
        / ``delta.dataSkippingStatsColumns`` as the table is configured now).
    """

    version: int
    column_types: tuple[tuple[str, str], ...]
    files: tuple[FileStats, ...] = field(default=())
    indexed: frozenset[str] = frozenset()

    @functools.cached_property
    def types(self) -> Mapping[str, str]:
        return dict(self.column_types)

    @functools.cached_property
    def by_path(self) -> Mapping[str, FileStats]:
        return {f.path: f for f in self.files}

    @functools.cached_property
    def memo(self) -> dict[object, object]:
        """Per-snapshot results (a scheduler asks about the same running writes again and again)."""
        return {}


@dataclass(frozen=True)
class Interval:
    """Values ``low .. high`` (either end ``None`` = open); ``*_closed`` says whether the end belongs to it."""

    low: Value | None = None
    low_closed: bool = True
    high: Value | None = None
    high_closed: bool = True

    def intersect(self, other: Interval) -> Interval:
        low, low_closed = self.low, self.low_closed
        if other.low is not None and (
            low is None or _gt(other.low, low) or (other.low == low and not other.low_closed)
        ):
            low, low_closed = other.low, other.low_closed
        high, high_closed = self.high, self.high_closed
        if other.high is not None and (
            high is None or _gt(high, other.high) or (other.high == high and not other.high_closed)
        ):
            high, high_closed = other.high, other.high_closed
        return Interval(low, low_closed, high, high_closed)

    def empty(self) -> bool:
        if self.low is None or self.high is None:
            return False
        if _gt(self.low, self.high):
            return True
        return self.low == self.high and not (self.low_closed and self.high_closed)

    def overlaps(self, other: Interval) -> bool:
        return not self.intersect(other).empty()


def _gt(a: Value, b: Value) -> bool:
    if type(a) is not type(b):  # never compared: callers only build same-typed intervals per column
        raise TypeError("mixed-type interval")
    return a > b  # type: ignore[operator]


#: no values at all (an empty set of rows); :func:`union_hull` skips it
EMPTY = Interval(1, False, 0, False)


def hull(intervals: Iterable[Interval]) -> Interval | None:
    """The smallest closed interval containing every interval (an open end stays open); ``None`` when
    there is no interval at all."""
    items = list(intervals)
    if not items:
        return None
    low: Value | None = items[0].low
    high: Value | None = items[0].high
    for i in items[1:]:
        low = None if low is None or i.low is None else (i.low if _gt(low, i.low) else low)
        high = None if high is None or i.high is None else (i.high if _gt(i.high, high) else high)
    return Interval(low, True, high, True)


#: a read predicate understood as per-column intervals (all of them must hold)
Constraints = Mapping[str, Interval]


def constraints(
    sql: str | None, types: Mapping[str, str], qualifier: str | None = None
) -> dict[str, Interval] | None:
    """The per-column intervals an ``AND`` of simple comparisons demands, or ``None`` if not understood.

    :param sql: the predicate (``None``/empty: no predicate, not understood here).
    :param types: column -> Delta type (columns of other types are not understood).
    :param qualifier: for a MERGE condition, the target alias: only conjuncts whose every column carries
        it and that compare with a literal are kept, the others are dropped (dropping a conjunct only widens
        what the write may touch). ``None``: every conjunct must be understood and unqualified.
    """
    if sql is None or not sql.strip():
        return None
    return _constraints_cached(sql, tuple(sorted(types.items())), qualifier)


@functools.lru_cache(maxsize=4096)
def _constraints_cached(
    sql: str, types_items: tuple[tuple[str, str], ...], qualifier: str | None
) -> dict[str, Interval] | None:
    types = dict(types_items)
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except (SqlglotError, ValueError):
        return None
    found: dict[str, Interval] = {}
    for conjunct in _conjuncts(tree):
        parsed = _comparison(conjunct, types, qualifier)
        if parsed is None:
            if qualifier is not None:
                continue  # a MERGE conjunct on the source, or not understood: dropped (wider, sound)
            return None
        column, interval = parsed
        found[column] = found[column].intersect(interval) if column in found else interval
    if qualifier is not None and not found:
        return None
    if any(interval.empty() for interval in found.values()):
        # A contradiction such as ``id > 5 AND id < 3``: the engine prunes conjunct by conjunct, so a file
        # every conjunct overlaps is kept although no row can match; not reasoned about here.
        return None
    return found


def _conjuncts(node: exp.Expr) -> Iterable[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        yield from _conjuncts(node.left)
        yield from _conjuncts(node.right)
    else:
        yield node


_OPS: dict[type[exp.Expr], tuple[bool, bool, bool]] = {
    # op -> (gives a low end, gives a high end, closed)
    exp.EQ: (True, True, True),
    exp.GT: (True, False, False),
    exp.GTE: (True, False, True),
    exp.LT: (False, True, False),
    exp.LTE: (False, True, True),
}
_FLIPPED: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.EQ: exp.EQ,
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
}


def _comparison(
    node: exp.Expr, types: Mapping[str, str], qualifier: str | None
) -> tuple[str, Interval] | None:
    if isinstance(node, exp.Between):
        column = _column(node.this, types, qualifier)
        if column is None:
            return None
        low = _literal(node.args.get("low"), types[column])
        high = _literal(node.args.get("high"), types[column])
        if low is None or high is None:
            return None
        return column, Interval(low, True, high, True)
    op = type(node)
    if op not in _OPS:
        return None
    left, right = node.args.get("this"), node.args.get("expression")
    if not isinstance(left, exp.Expr) or not isinstance(right, exp.Expr):
        return None
    column = _column(left, types, qualifier)
    other = right
    if column is None:
        column = _column(right, types, qualifier)
        other = left
        op = _FLIPPED[op]
    if column is None:
        return None
    value = _literal(other, types[column])
    if value is None:
        return None
    lower, upper, closed = _OPS[op]
    return column, Interval(
        value if lower else None,
        closed if lower else True,
        value if upper else None,
        closed if upper else True,
    )


def _column(node: exp.Expr | None, types: Mapping[str, str], qualifier: str | None) -> str | None:
    """A plain lower-case column of a supported type (qualified by ``qualifier`` when one is given)."""
    if not isinstance(node, exp.Column) or not isinstance(node.this, exp.Identifier):
        return None
    if node.args.get("db") or node.args.get("catalog"):
        return None
    table = node.table
    if qualifier is None and table:
        return None
    if qualifier is not None and table.lower() != qualifier.lower():
        return None
    name = node.this.name
    # delta-rs folds unquoted identifiers to lower case; only lower-case names mean the same to both sides
    if name != name.lower() or types.get(name) not in SUPPORTED_TYPES:
        return None
    return name


def _literal(node: exp.Expr | None, column_type: str) -> Value | None:
    """A literal of the column's own type (no implicit casts, whose semantics differ between engines)."""
    negative = False
    while isinstance(node, exp.Paren):
        node = node.this
    if (
        column_type in DATE_TYPES
        and type(node) is exp.Cast
        and node.to.this is exp.DataType.Type.DATE
        and isinstance(node.this, exp.Literal)
    ):
        # ``DATE '2024-01-01'`` (sqlglot spells it as a cast; ``CAST(... AS DATE)`` parses as TryCast and stays
        # not understood); measured: delta-rs prunes on it exactly as on the string form
        node = node.this
    if isinstance(node, exp.Neg):
        negative, node = True, node.this
    if not isinstance(node, exp.Literal):
        return None
    if column_type in INTEGER_TYPES:
        if node.is_string or not re.fullmatch(r"\d+", node.this):
            return None
        return -int(node.this) if negative else int(node.this)
    if negative or not node.is_string:
        return None
    text = str(node.this)
    if "'" in text or "\\" in text:
        return None  # escapes are spelled differently by the two SQL dialects: not reasoned about
    if column_type in DATE_TYPES:
        return text if _ISO_DATE.fullmatch(text) else None
    if len(text) > MAX_TRUSTED_STRING:
        return None
    return text


def file_interval(stats: ColumnStats) -> Interval | None:
    """The closed ``[min, max]`` of one file's column, ``None`` when not recorded."""
    if stats.min is None or stats.max is None:
        return None
    return Interval(stats.min, True, stats.max, True)


def touched(summary: FileStatsSummary, wanted: Constraints) -> frozenset[str]:
    """Paths of the files a write with this read predicate may read, remove or rewrite: those
    the engine's statistics pruning may keep (no constrained column's recorded range provably misses its
    interval), found through a per-column index (a decision may compare a thousand running
    writes against a snapshot of many thousand files)."""
    key = ("touched", tuple(sorted(wanted.items())))
    found = summary.memo.get(key)
    if isinstance(found, frozenset):
        return found
    candidates: set[int] | None = None
    try:
        for column, interval in wanted.items():
            hits = _index(summary, column).matching(interval)
            candidates = hits if candidates is None else candidates & hits
            if not candidates:
                break
    except TypeError:  # values of different types in one column: nothing is ruled out
        candidates = None
    indices = range(len(summary.files)) if candidates is None else candidates
    result = frozenset(summary.files[i].path for i in indices)
    summary.memo[key] = result
    return result


@dataclass(frozen=True)
class _ColumnIndex:
    """One column's file ranges sorted by minimum, with the running maximum of the maxima (non-decreasing),
    so the files overlapping an interval are found by two binary searches and a short scan."""

    mins: list[Value]
    maxes: list[Value]
    running_max: list[Value]
    order: list[int]
    unranged: frozenset[int]

    def matching(self, interval: Interval) -> set[int]:
        end = len(self.mins)
        if interval.high is not None:
            search = bisect.bisect_right if interval.high_closed else bisect.bisect_left
            end = search(self.mins, interval.high)
        start = 0
        if interval.low is not None:
            search = bisect.bisect_left if interval.low_closed else bisect.bisect_right
            start = search(self.running_max, interval.low)
        low = interval.low
        found = set(self.unranged)
        for position in range(start, end):
            top = self.maxes[position]
            if low is None or _gt(top, low) or (top == low and interval.low_closed):
                found.add(self.order[position])
        return found


def _index(summary: FileStatsSummary, column: str) -> _ColumnIndex:
    key = ("index", column)
    cached = summary.memo.get(key)
    if isinstance(cached, _ColumnIndex):
        return cached
    ranged: list[tuple[Value, Value, int]] = []
    unranged: set[int] = set()
    for i, f in enumerate(summary.files):
        stats = f.by_column.get(column)
        rng = file_interval(stats) if stats is not None else None
        if rng is None or rng.low is None or rng.high is None:
            unranged.add(i)
        else:
            ranged.append((rng.low, rng.high, i))
    ranged.sort(key=lambda item: (item[0], item[2]))
    running: list[Value] = []
    for _, high, _ in ranged:
        running.append(high if not running or _gt(high, running[-1]) else running[-1])
    index = _ColumnIndex(
        mins=[r[0] for r in ranged],
        maxes=[r[1] for r in ranged],
        running_max=running,
        order=[r[2] for r in ranged],
        unranged=frozenset(unranged),
    )
    summary.memo[key] = index
    return index


def rewritten_range(summary: FileStatsSummary, paths: frozenset[str], column: str) -> Interval | None:
    """Where the non-null values of ``column`` of every row copied out of ``paths`` lie: the hull of the
    files' ranges (``EMPTY`` when none has a value; ``None`` = anywhere: some file has no recorded range).

    Nulls do not widen it: a new file's range covers only its non-null values, and a new file whose column
    is entirely null is pruned by every understood comparison (measured on deltalake 1.6.6 for ``=``, ``<``,
    ``<=``, ``>``, ``>=``, ``BETWEEN`` on long, date and string columns: ADR 0020).
    """
    key = ("rewritten", paths, column)
    if key in summary.memo:
        cached = summary.memo[key]
        return cached if isinstance(cached, Interval) else None
    found = _rewritten_range(summary, paths, column)
    summary.memo[key] = found
    return found


def _rewritten_range(summary: FileStatsSummary, paths: frozenset[str], column: str) -> Interval | None:
    ranges: list[Interval] = []
    for path in paths:
        f = summary.by_path[path]
        stats = f.by_column.get(column)
        if stats is None:
            return None
        rng = file_interval(stats)
        if rng is not None:
            ranges.append(rng)
        elif not f.all_null(column):
            return None
    if not ranges:
        return EMPTY
    return hull(ranges)


def _utf8_prefix(text: str, limit: int) -> str:
    """The longest prefix of whole characters of ``text`` within ``limit`` UTF-8 bytes."""
    used = 0
    for position, char in enumerate(text):
        used += len(char.encode("utf-8"))
        if used > limit:
            return text[:position]
    return text


def _incrementable(char: str) -> bool:
    """Whether the engine's cut maximum can end in ``char`` + 1 (a next code point of the same UTF-8 length)."""
    code = ord(char) + 1
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return False
    return len(chr(code).encode("utf-8")) == len(char.encode("utf-8"))


def recorded_low(value: Value) -> Value:
    """A value no recorded minimum of a value ``>= value`` falls below (non-strings: ``value``).

    The engine records a long string's minimum as a prefix; a prefix of at most
    :data:`SAFE_STRING_BYTES` bytes is below every such cut (a first difference within it survives the cut).
    """
    if not isinstance(value, str):
        return value
    return _utf8_prefix(value, SAFE_STRING_BYTES)


def recorded_high(value: Value) -> Value | None:
    """A value no recorded maximum of a value ``<= value`` exceeds (``None``: none known; non-strings:
    ``value``).

    A string of more than :data:`SAFE_STRING_BYTES` bytes gives none (its cut may be bumped past it). For a
    shorter one, a value ``y <= value`` longer than the cut can still be recorded above ``value`` when the
    character where ``y`` first falls below ``value`` cannot be incremented in place (U+007F, U+07FF, ...):
    the engine then bumps an earlier character. Every such bump is bounded here (a first difference at a
    non-ASCII character of ``value``, bumped at the last incrementable character before it).
    """
    if not isinstance(value, str):
        return value
    if len(value.encode("utf-8")) > SAFE_STRING_BYTES:
        return None
    best = value
    last: int | None = None
    for position, char in enumerate(value):
        if ord(char) > 0x7F and last is not None:
            bumped = value[:last] + chr(ord(value[last]) + 1)
            best = max(best, bumped)
        if _incrementable(char):
            last = position
    return best


def recorded_range(interval: Interval | None) -> Interval | None:
    """Where the statistics the engine *records* for a new file lie when its values lie in ``interval``
    (string ends widened for the cut of long strings, a cut maximum becoming open; ``None`` and empty
    intervals unchanged).

    :param interval: the values' range.
    """
    if interval is None or interval is EMPTY or interval.empty():
        return interval
    low = interval.low if interval.low is None else recorded_low(interval.low)
    high = interval.high if interval.high is None else recorded_high(interval.high)
    if low == interval.low and high == interval.high:
        return interval
    return Interval(
        low,
        interval.low_closed or low != interval.low,
        high,
        interval.high_closed or high != interval.high,
    )


def union_hull(parts: Iterable[Interval | None]) -> Interval | None:
    """The hull of several value sets (``None`` = anywhere wins; empty sets are skipped)."""
    bounded: list[Interval] = []
    for part in parts:
        if part is None:
            return None
        if part is EMPTY or part.empty():
            continue
        bounded.append(part)
    return hull(bounded) if bounded else EMPTY


def is_empty(interval: Interval | None) -> bool:
    return interval is not None and (interval is EMPTY or interval.empty())


def value_bounds(sql: str | None, types: Mapping[str, str]) -> dict[str, Interval]:
    """Where the non-null values of each column of rows known to satisfy ``sql`` lie (a column missing from
    the result: anywhere).

    Unlike :func:`constraints` this describes *values*, not what the engine's pruning keeps, so more forms
    are sound: a conjunct not understood is dropped (an ``AND`` of fewer conjuncts holds for more rows),
    ``c IN (literals)`` gives the literals' hull, and ``(X OR c IS NULL)`` gives what ``X`` gives for ``c``
    (a null is no value: a new file's range covers only its non-null values, ADR 0020). Used for the rows a
    write inserts (:attr:`~deltaguard.core.operations.Operation.inserts`, a REPLACE WHERE's predicate).

    :param sql: a predicate on unqualified columns (``None``/empty: nothing known).
    :param types: column -> Delta type.
    """
    if sql is None or not sql.strip():
        return {}
    return dict(_value_bounds_cached(sql, tuple(sorted(types.items()))))


@functools.lru_cache(maxsize=4096)
def _value_bounds_cached(
    sql: str, types_items: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, Interval], ...]:
    types = dict(types_items)
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except (SqlglotError, ValueError):
        return ()
    found: dict[str, Interval] = {}
    for conjunct in _conjuncts(tree):
        parsed = _value_conjunct(conjunct, types)
        if parsed is None:
            continue  # dropped: the remaining conjuncts still hold for every row
        column, interval = parsed
        found[column] = found[column].intersect(interval) if column in found else interval
    return tuple(found.items())


def _value_conjunct(node: exp.Expr, types: Mapping[str, str]) -> tuple[str, Interval] | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Or):
        # ``X OR c IS NULL``: the non-null values of ``c`` satisfy ``X``
        for kept, other in ((node.left, node.right), (node.right, node.left)):
            null_column = _is_null_of(other, types)
            parsed = _value_conjunct(kept, types)
            if null_column is not None and parsed is not None and parsed[0] == null_column:
                return parsed
        return None
    if isinstance(node, exp.In) and not node.args.get("query") and not node.args.get("unnest"):
        column = _column(node.this, types, None)
        items = node.expressions
        if column is None or not items:
            return None
        literals = [_literal(_date_cast(item, types[column]), types[column]) for item in items]
        if any(v is None for v in literals):
            return None
        return column, hull(Interval(v, True, v, True) for v in literals if v is not None) or EMPTY
    if isinstance(node, exp.Between):
        column = _column(node.this, types, None)
        if column is None:
            return None
        low = _literal(_date_cast(node.args.get("low"), types[column]), types[column])
        high = _literal(_date_cast(node.args.get("high"), types[column]), types[column])
        if low is None or high is None:
            return None
        return column, Interval(low, True, high, True)
    return _comparison(node, types, None)


def _date_cast(node: exp.Expr | None, column_type: str) -> exp.Expr | None:
    """``CAST('yyyy-mm-dd' AS DATE)`` (how :func:`deltaguard.core.sql.literals.literal_expression` renders a
    date) as its string: as a statement about values it names that date. Only for values, not for what the
    engine's pruning keeps (not measured there)."""
    if (
        column_type in DATE_TYPES
        and isinstance(node, exp.Cast)  # TryCast is a Cast
        and node.to.this is exp.DataType.Type.DATE
        and isinstance(node.this, exp.Literal)
        and node.this.is_string
    ):
        return node.this
    return node


def _is_null_of(node: exp.Expr, types: Mapping[str, str]) -> str | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        return _column(node.this, types, None)
    return None


def fully_matched(file: FileStats, wanted: Constraints) -> bool:
    """Every row of ``file`` satisfies the predicate these constraints express exactly: each constrained
    column's recorded range lies inside its interval and holds no null (so a DELETE or REPLACE WHERE copies
    none of the file's rows into a new file)."""
    if not wanted:
        return False
    for column, interval in wanted.items():
        stats = file.by_column.get(column)
        if stats is None or stats.null_count != 0:
            return False
        rng = file_interval(stats)
        if rng is None or rng.intersect(interval) != rng:
            return False
    return True
