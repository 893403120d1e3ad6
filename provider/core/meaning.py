"""The engine as the judge of what a partition predicate means (ADR 0037).

The conflict rules read predicates by hand (:mod:`deltaguard.core.sql.predicates`): literal kinds, type
coercion and NULL semantics are the model's own reading of Spark SQL. Where an engine is at hand, a
:class:`PredicateOracle` lets the engine's own evaluator check that reading before two writes are kept
apart: every value the model's reading touches (each literal of a partition predicate and its neighbours,
NULL, the empty string) becomes a witness partition row of the table's real partition types, the engine
evaluates both writes' partition predicates on every row, and a row on which one write selects files
(``TRUE``) that the other does not rule out (``TRUE`` or ``NULL``) refutes the claim. Anything the oracle
cannot answer (an error, a predicate it cannot express, too many witness rows) refutes it too: the model
may separate two writes only through facts that were established.

The check only ever turns a ``no_conflict`` into a ``conflict``; without an oracle (``deltaguard check``
documents, a configuration read back from a lease store) the hand-written reading decides alone.

Pure: the oracle (:class:`~deltaguard.core.oracle.PredicateOracle`) is passed in (``TableConfig.meaning``);
this module imports no engine.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Collection, Iterable, Sequence
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from sqlglot import exp

from deltaguard.core.closed_world import is_deterministic
from deltaguard.core.oracle import PredicateOracle
from deltaguard.core.sql.limits import shown
from deltaguard.core.sql.predicates import DIALECT, Predicate

if TYPE_CHECKING:
    from deltaguard.core.facts import OpFacts
    from deltaguard.core.table_config import TableConfig

#: Candidate values per partition column at most (literals and their neighbours).
MAX_VALUES_PER_COLUMN = 48
#: Values every column is also tried on, whatever the predicates compare it with: a pair with no literal on a
#: column (``k IS NOT NULL`` beside ``k > -1``) would otherwise be evaluated on the NULL partition alone,
#: where both are apart. Each engine drops the texts its column's type cannot hold.
TYPICAL_VALUES: tuple[str, ...] = (
    "0", "1", "-1", "a", "", "true", "false", "1970-01-01", "2024-01-01", "2024-01-01 00:00:00",
)  # fmt: skip

_DATE_PREFIX = re.compile(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})")


class _Unexpressible(Exception):
    """A predicate the oracle cannot be asked about (a subquery)."""


def partition_only(p: Predicate, partition_columns: Collection[str]) -> exp.Expr | None:
    """An upper bound of ``p`` that uses only the partition columns (``None``: ``TRUE``, no restriction).

    Every atom (a comparison, function, ... below the ``AND``/``OR``/``NOT`` structure) that reads any
    other column, a qualified name or a value the model marked as moved is replaced by ``TRUE`` where it
    appears positively and by ``FALSE`` under an odd number of ``NOT``: the result holds on every row
    ``p`` may select, whatever the other columns hold.

    :param p: a predicate as the model read it.
    :param partition_columns: the table's partition columns (case-insensitive).
    :raises _Unexpressible: when ``p`` holds a subquery.
    """
    if p.tree is None:
        return None
    if p.tree.find(exp.Query, exp.Subquery) is not None:
        raise _Unexpressible("a subquery")
    names = {column.lower() for column in partition_columns}

    def widen(node: exp.Expr, positive: bool) -> exp.Expr:
        if isinstance(node, exp.Paren):
            return exp.Paren(this=widen(node.this, positive))
        if isinstance(node, exp.And | exp.Or):
            return type(node)(this=widen(node.this, positive), expression=widen(node.expression, positive))
        if isinstance(node, exp.Not):
            return exp.Not(this=widen(node.this, not positive))
        if _partition_atom(node, names):
            return node.copy()
        return exp.true() if positive else exp.false()

    return widen(p.tree, True)


def _partition_atom(node: exp.Expr, names: set[str]) -> bool:
    if node.find(exp.Anonymous) is not None:
        return False  # ``moved(c)`` (a value an UPDATE sets) or a function the model does not know
    if any(not is_deterministic(call) for call in node.find_all(exp.Func)):
        return False  # ``rand() < 0.5`` would answer differently on the witnesses than on the table
    columns = list(node.find_all(exp.Column))
    return bool(columns) and all(not column.table and column.name.lower() in names for column in columns)


def _neighbours(text: str) -> Iterable[str]:
    """Values next to a literal's text that a coercion or an order could confuse with it."""
    yield text
    yield text + "~"
    if text:
        yield text[:-1]
    yield text.upper()
    yield text.lower()
    try:
        number = Decimal(text.strip())
    except InvalidOperation:
        number = None
    if number is not None and number.is_finite():
        for delta in (Decimal(-1), Decimal("-0.5"), Decimal("0.5"), Decimal(1)):
            yield str((number + delta).normalize())
        yield str(number.to_integral_value())
        yield str(number.normalize())
    match = _DATE_PREFIX.match(text)
    if match is not None:
        try:
            day = dt.date(int(match[1]), int(match[2]), int(match[3]))
        except ValueError:
            return
        for offset in (-1, 0, 1):
            yield (day + dt.timedelta(days=offset)).isoformat()


def candidate_values(
    trees: Iterable[exp.Expr], partition_columns: Collection[str]
) -> dict[str, list[str | None]]:
    """Candidate partition values per column: NULL, every literal of an atom on that column with its
    neighbours, and :data:`TYPICAL_VALUES`.

    :param trees: partition-only predicates (:func:`partition_only`).
    :param partition_columns: the table's partition columns.
    """
    found: dict[str, dict[str | None, None]] = {c.lower(): {None: None} for c in partition_columns}
    for tree in trees:
        for atom in _atoms(tree):
            columns = {c.name.lower() for c in atom.find_all(exp.Column)} & set(found)
            texts: list[str] = []
            for literal in atom.find_all(exp.Literal):
                negated = isinstance(literal.parent, exp.Neg) and not literal.is_string
                texts.append(("-" if negated else "") + str(literal.this))
            for boolean in atom.find_all(exp.Boolean):
                texts.append("true" if boolean.this else "false")
            for column in columns:
                bucket = found[column]
                for text in texts:
                    for value in _neighbours(text):
                        if len(bucket) >= MAX_VALUES_PER_COLUMN:
                            break
                        bucket[value] = None
    for bucket in found.values():
        for value in TYPICAL_VALUES:
            if len(bucket) >= MAX_VALUES_PER_COLUMN:
                break
            bucket.setdefault(value, None)
    return {column: list(values) for column, values in found.items()}


def _atoms(node: exp.Expr) -> Iterable[exp.Expr]:
    if isinstance(node, exp.Paren | exp.Not):
        yield from _atoms(node.this)
    elif isinstance(node, exp.And | exp.Or):
        yield from _atoms(node.this)
        yield from _atoms(node.expression)
    else:
        yield node


def engine_refutes(
    a: OpFacts,
    b: OpFacts,
    partition_columns: Sequence[str],
    oracle: PredicateOracle,
    *,
    unknown_selects: bool = True,
) -> str | None:
    """Why the engine does not confirm that ``a`` and ``b`` touch different partitions (``None``: confirmed).

    Compared like :func:`~deltaguard.core.facts.may_overlap`: each read scope with the other's read scope
    and with every place the other writes rows to. A pair is apart on a witness row unless one of them is
    ``TRUE`` there and the other is not ``FALSE`` (a NULL partition counts as read by a comparison that is
    unknown on it, as delta-rs prunes a stale write's read files, ADR 0003), or, without
    ``unknown_selects``, unless both are ``TRUE`` there.

    :param a: one write's facts.
    :param b: the other's.
    :param partition_columns: the table's partition columns.
    :param oracle: the engine's evaluator.
    :param unknown_selects: a predicate that is NULL on a partition selects its files (delta-rs); ``False``
        where the engine keeps only the files its predicate is ``TRUE`` on (delta-spark's ``filterFileList``
        is a DataFrame filter).
    """
    try:
        pairs = [(a.scope, b.scope), *((w, b.scope) for w in a.writes), *((a.scope, w) for w in b.writes)]
        texts: dict[str, int] = {}
        trees: list[exp.Expr] = []
        indexed: list[tuple[int, int]] = []
        for pair in pairs:
            sides = []
            for p in pair:
                tree = partition_only(p, partition_columns)
                if tree is None:
                    return f"{p.sql or 'the whole table'} restricts no partition column"
                text = tree.sql(dialect=DIALECT)
                if text not in texts:
                    texts[text] = len(texts)
                    trees.append(tree)
                sides.append(texts[text])
            indexed.append((sides[0], sides[1]))
        rows = oracle.evaluate(list(texts), candidate_values(trees, partition_columns))
    except _Unexpressible as why:
        return f"the engine cannot be asked about {why}"
    except Exception as error:  # closed world: whatever the engine cannot answer separates nothing
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return f"the engine could not evaluate the partition predicates ({message[:200]})"
    names = list(texts)
    if not rows or any(len(row) != len(names) for row in rows):
        # closed world: an answer not of the shape asked for confirms nothing
        return f"the engine answered {len(rows)} witness rows not of {len(names)} values each"
    for row in rows:
        for first, second in indexed:
            x, y = row[first], row[second]
            if not unknown_selects:
                x, y = x is True, y is True
            if (x is True and y is not False) or (y is True and x is not False):
                return (
                    f"the engine selects one witness partition by both {shown(names[first])} and "
                    f"{shown(names[second])}"
                )
    return None


def judged_by_partition_types(config: TableConfig) -> bool:
    """Whether an engine's evaluator can judge ``config``'s partition predicates: the table exists, is
    partitioned and the type of every partition column is known (delta-rs' evaluator needs no more)."""
    return (
        config.exists
        and bool(config.partition_columns)
        and all(config.column_type(column) is not None for column in config.partition_columns)
    )
