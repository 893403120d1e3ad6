"""The one-line cause and the structured changes the UI shows for a conflicting pair (core.remedies)."""

from __future__ import annotations

import pytest

from deltaguard.core.facts import build_facts
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.remedies import MAX_WHY, ChangeKind, _data_changes, explain_pair
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
    # the full reason stays available, word for word the model's
    assert e.reason == pair_verdict(MERGE, UPDATE, TableConfig(), profile).reason


@pytest.mark.parametrize("profile", [RS, DBR, SPARK])
def test_a_change_that_leaves_the_pair_conflicting_is_not_offered(profile: EngineProfile) -> None:
    # Restricting only the MERGE's ON condition leaves an unpartitioned table's files shared: the model
    # still says they conflict, so the change is not offered.
    restricted = Operation(K.MERGE, merge_condition="(t.id = s.id) AND t.event_date = '__value_1__'")
    assert pair_verdict(restricted, UPDATE, TableConfig(), profile).conflict
    assert ChangeKind.MERGE_CONDITION not in kinds(explain_pair(MERGE, UPDATE, TableConfig(), profile))


PAIRS = [
    (MERGE, UPDATE, TableConfig()),
    (MERGE, UPDATE, TableConfig(partition_columns=("event_date",))),
    (MERGE, MERGE, TableConfig(partition_columns=("country",))),
    (UPDATE, Operation(K.DELETE, predicate="status = 'closed'"), TableConfig()),
    (
        Operation(K.MERGE, merge_condition="t.k = s.k AND t.day = 'x' AND t.country = 'DE'", inserts=""),
        Operation(K.MERGE, merge_condition="t.k = s.k AND t.day = 'x' AND t.country = 'FR'", inserts=""),
        TableConfig(),
    ),
    (
        UPDATE,
        Operation(K.DELETE, predicate="event_date = '2026-01-02'"),
        TableConfig(clustering_columns=("event_date",)),
    ),
    (Operation(K.OPTIMIZE), UPDATE, TableConfig()),
]


@pytest.mark.parametrize("profile", [RS, DBR, SPARK])
@pytest.mark.parametrize(("a", "b", "table"), PAIRS)
def test_every_offered_change_lets_the_pair_run_together(
    a: Operation, b: Operation, table: TableConfig, profile: EngineProfile
) -> None:
    """Offered exactly when the model, judging the changed pair again, lets it run together (fallbacks
    aside: offered only when no smaller change of their kind was)."""
    verdict = pair_verdict(a, b, table, profile)
    if not verdict.conflict or verdict.rule.startswith("common."):
        pytest.skip("no data changes for this pair")
    offered = explain_pair(a, b, table, profile).changes
    fa, fb = build_facts(a), build_facts(b)
    for candidate in _data_changes(fa, fb, table, profile):
        together = not pair_verdict(*candidate.apply(a, b, table), profile).conflict
        if candidate.change in offered:
            assert together, candidate.change
        elif not candidate.fallback:
            assert not together, candidate.change


def test_the_smallest_partitioning_is_offered_first() -> None:
    # Both MERGEs name one day and different countries: partitioning by country alone keeps them apart,
    # partitioning by the day they share would not, and the heavier fallback is not offered beside it.
    a, b, table = PAIRS[4]
    e = explain_pair(a, b, table, RS)
    assert [c.text for c in e.changes if c.kind is ChangeKind.PARTITION] == [
        "partition the table by country: the writes' conditions already keep them apart on it"
    ]
    assert not pair_verdict(a, b, TableConfig(partition_columns=("country",)), RS).conflict
    assert pair_verdict(a, b, TableConfig(partition_columns=("day",)), RS).conflict


def test_engine_decides_which_alternatives_are_offered() -> None:
    # file statistics that keep writes apart depend on the files a table will hold: not checkable, not offered
    assert ChangeKind.FILE_STATISTICS not in kinds(explain_pair(MERGE, UPDATE, TableConfig(), RS))
    # row-level concurrency needs the columns' types (ADR 0036): a table whose schema was not read gets none
    assert ChangeKind.LIQUID_CLUSTERING not in kinds(explain_pair(MERGE, UPDATE, TableConfig(), DBR))
    typed = TableConfig(column_types=(("id", "long"), ("event_date", "date"), ("amount", "double")))
    dbr = kinds(explain_pair(MERGE, UPDATE, typed, DBR))
    assert ChangeKind.LIQUID_CLUSTERING in dbr
    # deletion vectors alone leave the MERGE reading the whole table: the model still says conflict
    assert ChangeKind.DELETION_VECTORS not in dbr
    spark = kinds(explain_pair(MERGE, UPDATE, TableConfig(), SPARK))
    assert ChangeKind.LIQUID_CLUSTERING not in spark and ChangeKind.FILE_STATISTICS not in spark


def test_partitioned_table_asks_for_different_partition_values() -> None:
    table = TableConfig(partition_columns=("event_date",))
    e = explain_pair(MERGE, UPDATE, table, RS)
    assert e.conflict and "same partitions (event_date)" in e.why
    # the MERGE's ON condition alone is not enough: it still inserts source rows into any partition, the
    # UPDATE's among them; a condition on each write (inserted rows included) is
    assert kinds(e) == [ChangeKind.PREDICATE]
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
