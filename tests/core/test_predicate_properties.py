"""Hypothesis properties of provable disjointness: soundness against real row evaluation, symmetry, monotonicity.

Predicates are generated as small trees over two numeric columns, rendered to Spark SQL for the model, and
evaluated independently in Python with SQL's three-valued logic over a grid of rows (including NULLs and
non-integers), so "disjoint" is checked against what the predicates actually select.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from deltaguard.core.sql.predicates import merge_target_predicate, parse_predicate, provably_disjoint

COLUMNS = ("a", "b")
LITERALS = [Fraction(n, 2) for n in range(-2, 11)]  # -1 .. 5 in steps of 0.5
GRID: list[Fraction | None] = [None, *LITERALS, Fraction(-3), Fraction(7)]
ROWS = [dict(zip(COLUMNS, values, strict=True)) for values in itertools.product(GRID, repeat=2)]
COLUMN_SETS: list[list[str] | None] = [None, ["a"], ["b"], ["a", "b"], []]

Node = tuple[Any, ...]
Row = dict[str, Any]
Truth = bool | None

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_MIRROR = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _lit(value: Fraction | str) -> str:
    if isinstance(value, str):
        return "'" + value + "'"
    return str(Decimal(value.numerator) / Decimal(value.denominator))


columns = st.sampled_from(COLUMNS)


def predicate_trees(
    pool: list[Any], unknown: st.SearchStrategy[Node], names: tuple[str, ...] = COLUMNS
) -> st.SearchStrategy[Node]:
    """Random predicate trees over the columns ``names`` with literals from ``pool``."""
    literals = st.sampled_from(pool)
    columns = st.sampled_from(names)
    atoms = st.one_of(
        st.tuples(st.just("cmp"), columns, st.sampled_from(sorted(_OPS)), literals, st.booleans()),
        st.tuples(st.just("in"), columns, st.lists(literals, min_size=1, max_size=3), st.booleans()),
        st.tuples(st.just("between"), columns, literals, literals, st.booleans()),
        st.tuples(st.just("isnull"), columns, st.booleans()),
        st.tuples(st.just("colcmp"), st.sampled_from(sorted(_OPS)), columns, columns),  # not understood
        unknown,
        st.tuples(st.just("bool"), st.booleans()),
    )
    return st.recursive(
        atoms,
        lambda inner: st.one_of(
            st.tuples(st.just("not"), inner),
            st.tuples(st.just("and"), inner, inner),
            st.tuples(st.just("or"), inner, inner),
        ),
        max_leaves=6,
    )


literals = st.sampled_from(LITERALS)
predicates = predicate_trees(LITERALS, st.tuples(st.just("sum"), literals))  # a + b = x: not understood

#: A string-typed world: plain strings and canonical dates (two kinds the model never compares with each
#: other), evaluated with Spark's binary string order, which is Python's.
STRING_LITERALS = ["DE", "FR", "US", "de", "2024-01-01", "2024-01-02", "2024-02-01", "2023-12-31"]
STRING_GRID: list[str | None] = [
    None,
    *STRING_LITERALS,
    "",
    "A",
    "Zz",
    "2024-01-015",
    "2024-01-01 00:00",
    "é",
]
STRING_ROWS = [dict(zip(COLUMNS, values, strict=True)) for values in itertools.product(STRING_GRID, repeat=2)]
string_predicates = predicate_trees(
    STRING_LITERALS, st.tuples(st.just("upper"), st.sampled_from(STRING_LITERALS))
)  # upper(a) = x: not understood


def render(node: Node) -> str:
    tag = node[0]
    if tag == "cmp":
        _, column, op, value, literal_first = node
        return f"{_lit(value)} {_MIRROR[op]} {column}" if literal_first else f"{column} {op} {_lit(value)}"
    if tag == "in":
        _, column, values, negated = node
        return f"{column} {'NOT IN' if negated else 'IN'} ({', '.join(_lit(v) for v in values)})"
    if tag == "between":
        _, column, low, high, negated = node
        return f"{column} {'NOT BETWEEN' if negated else 'BETWEEN'} {_lit(low)} AND {_lit(high)}"
    if tag == "isnull":
        return f"{node[1]} IS {'NOT NULL' if node[2] else 'NULL'}"
    if tag == "colcmp":
        return f"{node[2]} {node[1]} {node[3]}"
    if tag == "sum":
        return f"a + b = {_lit(node[1])}"
    if tag == "upper":
        return f"upper(a) = {_lit(node[1])}"
    if tag == "bool":
        return "TRUE" if node[1] else "FALSE"
    if tag == "not":
        return f"NOT ({render(node[1])})"
    return f"({render(node[1])}) {tag.upper()} ({render(node[2])})"


def evaluate(node: Node, row: Row) -> Truth:
    """SQL three-valued evaluation of a generated predicate on one row."""
    tag = node[0]
    if tag == "cmp":
        value = row[node[1]]
        return None if value is None else _OPS[node[2]](value, node[3])
    if tag == "in":
        value = row[node[1]]
        if value is None:
            return None
        return (value in node[2]) != node[3]
    if tag == "between":
        value = row[node[1]]
        if value is None:
            return None
        return (node[2] <= value <= node[3]) != node[4]
    if tag == "isnull":
        return (row[node[1]] is None) != node[2]
    if tag == "colcmp":
        left, right = row[node[2]], row[node[3]]
        return None if left is None or right is None else _OPS[node[1]](left, right)
    if tag == "sum":
        a, b = row["a"], row["b"]
        return None if a is None or b is None else a + b == node[1]
    if tag == "upper":
        return None if row["a"] is None else row["a"].upper() == node[1]
    if tag == "bool":
        return bool(node[1])
    if tag == "not":
        inner = evaluate(node[1], row)
        return None if inner is None else not inner
    left, right = evaluate(node[1], row), evaluate(node[2], row)
    if tag == "and":
        if left is False or right is False:
            return False
        return None if left is None or right is None else True
    if left is True or right is True:
        return True
    return None if left is None or right is None else False


@settings(max_examples=400, deadline=None)
@given(predicates, predicates)
def test_disjoint_answers_are_sound_for_every_column_set(a: Node, b: Node) -> None:
    pa, pb = parse_predicate(render(a)), parse_predicate(render(b))
    for column_set in COLUMN_SETS:
        if provably_disjoint(pa, pb, column_set):
            both = [row for row in ROWS if evaluate(a, row) is True and evaluate(b, row) is True]
            assert not both, f"{render(a)!r} and {render(b)!r} over {column_set} share row {both[0]}"


@settings(max_examples=300, deadline=None)
@given(string_predicates, string_predicates)
def test_disjoint_answers_are_sound_on_a_string_column(a: Node, b: Node) -> None:
    pa, pb = parse_predicate(render(a)), parse_predicate(render(b))
    for column_set in COLUMN_SETS:
        if provably_disjoint(pa, pb, column_set):
            both = [row for row in STRING_ROWS if evaluate(a, row) is True and evaluate(b, row) is True]
            assert not both, f"{render(a)!r} and {render(b)!r} over {column_set} share row {both[0]}"


@settings(max_examples=300, deadline=None)
@given(predicates, predicates, st.sampled_from(COLUMN_SETS))
def test_disjointness_is_symmetric(a: Node, b: Node, column_set: list[str] | None) -> None:
    pa, pb = parse_predicate(render(a)), parse_predicate(render(b))
    assert provably_disjoint(pa, pb, column_set) == provably_disjoint(pb, pa, column_set)


@settings(max_examples=300, deadline=None)
@given(predicates, predicates, predicates, st.sampled_from(COLUMN_SETS))
def test_adding_a_conjunct_never_loses_disjointness(
    a: Node, b: Node, c: Node, column_set: list[str] | None
) -> None:
    pa, pb = parse_predicate(render(a)), parse_predicate(render(b))
    if provably_disjoint(pa, pb, column_set):
        narrowed = parse_predicate(f"({render(a)}) AND ({render(c)})")
        assert provably_disjoint(narrowed, pb, column_set)
        assert provably_disjoint(pb, narrowed, column_set)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(columns, st.lists(literals, min_size=2, max_size=4)), min_size=1, max_size=5),
    predicates,
)
def test_monotonicity_survives_the_dnf_cap(wide: list[tuple[str, list[Any]]], extra: Node) -> None:
    # ORs of up to 4 terms, up to 5 of them: products up to 1024 terms, well past the cap.
    base = " AND ".join("(" + " OR ".join(f"{col} = {_lit(v)}" for v in values) + ")" for col, values in wide)
    probe = parse_predicate("a = 100 OR b = 100")
    full = parse_predicate(base)
    narrowed = parse_predicate(f"{base} AND ({render(extra)})")
    if provably_disjoint(full, probe, None):
        assert provably_disjoint(narrowed, probe, None)


#: A MERGE world: target columns t.a and t.b, source column s.a, and an unqualified column a.
MERGE_NAMES = ("t.a", "t.b", "s.a", "a")
MERGE_VALUES: list[Fraction | None] = [None, Fraction(0), Fraction(1), Fraction(2), Fraction(3)]
MERGE_ROWS = [
    dict(zip(MERGE_NAMES, values, strict=True)) for values in itertools.product(MERGE_VALUES, repeat=4)
]
merge_conjuncts = predicate_trees(MERGE_VALUES[1:], st.tuples(st.just("bool"), st.just(True)), MERGE_NAMES)


@settings(max_examples=200, deadline=None)
@given(st.lists(merge_conjuncts, min_size=1, max_size=4), predicates)
def test_merge_target_predicate_is_implied_by_the_condition(conjuncts: list[Node], probe: Node) -> None:
    """Every (target, source) pair the ON condition accepts has a target row inside the extracted predicate,
    so anything provably disjoint from the extracted predicate never meets a row the MERGE reads."""
    condition = " AND ".join(f"({render(conjunct)})" for conjunct in conjuncts)
    target = merge_target_predicate(condition, "t")
    probe_predicate = parse_predicate(render(probe))
    if not provably_disjoint(target, probe_predicate, None):
        return
    for row in MERGE_ROWS:
        if all(evaluate(conjunct, row) is True for conjunct in conjuncts):
            target_row = {"a": row["t.a"], "b": row["t.b"]}
            assert evaluate(probe, target_row) is not True, (
                f"{condition!r} reads {row}, which {render(probe)!r} matches"
            )
