"""On a STRING partition a string literal is its text: ``'01'`` and ``'1'`` are two partitions (Spark and
DataFusion compare a STRING column with a string literal as text). Where the column is an integer
(``k = '01'`` is ``k = 1``) or of unknown type, the model keeps them together. The real-table check is
``tests/engines/test_deltars_string_text.py``."""

from __future__ import annotations

import pytest

from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.sql.predicates import parse_predicate, provably_disjoint
from deltaguard.core.table_config import TableConfig

PROFILES = [
    EngineProfile(EngineName.DELTA_RS, "1.6.6"),
    EngineProfile(EngineName.DELTA_SPARK, "4.4.0", session_ansi=True),
    EngineProfile(EngineName.DELTA_SPARK, "4.4.0"),
]
#: pairs of different texts Spark would cast to the same number
SAME_NUMBER = [("k = '01'", "k = '1'"), ("k IN ('01', '001')", "k = '1'"), ("k = '1.0'", "k <=> '1'")]


def _table(kind: str | None) -> TableConfig:
    types = None if kind is None else (("k", kind), ("v", "long"))
    return TableConfig(partition_columns=("k",), column_types=types)


def _conflict(a: str, b: str, kind: str | None, profile: EngineProfile) -> tuple[bool, str]:
    verdict = pair_verdict(Operation(K.DELETE, a), Operation(K.DELETE, b), _table(kind), profile)
    return verdict.conflict, verdict.reason


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: f"{p.name.value}-{p.session_ansi}")
@pytest.mark.parametrize(("a", "b"), SAME_NUMBER)
def test_different_texts_on_a_string_partition_are_different_partitions(
    a: str, b: str, profile: EngineProfile
) -> None:
    conflict, reason = _conflict(a, b, "string", profile)
    assert not conflict, reason


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: f"{p.name.value}-{p.session_ansi}")
@pytest.mark.parametrize("kind", ["integer", "long", None])
@pytest.mark.parametrize(("a", "b"), SAME_NUMBER[:2])
def test_on_an_integer_or_unknown_partition_they_may_be_one(
    a: str, b: str, kind: str | None, profile: EngineProfile
) -> None:
    conflict, reason = _conflict(a, b, kind, profile)
    assert conflict, reason


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: f"{p.name.value}-{p.session_ansi}")
def test_the_same_text_and_a_number_still_conflict_on_a_string_partition(profile: EngineProfile) -> None:
    assert _conflict("k = '01'", "k = '01'", "string", profile)[0]
    # a number compared with a STRING column is cast: the model does not read it as text
    assert _conflict("k = '01'", "k = 1", "string", profile)[0]


def test_text_columns_only_change_the_named_columns() -> None:
    a, b = parse_predicate("k = '01' AND j = '01'"), parse_predicate("k = '1' OR j = '1'")
    assert not provably_disjoint(a, b, ["k", "j"])
    assert not provably_disjoint(a, b, ["k", "j"], text=["k"])
    assert provably_disjoint(a, b, ["k", "j"], text=["K", "j"])
    # text order, not number order: '10' < '9' as text
    assert provably_disjoint(parse_predicate("k < '9'"), parse_predicate("k = '90'"), ["k"], text=["k"])
    assert not provably_disjoint(parse_predicate("k < '9'"), parse_predicate("k = '10'"), ["k"], text=["k"])


def test_string_columns_come_from_the_schema() -> None:
    table = TableConfig(column_types=(("K", "STRING"), ("v", "long"), ("c", "varchar(3)")))
    assert table.string_columns == frozenset({"k"})
    assert TableConfig().string_columns == frozenset()


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: f"{p.name.value}-{p.session_ansi}")
@pytest.mark.parametrize("kind", ["timestamp_ntz", "integer", "date", None])
@pytest.mark.parametrize(
    "a", ["k <=> '1.00'", "k <=> 'a'", "'a' <=> k", "k IS NOT DISTINCT FROM 'x'", "k <=> ('a')", "k <=> 1e30"]
)
def test_null_safe_equal_to_a_cast_literal_may_select_the_null_partition(
    a: str, kind: str | None, profile: EngineProfile
) -> None:
    """Spark with ANSI off casts text that does not parse to NULL, and ``NULL <=> NULL`` is TRUE: a DELETE of
    ``k <=> 'a'`` on an INT partition deletes the NULL partition (Spark 4.2, ``lab.fuzz.spark_meaning``). A
    number is kept with the NULL partition too: the reading does not know every type's cast."""
    conflict, reason = _conflict(a, "k IS NULL", kind, profile)
    assert conflict, reason


@pytest.mark.parametrize("profile", PROFILES[1:], ids=lambda p: f"{p.name.value}-{p.session_ansi}")
def test_text_null_safe_equal_to_a_string_column_keeps_the_null_partition_apart(
    profile: EngineProfile,
) -> None:
    """On delta-spark (delta-rs reads ``IS NULL`` as every partition)."""
    assert not _conflict("k <=> 'a'", "k IS NULL", "string", profile)[0]  # text to text: no cast
    assert not _conflict("k <=> ('a')", "k IS NULL", "string", profile)[0]
