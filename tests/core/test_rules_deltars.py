"""The measured delta-rs profile, rule by rule (the conformance harness proves it against the engine)."""

from __future__ import annotations

import pytest

from deltaguard.core.model import pair_verdict, table_context
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

DELTARS = EngineProfile(EngineName.DELTA_RS, "1.6.6")
PARTITIONED = TableConfig(partition_columns=("p",))
FLAT = TableConfig()


def iso(value: str, partitioned: bool = True) -> TableConfig:
    return TableConfig(
        partition_columns=("p",) if partitioned else (), properties={"delta.isolationLevel": value}
    )


def verdict(a: Operation, b: Operation, table: TableConfig = PARTITIONED) -> tuple[bool, str, str]:
    v = pair_verdict(a, b, table, DELTARS)
    assert v == pair_verdict(b, a, table, DELTARS)  # symmetric
    return v.conflict, v.rule, v.reason


UPDATE_A = Operation(K.UPDATE, "p = 'a'")
DELETE_B = Operation(K.DELETE, "p = 'b' AND id = 6")
INSERT_A = Operation(K.INSERT, "p = 'a'")
INSERT_B = Operation(K.INSERT, "p = 'b'")
OPTIMIZE_A = Operation(K.OPTIMIZE, "p = 'a'")
OPTIMIZE_B = Operation(K.OPTIMIZE, "p = 'b'", zorder_by=("id",))
READING_INSERT = Operation(K.INSERT, reads_target=True)


@pytest.mark.parametrize(
    ("a", "b", "table", "conflict", "rule"),
    [
        (INSERT_A, INSERT_A, FLAT, False, "deltars.append_append"),
        (INSERT_A, OPTIMIZE_A, PARTITIONED, False, "deltars.append_optimize"),
        (INSERT_A, Operation(K.OPTIMIZE), FLAT, False, "deltars.append_optimize"),
        (INSERT_B, UPDATE_A, PARTITIONED, True, "deltars.append_not_blind"),
        (UPDATE_A, DELETE_B, PARTITIONED, False, "deltars.disjoint_partitions"),
        (UPDATE_A, DELETE_B, FLAT, True, "deltars.rewrite_rewrite"),
        (UPDATE_A, Operation(K.UPDATE, "p = 'a' AND id = 1"), PARTITIONED, True, "deltars.rewrite_rewrite"),
        (
            Operation(K.MERGE, merge_condition="t.id = s.id"),
            DELETE_B,
            PARTITIONED,
            True,
            "deltars.rewrite_rewrite",
        ),
        (
            Operation(K.MERGE, merge_condition="t.id = s.id AND t.p = 'a'"),
            DELETE_B,
            PARTITIONED,
            False,
            "deltars.disjoint_partitions",
        ),
        (Operation(K.REPLACE_WHERE, "p = 'a'"), DELETE_B, PARTITIONED, False, "deltars.disjoint_partitions"),
        (Operation(K.OVERWRITE), DELETE_B, PARTITIONED, True, "deltars.rewrite_rewrite"),
        (OPTIMIZE_A, OPTIMIZE_B, PARTITIONED, False, "deltars.optimize_disjoint"),
        (OPTIMIZE_A, OPTIMIZE_A, PARTITIONED, True, "deltars.optimize_optimize_duplicates"),
        (Operation(K.OPTIMIZE), Operation(K.OPTIMIZE), FLAT, True, "deltars.optimize_optimize_duplicates"),
        (OPTIMIZE_A, DELETE_B, PARTITIONED, True, "deltars.optimize_rewrite"),
        (READING_INSERT, INSERT_A, PARTITIONED, True, "deltars.append_not_blind"),
        (Operation(K.REORG_PURGE), INSERT_A, PARTITIONED, True, "deltars.unmeasured"),
        (Operation(K.STREAMING_WRITE), INSERT_A, PARTITIONED, True, "deltars.unmeasured"),
    ],
)
def test_pairs(a: Operation, b: Operation, table: TableConfig, conflict: bool, rule: str) -> None:
    got_conflict, got_rule, reason = verdict(a, b, table)
    assert (got_conflict, got_rule) == (conflict, rule)
    assert "delta-rs 1.6.6 conformance" in reason


def test_silent_corruption_is_named_in_the_reason() -> None:
    assert "duplicate" in verdict(OPTIMIZE_A, OPTIMIZE_A)[2]
    assert "compacted rows" in verdict(Operation(K.OPTIMIZE), Operation(K.OVERWRITE))[2]


def test_snapshot_isolation_is_honoured_only_in_camel_case() -> None:
    for reader_partner in (INSERT_A, OPTIMIZE_A):
        assert verdict(READING_INSERT, reader_partner, iso("snapshotIsolation"))[:2] == (
            False,
            "deltars.snapshot_isolation_reading_insert",
        )
        assert verdict(READING_INSERT, reader_partner, iso("SnapshotIsolation"))[0] is True
    # two reading INSERTs may insert the same absent key: still a conflict
    assert verdict(READING_INSERT, READING_INSERT, iso("snapshotIsolation"))[0] is True
    # everything snapshot isolation does not make safe keeps the Serializable verdict
    assert verdict(INSERT_B, UPDATE_A, iso("snapshotIsolation"))[0] is True


def test_isolation_context() -> None:
    assert table_context(iso("writeSerializable"), DELTARS).isolation.value == "WriteSerializable"
    ignored = table_context(iso("WriteSerializable"), DELTARS)
    assert ignored.isolation.value == "Serializable" and "silently ignored" in ignored.notes[0]
    assert "silently ignored" in verdict(UPDATE_A, DELETE_B, iso("SnapshotIsolation"))[2]
    assert not table_context(iso("snapshotIsolation"), DELTARS).conservative


def test_unmeasured_isolation_value_is_conservative() -> None:
    conflict, rule, reason = verdict(INSERT_A, INSERT_A, iso("serializable"))
    assert conflict and rule == "common.conservative" and "not measured" in reason
