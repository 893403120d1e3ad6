"""Predicates of Delta writes: parsing, provable disjointness, MERGE target extraction, row-level limits.

Soundness comes first: :func:`provably_disjoint` answers ``True`` only when no row can satisfy both
predicates. Every piece of a predicate the model does not understand (functions of columns, column-vs-column
comparisons, ``LIKE``, subqueries, literals of an unclear kind, ...) is treated as ``TRUE``: it restricts
nothing, which can only make two predicates look *more* overlapping.

A predicate is reduced to disjunctive normal form (DNF) over understood atoms. The expansion is capped at
:data:`MAX_TERMS` terms; a conjunct whose expansion would exceed the cap is dropped (treated as ``TRUE``)
rather than giving up on the whole predicate. Conjuncts are expanded in the order they appear, so appending a
conjunct to a predicate can never turn "disjoint" into "may overlap".

Known limits (column types are not known here, except the STRING columns a caller names from the table's
schema, with which a string literal compares as text): a qualified name ``x.y`` may be a struct field, so it
restricts nothing (callers strip the target's own qualifiers first, ADR 0012); string comparisons assume
Spark's default binary collation, not a case-insensitive column collation; see
:mod:`deltaguard.core.sql.predicate_values` for how literals of unknown column type are compared.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from deltaguard.core.closed_world import function_name, is_deterministic
from deltaguard.core.sql.limits import sql_size_problem
from deltaguard.core.sql.predicate_values import (
    BOOL,
    DATE,
    DATESTR,
    DAY,
    EXCLUDABLE_KINDS,
    NUM,
    NUMSTR,
    ORDERED_KINDS,
    STR,
    TS,
    Bound,
    Domain,
    Value,
    literal_value,
)

#: The most DNF terms one predicate expands to; larger OR-conjuncts are dropped (restrict nothing).
MAX_TERMS = 64
#: Predicates are parsed in Spark SQL.
DIALECT = "spark"
#: Deeper expression trees are not analysed (the parser and the analysis recurse): they read the whole table.
MAX_DEPTH = 64
#: Reason given for a predicate too deeply nested to analyse.
TOO_DEEP = "the predicate is nested too deeply to analyse"

_MAX_SHOWN = 200


class PredicateError(ValueError):
    """A predicate that is not one parsable boolean SQL expression."""


@dataclass(frozen=True)
class _Atom:
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


_Term = frozenset[_Atom]
#: A DNF: a disjunction of conjunctive terms. ``()`` is FALSE, ``(frozenset(),)`` is TRUE.
_Dnf = tuple[_Term, ...]
_TRUE: _Dnf = (frozenset(),)
_FALSE: _Dnf = ()


class _Conflict:
    """Null-ness marker for "must be NULL and must not be NULL" (never equal to True/False/None)."""


_CONFLICT = _Conflict()
#: ``True``: must be NULL; ``False``: must not be NULL; ``None``: either; ``_CONFLICT``: impossible.
_Null = bool | None | _Conflict


@dataclass
class _ColumnConstraint:
    """Everything one conjunctive term says about one column."""

    null: _Null = None
    domains: dict[str, Domain] = field(default_factory=dict)
    #: the values of ``domains`` *or* NULL (a reader whose engine keeps NULL-valued files for its
    #: comparisons, see :func:`null_widened_terms`); never set by parsing
    or_null: bool = False
    #: with ``or_null``: also the empty string (a logged-null partition a string comparison may keep)
    or_empty: bool = False

    def add(self, atom: _Atom) -> None:
        self.null = _merge_null(self.null, atom.null)
        if atom.kind is not None and atom.domain is not None:
            known = self.domains.get(atom.kind)
            self.domains[atom.kind] = atom.domain if known is None else known.intersect(atom.domain)

    def is_empty(self) -> bool:
        return _empty(self.null, _lifted(self.domains).values())


def _lifted(domains: dict[str, Domain]) -> dict[str, Domain]:
    """``domains`` with finite sets of dates also stated as ``CAST(c AS DATE)`` values (kind ``day``).

    ``c = '2024-01-05'`` and ``c = DATE '2024-01-05'`` both mean ``CAST(c AS DATE) = DATE '2024-01-05'`` on
    every column type (a STRING column holds text that casts to that date, a DATE column that date, a
    TIMESTAMP column midnight of it), so such sets may meet ``year(c)`` and ``c LIKE '2024-01%'``. Ranges
    are not lifted (on a TIMESTAMP column ``ts > DATE '2024-01-05'`` holds at noon that day).
    """
    lifted: list[Domain] = []
    for kind in (DATESTR, DATE):
        domain = domains.get(kind)
        if domain is not None and domain.values is not None:
            # Admitted values only: bounds and exclusions of the domain already apply to them.
            admitted = frozenset(
                value
                for value in domain.values
                if not Domain(values=frozenset({value})).intersect(domain).is_empty()
            )
            lifted.append(Domain(values=admitted))
    if not lifted:
        return domains
    day = domains.get(DAY)
    for domain in lifted:
        day = domain if day is None else day.intersect(domain)
    assert day is not None
    return {**domains, DAY: day}


#: A compiled conjunctive term: column -> constraint, never provably empty on its own.
_Compiled = dict[str, _ColumnConstraint]


def _merge_null(a: _Null, b: _Null) -> _Null:
    if a is None:
        return b
    if b is None or a is b:
        return a
    return _CONFLICT


def _empty(null: _Null, domains: Iterable[Domain]) -> bool:
    domain_list = list(domains)
    if null is _CONFLICT:
        return True
    # Every comparison needs a non-NULL value, so "must be NULL" plus any domain is empty.
    if null is True and domain_list:
        return True
    return any(domain.is_empty() for domain in domain_list)


@dataclass(frozen=True)
class Predicate:
    """A parsed predicate.

    :param sql: the predicate text (``None`` for "the whole table").
    :param is_everything: ``True`` when there is no predicate at all (the whole table).
    :param tree: the parsed sqlglot expression (``None`` for everything). Shared between callers through a
        cache: never modify it.
    :param unknown: why a predicate that is given could not be analysed (it then counts as the whole
        table); ``None`` when it was analysed.
    """

    sql: str | None
    is_everything: bool
    tree: exp.Expr | None = field(default=None, compare=False, repr=False)
    unknown: str | None = field(default=None, compare=False)
    _terms: dict[tuple[frozenset[str] | None, frozenset[str]], tuple[_Compiled, ...]] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )

    def terms_over(
        self, columns: frozenset[str] | None, text: frozenset[str] = frozenset()
    ) -> tuple[_Compiled, ...]:
        """The satisfiable DNF terms of this predicate, restricted to ``columns`` (cached per column set).

        :param columns: the lower-cased columns whose conditions restrict (``None``: every column).
        :param text: lower-cased columns known to be STRINGs, compared with string literals as text.
        """
        cached = self._terms.get((columns, text))
        if cached is None:
            try:
                dnf = _TRUE if self.tree is None else _dnf(self.tree, False, columns, text)
            except RecursionError:
                dnf = _TRUE  # restricts nothing: sound
            cached = tuple(term for term in (_compile(t) for t in dnf) if term is not None)
            self._terms[(columns, text)] = cached
        return cached


EVERYTHING = Predicate(sql=None, is_everything=True, tree=None)


def _shown(text: str) -> str:
    """The offending text for a one-line message."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= _MAX_SHOWN else flat[:_MAX_SHOWN] + "...")


def parse_predicate(sql: str | None) -> Predicate:
    """Parse one Spark SQL boolean expression.

    :param sql: the predicate; ``None`` or blank means the whole table (:data:`EVERYTHING`).
    :raises PredicateError: for text that is not exactly one boolean expression.
    """
    if sql is None:
        return EVERYTHING
    if not isinstance(sql, str):
        raise PredicateError(f"a predicate must be SQL text, not {type(sql).__name__} {sql!r}")
    if not sql.strip():
        return EVERYTHING
    return _parse_cached(sql)


def opaque(sql: str, why: str) -> Predicate:
    """A predicate that is given but not analysed: it counts as the whole table, with ``why`` as the reason.

    :param sql: the predicate text.
    :param why: what was not understood.
    """
    return Predicate(sql=sql, is_everything=True, tree=None, unknown=why)


def tree_depth(node: exp.Expr) -> int:
    """The nesting depth of an expression tree, computed without recursion (the tree may be very deep).

    A chain of one connector (``a OR b OR c ...``, which sqlglot nests one level per operand) counts as one
    level: the analysis walks such chains without recursion.
    """
    deepest = 0
    stack = [(node, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        for child in current.iter_expressions():
            same_chain = isinstance(current, exp.Connector) and type(child) is type(current)
            stack.append((child, depth if same_chain else depth + 1))
    return deepest


@functools.lru_cache(maxsize=8192)
def _parse_cached(sql: str) -> Predicate:
    too_large = sql_size_problem(sql, DIALECT)
    if too_large is not None:
        raise PredicateError(f"predicate {_shown(sql)} is too large to parse: {too_large}")
    try:
        statements = [s for s in sqlglot.parse(sql, read=DIALECT) if s is not None]
    except SqlglotError as error:
        raise PredicateError(f"cannot parse predicate {_shown(sql)}: {_first_line(error)}") from None
    except RecursionError:
        # sqlglot's parser recurses about a dozen frames per parenthesis: a valid but deep predicate.
        return opaque(sql, TOO_DEEP)
    if not statements:
        return EVERYTHING
    if len(statements) > 1:
        raise PredicateError(
            f"predicate {_shown(sql)} contains {len(statements)} statements; give one condition"
        )
    tree = statements[0]
    if tree_depth(tree) > MAX_DEPTH:
        return opaque(sql, TOO_DEEP)
    bad = _non_boolean_part(tree)
    if bad is not None:
        raise PredicateError(
            f"predicate {_shown(sql)} is not a boolean condition ({_shown(bad.sql(dialect=DIALECT))} is not)"
        )
    return Predicate(sql=sql, is_everything=False, tree=tree)


def _first_line(error: SqlglotError) -> str:
    errors = getattr(error, "errors", None)
    if errors and isinstance(errors[0], dict) and errors[0].get("description"):
        return str(errors[0]["description"])
    return str(error).splitlines()[0] if str(error) else "syntax error"


#: Nodes that can be boolean (NULL is a valid, if useless, boolean operand: "a = 1 OR NULL").
_BOOLEAN_NODES = (exp.Predicate, exp.Boolean, exp.Null, exp.Column, exp.Func, exp.Bracket, exp.Dot, exp.Case)


def _non_boolean_part(node: exp.Expr) -> exp.Expr | None:
    """The first part of a would-be condition that cannot be boolean (a literal, alias, query, sum, ...)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, exp.Paren | exp.Not):
            stack.append(current.this)
        elif isinstance(current, exp.And | exp.Or):
            stack.extend((current.right, current.left))
        # A trailing word is parsed as an alias ("a = 1 b"): garbage, not a condition.
        elif not isinstance(current, _BOOLEAN_NODES) or isinstance(current, exp.Alias):
            return current
    return None


# --------------------------------------------------------------------------------------------------- DNF


def _flatten(node: exp.Expr, kind: type[exp.Connector]) -> Iterator[exp.Expr]:
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


def _conjoin(parts: Iterable[_Dnf]) -> _Dnf:
    """AND of DNFs in order; a part that would push the product past :data:`MAX_TERMS` is dropped."""
    result = _TRUE
    for part in parts:
        if part == _TRUE:
            continue
        if not part:
            return _FALSE
        if len(result) * len(part) > MAX_TERMS:
            continue  # Dropping a conjunct only widens the predicate: sound.
        result = _dedupe(a | b for a in result for b in part)
    return result


def _disjoin(parts: Iterable[_Dnf]) -> _Dnf:
    """OR of DNFs; ``TRUE`` if any part is ``TRUE`` or the union exceeds :data:`MAX_TERMS`."""
    terms: list[_Term] = []
    for part in parts:
        if frozenset() in part:
            return _TRUE
        terms.extend(part)
    result = _dedupe(terms)
    return _TRUE if len(result) > MAX_TERMS else result


def _dedupe(terms: Iterable[_Term]) -> _Dnf:
    return tuple(dict.fromkeys(terms))


def _dnf(node: exp.Expr, negated: bool, columns: frozenset[str] | None, text: frozenset[str]) -> _Dnf:
    """The DNF of ``node`` (of ``NOT node`` when ``negated``), over ``columns`` only (all when ``None``);
    string literals compared with a ``text`` column are read as text."""
    if isinstance(node, exp.Paren):
        return _dnf(node.this, negated, columns, text)
    if isinstance(node, exp.Not):
        return _dnf(node.this, not negated, columns, text)
    if isinstance(node, exp.And | exp.Or):
        # De Morgan holds in SQL's three-valued logic, so NOT can be pushed down to the atoms.
        conjunctive = isinstance(node, exp.And) != negated
        operands = (_dnf(child, negated, columns, text) for child in _flatten(node, type(node)))
        return _conjoin(operands) if conjunctive else _disjoin(operands)
    if isinstance(node, exp.Boolean):
        return _TRUE if bool(node.this) != negated else _FALSE
    return _atom_dnf(node, negated, columns, text)


def _column_name(node: exp.Expr) -> str | None:
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


def _atom_dnf(node: exp.Expr, negated: bool, columns: frozenset[str] | None, text: frozenset[str]) -> _Dnf:
    """A single understood atom as a DNF; ``TRUE`` when not understood or outside ``columns``."""
    dnf = _understood_atom(node, negated, text)
    if dnf is None:
        return _TRUE
    if columns is not None and any(atom.column not in columns for term in dnf for atom in term):
        return _TRUE
    return dnf


def _year_of(node: exp.Expr) -> str | None:
    """The column of ``year(column)`` (sqlglot: ``Year(TsOrDsToDate(column))``)."""
    if not isinstance(node, exp.Year):
        return None
    inner = node.this
    if isinstance(inner, exp.TsOrDsToDate) and not inner.args.get("format"):
        inner = inner.this
    return _column_name(inner)


def _year_comparison(column: str, op: type[exp.Expr], literal: tuple[str, object] | None) -> _Dnf | None:
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


def _like_prefix(node: exp.Like) -> _Dnf | None:
    """``c LIKE '2024-01%'`` (or ``'2024-01-05%'``) as a ``day`` range (``CAST(c AS DATE)``).

    Spark compares a DATE or TIMESTAMP column as its ``yyyy-MM-dd...`` text, and a STRING column whose text
    starts with a month (or day) and casts to a date at all casts into that month (day): Spark's date cast
    needs a one- or two-digit month and day after the four-digit year. Text that does not cast matches no
    date, so it cannot be in a row set the other side states as dates.
    """
    column = _column_name(node.this)
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


def _understood_atom(node: exp.Expr, negated: bool, text: frozenset[str]) -> _Dnf | None:
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
        column, literal = _column_literal(node.left, node.right, text)
        if column is None:
            column, literal = _column_literal(node.right, node.left, text)
        return None if column is None or literal is None else _comparison(column, exp.EQ, *literal)
    if isinstance(node, exp.In):
        return _in_list(node, negated, text)
    if isinstance(node, exp.Between):
        return _between(node, negated, text)
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        column = _column_name(node.this)
        return None if column is None else (frozenset({_Atom(column, null=not negated)}),)
    column = _column_name(node)
    if column is not None:  # A bare boolean column: "WHERE is_active".
        return _comparison(column, exp.EQ, BOOL, not negated)
    return None


def _column_literal(
    side: exp.Expr, other: exp.Expr, text: frozenset[str]
) -> tuple[str | None, tuple[str, Value] | None]:
    """The column ``side`` names and the literal ``other`` is, read as text when the column is in ``text``."""
    column = _column_name(side)
    if column is None:
        return None, None
    return column, literal_value(other, column in text)


def _single(column: str, kind: str, domain: Domain) -> _Dnf:
    return (frozenset({_Atom(column, null=False, kind=kind, domain=domain)}),)


def _comparison(column: str, op: type[exp.Expr], kind: str, value: Value) -> _Dnf | None:
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


def _in_list(node: exp.In, negated: bool, text: frozenset[str]) -> _Dnf | None:
    column = _column_name(node.this)
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


def _between(node: exp.Between, negated: bool, text: frozenset[str]) -> _Dnf | None:
    column = _column_name(node.this)
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


def _compile(term: _Term) -> _Compiled | None:
    """Group a term's atoms by column; ``None`` if the term is provably unsatisfiable."""
    compiled: _Compiled = {}
    for atom in term:
        compiled.setdefault(atom.column, _ColumnConstraint()).add(atom)
    if any(constraint.is_empty() for constraint in compiled.values()):
        return None
    return compiled


def _terms_disjoint(a: _Compiled, b: _Compiled) -> bool:
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    for column, first in small.items():
        second = large.get(column)
        if second is not None and _columns_disjoint(first, second):
            return True
    return False


def _admits_null(constraint: _ColumnConstraint) -> bool:
    """Whether a NULL value satisfies the constraint (a comparison domain needs a non-NULL value)."""
    return constraint.or_null or (
        constraint.null is True or (constraint.null is None and not constraint.domains)
    )


#: kinds whose comparisons a string column's empty string may satisfy (it is below every other string)
_TEXT_KINDS = frozenset({STR, DATESTR, NUMSTR})


def _admits_empty_string(constraint: _ColumnConstraint) -> bool:
    """Whether the empty string may satisfy the constraint (conservatively ``True`` where unsure): only a
    string comparison can hold for it, and it is below every other string."""
    if constraint.null is True:
        return False
    for kind, domain in constraint.domains.items():
        if kind not in _TEXT_KINDS:
            return False  # a typed comparison (number, date, ...): no string column value of ''
        if domain.values is not None:
            if kind != STR or "" not in domain.values:
                return False
        elif domain.low is not None and not (domain.low.value == "" and domain.low.inclusive):
            return False
        if "" in domain.excluded:
            return False
    return True


def _columns_disjoint(first: _ColumnConstraint, second: _ColumnConstraint) -> bool:
    """Whether two satisfiable constraints on one column exclude each other."""
    if first.or_null or second.or_null:
        # NULL is shared when both admit it; otherwise only the non-NULL values can meet
        if _admits_null(first) and _admits_null(second):
            return False
        # delta-rs logs an empty-string partition value as null, so a widened read keeps its files too
        # (measured): the other side must not admit ''
        widened, plain = (first, second) if first.or_null else (second, first)
        if widened.or_empty and not plain.or_null and _admits_empty_string(plain):
            return False
        return _columns_disjoint(
            _ColumnConstraint(first.null, first.domains), _ColumnConstraint(second.null, second.domains)
        )
    null = _merge_null(first.null, second.null)
    if null is _CONFLICT or (null is True and (first.domains or second.domains)):
        return True
    # Each domain is satisfiable on its own (unsatisfiable terms were dropped): only shared kinds can clash.
    first_domains, second_domains = _lifted(first.domains), _lifted(second.domains)
    for kind, domain in second_domains.items():
        known = first_domains.get(kind)
        if known is not None and known.intersect(domain).is_empty():
            return True
    return False


def provably_disjoint(
    a: Predicate, b: Predicate, columns: Collection[str] | None, text: Collection[str] = ()
) -> bool:
    """True only if no row (no file, when ``columns`` are the partition columns) can match both predicates.

    :param a: one predicate.
    :param b: the other predicate (the answer is symmetric).
    :param columns: only conjuncts on these columns restrict (e.g. the partition columns for file-level
        rules); ``None`` lets every column restrict (row-level concurrency). Case-insensitive.
    :param text: columns the table's schema says are STRINGs (case-insensitive): a string literal compared
        with one is its text (``'01'`` is not ``'1'`` there). A column of another or unknown type is not
        named here: ``'01'`` may be the number 1 on it.
    """
    key = None if columns is None else frozenset(column.lower() for column in columns)
    text_key = frozenset(column.lower() for column in text)
    terms_a, terms_b = a.terms_over(key, text_key), b.terms_over(key, text_key)
    return all(_terms_disjoint(x, y) for x in terms_a for y in terms_b)


def null_widened_terms(
    p: Predicate, columns: Collection[str], text: Collection[str] = ()
) -> tuple[_Compiled, ...]:
    """The DNF terms of ``p`` over ``columns``, each widened to what an engine keeps when it prunes files on
    partition values whose NULL compares as *unknown*: every comparison on a column also admits NULL, and a
    null test (``IS NULL``, ``IS NOT NULL``) restricts nothing.

    This is how delta-rs 1.6.6 decides which files a stale write *read* for conflict detection (measured,
    ADR 0003 fact 11): a file of the ``p = NULL`` partition counts as read by ``p <> 'a'``, ``p > 'a'``,
    ``p BETWEEN ...``, ``NOT IN``, ``NOT (p = 'a')`` and, on DATE and BIGINT partitions, even by ``p = 1``
    and ``p IN (...)`` (an equality or IN list of plain strings AND-ed at the top stays exact); ``p IS NULL`` and ``p IS NOT NULL`` count every file as read. delta-rs logs an
    empty-string partition value as null, so the files of ``p = ''`` count as read alike: a widened term also
    meets every constraint the empty string may satisfy (:func:`provably_disjoint_terms`).

    :param p: the reader's predicate.
    :param columns: the partition columns (case-insensitive).
    :param text: the columns known to be STRINGs (see :func:`provably_disjoint`).
    """
    key = frozenset(column.lower() for column in columns)
    terms = p.terms_over(key, frozenset(column.lower() for column in text))
    widened: list[_Compiled] = []
    for term in terms:
        found: _Compiled = {}
        for column, constraint in term.items():
            if not constraint.domains:
                continue  # a null test only: every file is read
            if len(terms) == 1 and _string_values_only(constraint):
                # ``p = 'a'`` / ``p IN ('a', 'b')`` AND-ed at the top on a STRING partition are pruned exactly
                # (measured: neither NULL nor '' partitions are read); in an OR they may not be
                found[column] = constraint
                continue
            # an equality / IN of string literals keeps no '' partition: on a STRING column it is a plain
            # string equality, other column types hold no ''
            text_values = all(
                kind in _TEXT_KINDS and domain.values is not None
                for kind, domain in constraint.domains.items()
            )
            found[column] = _ColumnConstraint(
                None, dict(constraint.domains), or_null=True, or_empty=not text_values
            )
        widened.append(found)
    return tuple(widened)


def _string_values_only(constraint: _ColumnConstraint) -> bool:
    """An equality or IN list of plain (non-date, non-number) string literals, nothing else."""
    domain = constraint.domains.get(STR)
    return len(constraint.domains) == 1 and domain is not None and domain.values is not None


def provably_disjoint_terms(a: Iterable[_Compiled], b: Iterable[_Compiled]) -> bool:
    """:func:`provably_disjoint` on terms already computed (e.g. by :func:`null_widened_terms`)."""
    second = tuple(b)
    return all(_terms_disjoint(x, y) for x in a for y in second)


# ----------------------------------------------------------------------------------------- MERGE target


def merge_target_predicate(condition: str, target_alias: str = "t") -> Predicate:
    """The part of a MERGE ``ON`` condition that restricts which target rows the MERGE reads.

    Only top-level ``AND`` conjuncts whose columns are all qualified with ``target_alias`` count
    (``t.date = '2024-01-01'``); conjuncts with source or unqualified columns (``s.date = t.date``) restrict
    nothing. The kept conjuncts are returned with their qualifiers removed; none kept is :data:`EVERYTHING`.

    :param condition: the MERGE ``ON`` condition.
    :param target_alias: the target's alias (or its table name, possibly ``db.table``), case-insensitive.
    :raises PredicateError: if the condition does not parse.
    """
    return _merge_target_cached(condition, target_alias.lower())


@functools.lru_cache(maxsize=4096)
def _merge_target_cached(condition: str, alias: str) -> Predicate:
    parsed = parse_predicate(condition)
    if parsed.tree is None:
        return EVERYTHING
    kept = [
        _unqualified(conjunct)
        for conjunct in _flatten(parsed.tree, exp.And)
        if _only_target_columns(conjunct, alias)
    ]
    if not kept:
        return EVERYTHING
    # Keep an OR in parentheses so the text stays right when a caller ANDs it with more conditions.
    kept = [
        exp.paren(conjunct, copy=False) if isinstance(conjunct, exp.Or) else conjunct for conjunct in kept
    ]
    tree = exp.and_(*kept) if len(kept) > 1 else kept[0]
    return Predicate(sql=tree.sql(dialect=DIALECT), is_everything=False, tree=tree)


def _qualifier_matches(column: exp.Column, alias: str) -> bool:
    qualifier = ".".join(part.name for part in column.parts[:-1]).lower()
    if not qualifier:
        return False
    return qualifier == alias or ("." in alias and qualifier == alias.rsplit(".", 1)[1])


def _only_target_columns(conjunct: exp.Expr, alias: str) -> bool:
    if conjunct.find(exp.Query, exp.Subquery) is not None:
        return False
    return all(_qualifier_matches(column, alias) for column in conjunct.find_all(exp.Column))


def _unqualified(conjunct: exp.Expr) -> exp.Expr:
    def strip(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column):
            return exp.column(node.this.copy())
        return node

    return conjunct.transform(strip)


# ----------------------------------------------------------------------------------- row-level limits

COMPLEX_TYPE = "condition on a complex type (struct/array/map)"
SUBQUERY = "subquery"
CORRELATED_SUBQUERY = "correlated subquery"

#: sqlglot classes (by key) and Spark function names that take apart structs, arrays or maps.
_COMPLEX_FUNCTIONS = frozenset(
    {
        "arraycontains",
        "arraysize",
        "arrayfilter",
        "arrayany",
        "arrayall",
        "arrayjoin",
        "arraysort",
        "arrayagg",
        "arrayconcat",
        "arrayslice",
        "arrayfirst",
        "arraylast",
        "arraytostring",
        "arraysoverlap",
        "arrayintersect",
        "arrayoverlaps",
        "arrayuniqueagg",
        "mapkeys",
        "mapvalues",
        "mapfromentries",
        "explode",
        "explodeouter",
        "posexplode",
        "posexplodeouter",
        "inline",
        "flatten",
        "transform",
        "structextract",
        "elementat",
        "cardinality",
        "size",
        "get",
        "element_at",
        "try_element_at",
        "filter",
        "exists",
        "forall",
        "aggregate",
        "reduce",
        "sort_array",
        "zip_with",
        "arrays_zip",
        "slice",
        "get_field",
        "map_contains_key",
        "map_filter",
        "map_zip_with",
        "transform_keys",
        "transform_values",
    }
)
_COMPLEX_PREFIXES = ("array_", "map_", "arrays_")


def _function_names(node: exp.Func) -> tuple[str, ...]:
    if isinstance(node, exp.Anonymous):
        return (str(node.name).lower(),)
    return (node.key.lower(), *(name.lower() for name in node.sql_names()))


#: Constructors of complex values: comparing with ``array(...)``, ``named_struct(...)`` or ``map(...)`` is a
#: condition on a complex type.
_COMPLEX_CONSTRUCTORS = (exp.Array, exp.Struct, exp.Map, exp.VarMap, exp.MapFromEntries)


def _is_complex_access(node: exp.Expr, table_qualifiers: bool) -> bool:
    if isinstance(node, (exp.Bracket, exp.Dot, *_COMPLEX_CONSTRUCTORS)):
        return True
    # More than one qualifier: a struct field behind a table alias ("t.address.city"). Without known table
    # qualifiers even one qualifier may be a struct ("address.city").
    if isinstance(node, exp.Column) and len(node.parts) > (2 if table_qualifiers else 1):
        return True
    # EXISTS (SELECT ...) is a subquery; exists(array, x -> ...) is a higher-order array function.
    if isinstance(node, exp.Exists) and isinstance(node.this, exp.Query | exp.Subquery):
        return False
    if isinstance(node, exp.Lambda):
        return True
    if isinstance(node, exp.Func) and node.find(exp.Column) is not None:
        names = _function_names(node)
        return any(name in _COMPLEX_FUNCTIONS or name.startswith(_COMPLEX_PREFIXES) for name in names)
    return False


def _is_correlated(query: exp.Expr) -> bool:
    """A subquery that refers to a table alias it does not itself define (``t.id`` of the outer query)."""
    defined = {table.alias_or_name.lower() for table in query.find_all(exp.Table)}
    defined |= {alias.alias.lower() for alias in query.find_all(exp.TableAlias) if alias.name}
    defined |= {str(cte.alias).lower() for cte in query.find_all(exp.CTE)}
    for column in query.find_all(exp.Column):
        qualifier = column.table.lower()
        if qualifier and qualifier not in defined:
            return True
    return False


def row_level_limitations(p: Predicate, table_qualifiers: bool = False) -> tuple[str, ...]:
    """Why this predicate keeps Databricks from resolving conflicts row by row ("Isolation levels and write
    conflicts", Limitations for row-level concurrency).

    :param p: the predicate (of an UPDATE/DELETE, or a MERGE condition).
    :param table_qualifiers: ``x.y`` names column ``y`` of table ``x`` (a MERGE condition, whose
        qualifiers are the target and source aliases); otherwise a qualifier may be a struct column.
    :returns: short phrases, each at most once and in a fixed order: :data:`COMPLEX_TYPE`,
        ``"non-deterministic expression (<function>)"``, :data:`SUBQUERY`, :data:`CORRELATED_SUBQUERY`
        (a correlated subquery is reported as both). Empty when there is none.
    """
    if p.tree is None:
        return (p.unknown,) if p.unknown else ()
    complex_type = False
    random_names: list[str] = []
    subquery = correlated = False
    for node in p.tree.walk():
        if isinstance(node, exp.Subquery | exp.Query) and not isinstance(node.parent, exp.Subquery):
            subquery = True
            correlated = correlated or _is_correlated(node)
        if (
            isinstance(node, exp.Func)
            and node.find_ancestor(exp.Query) is None
            and not is_deterministic(node)
        ):
            # A function not known to be deterministic is not (ADR 0036); one taking apart a complex value
            # is a complex-type condition, and inside a subquery the subquery already is the limitation.
            name = function_name(node)
            over_query = isinstance(node, exp.Exists) and isinstance(node.this, exp.Query | exp.Subquery)
            if not over_query and not _is_complex_access(node, True) and name not in random_names:
                random_names.append(name)
        # Inside a subquery a qualifier names one of the subquery's own tables.
        in_query = isinstance(node, exp.Column) and node.find_ancestor(exp.Query) is not None
        complex_type = complex_type or _is_complex_access(node, table_qualifiers or in_query)
    reasons: list[str] = []
    if complex_type:
        reasons.append(COMPLEX_TYPE)
    reasons.extend(f"non-deterministic expression ({name})" for name in random_names)
    if subquery:
        reasons.append(SUBQUERY)
    if correlated:
        reasons.append(CORRELATED_SUBQUERY)
    return tuple(reasons)


def referenced_columns(p: Predicate) -> frozenset[str]:
    """Lower-cased, unqualified names of the columns a predicate uses (outside any subquery).

    :param p: the predicate.
    """
    if p.tree is None:
        return frozenset()
    names = set()
    for node in p.tree.walk(prune=lambda n: isinstance(n, exp.Subquery | exp.Query)):
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            names.add(node.name.lower())
    return frozenset(names)


def expression_columns(sql: str) -> frozenset[str] | None:
    """Lower-cased names of the columns a scalar expression reads (struct paths by their first part), or
    ``None`` when it cannot be parsed (a caller must then assume it reads any column).

    :param sql: a Spark SQL expression, such as a generation expression ``CAST(ts AS DATE)``.
    """
    return _expression_columns_cached(sql)


@functools.lru_cache(maxsize=1024)
def _expression_columns_cached(sql: str) -> frozenset[str] | None:
    try:
        tree = sqlglot.parse_one(sql, read=DIALECT)
    except (SqlglotError, RecursionError):
        return None
    names = set()
    for node in tree.walk():
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            parts = [part.name for part in node.parts]
            names.add(parts[0].lower() if parts else node.name.lower())
        elif isinstance(node, exp.Star):
            return None
    return frozenset(names)


@dataclass(frozen=True)
class AssignedColumn:
    """What an assignment's column text names, read as Spark reads an identifier path.

    :param names: the lower-cased top-level column names the assignment may change: for one identifier
        (```a.b``` quoted, or ``date``) that column; for a path (``meta.date``, or the unquoted key ``a.b``
        of a typed spec) every part and the whole dotted name, since it may be a struct field of its first
        part or a column named with dots. A superset is only less precise, never unsound.
    :param column: the one column it sets when it is a single identifier (lower-cased), else ``None``.
    """

    names: frozenset[str]
    column: str | None


def assigned_column(text: str) -> AssignedColumn:
    """Read an assignment's column (``UPDATE ... SET <column> = ...``) with sqlglot's identifier rules.

    ``*`` (``SET *``) names every column: ``names`` is ``{"*"}``.

    :param text: the column as the statement or a spec spells it.
    """
    return _assigned_cached(text)


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def column_text(parts: Iterable[str]) -> str:
    """An identifier path as Spark SQL text: each part quoted with backticks unless it is a plain name."""
    return ".".join(
        part if _PLAIN_NAME.fullmatch(part) else "`" + part.replace("`", "``") + "`" for part in parts
    )


@functools.lru_cache(maxsize=4096)
def _assigned_cached(text: str) -> AssignedColumn:
    raw = text.strip()
    if raw == "*":
        return AssignedColumn(frozenset({"*"}), None)
    loose = {raw.lower(), raw.strip("` ").lower(), *(part.strip("` ").lower() for part in raw.split("."))}
    try:
        node = sqlglot.parse_one(raw, read=DIALECT)
    except (SqlglotError, RecursionError):
        node = None
    if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
        return AssignedColumn(frozenset(loose), None)  # not an identifier path: every reading of it
    parts = [part.name.lower() for part in node.parts]
    if len(parts) == 1:
        return AssignedColumn(frozenset(parts), parts[0])
    return AssignedColumn(frozenset({*parts, ".".join(parts)}) | loose, None)


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
    return _numeric_cached(p, _ALL_NODES)


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
    return _numeric_cached(p, _ORDER_NODES)


_ORDER_NODES: tuple[type[exp.Expr], ...] = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between)
_ALL_NODES: tuple[type[exp.Expr], ...] = (*_ORDER_NODES, exp.EQ, exp.NEQ, exp.In)


@functools.lru_cache(maxsize=4096)
def _numeric_cached(p: Predicate, nodes: tuple[type[exp.Expr], ...]) -> frozenset[str]:
    assert p.tree is not None
    found: set[str] = set()
    for node in p.tree.find_all(*nodes):
        operands = [
            node.this,
            *(node.args.get(k) for k in ("low", "high", "expression")),
            *(node.expressions if isinstance(node, exp.In) else ()),
        ]
        if not any(
            isinstance(o, exp.Expr) and (literal_value(o) or ("", None))[0] in (NUM, NUMSTR) for o in operands
        ):
            continue
        # every column the comparison reads: ``p + 0 < 5`` and ``-p < 5`` order ``p`` as well
        found.update(
            c.name.lower() for o in operands if isinstance(o, exp.Expr) for c in o.find_all(exp.Column)
        )
    return frozenset(found)


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
    return _coercible_cached(p)


@functools.lru_cache(maxsize=4096)
def _coercible_cached(p: Predicate) -> frozenset[str]:
    assert p.tree is not None
    found: set[str] = set()
    for node in p.tree.find_all(*_ALL_NODES):
        operands = [
            node.this,
            *(node.args.get(k) for k in ("low", "high", "expression")),
            *(node.expressions if isinstance(node, exp.In) else ()),
        ]
        if not any(
            isinstance(o, exp.Literal)
            and o.is_string
            and _NUMBER_TEXT.fullmatch(o.this)
            and not _PLAIN_INTEGER.fullmatch(o.this)
            for o in operands
        ):
            continue
        found.update(
            c.name.lower() for o in operands if isinstance(o, exp.Expr) for c in o.find_all(exp.Column)
        )
    return frozenset(found)


# ------------------------------------------------------------------------------------ derived scopes


def project_out(p: Predicate, columns: Collection[str]) -> Predicate:
    """``p`` with every restriction of ``columns`` removed: the rows ``p`` selects after those columns were
    set to anything (where an UPDATE moves the rows it read).

    Each column is wrapped in an opaque function, so every atom using it is not understood and restricts
    nothing, whatever its polarity.

    :param p: the predicate.
    :param columns: the columns whose values change (case-insensitive).
    """
    if p.tree is None or not columns:
        return p
    names = {column.lower() for column in columns}

    def hide(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.name.lower() in names:
            return exp.Anonymous(this="moved", expressions=[node.copy()])
        return node

    tree = p.tree.transform(hide)
    return Predicate(sql=tree.sql(dialect=DIALECT), is_everything=False, tree=tree)


def conjoin(first: Predicate, second: Predicate) -> Predicate:
    """``first AND second`` on parsed predicates ("everything" is the neutral element).

    :param first: one predicate.
    :param second: the other.
    """
    if first.tree is None:
        return first if first.unknown is not None else second
    if second.tree is None:
        return second if second.unknown is not None else first
    tree = exp.and_(exp.paren(first.tree.copy()), exp.paren(second.tree.copy()))
    return Predicate(sql=tree.sql(dialect=DIALECT), is_everything=False, tree=tree)


def partition_conjuncts(p: Predicate, partition_columns: Collection[str]) -> Predicate:
    """The top-level ``AND`` conjuncts of ``p`` that use partition columns only, and nothing else.

    This is how delta-spark records what a transaction read (``OptimisticTransaction.filterFiles`` keeps
    the filters for which ``DeltaTableUtils.isPredicatePartitionColumnsOnly`` holds, over the conjuncts
    of the condition), so ``(date = '1' AND id = 1) OR (date = '2' AND id = 2)`` reads the whole table
    there although its partitions are known.

    :param p: the predicate.
    :param partition_columns: the table's partition columns (case-insensitive).
    """
    if p.tree is None:
        return p
    return _partition_conjuncts_cached(p, frozenset(column.lower() for column in partition_columns))


@functools.lru_cache(maxsize=4096)
def _partition_conjuncts_cached(p: Predicate, columns: frozenset[str]) -> Predicate:
    assert p.tree is not None
    kept = []
    for conjunct in _flatten(p.tree, exp.And):
        if conjunct.find(exp.Query, exp.Subquery) is not None:
            continue
        used = list(conjunct.find_all(exp.Column))
        if used and all(_column_name(column) in columns for column in used):
            kept.append(conjunct)
    if not kept:
        return EVERYTHING
    if len(kept) == len(list(_flatten(p.tree, exp.And))):
        return p
    tree = exp.and_(*(exp.paren(conjunct.copy()) for conjunct in kept))
    return Predicate(sql=tree.sql(dialect=DIALECT), is_everything=False, tree=tree)
