"""Runtime/Photon/preview/limitation rules, the seed's examples, shared rules, engines and decide()."""

from __future__ import annotations

import pytest

from deltaguard.core import decide, pair_verdict
from deltaguard.core.decision import DeltaException, Verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

K = OperationKind
DV = {"delta.enableDeletionVectors": "true"}
#: the columns these tables' conditions use, declared: row-level concurrency needs known column types
TYPES = (("id", "long"), ("date", "date"), ("country", "string"), ("tags", "complex"))
DV_TABLE = TableConfig(properties=DV, column_types=TYPES)
LIQUID = TableConfig(clustering_columns=("id",), column_types=TYPES)


def db(runtime: str = "14.3", photon: bool = False, preview: bool = False) -> EngineProfile:
    return EngineProfile(EngineName.DATABRICKS, runtime, photon=photon, row_level_preview=preview)


def merge(target: str | None = None) -> Operation:
    return Operation(K.MERGE, merge_condition="t.id = s.id" + (f" AND {target}" if target else ""))


def conflict(a: Operation, b: Operation, table: TableConfig, profile: EngineProfile) -> bool:
    verdict = pair_verdict(a, b, table, profile)
    assert verdict == pair_verdict(b, a, table, profile)
    return verdict.conflict


# Two operations on different rows (ids) of one file: only row-level concurrency tells them apart.
ROWS = {
    K.UPDATE: (Operation(K.UPDATE, "id = 1"), Operation(K.UPDATE, "id = 2")),
    K.DELETE: (Operation(K.DELETE, "id = 1"), Operation(K.DELETE, "id = 2")),
    K.MERGE: (merge("t.id = 1"), merge("t.id = 2")),
}


@pytest.mark.parametrize(
    ("runtime", "photon", "preview", "table", "row_level_kinds"),
    [
        ("14.3", False, False, DV_TABLE, {K.UPDATE, K.DELETE, K.MERGE}),
        ("15.4", False, False, DV_TABLE, {K.UPDATE, K.DELETE, K.MERGE}),
        ("14.2", False, False, DV_TABLE, {K.UPDATE, K.DELETE}),  # MERGE needs Photon on 14.2
        ("14.2", True, False, DV_TABLE, {K.UPDATE, K.DELETE, K.MERGE}),
        ("14.1", False, False, DV_TABLE, set()),  # preview flag not set
        ("14.1", False, True, DV_TABLE, {K.DELETE}),  # non-Photon preview: DELETE only
        ("14.0", True, True, DV_TABLE, {K.UPDATE, K.DELETE, K.MERGE}),
        ("13.3", False, False, DV_TABLE, set()),  # no preview flag before 14.0, no liquid
        ("13.3", False, False, LIQUID, {K.DELETE}),  # liquid clustering enables it from 13.3
        ("13.3", True, False, LIQUID, {K.UPDATE, K.DELETE, K.MERGE}),
        ("13.2", True, False, LIQUID, set()),
        (
            "14.3",
            False,
            False,
            TableConfig(clustering_columns=("id",), properties={"delta.enableDeletionVectors": "false"}),
            set(),
        ),
        ("14.3", False, False, TableConfig(partition_columns=("date",), properties=DV), set()),
        ("14.3", False, False, TableConfig(), set()),  # no deletion vectors
    ],
)
def test_row_level_applicability(
    runtime: str, photon: bool, preview: bool, table: TableConfig, row_level_kinds: set[OperationKind]
) -> None:
    profile = db(runtime, photon, preview)
    for kind, (a, b) in ROWS.items():
        assert conflict(a, b, table, profile) == (kind not in row_level_kinds), (kind, runtime, photon)


@pytest.mark.parametrize(
    "predicate",
    [
        "id = 1 AND rand() < 0.5",
        "id IN (SELECT id FROM other)",
        "tags[0] = 'x' AND id = 1",
        "id = 1 AND uuid() = 'a'",
    ],
)
def test_row_level_limitations_fall_back_to_file_level(predicate: str) -> None:
    limited = Operation(K.UPDATE, predicate)
    other = Operation(K.UPDATE, "id = 2")
    verdict = pair_verdict(limited, other, DV_TABLE, db())
    assert verdict.conflict
    assert "without row-level concurrency" in verdict.reason and "Limitations" in verdict.reason


def test_merge_without_target_predicate_on_14_2_falls_back() -> None:
    profile = db("14.2", photon=True)
    other = Operation(K.UPDATE, "id = 2")
    assert conflict(merge(), other, DV_TABLE, profile)
    verdict = pair_verdict(merge(), other, DV_TABLE, profile)
    assert any("to the MERGE condition" in a for a in verdict.advice)
    assert not conflict(merge("t.id = 1"), other, DV_TABLE, profile)
    # From 14.3 the explicit target predicate is no longer required, but rows must still be disjoint:
    # a MERGE that may touch every row can touch id = 2.
    assert conflict(merge(), other, DV_TABLE, db("14.3"))


def test_partition_example_update_vs_delete_by_date() -> None:
    update = Operation(K.UPDATE, "date > '2010-01-01'")
    delete = Operation(K.DELETE, "date < '2010-01-01'")
    assert conflict(update, delete, TableConfig(), db())
    assert not conflict(update, delete, TableConfig(partition_columns=("date",)), db())
    assert conflict(update, delete, TableConfig(partition_columns=("country",)), db())
    overlapping = Operation(K.DELETE, "date <= '2010-01-02'")
    assert conflict(update, overlapping, TableConfig(partition_columns=("date",)), db())


def test_date_country_merge_example() -> None:
    table = TableConfig(partition_columns=("date", "country"))
    loose = "s.user_id = t.user_id AND s.date = t.date AND s.country = t.country"

    def m(extra: str = "") -> Operation:
        return Operation(K.MERGE, merge_condition=loose + extra)

    verdict = pair_verdict(m(), m(), table, db())
    assert verdict.conflict
    assert any("t.date = ..." in a for a in verdict.advice)
    a = m(" AND t.date = '2024-01-01' AND t.country = 'DE'")
    b = m(" AND t.date = '2024-01-02' AND t.country = 'DE'")
    c = m(" AND t.date = '2024-01-01' AND t.country = 'FR'")
    assert not conflict(a, b, table, db())
    assert not conflict(a, c, table, db())
    assert conflict(a, a, table, db())


@pytest.mark.parametrize(
    ("changer", "expected"),
    [
        (Operation(K.SET_TBLPROPERTIES), DeltaException.METADATA_CHANGED),
        (Operation(K.ADD_COLUMNS), DeltaException.METADATA_CHANGED),
        (Operation(K.ALTER_SCHEMA), DeltaException.METADATA_CHANGED),
        (Operation(K.REORG_UPGRADE), DeltaException.PROTOCOL_CHANGED),
        (Operation(K.CREATE_OR_REPLACE), DeltaException.METADATA_CHANGED),
    ],
)
@pytest.mark.parametrize("engine", list(EngineName))
def test_metadata_changes_conflict_with_every_write(
    changer: Operation, expected: DeltaException, engine: EngineName
) -> None:
    profile = EngineProfile(engine, "14.3" if engine is EngineName.DATABRICKS else "3.2.0")
    for other in (Operation(K.INSERT, "date = 'x'"), Operation(K.OPTIMIZE), Operation(K.UPDATE, "id = 1")):
        verdict = pair_verdict(changer, other, DV_TABLE, profile)
        assert verdict.conflict and expected in verdict.exceptions, verdict
        assert any("alone" in a for a in verdict.advice)


def test_create_or_replace_twice_is_a_protocol_change() -> None:
    verdict = pair_verdict(
        Operation(K.CREATE_OR_REPLACE), Operation(K.CREATE_OR_REPLACE), TableConfig(), db()
    )
    assert DeltaException.PROTOCOL_CHANGED in verdict.exceptions


def test_identity_columns_allow_no_concurrency() -> None:
    table = TableConfig(identity_columns=("id",), properties=DV)
    assert not conflict(Operation(K.INSERT), Operation(K.INSERT), DV_TABLE, db())
    verdict = pair_verdict(Operation(K.INSERT), Operation(K.INSERT), table, db())
    assert verdict.conflict and "identity" in verdict.reason


def test_writers_racing_to_create_a_table() -> None:
    verdict = pair_verdict(Operation(K.INSERT), Operation(K.INSERT), TableConfig(exists=False), db())
    assert verdict.conflict and verdict.exceptions == (DeltaException.PROTOCOL_CHANGED,)


def test_streaming_checkpoints() -> None:
    a = Operation(K.STREAMING_WRITE, checkpoint_location="s3://chk/a")
    b = Operation(K.STREAMING_WRITE, checkpoint_location="s3://chk/b")
    same = pair_verdict(a, a, TableConfig(), db())
    assert same.conflict and same.exceptions == (DeltaException.CONCURRENT_TRANSACTION,)
    assert any("checkpoint" in x for x in same.advice)
    assert not conflict(a, b, TableConfig(), db())
    unknown = Operation(K.STREAMING_WRITE)
    assert conflict(unknown, a, TableConfig(), db())  # an undeclared checkpoint may be the same one
    # A streaming write is an append: in Serializable it conflicts with an overlapping reader.
    serializable = TableConfig(properties={"delta.isolationLevel": "Serializable"})
    assert conflict(a, Operation(K.UPDATE), serializable, db())


@pytest.mark.parametrize("spelling", ["serializable", "SERIALIZABLE", "Serializable"])
def test_isolation_level_spellings(spelling: str) -> None:
    table = TableConfig(properties={"delta.isolationLevel": spelling})
    assert conflict(Operation(K.UPDATE), Operation(K.INSERT), table, db())


def test_unrecognised_isolation_level_is_conservative() -> None:
    table = TableConfig(properties={"delta.isolationLevel": "SnapshotIsolation"})
    verdict = pair_verdict(Operation(K.INSERT), Operation(K.INSERT), table, db())
    assert (
        verdict.conflict and "SnapshotIsolation" in verdict.reason and verdict.rule == "common.conservative"
    )


def test_unknown_table_settings_are_conservative() -> None:
    table = TableConfig(unknown=("feature:someFutureFeature",))
    verdict = pair_verdict(Operation(K.INSERT), Operation(K.INSERT), table, db())
    assert verdict.conflict and "someFutureFeature" in verdict.reason


def test_insert_reading_the_target_behaves_like_merge() -> None:
    reading = Operation(K.INSERT, reads_target=True)
    assert not conflict(Operation(K.INSERT), Operation(K.INSERT), TableConfig(), db())
    assert conflict(
        reading, Operation(K.INSERT), TableConfig(properties={"delta.isolationLevel": "Serializable"}), db()
    )
    assert conflict(reading, Operation(K.UPDATE, "id = 1"), TableConfig(), db())
    assert not conflict(reading, Operation(K.OPTIMIZE), DV_TABLE, db())


def test_overwrite_and_replace_where_are_file_level_deletes() -> None:
    replace = Operation(K.REPLACE_WHERE, "id = 1")
    # Row-level concurrency would separate id = 1 from id = 2; a REPLACE WHERE removes whole files.
    verdict = pair_verdict(replace, Operation(K.UPDATE, "id = 2"), DV_TABLE, db())
    assert verdict.conflict and "judged as DELETE" in verdict.reason
    partitioned = TableConfig(partition_columns=("date",))
    assert not conflict(
        Operation(K.REPLACE_WHERE, "date = 'a'"), Operation(K.DELETE, "date = 'b'"), partitioned, db()
    )
    assert conflict(
        Operation(K.OVERWRITE, "date = 'a'"), Operation(K.DELETE, "date = 'b'"), partitioned, db()
    )
    assert not conflict(Operation(K.OVERWRITE), Operation(K.INSERT), TableConfig(), db())
    serializable = TableConfig(properties={"delta.isolationLevel": "Serializable"})
    assert conflict(Operation(K.OVERWRITE), Operation(K.INSERT), serializable, db())


def test_reorg_purge_has_optimize_semantics() -> None:
    assert not conflict(Operation(K.REORG_PURGE), Operation(K.UPDATE), DV_TABLE, db())
    assert conflict(Operation(K.REORG_PURGE), Operation(K.UPDATE), TableConfig(), db())
    assert not conflict(Operation(K.REORG_PURGE), Operation(K.INSERT), TableConfig(), db())


# ------------------------------------------------------------------------------ delta-spark, delta-rs

SPARK = EngineProfile(EngineName.DELTA_SPARK, "4.4.0")
DELTARS = EngineProfile(EngineName.DELTA_RS, "1.6.6")


def test_delta_spark_follows_the_conflict_checker() -> None:
    unpartitioned = TableConfig()
    partitioned = TableConfig(partition_columns=("date",))
    # Whole-table reader of an unpartitioned table vs any added file, blind appends included.
    verdict = pair_verdict(Operation(K.INSERT), Operation(K.UPDATE, "id = 1"), unpartitioned, SPARK)
    assert verdict.conflict and verdict.exceptions == (DeltaException.CONCURRENT_APPEND,)
    assert "ConflictChecker" in verdict.reason
    assert not conflict(
        Operation(K.INSERT, "date = 'a'"), Operation(K.UPDATE, "date = 'b'"), partitioned, SPARK
    )
    assert conflict(Operation(K.INSERT, "date = 'a'"), Operation(K.UPDATE, "date = 'a'"), partitioned, SPARK)
    assert not conflict(Operation(K.INSERT), Operation(K.INSERT), unpartitioned, SPARK)
    # OPTIMIZE commits without data change: no added-files check against a blind append ...
    assert not conflict(Operation(K.OPTIMIZE), Operation(K.INSERT), unpartitioned, SPARK)
    # ... but its removes still conflict with readers, deletion vectors or not (no Databricks exemption).
    assert conflict(Operation(K.OPTIMIZE), Operation(K.DELETE, "id = 1"), DV_TABLE, SPARK)
    # No row-level concurrency.
    assert conflict(Operation(K.UPDATE, "id = 1"), Operation(K.UPDATE, "id = 2"), DV_TABLE, SPARK)


def spark_table(isolation: str | None, partitioned: bool = True) -> TableConfig:
    properties = {} if isolation is None else {"delta.isolationLevel": isolation}
    return TableConfig(partition_columns=("date",) if partitioned else (), properties=properties)


SAME_DAY_PAIRS = [
    (Operation(K.INSERT, "date = 'a'"), Operation(K.UPDATE, "date = 'a'")),
    (Operation(K.INSERT, "date = 'a'"), merge("t.date = 'a'")),
]


@pytest.mark.parametrize("isolation", ["WriteSerializable", "writeserializable", "WRITESERIALIZABLE"])
@pytest.mark.parametrize(("append", "reader"), SAME_DAY_PAIRS)
def test_delta_spark_honours_write_serializable_for_blind_appends(
    isolation: str, append: Operation, reader: Operation
) -> None:
    # Measured (conformance --engine delta-spark --slice isolation): a blind INSERT committing while an
    # UPDATE/MERGE of the same partition is in flight fails the reader under Serializable, not here.
    verdict = pair_verdict(append, reader, spark_table(isolation), SPARK)
    assert not verdict.conflict, verdict.reason
    assert verdict.rule == "spark.write_serializable_blind_append"
    assert "measured" in verdict.reason
    # The same pair on a Serializable (or default) table still conflicts.
    for serializable in (None, "Serializable"):
        assert conflict(append, reader, spark_table(serializable), SPARK)


def test_delta_spark_write_serializable_on_an_unpartitioned_table() -> None:
    table = spark_table("WriteSerializable", partitioned=False)
    assert not conflict(Operation(K.INSERT), Operation(K.UPDATE, "id = 1"), table, SPARK)
    assert conflict(Operation(K.INSERT), Operation(K.UPDATE, "id = 1"), spark_table(None, False), SPARK)


def test_delta_spark_write_serializable_keeps_the_other_checks() -> None:
    table = spark_table("WriteSerializable")
    # Two readers that remove files conflict under both levels.
    verdict = pair_verdict(
        Operation(K.UPDATE, "date = 'a'"), Operation(K.DELETE, "date = 'a' AND id = 2"), table, SPARK
    )
    assert verdict.conflict and DeltaException.CONCURRENT_DELETE_READ in verdict.exceptions
    assert "WriteSerializable" in verdict.reason
    # A non-blind writer's files are still checked against a reader (MERGE adds files after reading).
    assert conflict(merge("t.date = 'a'"), Operation(K.UPDATE, "date = 'a'"), table, SPARK)
    # Other readers and appends keep the Serializable check.
    for reader in (
        Operation(K.REPLACE_WHERE, "date = 'a'"),
        Operation(K.INSERT, "date = 'a'", reads_target=True),
    ):
        assert conflict(Operation(K.INSERT, "date = 'a'"), reader, table, SPARK)
    assert conflict(Operation(K.STREAMING_WRITE), Operation(K.UPDATE, "date = 'a'"), table, SPARK)


def test_delta_spark_snapshot_isolation_is_judged_by_the_serializable_rules() -> None:
    table = spark_table("SnapshotIsolation")
    verdict = pair_verdict(Operation(K.INSERT, "date = 'a'"), Operation(K.UPDATE, "date = 'a'"), table, SPARK)
    assert verdict.conflict and "delta.isolationLevel" not in verdict.reason  # not the conservative path
    assert not conflict(Operation(K.INSERT), Operation(K.INSERT), table, SPARK)


@pytest.mark.parametrize("bad", ["nonsense", " Serializable", "Serializable ", "write_serializable", ""])
def test_delta_spark_fails_every_write_on_an_unknown_isolation_level(bad: str) -> None:
    # Measured with 'nonsense': every write fails (IsolationLevel.fromString trims nothing, so neither does this).
    verdict = pair_verdict(Operation(K.INSERT), Operation(K.INSERT), spark_table(bad), SPARK)
    assert verdict.conflict and "fails every write" in verdict.reason


def test_delta_spark_reads_the_isolation_level_as_its_writer_does() -> None:
    from deltaguard.core.rules.delta_spark import read_isolation

    assert read_isolation(None).level == "Serializable"
    assert read_isolation("serializable").level == "Serializable"
    assert read_isolation("writeSerializable").level == "WriteSerializable"
    assert read_isolation("snapshotisolation").level == "SnapshotIsolation"
    unknown = read_isolation("nonsense")
    assert unknown.level is None and unknown.problem and "'nonsense'" in unknown.problem


def test_delta_rs_profile_is_the_measured_one() -> None:
    # the conservative placeholder was replaced by the measured profile (tests/conformance has the details)
    assert not conflict(Operation(K.INSERT), Operation(K.INSERT), TableConfig(), DELTARS)
    partitioned = TableConfig(partition_columns=("date",))
    assert not conflict(
        Operation(K.UPDATE, "date = 'a'"), Operation(K.DELETE, "date = 'b'"), partitioned, DELTARS
    )
    assert conflict(
        Operation(K.UPDATE, "date = 'a'"), Operation(K.INSERT, "date = 'b'"), partitioned, DELTARS
    )
    assert not conflict(Operation(K.INSERT), Operation(K.OPTIMIZE), partitioned, DELTARS)


# ----------------------------------------------------------------------------------------- decide()

PARTITIONED = TableConfig(partition_columns=("date",))


def test_decide_reports_indexes_reasons_and_advice() -> None:
    running = [
        Operation(K.UPDATE, "date = '2024-01-01'"),
        Operation(K.DELETE, "date = '2024-01-02'"),
        Operation(K.INSERT, "date = '2024-01-03'"),
    ]
    decision = decide(
        Operation(K.MERGE, merge_condition="t.id = s.id AND t.date = '2024-01-02'"),
        running,
        PARTITIONED,
        db(),
    )
    assert decision.verdict is Verdict.CONFLICT
    assert decision.conflicts_with == (1,)
    assert decision.reasons and "running #1" in decision.reasons[0]
    assert decision.advice
    json = decision.to_json()
    assert json["verdict"] == "conflict" and json["conflicts_with"] == [1]

    free = decide(
        Operation(K.MERGE, merge_condition="t.id = s.id AND t.date = '2024-01-09'"),
        running,
        PARTITIONED,
        db(),
    )
    assert free.verdict is Verdict.NO_CONFLICT and free.conflicts_with == () and free.reasons


def test_decide_with_nothing_running() -> None:
    decision = decide(Operation(K.UPDATE), [], TableConfig(), db())
    assert decision.verdict is Verdict.NO_CONFLICT and decision.reasons


def test_decide_rejects_an_unparsable_predicate() -> None:
    with pytest.raises(ValueError, match=r"\S"):
        decide(Operation(K.UPDATE, "date = = 'x'"), [Operation(K.INSERT)], TableConfig(), db())


def test_three_way_blind_append_candidate() -> None:
    append = Operation(K.INSERT, "date = '2024-01-01'")
    one = [Operation(K.UPDATE, "date = '2024-01-01'")]
    two = [*one, Operation(K.DELETE, "date >= '2024-01-01'")]
    assert decide(append, one, PARTITIONED, db()).verdict is Verdict.NO_CONFLICT
    decision = decide(append, two, PARTITIONED, db())
    assert decision.verdict is Verdict.CONFLICT
    assert decision.conflicts_with == (0, 1)
    assert decision.exceptions == (DeltaException.CONCURRENT_APPEND,)
    assert any("Japanese edition" in r for r in decision.reasons)
    # Readers that cannot read the appended partition do not count.
    elsewhere = [Operation(K.UPDATE, "date = '2023-01-01'"), Operation(K.DELETE, "date < '2024-01-01'")]
    assert decide(append, elsewhere, PARTITIONED, db()).verdict is Verdict.NO_CONFLICT
    # Row-level table: the readers' row conditions decide.
    rows = [Operation(K.UPDATE, "id = 5"), Operation(K.DELETE, "id = 6")]
    assert decide(Operation(K.INSERT, "id = 7"), rows, DV_TABLE, db()).verdict is Verdict.NO_CONFLICT
    assert decide(
        Operation(K.INSERT, "id = 5"), [*rows, Operation(K.DELETE, "id > 4")], DV_TABLE, db()
    ).conflict


def test_three_way_second_reader_candidate() -> None:
    running = [Operation(K.INSERT, "date = '2024-01-01'"), Operation(K.UPDATE, "date = '2024-01-01'")]
    decision = decide(Operation(K.DELETE, "date = '2024-01-01' AND id = 3"), running, PARTITIONED, db())
    assert decision.verdict is Verdict.CONFLICT
    # The DELETE also conflicts with the UPDATE pairwise (same partition); the append via the 3-way rule.
    assert decision.conflicts_with == (0, 1)
    assert "db.multi_reader_append" in decision.rules
    # Only the append is in conflict when the DML pair itself is compatible (row-level table).
    rows = [Operation(K.INSERT), Operation(K.UPDATE, "id = 1")]
    second = decide(Operation(K.DELETE, "id = 2"), rows, DV_TABLE, db())
    assert second.conflicts_with == (0,)
    # Not in Serializable-only engines' WriteSerializable sense: delta-spark has no such rule, it's pairwise.
    serializable = TableConfig(properties={"delta.isolationLevel": "Serializable", **DV})
    assert (
        "db.multi_reader_append" not in decide(Operation(K.DELETE, "id = 2"), rows, serializable, db()).rules
    )


def test_decide_is_the_union_of_pairs_without_multi_way_rules() -> None:
    running = [Operation(K.UPDATE, f"date = '2024-01-0{i}'") for i in range(1, 6)]
    cand = Operation(K.DELETE, "date IN ('2024-01-02', '2024-01-04')")
    decision = decide(cand, running, PARTITIONED, db())
    expected = tuple(i for i, op in enumerate(running) if pair_verdict(cand, op, PARTITIONED, db()).conflict)
    assert decision.conflicts_with == expected == (1, 3)
