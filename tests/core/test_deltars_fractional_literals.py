"""A number that is not a whole number, compared with an integer partition, in the delta-rs profile.

DataFusion casts the literal to the column's type and truncates it: on a BIGINT partition ``p = 1.5`` and
``p >= 1.5`` rewrite ``p = 1``, ``p <= -0.5`` rewrites ``p = 0`` (measured on deltalake 1.6.6, ADR 0003
fact 13; the real-table checks are ``tests/engines/test_deltars_fractional_literals.py``). The model reads
the literal exactly, as Spark does, so on delta-rs such a column separates nothing for the pair.
"""

from __future__ import annotations

import pytest

from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.sql.literal_columns import fractional_columns
from deltaguard.core.sql.predicates import parse_predicate
from deltaguard.core.table_config import TableConfig

DELTARS = EngineProfile(EngineName.DELTA_RS, "1.6.6")
SPARK = EngineProfile(EngineName.DELTA_SPARK, "4.4.0")
INTEGER_TYPES = ["byte", "short", "integer", "long", "LONG"]
#: (a write's predicate, the partition delta-rs also rewrites): every spelling measured to truncate
TRUNCATED = [
    ("p = 1.5", "p = 1"),
    ("p = 0.5", "p = 0"),
    ("p = -0.5", "p = 0"),
    ("p = +1.5", "p = 1"),
    ("p = .5", "p = 0"),
    ("p = 15e-1", "p = 1"),
    ("p = 1.5e0", "p = 1"),
    ("p = 1.50", "p = 1"),
    ("p = 01.5", "p = 1"),
    ("p = 1e-1", "p = 0"),
    ("p IN (1.5, 3)", "p = 1"),
    ("p >= 1.5", "p = 1"),
    ("p >= 0.5", "p = 0"),
    ("p <= -0.5", "p = 0"),
    ("p BETWEEN 0 AND -0.5", "p = 0"),
    ("1.5 = p", "p = 1"),
]


def _table(kind: str | None) -> TableConfig:
    types = None if kind is None else (("id", "long"), ("p", kind))
    return TableConfig(partition_columns=("p",), column_types=types)


@pytest.mark.parametrize(("first", "truncated"), TRUNCATED)
@pytest.mark.parametrize("kind", INTEGER_TYPES)
def test_a_fraction_on_an_integer_partition_separates_nothing(first: str, truncated: str, kind: str) -> None:
    verdict = pair_verdict(Operation(K.DELETE, first), Operation(K.DELETE, truncated), _table(kind), DELTARS)
    assert verdict.conflict, verdict.reason
    assert "not a whole number" in verdict.reason


@pytest.mark.parametrize("kind", ["long", "integer"])
def test_an_assigned_fraction_and_a_merge_condition_separate_nothing(kind: str) -> None:
    table = _table(kind)
    # UPDATE ... SET p = 1.5 WHERE p = 3 moves the rows into p = 1 (measured)
    moved = Operation(K.UPDATE, "p = 3", assignments=(("p", "1.5"),))
    assert pair_verdict(moved, Operation(K.DELETE, "p = 1"), table, DELTARS).conflict
    merge = Operation(K.MERGE, merge_condition="t.id = s.id AND t.p = 1.5")
    assert pair_verdict(merge, Operation(K.DELETE, "p = 1"), table, DELTARS).conflict


@pytest.mark.parametrize("kind", INTEGER_TYPES)
def test_whole_numbers_still_separate(kind: str) -> None:
    table = _table(kind)
    for first in ("p = 1", "p = 1.0", "p = 1e0", "p IN (1, 3)", "p <= 1.0", "p = -1"):
        verdict = pair_verdict(Operation(K.DELETE, first), Operation(K.DELETE, "p = 2"), table, DELTARS)
        assert not verdict.conflict, (first, verdict.reason)
    moved = Operation(K.UPDATE, "p = 3", assignments=(("p", "1"),))
    assert not pair_verdict(moved, Operation(K.DELETE, "p = 2"), table, DELTARS).conflict


def test_the_fraction_hides_only_its_column_and_only_on_delta_rs() -> None:
    table = TableConfig(partition_columns=("p", "q"), column_types=(("p", "long"), ("q", "string")))
    # q still keeps the pair apart
    assert not pair_verdict(
        Operation(K.DELETE, "p = 1.5 AND q = 'a'"), Operation(K.DELETE, "p = 1 AND q = 'b'"), table, DELTARS
    ).conflict
    # Spark compares an integer column with 1.5 exactly (as decimals): it matches nothing
    assert not pair_verdict(
        Operation(K.DELETE, "p = 1.5"), Operation(K.DELETE, "p = 1"), _table("long"), SPARK
    ).conflict


def test_fractional_columns() -> None:
    assert fractional_columns(parse_predicate("p = 1.5 AND q = 1 AND r IN (2, .5) AND s >= 1e-1")) == {
        "p",
        "r",
        "s",
    }
    assert fractional_columns(parse_predicate("p = 1.0 AND q = 1e0 AND r = -2 AND s = 'a'")) == frozenset()
    # numeric text other than a plain integer: delta-rs casts it to the column's type as well
    assert fractional_columns(parse_predicate("p = '1.5' AND q = ' 1' AND r = '01'")) == {"p", "q"}
    assert fractional_columns(parse_predicate("p + 0 BETWEEN 0.5 AND 2")) == {"p"}
    assert fractional_columns(parse_predicate(None)) == frozenset()
