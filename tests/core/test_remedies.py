"""The one-line cause and the structured changes the UI shows for a conflicting pair (core.remedies)."""

from __future__ import annotations

import pytest

from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.remedies import MAX_WHY, ChangeKind, explain_pair
from deltaguard.core.table_config import TableConfig

RS = EngineProfile(EngineName.DELTA_RS, "1.0")
DBR = EngineProfile(EngineName.DATABRICKS, "15.4")
SPARK = EngineProfile(EngineName.DELTA_SPARK, "4.0")
MERGE = Operation(K.MERGE, merge_condition="t.id = s.id")
UPDATE = Operation(K.UPDATE, predicate="event_date = '2026-01-01'")


def kinds(explanation) -> list[ChangeKind]:
    return [c.kind for c in explanation.changes]


@pytest.mark.parametrize("profile", [RS, DBR, SPARK])
def test_unpartitioned_pair_names_the_column_both_conditions_use(profile: EngineProfile) -> None:
    e = explain_pair(MERGE, UPDATE, TableConfig(), profile)
    assert e.conflict and e.conflict == pair_verdict(MERGE, UPDATE, TableConfig(), profile).conflict
    assert "not partitioned" in e.why and len(e.why) <= MAX_WHY
    partition = next(c for c in e.changes if c.kind is ChangeKind.PARTITION)
    assert "event_date" in partition.text  # the column the UPDATE filters on, not the MERGE's join key
    merge = next(c for c in e.changes if c.kind is ChangeKind.MERGE_CONDITION)
    assert "`t.event_date = <value>`" in merge.text and "id" not in merge.text.split("ON condition")[0]
    # the full reason stays available, word for word the model's
    assert e.reason == pair_verdict(MERGE, UPDATE, TableConfig(), profile).reason


def test_engine_decides_which_alternatives_are_offered() -> None:
    assert ChangeKind.FILE_STATISTICS in kinds(explain_pair(MERGE, UPDATE, TableConfig(), RS))
    assert ChangeKind.FILE_STATISTICS not in kinds(explain_pair(MERGE, UPDATE, TableConfig(), DBR))
    dbr = kinds(explain_pair(MERGE, UPDATE, TableConfig(), DBR))
    assert ChangeKind.LIQUID_CLUSTERING in dbr and ChangeKind.DELETION_VECTORS in dbr
    spark = kinds(explain_pair(MERGE, UPDATE, TableConfig(), SPARK))
    assert ChangeKind.LIQUID_CLUSTERING not in spark and ChangeKind.FILE_STATISTICS not in spark


def test_partitioned_table_asks_for_different_partition_values() -> None:
    table = TableConfig(partition_columns=("event_date",))
    e = explain_pair(MERGE, UPDATE, table, RS)
    assert e.conflict and "same partitions (event_date)" in e.why
    assert kinds(e) == [ChangeKind.MERGE_CONDITION, ChangeKind.PREDICATE]
    assert ChangeKind.PARTITION not in kinds(e)


def test_compatible_pair_has_no_changes() -> None:
    table = TableConfig(partition_columns=("event_date",))
    a = Operation(K.UPDATE, predicate="event_date = '2026-01-01'")
    b = Operation(K.DELETE, predicate="event_date = '2026-01-02'")
    e = explain_pair(a, b, table, RS)
    assert not e.conflict and e.changes == () and "can run together" in e.why


def test_table_level_rules_keep_the_models_advice() -> None:
    e = explain_pair(Operation(K.ADD_COLUMNS), Operation(K.INSERT), TableConfig(), RS)
    verdict = pair_verdict(Operation(K.ADD_COLUMNS), Operation(K.INSERT), TableConfig(), RS)
    assert e.conflict and e.rule.startswith("common.")
    assert [c.text for c in e.changes] == list(verdict.advice) and verdict.advice
    assert set(kinds(e)) == {ChangeKind.SEQUENCE}
    assert len(e.why) <= MAX_WHY


def test_two_equal_merges_get_each_change_once() -> None:
    e = explain_pair(MERGE, MERGE, TableConfig(partition_columns=("country",)), DBR)
    assert [c.text for c in e.changes].count(
        "add `t.country = <value>` to the ON condition of MERGE (t.id = s.id)"
    ) == 1
