"""Partition restrictions delta-rs does not read as the model does, by the column's type (ADR 0003 fact 13):
a numeric range on a STRING partition (compared as text: ``p < 5`` and ``p > 10`` both keep ``'2'``), any
restriction of a DECIMAL, FLOAT or DOUBLE partition, and any numeric comparison on a partition of unknown
type separate nothing. The real-table checks are ``tests/engines/test_deltars_numeric_text_order.py``."""

from __future__ import annotations

import pytest

from deltaguard.core.check_request import parse_table
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.sql.literal_columns import numeric_columns, numeric_order_columns
from deltaguard.core.sql.predicates import parse_predicate
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.codec import config_from_json, config_to_json

DELTARS = EngineProfile(EngineName.DELTA_RS, "1.6.6")
SPARK = EngineProfile(EngineName.DELTA_SPARK, "4.4.0")
ORDERED_PAIRS = [
    ("p < 5", "p > 10"),
    ("p IN (2, 7)", "p >= 10"),
    ("p BETWEEN 1 AND 5", "p > 25"),
    ("NOT (p >= 5)", "p = 12"),
    ("p < -1", "p > 1"),
]


def _table(kind: str | None, extra: tuple[tuple[str, str], ...] = ()) -> TableConfig:
    types = None if kind is None else (("id", "long"), ("p", kind), *extra)
    return TableConfig(partition_columns=("p",), column_types=types)


def _conflict(a: str, b: str, table: TableConfig, profile: EngineProfile = DELTARS) -> tuple[bool, str]:
    verdict = pair_verdict(Operation(K.UPDATE, a), Operation(K.DELETE, b), table, profile)
    return verdict.conflict, verdict.reason


@pytest.mark.parametrize(("a", "b"), ORDERED_PAIRS)
@pytest.mark.parametrize("kind", [None, "string", "STRING", "decimal(5,2)", "double", "float"])
def test_numeric_range_on_a_partition_not_compared_exactly_conflicts(
    a: str, b: str, kind: str | None
) -> None:
    conflict, reason = _conflict(a, b, _table(kind))
    assert conflict, reason
    assert "not compared: p (" in reason


@pytest.mark.parametrize(("a", "b"), ORDERED_PAIRS)
@pytest.mark.parametrize("kind", ["long", "integer", "short", "byte"])
def test_numeric_range_on_an_integer_partition_is_admitted(a: str, b: str, kind: str) -> None:
    conflict, reason = _conflict(a, b, _table(kind))
    assert not conflict, reason


def test_equalities_depend_on_the_type() -> None:
    # a number has one text: equalities on a STRING partition still read different partitions
    assert not _conflict("p = 2", "p IN (7, 12)", _table("string"))[0]
    assert not _conflict("p = 2", "p IN (7, 12)", _table("long"))[0]
    # a DECIMAL partition fails every stale commit that reads it; -0.0 and 0.0 on a DOUBLE; unknown: either
    for kind in ("decimal(5,2)", "double", None):
        assert _conflict("p = 1.5", "p = 10.25", _table(kind))[0], kind
        assert _conflict("p = '1.5'", "p = '10.25'", _table(kind))[0], kind
    assert _conflict("p = 'a'", "p = 'b'", _table("decimal(5,2)"))[0]
    # plain strings on a STRING (or unknown) partition keep their precision
    assert not _conflict("p = 'a'", "p = 'b'", _table("string"))[0]
    assert not _conflict("p = 'a'", "p = 'b'", _table(None))[0]


def test_other_columns_and_engines_are_unchanged() -> None:
    table = TableConfig(partition_columns=("p", "q"), column_types=(("p", "string"), ("q", "string")))
    # the numeric range is on q only; p keeps the pair apart
    assert not _conflict("p = 'a' AND q < 5", "p = 'b' AND q > 10", table)[0]
    # Spark compares a STRING column with a number as a number: unchanged there
    assert not _conflict("p < 5", "p > 10", _table(None), SPARK)[0]


def test_numeric_columns() -> None:
    assert numeric_order_columns(parse_predicate("p < 5 AND q = 1 AND 3 <= r")) == {"p", "r"}
    assert numeric_order_columns(parse_predicate("s BETWEEN 1 AND 2 OR t > 'a'")) == {"s"}
    assert numeric_order_columns(parse_predicate("p IN (1, 2) AND p <> 3")) == frozenset()
    assert numeric_columns(parse_predicate("p IN (1, 2) AND q <> 3 AND r = '01' AND s = 'a'")) == {
        "p",
        "q",
        "r",
    }
    assert numeric_columns(parse_predicate(None)) == frozenset()


def test_column_types_travel_with_the_configuration() -> None:
    for types in (None, (), (("p", "string"), ("n", "decimal(5,2)"))):
        config = TableConfig(partition_columns=("p",), column_types=types)
        assert config_from_json(config_to_json(config)).column_types == types
    assert parse_table({"partition_columns": ["p"]}).column_types is None
    table = parse_table({"partition_columns": ["p"], "column_types": {"p": "long"}})
    assert table.column_type("P") == "long"
