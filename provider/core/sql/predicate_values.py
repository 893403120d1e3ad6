"""Literal values and per-column value domains for deltaguard's predicate reasoning.

The conflict model never knows a column's type, so a literal is sorted into a *kind* whose comparisons are
meaningful whatever the column type turns out to be. Two constraints are only ever intersected when their
kinds agree; constraints of different kinds on the same column are kept side by side and never combined,
which can only make the model answer "may overlap" (sound).

Kinds:

- ``num``: numeric literals (``1``, ``-2.5``), compared as :class:`~decimal.Decimal`.
- ``str``: string literals that no Spark cast could turn into a number, date, timestamp or boolean
  (``'DE'``, ``'sales'``), compared as text (Spark's default binary collation orders like Python ``str``).
- ``date``: ``DATE '...'`` and ``CAST('...' AS DATE)``, compared as ISO text. Spark compares a column of
  any type with a DATE literal as dates (a STRING column is cast), so two DATE literals compare the same way.
- ``datestr``: string literals in canonical ``YYYY-MM-DD`` form, compared as text. On a STRING column Spark
  compares them as text, on a DATE or TIMESTAMP column it casts them, and for canonical text both orders
  agree. It is a kind of its own because it does not compare like ``date`` on a STRING column:
  ``s > '2024-01-05'`` and ``s = DATE '2024-01-05'`` both hold for ``'2024-01-05 12:00'``.
- ``day``: ``CAST(c AS DATE)`` as ISO text, never from a literal directly: ``year(c) = 2024`` and
  ``c LIKE '2024-01%'`` state it, and a finite set of ``date`` or ``datestr`` values implies it (``c =
  '2024-01-05'`` and ``c = DATE '2024-01-05'`` both mean the cast is 2024-01-05, whatever the column type).
  Ranges do not: on a TIMESTAMP column ``ts > DATE '2024-01-05'`` holds at 12:00 that day.
- ``ts``: ``TIMESTAMP '...'`` and ``CAST('...' AS TIMESTAMP)``, compared as naive datetimes.
- ``numstr``: strings that Spark could cast to a number (``'01'``). ``'01'`` and ``'1'`` are the same row on
  an integer column but different rows on a string column, and text order differs from numeric order, so
  only positive equality/``IN`` is understood, compared numerically.

Where the caller knows a column is a STRING (``text=True`` in :func:`literal_value`), Spark and DataFusion
compare it with a string literal as text whatever the text spells, so every string literal but a canonical
date (kept ``datestr``, which compares as text too and also meets ``day``) is ``str`` with its exact text:
``'01'`` and ``'1'`` are then two values.
- ``bool``: ``TRUE``/``FALSE``.

Anything else (other date-like text, strings with time parts, ``NULL``) is "not understood" and the atom
using it restricts nothing.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from sqlglot import exp

#: A literal value as the model compares it.
Value = Decimal | str | dt.datetime | bool

NUM = "num"
STR = "str"
DATE = "date"
DATESTR = "datestr"
DAY = "day"
TS = "ts"
NUMSTR = "numstr"
BOOL = "bool"

#: Kinds with a total order that means the same on every column type they can be compared with.
ORDERED_KINDS = frozenset({NUM, STR, DATE, DATESTR, TS})
#: Kinds for which ``!=`` / ``NOT IN`` is understood.
EXCLUDABLE_KINDS = frozenset({NUM, STR, DATE, DATESTR, TS, BOOL})

_CANONICAL_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_LENIENT_DATE = re.compile(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})\s*")
_TIMESTAMP = re.compile(
    r"\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?)?\s*"
)
_NUMBER_TEXT = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")
#: Strings Spark would cast to a boolean on a boolean column.
_BOOLEAN_WORDS = frozenset({"t", "true", "y", "yes", "f", "false", "n", "no"})
#: Strings Spark would cast to special floating-point values.
_SPECIAL_FLOATS = frozenset({"nan", "inf", "infinity", "+inf", "-inf", "+infinity", "-infinity"})
#: At most this many significant digits: distinct such decimals stay distinct as doubles (DBL_DIG).
_MAX_DIGITS = 15
_INTEGER_RANGES = {
    exp.DataType.Type.TINYINT: (-(2**7), 2**7 - 1),
    exp.DataType.Type.SMALLINT: (-(2**15), 2**15 - 1),
    exp.DataType.Type.INT: (-(2**31), 2**31 - 1),
    exp.DataType.Type.BIGINT: (-(2**63), 2**63 - 1),
}
_DATE_TYPES = frozenset({exp.DataType.Type.DATE, exp.DataType.Type.DATE32})
_TIMESTAMP_TYPES = frozenset(
    {
        exp.DataType.Type.TIMESTAMP,
        exp.DataType.Type.TIMESTAMPTZ,
        exp.DataType.Type.TIMESTAMPLTZ,
        exp.DataType.Type.TIMESTAMPNTZ,
        exp.DataType.Type.DATETIME,
    }
)


def literal_value(node: exp.Expr, text: bool = False) -> tuple[str, Value] | None:
    """The ``(kind, value)`` of a literal expression, or ``None`` if it is not an understood literal.

    :param node: a sqlglot expression (a column, function, ... simply yields ``None``).
    :param text: the literal is compared with a column known to be a STRING: a string literal is its text.
    """
    if isinstance(node, exp.Paren):
        return literal_value(node.this, text)
    if isinstance(node, exp.Boolean):
        return BOOL, bool(node.this)
    if isinstance(node, exp.Neg):
        inner = literal_value(node.this)
        if inner is not None and inner[0] == NUM and isinstance(inner[1], Decimal):
            return NUM, -inner[1]
        return None
    if isinstance(node, exp.Literal):
        if node.is_string:
            return _text_value(node.this) if text else _string_value(node.this)
        number = _number(node.this)
        return None if number is None else (NUM, number)
    if isinstance(node, exp.Cast | exp.TryCast) and isinstance(node.this, exp.Literal):
        return _cast_value(node.this, node.to)
    return None


def _number(text: str) -> Decimal | None:
    """A numeric literal's value, if a double column would still tell it apart from its neighbours.

    Spark compares a DOUBLE/FLOAT column with a decimal literal as doubles. Decimals of at most 15
    significant digits map to distinct doubles in the same order, so only those are understood.
    """
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        return None
    if not value.is_finite() or len(value.normalize().as_tuple().digits) > _MAX_DIGITS:
        return None
    return value


def _cast_value(literal: exp.Literal, to: exp.DataType) -> tuple[str, Value] | None:
    """``DATE '...'``, ``TIMESTAMP '...'``, ``CAST(...)`` and typed numbers such as ``1L`` or ``1.5BD``."""
    target = to.this
    if literal.is_string and target in _DATE_TYPES:
        date = _parse_date(literal.this)
        return None if date is None else (DATE, date)
    if literal.is_string and target in _TIMESTAMP_TYPES:
        stamp = _parse_timestamp(literal.this)
        return None if stamp is None else (TS, stamp)
    number = _number(literal.this)
    if number is None:
        return None
    if target in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[target]
        # A fraction or an overflow would be changed by the cast: not understood.
        return (NUM, number) if number == number.to_integral_value() and low <= number <= high else None
    if target is exp.DataType.Type.DOUBLE:
        return NUM, number
    if target is exp.DataType.Type.DECIMAL and _fits_decimal(number, to):
        return NUM, number
    return None


def _fits_decimal(value: Decimal, to: exp.DataType) -> bool:
    """Whether ``CAST(value AS DECIMAL(p, s))`` keeps the value unchanged."""
    params = [param.this for param in to.expressions]
    try:
        precision = int(params[0].this) if params else 10
        scale = int(params[1].this) if len(params) > 1 else 0
    except (AttributeError, ValueError):  # ValueError also covers integers past Python's digit limit
        return False
    exponent = value.normalize().as_tuple().exponent
    decimals = -exponent if isinstance(exponent, int) and exponent < 0 else 0
    # The adjusted exponent counts integer digits without converting to int (no digit limit applies).
    integer_digits = value.adjusted() + 1 if abs(value) >= 1 else 0
    return decimals <= scale and integer_digits <= precision - scale


def _string_value(text: str) -> tuple[str, Value] | None:
    if _CANONICAL_DATE.fullmatch(text):
        date = _parse_date(text)
        return None if date is None else (DATESTR, date)
    if _NUMBER_TEXT.fullmatch(text):
        number = _number(text)
        return None if number is None else (NUMSTR, number)
    if _could_cast_to_non_string(text):
        return None
    return STR, text


def _text_value(text: str) -> tuple[str, Value]:
    """A string literal compared with a STRING column: its exact text (a canonical date stays ``datestr``)."""
    date = _parse_date(text) if _CANONICAL_DATE.fullmatch(text) else None
    return (DATESTR, date) if date is not None else (STR, text)


def _could_cast_to_non_string(text: str) -> bool:
    """True if Spark might cast this text to a number, date, timestamp or boolean.

    Such text could equal a differently written literal on a typed column (``' 5'`` and ``'5'`` on an
    integer column), so it is not understood as a plain string.
    """
    stripped = text.strip()
    if stripped != text or not stripped:
        return True
    lowered = stripped.lower()
    if lowered in _BOOLEAN_WORDS or lowered in _SPECIAL_FLOATS:
        return True
    first = stripped[0]
    # Digits, signs and dots start numbers and dates; "T12:00" is a time-only timestamp string.
    return (
        first.isdigit() or first in "+-." or (first in "tT" and len(stripped) > 1 and stripped[1].isdigit())
    )


def _parse_date(text: str) -> str | None:
    """A ``DATE`` literal's text in canonical ISO form, or ``None`` if it is not a plain date."""
    match = _LENIENT_DATE.fullmatch(text)
    if match is None:
        return None
    try:
        return dt.date(int(match[1]), int(match[2]), int(match[3])).isoformat()
    except ValueError:
        return None


def _parse_timestamp(text: str) -> dt.datetime | None:
    """A ``TIMESTAMP`` literal's value (without zone), or ``None`` for zones or unusual forms."""
    match = _TIMESTAMP.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction = match.groups()
    try:
        return dt.datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            int((fraction or "0").ljust(6, "0")),
        )
    except ValueError:
        return None


@dataclass(frozen=True)
class Bound:
    """One end of an interval.

    :param value: the end value.
    :param inclusive: whether the end value itself belongs to the interval.
    """

    value: Value
    inclusive: bool


@dataclass(frozen=True)
class Domain:
    """The values one column may take, within one kind: a finite set, an interval, and excluded values.

    All three restrictions hold at once; ``values=None`` means no finite set is known.

    :param values: the allowed values, or ``None`` for "any".
    :param low: lower end, or ``None`` for unbounded.
    :param high: upper end, or ``None`` for unbounded.
    :param excluded: values that are not allowed.
    """

    values: frozenset[Value] | None = None
    low: Bound | None = None
    high: Bound | None = None
    excluded: frozenset[Value] = frozenset()

    def intersect(self, other: Domain) -> Domain:
        """The values allowed by both domains (which must be of the same kind)."""
        if self.values is None:
            values = other.values
        elif other.values is None:
            values = self.values
        else:
            values = self.values & other.values
        return Domain(
            values=values,
            low=_tighter(self.low, other.low, lower=True),
            high=_tighter(self.high, other.high, lower=False),
            excluded=self.excluded | other.excluded,
        )

    def is_empty(self) -> bool:
        """True only when provably no value satisfies the domain."""
        if self.values is not None:
            return not any(self._admits(value) for value in self.values)
        if self.low is None or self.high is None:
            return False
        low, high = self.low.value, self.high.value
        if _less(high, low):
            return True
        if low == high:
            return not (self.low.inclusive and self.high.inclusive) or low in self.excluded
        return False

    def _admits(self, value: Value) -> bool:
        if value in self.excluded:
            return False
        if self.low is not None and (
            _less(value, self.low.value) or (value == self.low.value and not self.low.inclusive)
        ):
            return False
        return not (
            self.high is not None
            and (_less(self.high.value, value) or (value == self.high.value and not self.high.inclusive))
        )


def _less(a: Value, b: Value) -> bool:
    # Values of one domain share a kind, so they are mutually comparable; bool never gets bounds.
    return a < b  # type: ignore[operator]


def _tighter(a: Bound | None, b: Bound | None, *, lower: bool) -> Bound | None:
    if a is None:
        return b
    if b is None:
        return a
    if a.value == b.value:
        return Bound(a.value, a.inclusive and b.inclusive)
    a_first = _less(a.value, b.value)
    # The larger lower bound and the smaller upper bound are the tighter ones.
    return (b if a_first else a) if lower else (a if a_first else b)
