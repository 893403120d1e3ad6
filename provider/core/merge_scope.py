"""Data-aware MERGE scopes: what a MERGE's source says about the target rows it can touch (ADR 0019).

``MERGE ... ON t.id = s.id AND t.date = s.date`` restricts nothing by its text (the Databricks page
"Isolation levels and write conflicts": ``s.date = t.date`` alone is not an explicit predicate), yet a row
it matches has ``t.date`` equal to one of the source's dates, and a row it inserts carries one of them. Given
the source's distinct values (or its min/max) per key column, this module builds

* the **conjunct** ``t.date IN (...)`` (or ``BETWEEN lo AND hi``): the one text the lease claim is judged on
  and the engine adds to the ON condition (:meth:`MergeScope.conjunct`); adding it changes no match,
  because every matched pair already satisfies ``t.date = s.date``;
* the **inserted rows' scope** ``date IN (...) OR date IS NULL`` (:meth:`MergeScope.inserted_predicate`):
  where ``WHEN NOT MATCHED THEN INSERT`` (and ``UPDATE SET *``) put rows. A NULL key never matches in the
  ON join, so a source row with a NULL key is always inserted, into the NULL partition;
* the source values that fall **outside a declared target predicate** (:func:`values_outside`).

Pure: the values come from the engine (``deltaguard.engines.sources``), which also checks at write time
that the source it writes still lies within the scope the lease was taken for.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from deltaguard.core.sql.literals import SPARK, column_equals, literal_expression, render_tree
from deltaguard.core.sql.predicates import Predicate, parse_predicate, provably_disjoint

#: Default bounds: up to this many distinct values an IN list, ...
DEFAULT_MAX_IN_VALUES = 100
#: ... up to this many a BETWEEN range (integers and dates only), above it the whole table.
DEFAULT_MAX_RANGE_VALUES = 100_000


@dataclass(frozen=True)
class ScopeLimits:
    """How far the source is enumerated.

    :param max_in_values: at most this many distinct values become ``t.col IN (...)``.
    :param max_range_values: above ``max_in_values`` and up to this many, ``t.col BETWEEN lo AND hi`` (only
        for integer and date values, whose order every engine compares alike); above it, no narrowing.
    """

    max_in_values: int = DEFAULT_MAX_IN_VALUES
    max_range_values: int = DEFAULT_MAX_RANGE_VALUES

    def __post_init__(self) -> None:
        if not 1 <= self.max_in_values <= self.max_range_values:
            raise ValueError(
                f"need 1 <= max_in_values <= max_range_values, got {self.max_in_values}, {self.max_range_values}"
            )


@dataclass(frozen=True)
class KeySummary:
    """What the source holds in one column, as an engine read it.

    :param column: the source column.
    :param values: its distinct non-NULL values, sorted; ``None`` when there are more than
        ``max_in_values``.
    :param low: the smallest non-NULL value (set when ``values`` is ``None`` and the count is within
        ``max_range_values``).
    :param high: the largest non-NULL value (likewise).
    :param has_null: whether some row holds NULL.
    :param too_many: more than ``max_range_values`` distinct values.
    """

    column: str
    values: tuple[object, ...] | None
    low: object = None
    high: object = None
    has_null: bool = False
    too_many: bool = False


@dataclass(frozen=True)
class SourceKeys:
    """What an engine read of a MERGE source: the key summaries, and the source to write.

    :param summaries: source column (lower-cased) -> what it holds.
    :param source: the source as read: for a zero-argument callable the data it produced (so a write that
        follows in the same process does not produce it again), otherwise the source unchanged.
    """

    summaries: Mapping[str, KeySummary]
    source: object


@dataclass(frozen=True)
class ColumnScope:
    """The values one target column can take in the rows a MERGE touches.

    :param column: the target column.
    :param source_column: the source column it is equated to (ON) or copied from (INSERT / UPDATE SET *).
    :param values: the allowed non-NULL values, or ``None`` for the range ``low..high``.
    :param has_null: the source holds NULL there (inserted rows may carry NULL).
    """

    column: str
    source_column: str
    values: tuple[object, ...] | None
    low: object = None
    high: object = None
    has_null: bool = False

    def condition(self, qualifier: str | None) -> exp.Expr:
        """``q.column IN (...)`` or ``q.column BETWEEN lo AND hi`` (the non-NULL values) as a sqlglot tree."""
        return self._test(exp.column(self.column, table=qualifier, quoted=not self.column.isidentifier()))

    def source_condition(self) -> exp.Expr:
        """The same test on the source column (quoted), true for NULL when the source held NULL: what an
        engine checks every source row against at write time."""
        col = exp.column(self.source_column, quoted=True)
        test = self._test(col)
        if not self.has_null:
            return test
        return exp.paren(exp.or_(exp.Is(this=col.copy(), expression=exp.Null()), test))

    def _test(self, col: exp.Column) -> exp.Expr:
        if self.values is not None:
            return exp.In(this=col, expressions=[literal_expression(v) for v in self.values])
        return exp.Between(this=col, low=literal_expression(self.low), high=literal_expression(self.high))

    def admits(self, value: object) -> bool:
        """Whether a source value lies within this scope (for the write-time check)."""
        if value is None:
            return self.has_null
        if self.values is not None:
            return value in self.values
        return bool(self.low <= value <= self.high)  # type: ignore[operator]


@dataclass(frozen=True)
class MergeScope:
    """A MERGE's scope computed from its source.

    :param matched: columns the ON condition equates to a source column: their conjunct narrows the rows
        the MERGE reads and matches.
    :param inserted: columns whose values inserted (or ``UPDATE SET *``-copied) rows take from the source.
    :param copies_all_keys: every partition column of the rows ``UPDATE SET *`` writes is in ``inserted``.
    :param reasons: what was narrowed, or why a column was not.
    """

    matched: tuple[ColumnScope, ...] = ()
    inserted: tuple[ColumnScope, ...] = ()
    copies_all_keys: bool = False
    reasons: tuple[str, ...] = field(default=(), compare=False)

    def conjunct(self, target_alias: str, dialect: str = SPARK) -> str | None:
        """The conjunct added to the ON condition: in Spark SQL what the lease claim is judged on, in the
        engine's dialect what the engine runs. One tree, rendered for each reader; its values are literals
        built by :func:`deltaguard.core.sql.literals.literal_expression`, quoted for that dialect.

        ``None`` when no ON-equated column could be narrowed.
        """
        if not self.matched:
            return None
        return render_tree(exp.and_(*(c.condition(target_alias) for c in self.matched)), dialect)

    def inserted_predicate(self) -> str | None:
        """Where inserted rows land, on unqualified columns (``date IN (...) OR date IS NULL``); ``None``
        when no inserted column is known (they may land anywhere)."""
        if not self.inserted:
            return None
        parts: list[exp.Expr] = []
        for scope in self.inserted:
            condition = scope.condition(None)
            if scope.has_null:
                null = exp.Is(
                    this=exp.column(scope.column, quoted=not scope.column.isidentifier()),
                    expression=exp.Null(),
                )
                condition = exp.paren(exp.or_(condition, null))
            parts.append(condition)
        return exp.and_(*parts).sql(dialect=SPARK)

    def columns(self) -> tuple[ColumnScope, ...]:
        """Every column scope (for the write-time check of the source)."""
        return self.matched + self.inserted

    def to_json(self) -> dict[str, object]:
        """A JSON-safe form (values tagged by type), so a deferred task resumes with the scope it queued with."""
        return {
            "matched": [_scope_json(c) for c in self.matched],
            "inserted": [_scope_json(c) for c in self.inserted],
            "copies_all_keys": self.copies_all_keys,
            "reasons": list(self.reasons),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> MergeScope:
        """The scope :meth:`to_json` wrote.

        :raises ValueError: for anything else.
        """
        try:
            return cls(
                tuple(_scope_from_json(c) for c in data["matched"]),  # type: ignore[attr-defined]
                tuple(_scope_from_json(c) for c in data["inserted"]),  # type: ignore[attr-defined]
                bool(data["copies_all_keys"]),
                tuple(str(r) for r in data["reasons"]),  # type: ignore[attr-defined]
            )
        except (KeyError, TypeError, AttributeError) as error:
            raise ValueError(f"not a MERGE scope: {error}") from None


def _tagged(value: object) -> list[object] | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return ["b", value]
    if isinstance(value, int):
        return ["i", str(value)]
    if isinstance(value, Decimal):
        return ["n", str(value)]
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return ["d", value.isoformat()]
    if isinstance(value, str):
        return ["s", value]
    raise ValueError(f"cannot store a {type(value).__name__} scope value")


def _untagged(item: object) -> object:
    if item is None:
        return None
    if not isinstance(item, list | tuple) or len(item) != 2:
        raise ValueError(f"not a tagged scope value: {item!r}")
    tag, text = item
    readers: dict[object, Callable[[Any], object]] = {
        "b": bool,
        "i": int,
        "n": Decimal,
        "d": dt.date.fromisoformat,
        "s": str,
    }
    if tag not in readers:
        raise ValueError(f"unknown scope value tag {tag!r}")
    return readers[tag](text)


def _scope_json(scope: ColumnScope) -> dict[str, object]:
    return {
        "column": scope.column,
        "source_column": scope.source_column,
        "values": None if scope.values is None else [_tagged(v) for v in scope.values],
        "low": _tagged(scope.low),
        "high": _tagged(scope.high),
        "has_null": scope.has_null,
    }


def _scope_from_json(data: Mapping[str, object]) -> ColumnScope:
    values = data["values"]
    return ColumnScope(
        str(data["column"]),
        str(data["source_column"]),
        None if values is None else tuple(_untagged(v) for v in values),  # type: ignore[attr-defined]
        _untagged(data["low"]),
        _untagged(data["high"]),
        bool(data["has_null"]),
    )


# ----------------------------------------------------------------------------------------- which columns


def equated_columns(
    condition: str, key_columns: Collection[str], target_alias: str = "t", source_alias: str = "s"
) -> dict[str, str]:
    """Target key columns the ON condition equates to a source column in a top-level conjunct.

    ``t.date = s.date`` and ``s.day = t.date`` count; an equality inside ``OR`` or ``NOT`` does not.

    :returns: target column (as spelled in ``key_columns``) -> source column.
    """
    keys = {k.lower(): k for k in key_columns}
    try:
        tree = sqlglot.parse_one(condition, read=SPARK)
    except (SqlglotError, RecursionError):
        return {}
    found: dict[str, str] = {}
    stack: list[exp.Expr] = [tree]
    while stack:
        conjunct = stack.pop()
        if isinstance(conjunct, exp.Paren):
            stack.append(conjunct.this)
            continue
        if isinstance(conjunct, exp.And):
            stack.extend([conjunct.expression, conjunct.this])
            continue
        if not isinstance(conjunct, exp.EQ):
            continue
        first, second = _qualified(conjunct.this), _qualified(conjunct.expression)
        if first is None or second is None:
            continue
        by_alias = {alias: name for alias, name in (first, second)}
        target, source = by_alias.get(target_alias.lower()), by_alias.get(source_alias.lower())
        if len(by_alias) == 2 and target is not None and source is not None and target.lower() in keys:
            found.setdefault(keys[target.lower()], source)
    return found


def _qualified(node: exp.Expr) -> tuple[str, str] | None:
    """``(alias, column)`` of ``alias.column``; ``None`` for anything else."""
    if not isinstance(node, exp.Column) or len(node.parts) != 2:
        return None
    return node.parts[0].name.lower(), node.parts[1].name


def inserted_columns(
    key_columns: Collection[str],
    *,
    insert_all: bool,
    insert_map: Mapping[str, str] | None,
    source_alias: str = "s",
) -> dict[str, str] | None:
    """The source column each target key column takes its value from in ``WHEN NOT MATCHED THEN INSERT``.

    ``INSERT *`` copies the column of the same name; ``INSERT (date, ...) VALUES (s.day, ...)`` copies
    ``s.day``. A key column set from any other expression is left out (its rows may land anywhere on it).

    :returns: target column -> source column, or ``None`` when the MERGE inserts nothing.
    """
    if insert_all:
        return {c: c for c in key_columns}
    if insert_map is None:
        return None
    found: dict[str, str] = {}
    lowered = {k.lower(): v for k, v in insert_map.items()}
    for column in key_columns:
        expression = lowered.get(column.lower())
        if expression is None:
            continue
        try:
            node = sqlglot.parse_one(expression, read=SPARK)
        except (SqlglotError, RecursionError):
            continue
        qualified = _qualified(node)
        if qualified is not None and qualified[0] == source_alias.lower():
            found[column] = qualified[1]
    return found


# ------------------------------------------------------------------------------------------- the scope


def column_scope(column: str, summary: KeySummary, limits: ScopeLimits) -> ColumnScope | str:
    """One column's scope from the source's summary, or the reason it cannot be narrowed.

    Values are rendered exactly only for strings, integers, decimals, booleans and dates; timestamps (time
    zones), floating-point numbers (NaN, -0.0) and binary data are not narrowed. Ranges only for integers
    and dates.
    """
    if summary.too_many:
        return f"{column}: the source holds more than {limits.max_range_values} distinct values"
    if summary.values is not None:
        values = summary.values
        if not values:
            return f"{column}: the source holds no non-NULL value"
        for value in values:  # rendered exactly: no timestamps, floats or binary (bool is an int)
            if isinstance(value, dt.datetime) or not isinstance(value, str | int | Decimal | dt.date):
                return f"{column}: {type(value).__name__} values are not rendered exactly as SQL literals"
        return ColumnScope(column, summary.column, tuple(values), has_null=summary.has_null)
    low, high = summary.low, summary.high
    if not (_rangeable(low) and _rangeable(high) and type(low) is type(high)):
        return (
            f"{column}: more than {limits.max_in_values} distinct values and no range every engine orders "
            f"alike ({type(low).__name__})"
        )
    return ColumnScope(column, summary.column, None, low, high, summary.has_null)


def range_scope(scope: ColumnScope, delta_type: str) -> ColumnScope | str:
    """``scope`` as the range of its values (``BETWEEN min AND max``), or the reason it has none.

    :param scope: the column's scope (enumerated values or already a range).
    :param delta_type: the target column's Delta type: the values must be integers for an integer column,
        dates for a date column (a range of other values is not compared alike by every engine).
    """
    from deltaguard.core.file_stats import DATE_TYPES, INTEGER_TYPES

    values = scope.values if scope.values is not None else (scope.low, scope.high)
    wanted: type | None = (
        int if delta_type in INTEGER_TYPES else dt.date if delta_type in DATE_TYPES else None
    )
    if wanted is None or not all(_rangeable(v) and isinstance(v, wanted) for v in values):
        return f"{scope.column}: source values of no range a {delta_type} column is compared by"
    if scope.values is None:
        return scope
    low, high = min(values), max(values)  # type: ignore[type-var]
    return ColumnScope(scope.column, scope.source_column, None, low, high, scope.has_null)


def _rangeable(value: object) -> bool:
    if isinstance(value, bool | dt.datetime):
        return False
    return isinstance(value, int | dt.date)


def plan_merge_scope(
    *,
    matched: Mapping[str, str],
    inserted: Mapping[str, str] | None,
    partition_columns: Collection[str],
    summaries: Mapping[str, KeySummary],
    limits: ScopeLimits,
    ranged: Mapping[str, str] | None = None,
) -> MergeScope:
    """The MERGE's scope from its source's key summaries (one function for the whole decision).

    :param matched: ON-equated target column -> source column (:func:`equated_columns`).
    :param inserted: target key column -> source column its inserted value is copied from
        (:func:`inserted_columns`), ``None`` when the MERGE inserts nothing.
    :param partition_columns: the table's partition columns (``UPDATE SET *`` keeps rows inside the
        inserted scope only when every one of them is known there).
    :param summaries: source column (lower-cased) -> what the source holds.
    :param limits: the bounds the summaries were read with.
    :param ranged: target column -> Delta type, for columns scoped by their range ``BETWEEN min AND max``
        even when their values were enumerated (file statistics record ranges, ADR 0020); a column whose
        source values are not of its type (an integer or a date) is left out.
    """
    reasons: list[str] = []
    as_range = {c.lower(): t for c, t in (ranged or {}).items()}

    def scopes(columns: Mapping[str, str], role: str) -> tuple[ColumnScope, ...]:
        out: list[ColumnScope] = []
        for target, source in columns.items():
            summary = summaries.get(source.lower())
            if summary is None:
                reasons.append(f"{target}: the source has no column {source!r}")
                continue
            result = column_scope(target, summary, limits)
            if target.lower() in as_range and not isinstance(result, str):
                result = range_scope(result, as_range[target.lower()])
            if isinstance(result, str):
                reasons.append(f"{role} {result}; not narrowed")
            else:
                out.append(result)
                count = len(result.values) if result.values is not None else "a range of"
                reasons.append(f"{role} {target}: narrowed to {count} source value(s)")
        return tuple(out)

    matched_scopes = scopes(matched, "matched")
    inserted_scopes = scopes(inserted or {}, "inserted")
    known = {s.column.lower() for s in inserted_scopes if s.source_column.lower() == s.column.lower()}
    copies_all = bool(partition_columns) and all(p.lower() in known for p in partition_columns)
    return MergeScope(matched_scopes, inserted_scopes, copies_all, tuple(reasons))


# -------------------------------------------------------------------------------- declared target check


def values_outside(
    scopes: Collection[ColumnScope], declared: Predicate, columns: Collection[str]
) -> dict[str, tuple[object, ...]]:
    """Source values that inserted rows would carry outside a declared target predicate.

    A value is outside when ``column = value`` is provably disjoint from ``declared`` (the MERGE's own
    target conjuncts and ``target_partition_values``); NULL is outside whenever ``declared`` restricts the
    column (a NULL partition value equals nothing). A range scope is outside when the whole range is
    disjoint, or counted as ``(low, high)`` when ``declared`` restricts the column at all, since its
    values were not enumerated.

    :param scopes: the inserted columns' scopes.
    :param declared: the declared target predicate, unqualified.
    :param columns: the columns the model may prune by (partition and clustering columns).
    :returns: target column -> offending values (``None`` for NULL).
    """
    if declared.is_everything:
        return {}
    restricted = {c.lower() for c in _restricted_columns(declared, columns)}
    out: dict[str, tuple[object, ...]] = {}
    for scope in scopes:
        if scope.column.lower() not in restricted:
            continue
        offending: list[object] = []
        if scope.values is None:
            offending.extend([scope.low, scope.high])
        else:
            for value in scope.values:
                single = parse_predicate(column_equals(scope.column, value).sql(dialect=SPARK))
                if provably_disjoint(single, declared, columns):
                    offending.append(value)
        if scope.has_null:
            offending.append(None)
        if offending:
            out[scope.column] = tuple(offending)
    return out


def _restricted_columns(declared: Predicate, columns: Collection[str]) -> list[str]:
    """Key columns ``declared`` restricts: those for which some value is provably excluded by it."""
    from deltaguard.core.sql.columns import referenced_columns

    names = {c.lower() for c in referenced_columns(declared)}
    return [c for c in columns if c.lower() in names]
