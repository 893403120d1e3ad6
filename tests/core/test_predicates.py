"""Predicates: parsing, provable disjointness, MERGE target extraction, row-level limitations."""

from __future__ import annotations

import pytest

from deltaguard.core.sql.columns import referenced_columns
from deltaguard.core.sql.dnf import MAX_TERMS
from deltaguard.core.sql.predicates import (
    EVERYTHING,
    PredicateError,
    merge_target_predicate,
    parse_predicate,
    provably_disjoint,
)
from deltaguard.core.sql.row_level import COMPLEX_TYPE, CORRELATED_SUBQUERY, SUBQUERY, row_level_limitations


def disjoint(a: str | None, b: str | None, columns: list[str] | None = None) -> bool:
    """Check both argument orders, so every case also checks symmetry."""
    pa, pb = parse_predicate(a), parse_predicate(b)
    forward, backward = provably_disjoint(pa, pb, columns), provably_disjoint(pb, pa, columns)
    assert forward == backward, f"asymmetric answer for {a!r} / {b!r}"
    return forward


DISJOINT_CASES = [
    # equalities and IN lists
    ("a = 1", "a = 2", True),
    ("a = 1", "a = 1", False),
    ("a = 1", "1 = a", False),
    ("a = 1", "2 = a", True),
    ("a = 1.0", "a = 1", False),
    ("a = -1", "a = 1", True),
    ("a IN (1, 2)", "a = 3", True),
    ("a IN (1, 2)", "a IN (2, 3)", False),
    ("a IN (1, 2)", "a IN (3, 4)", True),
    ("country = 'DE'", "country = 'FR'", True),
    ("country = 'DE'", "country IN ('FR', 'DE')", False),
    # ranges with open and closed ends, either side
    ("date > '2010-01-01'", "date < '2010-01-01'", True),  # the seed's UPDATE/DELETE example
    ("date >= '2010-01-01'", "date <= '2010-01-01'", False),
    ("date >= '2010-01-01'", "date < '2010-01-01'", True),
    ("a > 5", "a <= 5", True),
    ("a > 5", "a < 6", False),
    ("5 < a", "a < 5", True),
    ("5 >= a", "a > 5", True),
    ("5 >= a", "a >= 5", False),
    ("a > 5 AND a < 3", "a = 100", True),  # an unsatisfiable term is disjoint from anything
    ("a >= 3 AND a <= 3", "a = 3", False),
    ("a >= 3 AND a <= 3 AND a <> 3", "b = 1", True),
    ("a = 10", "a < 5 OR a > 20", True),
    ("a = 10", "a < 5 OR a >= 10", False),
    # BETWEEN (closed) and NOT BETWEEN (open outside)
    ("a BETWEEN 1 AND 5", "a > 5", True),
    ("a BETWEEN 1 AND 5", "a >= 5", False),
    ("a BETWEEN 1 AND 5", "a BETWEEN 6 AND 9", True),
    ("a BETWEEN 5 AND 1", "b = 1", True),  # Spark BETWEEN is not symmetric: empty
    ("a NOT BETWEEN 1 AND 5", "a = 3", True),
    ("a NOT BETWEEN 1 AND 5", "a = 5", True),
    ("a NOT BETWEEN 1 AND 5", "a = 0", False),
    ("a NOT BETWEEN 1 AND 5", "a = 6", False),
    # NULL semantics: comparisons never match NULL rows
    ("a IS NULL", "a = 1", True),
    ("a IS NULL", "a <> 1", True),
    ("a IS NULL", "a IS NOT NULL", True),
    ("a IS NULL", "a IS NULL", False),
    ("a IS NULL", "NOT (a = 1)", True),
    ("a IS NULL", "a NOT IN (1)", True),
    ("a IS NULL", "b = 1", False),
    ("a IS NOT NULL", "a = 1", False),
    # NOT IN, <>, NOT (atom)
    ("a NOT IN (1, 2)", "a = 1", True),
    ("a NOT IN (1, 2)", "a = 3", False),
    ("a NOT IN (1, 2)", "a IN (1, 2)", True),
    ("a NOT IN (1, 2)", "a NOT IN (1, 2)", False),
    ("a <> 1", "a = 1", True),
    ("a != 1", "a IN (1, 2)", False),
    ("NOT (a = 1)", "a = 1", True),
    ("NOT (a < 5)", "a < 5", True),
    ("NOT (a < 5)", "a = 5", False),
    ("NOT (a IN (1, 2))", "a = 2", True),
    ("NOT NOT (a = 1)", "a = 2", True),
    ("NOT (a = 1 OR a = 2)", "a = 2", True),
    ("NOT (a = 1 AND b = 1)", "a = 1 AND b = 1", True),
    ("NOT (a = 1 AND b = 1)", "a = 1", False),
    # OR / DNF
    ("a = 1 OR a = 2", "a = 3", True),
    ("a = 1 OR a = 2", "a = 2 OR a = 3", False),
    ("(a = 1 OR a = 2) AND b = 1", "a = 3 OR b = 2", True),
    ("(a = 1 AND b = 1) OR (a = 2 AND b = 2)", "a = 1 AND b = 2", True),
    ("(a = 1 AND b = 1) OR (a = 2 AND b = 2)", "a = 2 AND b = 2", False),
    ("a = 1 OR b = 1", "a = 2", False),
    ("a = 1 OR x LIKE 'y%'", "a = 2", False),  # a not-understood disjunct makes the OR restrict nothing
    # booleans and bare boolean columns
    ("flag", "NOT flag", True),
    ("flag = true", "flag = false", True),
    ("flag", "flag <> false", False),
    ("flag <> true", "flag", True),
    ("FALSE", "a = 1", True),
    ("TRUE", "a = 1", False),
    ("a = 1 AND FALSE", "a = 1", True),
    # column names: case is ignored; a qualified name may be a struct field (meta.date is not date)
    ("`Date` = '2024-01-01'", "date = '2024-01-02'", True),
    ("t.date = '2024-01-01'", "date = '2024-01-02'", False),
    ("T.DATE = '2024-01-01'", "date = '2024-01-01'", False),
    ("meta.date = '2024-01-01'", "date = '2024-01-02'", False),
    # dates and timestamps
    ("d = DATE '2024-01-01'", "d = '2024-01-01'", False),
    # a DATE literal and a date-like string are different kinds (a STRING column compares them differently);
    # only finite sets of either are compared, as CAST(d AS DATE) values
    ("d = DATE '2024-01-01'", "d = '2024-01-02'", True),
    ("d < DATE '2024-01-02'", "d = '2024-01-02'", False),
    ("s > '2024-01-05'", "s = DATE '2024-01-05'", False),
    ("s = '2024-01-05'", "s = '2024-01-06'", True),
    # year() and a month prefix are partition-only conditions on CAST(d AS DATE)
    ("year(d) = 2024", "d = '2023-01-01'", True),
    ("year(d) = 2024", "d = '2024-05-01'", False),
    ("year(d) >= 2024", "d IN ('2023-12-31', '2022-01-01')", True),
    ("d LIKE '2024-01%'", "d = '2023-01-01'", True),
    ("d LIKE '2024-01%'", "year(d) = 2023", True),
    ("d LIKE '2024-01%'", "d = '2024-01-31'", False),
    ("d LIKE '2024-01%'", "d > '2024-02-01'", False),  # text ranges are not CAST(d AS DATE) ranges
    ("ts > DATE '2024-01-05'", "ts LIKE '2024-01-05%'", False),  # noon that day satisfies both
    ("d LIKE '2024-01_%'", "d = '2023-01-01'", False),
    ("NOT year(d) = 2024", "d = '2024-03-01'", False),
    ("d = CAST('2024-01-01' AS DATE)", "d >= DATE '2024-01-02'", True),
    ("d = DATE '2024-1-1'", "d = '2024-01-01'", False),
    ("ts < TIMESTAMP '2024-01-01 10:00:00'", "ts >= TIMESTAMP '2024-01-01 10:00:00'", True),
    ("ts = TIMESTAMP '2024-01-01 00:00:00'", "ts = TIMESTAMP '2024-01-01'", False),
    ("ts = TIMESTAMP '2024-01-01 00:00:00'", "ts = '2024-01-01'", False),  # different kinds: no claim
    ("d = '2024-01-01 10:00:00'", "d = '2024-01-01 11:00:00'", False),  # same day on a date column
    # typed numeric literals; values a cast would change, or a double could not tell apart, are not understood
    ("a = 1L", "a = 2", True),
    ("a = -1L", "a = 1", True),
    ("a = 1L", "a = 1.0", False),
    ("a = 1.5BD", "a = 1.6", True),
    ("a = 0.1D", "a = 0.2", True),
    ("a = CAST(1.5 AS INT)", "a = 2", False),
    ("a = CAST(300 AS TINYINT)", "a = 2", False),
    ("a = CAST('1.55' AS DECIMAL(3,1))", "a = 7", False),
    ("a = CAST('1.5' AS DECIMAL(3,1))", "a = 7", True),
    ("a = 0.1", "a = 0.10000000000000000001", False),
    ("a = 1e18", "a = 1", True),
    # mixed kinds are never compared (types unknown)
    ("a = 1", "a = '1'", False),
    ("a = 1", "a = 'x'", False),
    ("a = 'abc'", "a = '2024-01-01'", False),
    ("a IN (1, 'x')", "a = 2", False),
    # numeric-looking strings: equality only, compared as numbers
    ("m = '01'", "m = '1'", False),
    ("m = '01'", "m = '02'", True),
    ("m IN ('01', '02')", "m = '3'", True),
    ("m < '5'", "m >= '40'", False),  # text order is not numeric order: not understood
    ("m <> '01'", "m = '1'", False),
    ("s = ' 1'", "s = '2'", True),
    ("s = 'true'", "s = 'TRUE'", False),  # boolean spellings are not plain strings
    ("s = ' x'", "s = 'x'", False),
    # not understood: restricts nothing
    ("a = b", "a = 1", False),
    ("upper(c) = 'X'", "upper(c) = 'Y'", False),
    ("a + 1 = 2", "a = 5", False),
    ("c LIKE 'x%'", "c = 'y'", False),
    ("a IN (SELECT x FROM y)", "a = 1", False),
    ("a = NULL", "a = 1", False),
    ("a = 1 OR NULL", "a = 2", False),  # NULL is not understood, so the OR restricts nothing
    ("a = 1 AND NULL", "a = 2", True),
    ("a = 1 AND upper(c) = 'X'", "a = 2", True),  # the understood conjunct still restricts
    ("t.s.f = 1", "t.s.f = 2", False),  # struct field access
    ("arr[0] = 1", "arr[0] = 2", False),
    # everything
    (None, "a = 1", False),
    ("", "a = 1", False),
    (None, None, False),
    (None, "a = 1 AND a = 2", True),
    ("a <=> 1", "a = 2", True),
    # a literal cast to the column's type may be NULL (ANSI off), and NULL <=> NULL is TRUE
    ("a <=> 1", "a IS NULL", False),
    ("a <=> 'x'", "a IS NULL", False),
]


@pytest.mark.parametrize(("a", "b", "expected"), DISJOINT_CASES)
def test_disjointness_over_all_columns(a: str | None, b: str | None, expected: bool) -> None:
    assert disjoint(a, b) is expected


COLUMN_SUBSET_CASES = [
    ("date = '2024-01-01' AND id = 1", "date = '2024-01-01' AND id = 2", ["date"], False),
    ("date = '2024-01-01' AND id = 1", "date = '2024-01-01' AND id = 2", None, True),
    ("date = '2024-01-01' AND id = 1", "date = '2024-01-02' AND id = 1", ["date"], True),
    ("date = '2024-01-01' AND id = 1", "date = '2024-01-02' AND id = 1", ["DATE"], True),
    ("id = 1", "id = 2", ["date"], False),
    ("id = 1 AND id = 2", "date = '2024-01-01'", ["date"], False),  # unsat on a non-partition column
    ("id = 1 AND id = 2", "date = '2024-01-01'", None, True),
    ("date = '2024-01-01' OR id = 1", "date = '2024-01-02'", ["date"], False),
    ("(date = '2024-01-01' OR id = 1) AND date <> '2024-01-02'", "date = '2024-01-02'", ["date"], True),
    (
        "date = '2024-01-01' AND country = 'DE'",
        "date = '2024-01-01' AND country = 'FR'",
        ["date", "country"],
        True,
    ),
    ("date = '2024-01-01' AND country = 'DE'", "date = '2024-01-01' AND country = 'FR'", ["date"], False),
    ("a = 1", "a = 2", [], False),
    ("FALSE", "a = 2", [], True),
]


@pytest.mark.parametrize(("a", "b", "columns", "expected"), COLUMN_SUBSET_CASES)
def test_disjointness_over_a_column_subset(a: str, b: str, columns: list[str] | None, expected: bool) -> None:
    assert disjoint(a, b, columns) is expected


def test_everything_is_the_blank_predicate() -> None:
    assert parse_predicate(None) is EVERYTHING
    assert parse_predicate("  ") is EVERYTHING
    assert parse_predicate("-- only a comment") is EVERYTHING
    assert EVERYTHING.is_everything and EVERYTHING.sql is None
    parsed = parse_predicate("a = 1")
    assert not parsed.is_everything and parsed.sql == "a = 1" and parsed.tree is not None


def test_each_predicate_text_is_parsed_once() -> None:
    assert parse_predicate("cache_probe = 1") is parse_predicate("cache_probe = 1")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a = 1 b", "not a boolean condition"),
        ("a = 1; b = 2", "2 statements"),
        ("1", "not a boolean condition"),
        ("a = 1 OR 2", "not a boolean condition"),
        ("'x'", "not a boolean condition"),
        ("a + 1", "not a boolean condition"),
        ("a = 1 AND 5", "not a boolean condition"),
        ("SELECT * FROM t", "not a boolean condition"),
        ("DROP TABLE t", "not a boolean condition"),
        ("a = 1)", "cannot parse"),
        ("a = 1 AND", "cannot parse"),
        ("a = 'unterminated", "cannot parse"),
        ("(a = 1", "cannot parse"),
    ],
)
def test_bad_predicates_raise_one_line_errors_naming_the_text(text: str, fragment: str) -> None:
    with pytest.raises(PredicateError) as caught:
        parse_predicate(text)
    message = str(caught.value)
    assert fragment in message
    assert "\n" not in message
    assert repr(" ".join(text.split()))[1:-1][:20] in message


def test_a_non_string_predicate_is_an_error() -> None:
    with pytest.raises(PredicateError, match="SQL text"):
        parse_predicate(42)  # type: ignore[arg-type]


def test_predicate_error_is_a_value_error() -> None:
    assert issubclass(PredicateError, ValueError)


# ------------------------------------------------------------------------------------------- DNF cap


def _wide_or(column: str, count: int, start: int = 0) -> str:
    return "(" + " OR ".join(f"{column} = {value}" for value in range(start, start + count)) + ")"


def test_an_or_wider_than_the_cap_restricts_nothing_but_the_rest_still_does() -> None:
    wide = _wide_or("b", MAX_TERMS + 1)
    assert not disjoint(wide, "b = 1000")  # dropped: restricts nothing
    assert disjoint(f"a = 1 AND {wide}", "a = 2")  # the other conjunct still restricts
    assert disjoint(_wide_or("b", MAX_TERMS), "b = 1000")  # at the cap it is still understood


def test_a_conjunct_that_would_overflow_the_product_is_dropped_not_the_predicate() -> None:
    first = _wide_or("a", 8)
    second = _wide_or("b", 8)  # 8 x 8 = 64: still fits
    third = _wide_or("c", 2)  # would make 128: dropped
    predicate = f"{first} AND {second} AND {third}"
    assert disjoint(predicate, "a = 100")
    assert disjoint(predicate, "b = 100")
    assert not disjoint(predicate, "c = 100")


# ------------------------------------------------------------------------------------ MERGE target


SEED_MERGE = "s.user_id = t.user_id AND s.date = t.date AND s.country = t.country"


@pytest.mark.parametrize(
    ("condition", "alias", "expected_sql"),
    [
        (SEED_MERGE, "t", None),  # the seed: not explicit enough, scans the whole table
        (
            SEED_MERGE + " AND t.date = '2024-01-01' AND t.country = 'DE'",
            "t",
            "date = '2024-01-01' AND country = 'DE'",
        ),
        ("s.id = t.id AND t.date = '2024-01-01'", "t", "date = '2024-01-01'"),
        ("s.id = t.id AND T.date = '2024-01-01'", "t", "date = '2024-01-01'"),
        ("s.id = t.id AND t.date = '2024-01-01'", "T", "date = '2024-01-01'"),
        ("s.id = t.id AND date = '2024-01-01'", "t", None),  # unqualified: could be the source's
        ("s.id = t.id AND s.date = '2024-01-01'", "t", None),  # the source side restricts nothing
        ("t.id = s.id AND (t.d = 1 OR t.d = 2)", "t", "(d = 1 OR d = 2)"),
        ("t.id = s.id AND (t.d = 1 OR t.d = 2) AND t.e = 3", "t", "(d = 1 OR d = 2) AND e = 3"),
        ("t.id = s.id AND (t.d = 1 OR s.d = 2)", "t", None),
        ("(s.id = t.id AND t.d = 1)", "t", "d = 1"),
        ("s.id = t.id OR t.d = 1", "t", None),  # a top-level OR with the source restricts nothing
        ("tgt.id = src.id AND tgt.d = 1", "tgt", "d = 1"),
        ("daily.id = s.id AND daily.d = 1", "sales.daily", "d = 1"),
        ("sales.daily.id = s.id AND sales.daily.d = 1", "sales.daily", "d = 1"),
        ("s.id = t.id AND t.d IN (SELECT d FROM other)", "t", None),
        ("", "t", None),
    ],
)
def test_merge_target_predicate_keeps_only_explicit_target_conjuncts(
    condition: str, alias: str, expected_sql: str | None
) -> None:
    result = merge_target_predicate(condition, alias)
    assert result.sql == expected_sql
    assert result.is_everything is (expected_sql is None)


def test_the_seed_merge_advice_makes_concurrent_merges_disjoint() -> None:
    partitions = ["date", "country"]
    vague_a = merge_target_predicate(SEED_MERGE)
    vague_b = merge_target_predicate(SEED_MERGE)
    assert not provably_disjoint(vague_a, vague_b, partitions)
    explicit = SEED_MERGE + " AND t.date = '{date}' AND t.country = '{country}'"
    de = merge_target_predicate(explicit.format(date="2024-01-01", country="DE"))
    fr = merge_target_predicate(explicit.format(date="2024-01-01", country="FR"))
    next_day = merge_target_predicate(explicit.format(date="2024-01-02", country="DE"))
    same = merge_target_predicate(explicit.format(date="2024-01-01", country="DE"))
    assert provably_disjoint(de, fr, partitions)
    assert provably_disjoint(de, next_day, partitions)
    assert not provably_disjoint(de, same, partitions)
    assert not provably_disjoint(de, vague_a, partitions)


def test_merge_target_predicate_rejects_a_bad_condition() -> None:
    with pytest.raises(PredicateError):
        merge_target_predicate("s.id = = t.id")


# ------------------------------------------------------------------------------- row-level limits


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a = 1 AND b IN (1, 2)", ()),
        ("t.a = 1", (COMPLEX_TYPE,)),  # t may be a struct column
        ("address.city = 'Berlin'", (COMPLEX_TYPE,)),
        ("t.address.city = 'Berlin'", (COMPLEX_TYPE,)),
        ("tags = array('a', 'b')", (COMPLEX_TYPE,)),
        ("s = named_struct('a', 1)", (COMPLEX_TYPE,)),
        ("m = map('k', 'v')", (COMPLEX_TYPE,)),
        ("tags[0] = 'x'", (COMPLEX_TYPE,)),
        ("props['k'] = 'v'", (COMPLEX_TYPE,)),
        ("element_at(tags, 1) = 'x'", (COMPLEX_TYPE,)),
        ("array_contains(tags, 'x')", (COMPLEX_TYPE,)),
        ("size(tags) > 2", (COMPLEX_TYPE,)),
        ("cardinality(tags) > 2", (COMPLEX_TYPE,)),
        ("map_keys(props) IS NOT NULL", (COMPLEX_TYPE,)),
        ("exists(tags, x -> x = 'a')", (COMPLEX_TYPE,)),
        ("filter(tags, x -> x > 1) IS NOT NULL", (COMPLEX_TYPE,)),
        ("rand() < 0.5", ("non-deterministic expression (rand)",)),
        ("a = 1 AND randn() > 0", ("non-deterministic expression (randn)",)),
        ("uuid() = id", ("non-deterministic expression (uuid)",)),
        (
            "monotonically_increasing_id() < 10",
            ("non-deterministic expression (monotonically_increasing_id)",),
        ),
        ("a IN (SELECT x FROM y)", (SUBQUERY,)),
        ("a > (SELECT max(x) FROM y)", (SUBQUERY,)),
        ("EXISTS (SELECT 1 FROM y WHERE y.id = t.id)", (SUBQUERY, CORRELATED_SUBQUERY)),
        ("EXISTS (SELECT 1 FROM y AS yy WHERE yy.id = 3)", (SUBQUERY,)),
        ("t.id IN (SELECT y.id FROM y WHERE y.k = t.k)", (COMPLEX_TYPE, SUBQUERY, CORRELATED_SUBQUERY)),
        (
            "tags[0] = 'x' AND rand() < 0.1 AND a IN (SELECT x FROM y)",
            (COMPLEX_TYPE, "non-deterministic expression (rand)", SUBQUERY),
        ),
    ],
)
def test_row_level_limitations(text: str, expected: tuple[str, ...]) -> None:
    assert row_level_limitations(parse_predicate(text)) == expected


def test_everything_has_no_limitations_and_no_columns() -> None:
    assert row_level_limitations(EVERYTHING) == ()
    assert referenced_columns(EVERYTHING) == frozenset()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a = 1", {"a"}),
        ("t.Date = '2024-01-01' AND `Country` IN ('DE')", {"date", "country"}),
        ("a = b OR upper(c) = 'X'", {"a", "b", "c"}),
        ("a IN (SELECT x FROM y)", {"a"}),
    ],
)
def test_referenced_columns(text: str, expected: set[str]) -> None:
    assert referenced_columns(parse_predicate(text)) == frozenset(expected)
