"""Predicates as disjunctive normal forms over understood atoms: the reading half of the predicate model.

A condition is reduced to a DNF (an OR of ANDs) of atoms, each one understood restriction of one column
(``c = 1``, ``c IN ('a', 'b')``, ``c BETWEEN ...``, ``c IS NULL``, ``year(c) = 2024``, ``c LIKE '2024-01%'``).
Anything else is ``TRUE``: it restricts nothing, which can only make two predicates look *more* overlapping.
The expansion is capped at :data:`MAX_TERMS` terms; a conjunct whose expansion would exceed the cap is
dropped rather than giving up on the whole predicate, and conjuncts are expanded in the order they appear, so
appending a conjunct to a predicate can never turn "disjoint" into "may overlap".
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal

from sqlglot import exp

from deltaguard.core.sql.predicate_values import (
    BOOL,
    DAY,
    EXCLUDABLE_KINDS,
    NUM,
    ORDERED_KINDS,
    Bound,
    Domain,
    Value,
    literal_value,
)

#: The most DNF terms one predicate expands to; larger OR-conjuncts are dropped (restrict nothing).
MAX_TERMS = 64


@dataclass(frozen=True)
class Atom:
    """One understood restriction of one column.

    :param column: lower-cased, unqualified column name.
    :param null: ``True`` if the column must be NULL, ``False`` if it must not be, ``None`` if either.
    :param kind: the literal kind of ``domain`` (see :mod:`deltaguard.core.sql.predicate_values`).
    :param domain: the allowed values, or ``None`` for a pure null-ness atom.
    """

    column: str
    null: bool | None
    kind: str | None = None
    domain: Domain | None = None


Term = frozenset[Atom]
#: A DNF: a disjunction of conjunctive terms. ``()`` is FALSE, ``(frozenset(),)`` is TRUE.
Dnf = tuple[Term, ...]
TRUE: Dnf = (frozenset(),)
FALSE: Dnf = ()


def flatten(node: exp.Expr, kind: type[exp.Connector]) -> Iterator[exp.Expr]:
    """The operands of a chain of one connector (``a AND (b AND c)`` -> a, b, c), through parentheses."""
    stack = [node]
    while stack:
        current = stack.pop()
        while isinstance(current, exp.Paren):
            current = current.this
        if isinstance(current, kind):
            stack.extend((current.right, current.left))
        else:
            yield current


def _conjoin(parts: Iterable[Dnf]) -> Dnf:
    """AND of DNFs in order; a part that would push the product past :data:`MAX_TERMS` is dropped."""
    result = TRUE
    for part in parts:
        if part == TRUE:
            continue
        if not part:
            return FALSE
        if len(result) * len(part) > MAX_TERMS:
            continue  # Dropping a conjunct only widens the predicate: sound.
        result = _dedupe(a | b for a in result for b in part)
    return result


def _disjoin(parts: Iterable[Dnf]) -> Dnf:
    """OR of DNFs; ``TRUE`` if any part is ``TRUE`` or the union exceeds :data:`MAX_TERMS`."""
    terms: list[Term] = []
    for part in parts:
        if frozenset() in part:
            return TRUE
        terms.extend(part)
    result = _dedupe(terms)
    return TRUE if len(result) > MAX_TERMS else result


def _dedupe(terms: Iterable[Term]) -> Dnf:
    return tuple(dict.fromkeys(terms))


def to_dnf(
    node: exp.Expr,
    negated: bool,
    columns: frozenset[str] | None,
    text: frozenset[str],
    null_tests: bool = True,
) -> Dnf:
    """The DNF of ``node`` (of ``NOT node`` when ``negated``), over ``columns`` only (all when ``None``);
    string literals compared with a ``text`` column are read as text. With ``null_tests=False`` a null test
    (``IS NULL``, ``IS NOT NULL``, under any NOT) restricts nothing: it is ``TRUE`` *before* the expansion,
    so no term is dropped as contradictory because of it (an engine that cannot prune on null-ness)."""
    if isinstance(node, exp.Paren):
        return to_dnf(node.this, negated, columns, text, null_tests)
    if isinstance(node, exp.Not):
        return to_dnf(node.this, not negated, columns, text, null_tests)
    if isinstance(node, exp.And | exp.Or):
        # De Morgan holds in SQL's three-valued logic, so NOT can be pushed down to the atoms.
        conjunctive = isinstance(node, exp.And) != negated
        operands = (to_dnf(child, negated, columns, text, null_tests) for child in flatten(node, type(node)))
        return _conjoin(operands) if conjunctive else _disjoin(operands)
    if isinstance(node, exp.Boolean):
        return TRUE if bool(node.this) != negated else FALSE
    if not null_tests and isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        return TRUE
    return _atom_dnf(node, negated, columns, text)


def column_name(node: exp.Expr) -> str | None:
    """Lower-cased name of a plain, unqualified column; ``None`` for anything else.

    ``x.y`` may be column ``y`` of table ``x`` or field ``y`` of a struct column ``x`` (``meta.date`` is not
    the partition column ``date``); without the schema it is not understood. Callers strip known table
    qualifiers first (the MERGE target alias, the statement's own table name).
    """
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star) and len(node.parts) == 1:
        return node.name.lower()
    return None


_FLIPPED = {
    exp.EQ: exp.EQ,
    exp.NEQ: exp.NEQ,
    exp.LT: exp.GT,
    exp.LTE: exp.GTE,
    exp.GT: exp.LT,
    exp.GTE: exp.LTE,
}
_NEGATED = {
    exp.EQ: exp.NEQ,
    exp.NEQ: exp.EQ,
    exp.LT: exp.GTE,
    exp.LTE: exp.GT,
    exp.GT: exp.LTE,
    exp.GTE: exp.LT,
}


def _atom_dnf(node: exp.Expr, negated: bool, columns: frozenset[str] | None, text: frozenset[str]) -> Dnf:
    """A single understood atom as a DNF; ``TRUE`` when not understood or outside ``columns``."""
    dnf = _understood_atom(node, negated, text)
    if dnf is None:
        return TRUE
    if columns is not None and any(atom.column not in columns for term in dnf for atom in term):
        return TRUE
    return dnf


def _year_of(node: exp.Expr) -> str | None:
    """The column of ``year(column)`` (sqlglot: ``Year(TsOrDsToDate(column))``)."""
    if not isinstance(node, exp.Year):
        return None
    inner = node.this
    if isinstance(inner, exp.TsOrDsToDate) and not inner.args.get("format"):
        inner = inner.this
    return column_name(inner)


def _year_comparison(column: str, op: type[exp.Expr], literal: tuple[str, object] | None) -> Dnf | None:
    """``year(c) <op> N`` as a ``day`` range: ``year`` casts its argument to DATE on every column type."""
    if literal is None or literal[0] != NUM or op is exp.NEQ:
        return None
    number = literal[1]
    assert isinstance(number, Decimal)
    if number != number.to_integral_value() or not 1 <= number <= 9999:
        return None
    year = int(number)
    first, last = f"{year:04d}-01-01", f"{year:04d}-12-31"
    if op is exp.EQ:
        return _single(column, DAY, Domain(low=Bound(first, True), high=Bound(last, True)))
    if op in (exp.LT, exp.GTE):
        bound = Bound(first, op is exp.GTE)
        return _single(column, DAY, Domain(high=bound) if op is exp.LT else Domain(low=bound))
    bound = Bound(last, op is exp.LTE)
    return _single(column, DAY, Domain(high=bound) if op is exp.LTE else Domain(low=bound))


_DATE_PREFIX = re.compile(r"(\d{4})-(\d{2})(?:-(\d{2}))?%")


def _like_prefix(node: exp.Like) -> Dnf | None:
    """``c LIKE '2024-01%'`` (or ``'2024-01-05%'``) as a ``day`` range (``CAST(c AS DATE)``).

    Spark compares a DATE or TIMESTAMP column as its ``yyyy-MM-dd...`` text, and a STRING column whose text
    starts with a month (or day) and casts to a date at all casts into that month (day): Spark's date cast
    needs a one- or two-digit month and day after the four-digit year. Text that does not cast matches no
    date, so it cannot be in a row set the other side states as dates.
    """
    column = column_name(node.this)
    pattern = node.expression
    if (
        column is None
        or not isinstance(pattern, exp.Literal)
        or not pattern.is_string
        or node.args.get("escape")
    ):
        return None
    match = _DATE_PREFIX.fullmatch(pattern.this)
    if match is None:
        return None
    year, month, day = int(match[1]), int(match[2]), match[3]
    try:
        start = dt.date(year, month, int(day) if day else 1)
        end = start if day else (dt.date(year + month // 12, month % 12 + 1, 1) - dt.timedelta(days=1))
    except ValueError:
        return None
    return _single(column, DAY, Domain(low=Bound(start.isoformat(), True), high=Bound(end.isoformat(), True)))


def _understood_atom(node: exp.Expr, negated: bool, text: frozenset[str]) -> Dnf | None:
    op = type(node)
    if op in _FLIPPED and isinstance(node, exp.Binary):
        for year_side, other in ((node.left, node.right), (node.right, node.left)):
            year_column = _year_of(year_side)
            if year_column is not None:
                year_op = op if year_side is node.left else _FLIPPED[op]
                return _year_comparison(
                    year_column, _NEGATED[year_op] if negated else year_op, literal_value(other)
                )
        column, literal = _column_literal(node.left, node.right, text)
        if column is None:
            column, literal = _column_literal(node.right, node.left, text)
            op = _FLIPPED[op]
        if column is None or literal is None:
            return None
        return _comparison(column, _NEGATED[op] if negated else op, *literal)
    if isinstance(node, exp.Like) and not negated:
        return _like_prefix(node)
    if isinstance(node, exp.NullSafeEQ) and not negated:
        return _null_safe_equal(node, text)
    if isinstance(node, exp.In):
        return _in_list(node, negated, text)
    if isinstance(node, exp.Between):
        return _between(node, negated, text)
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        column = column_name(node.this)
        return None if column is None else (frozenset({Atom(column, null=not negated)}),)
    column = column_name(node)
    if column is not None:  # A bare boolean column: "WHERE is_active".
        return _comparison(column, exp.EQ, BOOL, not negated)
    return None


def _null_safe_equal(node: exp.NullSafeEQ, text: frozenset[str]) -> Dnf | None:
    """``c <=> literal``: the literal's value, and also the NULL partition unless the literal is text compared
    with a STRING column. Spark with ANSI off casts text that does not parse (``'1.00'`` for a TIMESTAMP_NTZ,
    ``'a'`` for an INT or a BOOLEAN) to NULL, and ``NULL <=> NULL`` is TRUE (measured on Spark 4.2, found by
    ``python -m lab.fuzz.spark_meaning``). Numbers were measured not to become NULL against INT, DECIMAL and
    BOOLEAN columns, but the column's type is not known here, so no literal is taken as never NULL."""
    column, literal = _column_literal(node.left, node.right, text)
    other = node.right
    if column is None:
        column, literal = _column_literal(node.right, node.left, text)
        other = node.left
    if column is None or literal is None:
        return None
    equal = _comparison(column, exp.EQ, *literal)
    value = other.unnest()
    if equal is None or (column in text and isinstance(value, exp.Literal) and value.is_string):
        return equal
    return (*equal, frozenset({Atom(column, null=True)}))


def _column_literal(
    side: exp.Expr, other: exp.Expr, text: frozenset[str]
) -> tuple[str | None, tuple[str, Value] | None]:
    """The column ``side`` names and the literal ``other`` is, read as text when the column is in ``text``."""
    column = column_name(side)
    if column is None:
        return None, None
    return column, literal_value(other, column in text)


def _single(column: str, kind: str, domain: Domain) -> Dnf:
    return (frozenset({Atom(column, null=False, kind=kind, domain=domain)}),)


def _comparison(column: str, op: type[exp.Expr], kind: str, value: Value) -> Dnf | None:
    if op is exp.EQ:
        return _single(column, kind, Domain(values=frozenset({value})))
    if op is exp.NEQ:
        if kind == BOOL:
            return _single(column, kind, Domain(values=frozenset({not value})))
        return (
            _single(column, kind, Domain(excluded=frozenset({value}))) if kind in EXCLUDABLE_KINDS else None
        )
    if kind not in ORDERED_KINDS:
        return None
    if op in (exp.LT, exp.LTE):
        return _single(column, kind, Domain(high=Bound(value, op is exp.LTE)))
    return _single(column, kind, Domain(low=Bound(value, op is exp.GTE)))


def _in_list(node: exp.In, negated: bool, text: frozenset[str]) -> Dnf | None:
    column = column_name(node.this)
    items = node.expressions
    if (
        column is None
        or node.args.get("query") is not None
        or node.args.get("unnest") is not None
        or not items
    ):
        return None
    literals = [literal_value(item, column in text) for item in items]
    kinds = {literal[0] for literal in literals if literal is not None}
    if any(literal is None for literal in literals) or len(kinds) != 1:
        return None
    kind = kinds.pop()
    values = frozenset(literal[1] for literal in literals if literal is not None)
    if not negated:
        return _single(column, kind, Domain(values=values))
    if kind == BOOL:
        return _single(column, kind, Domain(values=frozenset({True, False}) - values))
    return _single(column, kind, Domain(excluded=values)) if kind in EXCLUDABLE_KINDS else None


def _between(node: exp.Between, negated: bool, text: frozenset[str]) -> Dnf | None:
    column = column_name(node.this)
    as_text = column is not None and column in text
    low, high = literal_value(node.args["low"], as_text), literal_value(node.args["high"], as_text)
    if column is None or low is None or high is None or low[0] != high[0] or low[0] not in ORDERED_KINDS:
        return None
    if node.args.get("symmetric"):
        return None
    kind = low[0]
    if not negated:
        return _single(column, kind, Domain(low=Bound(low[1], True), high=Bound(high[1], True)))
    below = _single(column, kind, Domain(high=Bound(low[1], False)))
    above = _single(column, kind, Domain(low=Bound(high[1], False)))
    return below + above
