"""Predicates of Delta writes: parsing, provable disjointness, the MERGE target and the scopes derived from them.

Soundness comes first: :func:`provably_disjoint` answers ``True`` only when no row can satisfy both
predicates. Every piece of a predicate the model does not understand (functions of columns, column-vs-column
comparisons, ``LIKE``, subqueries, literals of an unclear kind, ...) is treated as ``TRUE``: it restricts
nothing, which can only make two predicates look *more* overlapping. How a predicate is read is
:mod:`deltaguard.core.sql.dnf`; when two readings exclude each other, :mod:`deltaguard.core.sql.disjoint`.

Known limits (column types are not known here, except the STRING columns a caller names from the table's
schema, with which a string literal compares as text): a qualified name ``x.y`` may be a struct field, so it
restricts nothing (callers strip the target's own qualifiers first, ADR 0012); string comparisons assume
Spark's default binary collation, not a case-insensitive column collation; see
:mod:`deltaguard.core.sql.predicate_values` for how literals of unknown column type are compared.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

import sqlglot
import sqlglot.dialects.spark  # imported here, not on first use: see DIALECT
from sqlglot import exp
from sqlglot.errors import SqlglotError

from deltaguard.core.sql.disjoint import (
    TEXT_KINDS,
    ColumnConstraint,
    Compiled,
    compile_term,
    string_values_only,
    terms_disjoint,
)
from deltaguard.core.sql.dnf import TRUE, column_name, flatten, to_dnf
from deltaguard.core.sql.limits import shown, sql_size_problem

#: Predicates are parsed in Spark SQL. sqlglot imports a dialect's module on its first use; it is imported
#: with this one instead, because a process's first parse may be a holder's predicate inside a lease store
#: transaction, and the import (about 0.1 s) would hold the store's locks (``benchmarks/bench_lock_hold.py``).
DIALECT = "spark"
#: Deeper expression trees are not analysed (the parser and the analysis recurse): they read the whole table.
MAX_DEPTH = 64
#: Reason given for a predicate too deeply nested to analyse.
TOO_DEEP = "the predicate is nested too deeply to analyse"

_MAX_SHOWN = 200


class PredicateError(ValueError):
    """A predicate that is not one parsable boolean SQL expression."""


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
    _terms: dict[tuple[frozenset[str] | None, frozenset[str]], tuple[Compiled, ...]] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )

    def terms_over(
        self, columns: frozenset[str] | None, text: frozenset[str] = frozenset()
    ) -> tuple[Compiled, ...]:
        """The satisfiable DNF terms of this predicate, restricted to ``columns`` (cached per column set).

        :param columns: the lower-cased columns whose conditions restrict (``None``: every column).
        :param text: lower-cased columns known to be STRINGs, compared with string literals as text.
        """
        cached = self._terms.get((columns, text))
        if cached is None:
            try:
                dnf = TRUE if self.tree is None else to_dnf(self.tree, False, columns, text)
            except RecursionError:
                dnf = TRUE  # restricts nothing: sound
            cached = tuple(term for term in (compile_term(t) for t in dnf) if term is not None)
            self._terms[(columns, text)] = cached
        return cached


EVERYTHING = Predicate(sql=None, is_everything=True, tree=None)


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
        raise PredicateError(f"predicate {shown(sql, _MAX_SHOWN)} is too large to parse: {too_large}")
    try:
        statements = [s for s in sqlglot.parse(sql, read=DIALECT) if s is not None]
    except SqlglotError as error:
        raise PredicateError(
            f"cannot parse predicate {shown(sql, _MAX_SHOWN)}: {_first_line(error)}"
        ) from None
    except RecursionError:
        # sqlglot's parser recurses about a dozen frames per parenthesis: a valid but deep predicate.
        return opaque(sql, TOO_DEEP)
    if not statements:
        return EVERYTHING
    if len(statements) > 1:
        raise PredicateError(
            f"predicate {shown(sql, _MAX_SHOWN)} contains {len(statements)} statements; give one condition"
        )
    tree = statements[0]
    if tree_depth(tree) > MAX_DEPTH:
        return opaque(sql, TOO_DEEP)
    bad = _non_boolean_part(tree)
    if bad is not None:
        raise PredicateError(
            f"predicate {shown(sql, _MAX_SHOWN)} is not a boolean condition ({shown(bad.sql(dialect=DIALECT), _MAX_SHOWN)} is not)"
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
    return all(terms_disjoint(x, y) for x in terms_a for y in terms_b)


def null_widened_terms(
    p: Predicate, columns: Collection[str], text: Collection[str] = ()
) -> tuple[Compiled, ...]:
    """The DNF terms of ``p`` over ``columns`` as an engine reads them when it prunes files on partition
    values whose NULL compares as *unknown*: every comparison on a column also admits NULL, and a null test
    (``IS NULL``, ``IS NOT NULL``) restricts nothing.

    This is how delta-rs 1.6.6 decides which files a stale write *read* for conflict detection (measured,
    ADR 0003 fact 11): a file of the ``p = NULL`` partition counts as read by ``p <> 'a'``, ``p > 'a'``,
    ``p BETWEEN ...``, ``NOT IN``, ``NOT (p = 'a')`` and, on DATE and BIGINT partitions, even by ``p = 1``
    and ``p IN (...)`` (an equality or IN list of plain strings AND-ed at the top stays exact); ``p IS NULL``
    and ``p IS NOT NULL`` count every file as read. delta-rs logs an empty-string partition value as null, so
    the files of ``p = ''`` count as read alike: a widened term also meets every constraint the empty string
    may satisfy (:func:`provably_disjoint_terms`).

    The widening is applied to each comparison *before* the terms are intersected, never to what survives an
    exact reading: ``p <> 'a' AND (p IS NULL OR p <> 'b')`` reads the files of ``p = 'b'`` (measured: a stale
    DELETE with it fails after an UPDATE of ``p = 'b'``), although its exact reading is ``p NOT IN ('a', 'b')``.
    So null tests are ``TRUE`` while the DNF is built, and a term whose comparisons on a column contradict
    each other still reads that column's NULL and empty-string partitions.

    :param p: the reader's predicate.
    :param columns: the partition columns (case-insensitive).
    :param text: the columns known to be STRINGs (see :func:`provably_disjoint`).
    """
    key = frozenset(column.lower() for column in columns)
    text_key = frozenset(column.lower() for column in text)
    try:
        dnf = TRUE if p.tree is None else to_dnf(p.tree, False, key, text_key, null_tests=False)
    except RecursionError:
        dnf = TRUE  # restricts nothing: sound
    widened: list[Compiled] = []
    for term in dnf:
        by_column: Compiled = {}
        for atom in term:
            by_column.setdefault(atom.column, ColumnConstraint()).add(atom)
        found: Compiled = {}
        for column, constraint in by_column.items():
            if not constraint.domains:
                continue  # no comparison: every file is read
            if constraint.is_empty():
                # contradicting comparisons hold for no value, but each compares NULL as unknown: the NULL
                # (and logged-null empty-string) partition stays read
                found[column] = ColumnConstraint(True, or_null=True, or_empty=True)
                continue
            if len(dnf) == 1 and string_values_only(constraint):
                # ``p = 'a'`` / ``p IN ('a', 'b')`` AND-ed at the top on a STRING partition are pruned exactly
                # (measured: neither NULL nor '' partitions are read); in an OR they may not be
                found[column] = constraint
                continue
            # an equality / IN of string literals keeps no '' partition: on a STRING column it is a plain
            # string equality, other column types hold no ''
            text_values = all(
                kind in TEXT_KINDS and domain.values is not None
                for kind, domain in constraint.domains.items()
            )
            found[column] = ColumnConstraint(
                None, dict(constraint.domains), or_null=True, or_empty=not text_values
            )
        widened.append(found)
    return tuple(widened)


def provably_disjoint_terms(a: Iterable[Compiled], b: Iterable[Compiled]) -> bool:
    """:func:`provably_disjoint` on terms already computed (e.g. by :func:`null_widened_terms`)."""
    second = tuple(b)
    return all(terms_disjoint(x, y) for x in a for y in second)


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
        for conjunct in flatten(parsed.tree, exp.And)
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
    for conjunct in flatten(p.tree, exp.And):
        if conjunct.find(exp.Query, exp.Subquery) is not None:
            continue
        used = list(conjunct.find_all(exp.Column))
        if used and all(column_name(column) in columns for column in used):
            kept.append(conjunct)
    if not kept:
        return EVERYTHING
    if len(kept) == len(list(flatten(p.tree, exp.And))):
        return p
    tree = exp.and_(*(exp.paren(conjunct.copy()) for conjunct in kept))
    return Predicate(sql=tree.sql(dialect=DIALECT), is_everything=False, tree=tree)
