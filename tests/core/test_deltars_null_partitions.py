"""NULL partition values in the delta-rs profile (ADR 0003 fact 11).

delta-rs 1.6.6 prunes a stale write's read predicate on partition values where NULL compares as unknown:
the files of the ``p = NULL`` partition count as read by every comparison on ``p`` (on DATE and BIGINT even
by ``=`` and ``IN``), and ``IS NULL`` / ``IS NOT NULL`` read every partition. Measured pairs: the writes
below conflict on real delta-rs tables in at least one order (``tests/engines/test_deltars_null_partitions.py``
replays them on the engine).
"""

from __future__ import annotations

import pytest

from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

DELTARS = EngineProfile(EngineName.DELTA_RS, "1.6.6")
PARTITIONED = TableConfig(partition_columns=("p",))

NULL_SIDE = ("p IS NULL", "p IS NULL AND id = 3")
OTHER_SIDE = (
    "p = 'b'",
    "p = 'a'",
    "p <> 'a'",
    "p > 'a'",
    "p NOT IN ('a')",
    "NOT (p = 'a')",
    "p IS NOT NULL",
    "p BETWEEN 'a' AND 'b'",
    "p IN ('a', 'b')",
    "p = DATE '2024-01-01'",
    "p = 1",
    "p <> 1",
)


def _conflict(a: Operation, b: Operation) -> tuple[bool, str]:
    v = pair_verdict(a, b, PARTITIONED, DELTARS)
    assert v.conflict == pair_verdict(b, a, PARTITIONED, DELTARS).conflict
    return v.conflict, v.rule


@pytest.mark.parametrize("null_side", NULL_SIDE)
@pytest.mark.parametrize("other", OTHER_SIDE)
@pytest.mark.parametrize("kinds", [(K.UPDATE, K.UPDATE), (K.DELETE, K.UPDATE), (K.UPDATE, K.DELETE)])
def test_null_partition_rewrites_conflict(null_side: str, other: str, kinds: tuple[K, K]) -> None:
    conflict, rule = _conflict(Operation(kinds[0], other), Operation(kinds[1], null_side))
    assert conflict, rule


@pytest.mark.parametrize("null_side", NULL_SIDE)
def test_null_partition_against_merge_and_replace_where(null_side: str) -> None:
    merge = Operation(K.MERGE, merge_condition="t.id = s.id AND t.p = 'a'", inserts="")
    replace = Operation(K.REPLACE_WHERE, "p = 'a'")
    for op in (merge, replace):
        conflict, rule = _conflict(op, Operation(K.UPDATE, null_side))
        assert conflict, (op, rule)


@pytest.mark.parametrize(
    "comparison",
    ["p <> 'a'", "p > 'a'", "p < 'a'", "p NOT IN ('a')", "NOT (p = 'a')", "p BETWEEN 'b' AND 'c'"],
)
def test_rows_inserted_into_the_null_partition_meet_no_comparison(comparison: str) -> None:
    """Precision: files a concurrent commit *adds* are pruned exactly, NULL only matching ``IS NULL``
    (measured: a MERGE inserting only NULL-partition rows and a stale UPDATE with any comparison commit);
    only files the other write *removes* are judged with NULL as unknown."""
    mover = Operation(K.MERGE, merge_condition="t.id = s.id AND t.p = 'a'", inserts="p IS NULL")
    conflict, rule = _conflict(Operation(K.UPDATE, comparison), mover)
    assert not conflict, rule


def test_disjoint_named_partitions_still_commit() -> None:
    """Precision: writes that name different non-NULL partitions touch no NULL partition (measured: both
    commit), however the other one reads."""
    for a, b in [("p = 'a'", "p = 'b'"), ("p IN ('a', 'c')", "p = 'b'"), ("p = 'a'", "p > 'b'")]:
        conflict, rule = _conflict(Operation(K.UPDATE, a), Operation(K.DELETE, b))
        assert not conflict, (a, b, rule)


def test_widened_terms() -> None:
    from deltaguard.core.sql.predicates import null_widened_terms, parse_predicate, provably_disjoint_terms

    def disjoint(reader: str, files: str) -> bool:
        read = null_widened_terms(parse_predicate(reader), ["p"])
        return provably_disjoint_terms(read, parse_predicate(files).terms_over(frozenset({"p"})))

    assert not disjoint("p <> 'a'", "p IS NULL")
    # plain-string equality AND-ed at the top is pruned exactly; DATE / BIGINT equality and ORs are not
    assert disjoint("p = 'a'", "p IS NULL")
    assert disjoint("p IN ('a', 'b') AND id = 1", "p IS NULL")
    assert not disjoint("p = DATE '2024-01-01'", "p IS NULL")
    assert not disjoint("p = 1", "p IS NULL")
    assert not disjoint("p = 'a' OR (p = 'b' AND id = 1)", "p IS NULL")
    assert not disjoint("p IS NULL", "p = 'b'")
    assert not disjoint("p IS NOT NULL", "p IS NULL")
    assert disjoint("p <> 'a'", "p = 'a'")
    assert disjoint("p IS NULL OR p = 'a'", "p = 'b'") is False  # IS NULL reads every partition
    assert disjoint("p = 'a' AND q = 'x'", "p = 'b'")


def test_empty_string_partition_counts_as_null() -> None:
    """delta-rs logs ``p = ''`` as a null partition value: its files are read by any comparison (measured:
    ``DELETE WHERE p < 'b'`` removes them and a stale ``UPDATE WHERE p > 'b'`` fails)."""
    conflict, rule = _conflict(Operation(K.UPDATE, "p > 'b'"), Operation(K.DELETE, "p < 'b'"))
    assert conflict, rule
    conflict, rule = _conflict(Operation(K.UPDATE, "p > 'b'"), Operation(K.DELETE, "p <= 'a'"))
    assert conflict, rule
    # no empty string on either side: still apart
    for a, b, types in [
        ("p > 'b'", "p BETWEEN 'a' AND 'b'", None),
        ("p > 5", "p < 3", (("p", "long"),)),  # a STRING p compares the numbers as text (ADR 0003 fact 13)
        ("d = '2024-01-01'", "d = '2024-01-02'", None),
    ]:
        table = TableConfig(partition_columns=("p", "d"), column_types=types)
        v = pair_verdict(Operation(K.UPDATE, a), Operation(K.DELETE, b), table, DELTARS)
        assert not v.conflict, (a, b, v.rule)
