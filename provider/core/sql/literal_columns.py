"""Columns a predicate compares with literals whose meaning depends on the column's type or the session:
timestamp and date literals (the session time zone), numbers and numeric text (the column's type, Spark's
ANSI mode)."""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from sqlglot import exp

from deltaguard.core.sql.predicate_values import DATE, DATESTR, NUM, NUMSTR, TS, literal_value
from deltaguard.core.sql.predicates import Predicate


@dataclass(frozen=True)
class ZonedLiterals:
    """The literals of a predicate whose meaning depends on the reader's time zone.

    :param columns: columns compared with a ``TIMESTAMP`` literal (lower-cased): whatever their type, such a
        comparison reads the literal in the session time zone.
    :param local_times: every timestamp literal, and every date literal as its midnight, as naive local times
        (on a timestamp column a date is cast to its midnight in the session zone).
    """

    columns: frozenset[str] = frozenset()
    local_times: tuple[dt.datetime, ...] = ()


def zoned_literals(p: Predicate) -> ZonedLiterals:
    """The zone-dependent literals of ``p`` (see :class:`ZonedLiterals`).

    :param p: the predicate.
    """
    if p.tree is None:
        return ZonedLiterals()
    return _zoned_cached(p)


@functools.lru_cache(maxsize=4096)
def _zoned_cached(p: Predicate) -> ZonedLiterals:
    assert p.tree is not None
    columns: set[str] = set()
    times: list[dt.datetime] = []
    for node in p.tree.walk(prune=lambda n: isinstance(n, exp.Subquery | exp.Query)):
        found = literal_value(node) if isinstance(node, exp.Cast | exp.TryCast | exp.Literal) else None
        if found is None:
            continue
        kind, value = found
        if kind == TS and isinstance(value, dt.datetime):
            times.append(value)
            # the comparison the literal sits in: its columns read the literal in the session zone
            scope = node.parent
            while scope is not None and not isinstance(scope, exp.Predicate | exp.In | exp.Between):
                scope = scope.parent
            used = (scope or p.tree).find_all(exp.Column)
            columns.update(column.name.lower() for column in used)
        elif kind in (DATE, DATESTR) and isinstance(value, str):
            times.append(dt.datetime.fromisoformat(value))
    return ZonedLiterals(frozenset(columns), tuple(dict.fromkeys(times)))


def numeric_columns(p: Predicate) -> frozenset[str]:
    """Columns ``p`` compares (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``, ``IN``) with a number or
    a numeric string (``'01'``): on delta-rs their meaning depends on the column's type (ADR 0003 fact 13).

    :param p: the predicate (lower-cased names; ``frozenset()`` for "everything").
    """
    if p.tree is None:
        return frozenset()
    return _compared_columns(p, _ALL_NODES, _numeric)


def numeric_order_columns(p: Predicate) -> frozenset[str]:
    """Columns ``p`` compares by order (``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``) with a number (or a numeric
    string, whose order the model does not use anyway).

    The model orders such literals as numbers, which is how Spark compares them with a column of any type.
    DataFusion (delta-rs) compares a STRING column with a number as *text* (it casts the number to a
    string): on a STRING partition ``p < 5`` and ``p > 10`` both keep ``'2'`` (measured on deltalake 1.6.6,
    ADR 0003 fact 13). Callers that may meet a STRING column drop these columns.

    :param p: the predicate (lower-cased names; ``frozenset()`` for "everything").
    """
    if p.tree is None:
        return frozenset()
    return _compared_columns(p, _ORDER_NODES, _numeric)


def fractional_columns(p: Predicate) -> frozenset[str]:
    """Columns ``p`` compares with a number that is not a whole number (``1.5``, ``.5``, ``15e-1``), or with
    numeric text that is not a plain integer (``'1.5'``, ``' 1'``).

    DataFusion (delta-rs) casts such a literal to an integer column's type, truncating it: on a BIGINT
    partition ``g = 1.5`` and ``g >= 1.5`` select ``g = 1``, and ``g <= -0.5`` selects ``g = 0`` (measured on
    deltalake 1.6.6, ADR 0003 fact 13). A whole number (``1.0``, ``1e0``) keeps its value.

    :param p: the predicate (lower-cased names; ``frozenset()`` for "everything").
    """
    if p.tree is None:
        return frozenset()
    return _compared_columns(p, _ALL_NODES, _fractional)


def _fractional(node: exp.Expr) -> bool:
    value = literal_value(node)
    if value is None:
        return False
    kind, number = value
    if kind == NUMSTR:
        return not (isinstance(node, exp.Literal) and _PLAIN_INTEGER.fullmatch(node.this))
    return kind == NUM and isinstance(number, Decimal) and number != number.to_integral_value()


def _operands(node: exp.Expr) -> list[exp.Expr]:
    """The operands of a comparison, ``BETWEEN`` or ``IN`` node."""
    operands = [
        node.this,
        *(node.args.get(k) for k in ("low", "high", "expression")),
        *(node.expressions if isinstance(node, exp.In) else ()),
    ]
    return [o for o in operands if isinstance(o, exp.Expr)]


_ORDER_NODES: tuple[type[exp.Expr], ...] = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between)
_ALL_NODES: tuple[type[exp.Expr], ...] = (*_ORDER_NODES, exp.EQ, exp.NEQ, exp.In)


@functools.lru_cache(maxsize=4096)
def _compared_columns(
    p: Predicate, nodes: tuple[type[exp.Expr], ...], literal: Callable[[exp.Expr], bool]
) -> frozenset[str]:
    """Every column a comparison of ``nodes`` reads when one of its operands passes ``literal``: ``p + 0 < 5``
    and ``-p < 5`` compare ``p`` as well."""
    assert p.tree is not None
    found: set[str] = set()
    for node in p.tree.find_all(*nodes):
        operands = _operands(node)
        if any(literal(o) for o in operands):
            found.update(c.name.lower() for o in operands for c in o.find_all(exp.Column))
    return frozenset(found)


def _numeric(node: exp.Expr) -> bool:
    return (literal_value(node) or ("", None))[0] in (NUM, NUMSTR)


#: text Spark's non-ANSI cast reads as a number (surrounding blanks, a sign, a fraction, an exponent)
_NUMBER_TEXT = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[dDfFlL]?\s*")
#: text every cast reads as the same integer it spells
_PLAIN_INTEGER = re.compile(r"-?\d+")


def coercible_text_columns(p: Predicate) -> frozenset[str]:
    """Columns ``p`` compares with a text literal that a numeric column turns into another number than the
    model reads: ``k = '1.5'`` on an INT column is ``k = 1`` when ``spark.sql.ansi.enabled`` is off (Spark
    truncates the cast), ``' 1'`` and ``'+1'`` are ``1``, ``'1e0'`` is ``1.0`` on a DOUBLE. A plain integer
    text (``'01'``, ``'-7'``) reads as that integer in every mode.

    :param p: the predicate (lower-cased names; ``frozenset()`` for "everything").
    """
    if p.tree is None:
        return frozenset()
    return _compared_columns(p, _ALL_NODES, _coercible_text)


def _coercible_text(node: exp.Expr) -> bool:
    return (
        isinstance(node, exp.Literal)
        and node.is_string
        and bool(_NUMBER_TEXT.fullmatch(node.this))
        and not _PLAIN_INTEGER.fullmatch(node.this)
    )
