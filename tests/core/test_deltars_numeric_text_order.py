"""A numeric range on a partition column that may be a STRING separates nothing on delta-rs (ADR 0003 fact
13: DataFusion compares a STRING column with a number as text, so ``p < 5`` and ``p > 10`` both keep ``'2'``).
The real-table check is ``tests/engines/test_deltars_numeric_text_order.py``."""

from __future__ import annotations

import pytest

from deltaguard.core.check_request import parse_table
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.sql.predicates import numeric_order_columns, parse_predicate
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


def _conflict(a: str, b: str, table: TableConfig, profile: EngineProfile = DELTARS) -> tuple[bool, str]:
    verdict = pair_verdict(Operation(K.UPDATE, a), Operation(K.DELETE, b), table, profile)
    return verdict.conflict, verdict.reason


@pytest.mark.parametrize(("a", "b"), ORDERED_PAIRS)
@pytest.mark.parametrize("strings", [None, ("p",), ("P",)], ids=["types-unknown", "string", "string-case"])
def test_numeric_range_on_possible_string_partition_conflicts(
    a: str, b: str, strings: tuple[str, ...] | None
) -> None:
    conflict, reason = _conflict(a, b, TableConfig(partition_columns=("p",), string_columns=strings))
    assert conflict, reason
    assert "p not compared" in reason and "as text" in reason


@pytest.mark.parametrize(("a", "b"), ORDERED_PAIRS)
def test_numeric_range_on_known_non_string_partition_is_admitted(a: str, b: str) -> None:
    conflict, reason = _conflict(a, b, TableConfig(partition_columns=("p",), string_columns=("name",)))
    assert not conflict, reason


def test_equalities_and_other_columns_keep_their_precision() -> None:
    table = TableConfig(partition_columns=("p", "q"))
    # a number's equality is the same text whatever the column type: '2' vs '7'
    assert not _conflict("p = 2", "p IN (7, 12)", table)[0]
    assert not _conflict("p = 'a'", "p = 'b'", table)[0]
    # the numeric range is on q only; p keeps the pair apart
    assert not _conflict("p = 'a' AND q < 5", "p = 'b' AND q > 10", table)[0]
    # Spark compares a STRING column with a number as a number: unchanged there
    assert not _conflict("p < 5", "p > 10", TableConfig(partition_columns=("p",)), SPARK)[0]


def test_numeric_order_columns() -> None:
    assert numeric_order_columns(parse_predicate("p < 5 AND q = 1 AND 3 <= r")) == {"p", "r"}
    assert numeric_order_columns(parse_predicate("s BETWEEN 1 AND 2 OR t > 'a'")) == {"s"}
    assert numeric_order_columns(parse_predicate("p IN (1, 2) AND p <> 3")) == frozenset()
    assert numeric_order_columns(parse_predicate(None)) == frozenset()


def test_string_columns_travel_with_the_configuration() -> None:
    for strings in (None, (), ("p",)):
        config = TableConfig(partition_columns=("p",), string_columns=strings)
        assert config_from_json(config_to_json(config)).string_columns == strings
    assert parse_table({"partition_columns": ["p"]}).string_columns is None
    assert parse_table({"partition_columns": ["p"], "string_columns": []}).string_columns == ()
