"""Statements outside the two tables of "Isolation levels and write conflicts" that engines do conflict on.

Each case is a pair of Spark SQL statements on one table and the engines on which they conflict; the model
must never answer ``no_conflict`` there. The delta-rs outcomes were reproduced with real tables and stale
snapshots (``tests/engines/test_deltars_scopes.py``); the delta-spark ones follow ``OptimisticTransaction``
/ ``ConflictChecker`` (ADR 0012). A few controls check the model did not simply give up.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from deltaguard.core.model import decide
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.sql.classify import classify_sql
from deltaguard.core.table_config import TableConfig

DELTA_RS = EngineProfile(EngineName.DELTA_RS, "1.6.6")
DELTA_SPARK = EngineProfile(EngineName.DELTA_SPARK, "3.2.0")
DATABRICKS = EngineProfile(EngineName.DATABRICKS, "14.3")
ALL = (DELTA_RS, DELTA_SPARK, DATABRICKS)
SPARKS = (DELTA_SPARK, DATABRICKS)

PARTITIONED = TableConfig(partition_columns=("date",))
ROW_LEVEL = TableConfig(
    properties={"delta.enableDeletionVectors": "true"},
    column_types=(("id", "long"), ("city", "string"), ("address", "complex"), ("tags", "complex")),
)


def _conflict(first: str, second: str, profile: EngineProfile, table: TableConfig = PARTITIONED) -> bool:
    a, b = classify_sql(first).operation, classify_sql(second).operation
    forward = decide(a, [b], table, profile)
    backward = decide(b, [a], table, profile)
    assert forward.verdict == backward.verdict, "the decision must not depend on which one is running"
    if forward.conflict:
        assert forward.reasons, "a conflict needs a reason"
    return forward.conflict


MOVES = [
    (
        "UPDATE t SET date = '2024-01-03' WHERE date = '2024-01-01'",
        "DELETE FROM t WHERE date = '2024-01-03'",
    ),
    (
        "UPDATE t SET date = date_add(date, 2), v = 1 WHERE date = '2024-01-01'",
        "DELETE FROM t WHERE date = '2024-01-03'",
    ),
    (
        "MERGE INTO t USING s ON t.id = s.id AND t.date = '2024-01-01' "
        "WHEN MATCHED THEN UPDATE SET t.date = '2024-01-03'",
        "DELETE FROM t WHERE date = '2024-01-03'",
    ),
    (
        "MERGE INTO t USING s ON t.id = s.id AND t.date = '2024-01-01' WHEN NOT MATCHED THEN INSERT *",
        "DELETE FROM t WHERE date = '2024-01-02'",
    ),
    (
        "MERGE INTO t USING s ON t.id = s.id AND t.date = '2024-01-01' "
        "WHEN NOT MATCHED THEN INSERT (id, date) VALUES (s.id, s.date)",
        "UPDATE t SET v = 0 WHERE date = '2024-01-02'",
    ),
]


@pytest.mark.parametrize("profile", ALL, ids=lambda p: p.name.value)
@pytest.mark.parametrize(("first", "second"), MOVES)
def test_rows_written_outside_the_read_predicate_conflict(
    first: str, second: str, profile: EngineProfile
) -> None:
    assert _conflict(first, second, profile)


@pytest.mark.parametrize("profile", ALL, ids=lambda p: p.name.value)
def test_rows_that_stay_in_their_partition_do_not_widen_the_scope(profile: EngineProfile) -> None:
    update = "UPDATE t SET v = v + 1 WHERE date = '2024-01-01'"
    fixed_insert = (
        "MERGE INTO t USING s ON t.id = s.id AND t.date = '2024-01-01' "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (id, date) VALUES (s.id, '2024-01-01')"
    )
    delete = "DELETE FROM t WHERE date = '2024-01-02'"
    assert not _conflict(update, delete, profile)
    assert not _conflict(fixed_insert, delete, profile)


SELF_READS = [
    "INSERT OVERWRITE t PARTITION (date = '2024-01-01') SELECT id, v FROM t WHERE date = '2024-01-02'",
    "INSERT INTO t REPLACE WHERE date = '2024-01-01' SELECT id, '2024-01-01', v FROM t WHERE date = '2024-01-02'",
    "MERGE INTO t USING t AS s ON t.id = s.id AND t.date = '2024-01-01' WHEN MATCHED THEN UPDATE SET v = s.v",
    "MERGE INTO t USING (SELECT * FROM db.t WHERE date = '2024-01-02') s ON t.id = s.id AND t.date = '2024-01-01' "
    "WHEN MATCHED THEN DELETE",
    "WITH src AS (SELECT * FROM t WHERE date = '2024-01-02') MERGE INTO t USING src ON t.id = src.id "
    "AND t.date = '2024-01-01' WHEN MATCHED THEN DELETE",
    "DELETE FROM t WHERE date = '2024-01-01' AND id IN (SELECT id FROM t WHERE date = '2024-01-02')",
    "DELETE FROM t WHERE date = '2024-01-01' AND EXISTS "
    "(SELECT 1 FROM t AS o WHERE o.id = t.id AND o.date = '2024-01-02')",
    "UPDATE t SET v = 1 WHERE date = '2024-01-01' AND id IN (SELECT id FROM t WHERE date = '2024-01-02')",
]


@pytest.mark.parametrize("profile", ALL, ids=lambda p: p.name.value)
@pytest.mark.parametrize("statement", SELF_READS)
def test_statements_reading_their_own_table_read_it_all(statement: str, profile: EngineProfile) -> None:
    operation = classify_sql(statement).operation
    assert operation.reads_target
    assert _conflict(statement, "DELETE FROM t WHERE date = '2024-01-02'", profile)


@pytest.mark.parametrize("source", ["IDENTIFIER(:source)", "${source_table}", "read_files('/lake/t')"])
def test_a_relation_that_is_not_a_plain_name_may_be_the_target(source: str) -> None:
    statement = (
        f"MERGE INTO t USING {source} AS s ON t.id = s.id AND t.date = '2024-01-01' WHEN MATCHED THEN DELETE"
    )
    assert classify_sql(statement).operation.reads_target


def test_a_subquery_over_another_table_is_not_a_self_read() -> None:
    operation = classify_sql(
        "DELETE FROM t WHERE date = '2024-01-01' AND id IN (SELECT id FROM other WHERE date = '2024-01-02')"
    ).operation
    assert not operation.reads_target


COARSE_PRUNING = [
    (
        "DELETE FROM t WHERE (date = '2024-01-01' AND id = 1) OR (date = '2024-01-02' AND id = 2)",
        "2024-01-03",
    ),
    ("DELETE FROM t WHERE NOT (date = '2024-01-01' OR id = 1)", "2024-01-01"),
    (
        "MERGE INTO t USING s ON t.id = s.id AND (t.date = '2024-01-01' OR t.id = 7) WHEN MATCHED THEN DELETE",
        "2024-01-02",
    ),
]


@pytest.mark.parametrize("profile", SPARKS, ids=lambda p: p.name.value)
@pytest.mark.parametrize(("statement", "other_partition"), COARSE_PRUNING)
def test_spark_prunes_only_by_top_level_partition_conjuncts(
    statement: str, other_partition: str, profile: EngineProfile
) -> None:
    assert _conflict(statement, f"DELETE FROM t WHERE date = '{other_partition}'", profile)


@pytest.mark.parametrize(("statement", "other_partition"), COARSE_PRUNING[:2])
def test_delta_rs_prunes_disjunctions_by_partition_values(statement: str, other_partition: str) -> None:
    # Measured on delta-rs 1.6.6 with stale snapshots: both commit in either order.
    assert not _conflict(statement, f"DELETE FROM t WHERE date = '{other_partition}'", DELTA_RS)


@pytest.mark.parametrize("profile", ALL, ids=lambda p: p.name.value)
def test_a_struct_field_named_like_the_partition_column_is_not_the_partition(profile: EngineProfile) -> None:
    assert _conflict(
        "UPDATE t SET v = 1 WHERE meta.date = '2024-01-01'",
        "DELETE FROM t WHERE date = '2024-01-02'",
        profile,
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("DELETE FROM t WHERE address.city = 'Berlin'", "DELETE FROM t WHERE city = 'Paris'"),
        ("DELETE FROM t WHERE tags = array('a')", "DELETE FROM t WHERE tags = array('b')"),
        ("DELETE FROM t WHERE s = named_struct('k', 1)", "DELETE FROM t WHERE s = named_struct('k', 2)"),
        ("DELETE FROM t WHERE m = map('k', 1)", "DELETE FROM t WHERE m = map('k', 2)"),
        # one value of a STRING column, '2024-01-05 12:00', satisfies both (Spark casts for the DATE literal)
        ("DELETE FROM t WHERE s > '2024-01-05'", "DELETE FROM t WHERE s = DATE '2024-01-05'"),
    ],
)
def test_row_level_conditions_that_are_not_understood_conflict(first: str, second: str) -> None:
    assert _conflict(first, second, DATABRICKS, ROW_LEVEL)


def test_row_level_disjoint_plain_conditions_stay_compatible() -> None:
    assert not _conflict(
        "DELETE FROM t WHERE city = 'Berlin'", "DELETE FROM t WHERE city = 'Paris'", DATABRICKS, ROW_LEVEL
    )


@pytest.mark.parametrize(
    "other", ["/chk/a/", "file:/chk/a", "file:///chk/a", "file://localhost/chk/a", "/chk//a"]
)
def test_one_checkpoint_spelt_differently_is_one_checkpoint(other: str) -> None:
    first = Operation(OperationKind.STREAMING_WRITE, checkpoint_location="/chk/a")
    second = Operation(OperationKind.STREAMING_WRITE, checkpoint_location=other)
    assert decide(first, [second], PARTITIONED, DELTA_SPARK).conflict


def test_different_checkpoints_stay_compatible() -> None:
    first = Operation(OperationKind.STREAMING_WRITE, checkpoint_location="/chk/a")
    second = Operation(OperationKind.STREAMING_WRITE, checkpoint_location="/chk/b")
    assert not decide(first, [second], PARTITIONED, DELTA_SPARK).conflict


def test_a_pair_committed_by_two_engines_needs_both_engines_consent() -> None:
    # delta-spark alone: a blind append beside a DELETE of another partition is fine; delta-rs appends are
    # never blind, so the running delta-rs DELETE fails (ConcurrentAppend) or the append does.
    running = Operation(OperationKind.DELETE, predicate="date = '2024-01-01'", engine=DELTA_RS)
    candidate = Operation(OperationKind.INSERT, predicate="date = '2024-01-02'")
    alone = Operation(OperationKind.DELETE, predicate="date = '2024-01-01'")
    assert not decide(candidate, [alone], PARTITIONED, DELTA_SPARK).conflict
    decision = decide(candidate, [running], PARTITIONED, DELTA_SPARK)
    assert decision.conflict
    assert any("delta-rs" in reason for reason in decision.reasons)
    # and the other way round: the delta-rs newcomer beside a running delta-spark write
    spark_running = Operation(OperationKind.INSERT, predicate="date = '2024-01-02'", engine=DELTA_SPARK)
    assert decide(alone, [spark_running], PARTITIONED, DELTA_RS).conflict


def test_a_delta_path_beside_a_table_name_may_be_the_target() -> None:
    statement = "MERGE INTO sales.daily AS t USING delta.`/lake/sales/daily` AS s ON t.id = s.id WHEN MATCHED THEN DELETE"
    assert classify_sql(statement).operation.reads_target
    other_path = (
        "MERGE INTO delta.`/lake/a` AS t USING delta.`/lake/b` AS s ON t.id = s.id WHEN MATCHED THEN DELETE"
    )
    assert not classify_sql(other_path).operation.reads_target
    same_path = "MERGE INTO delta.`/lake/a` AS t USING delta.`file:/lake/a/` AS s ON t.id = s.id WHEN MATCHED THEN DELETE"
    assert classify_sql(same_path).operation.reads_target


def test_row_level_concurrency_can_be_switched_off_for_heavy_load() -> None:
    first = Operation(OperationKind.DELETE, predicate="city = 'Berlin'")
    second = Operation(OperationKind.DELETE, predicate="city = 'Paris'")
    assert not decide(first, [second], ROW_LEVEL, DATABRICKS).conflict
    loaded = EngineProfile(EngineName.DATABRICKS, "14.3", row_level_off=True)
    decision = decide(first, [second], ROW_LEVEL, loaded)
    assert decision.conflict
    assert any("heavy load" in reason for reason in decision.reasons)


@pytest.mark.parametrize("kind", [OperationKind.REPLACE_WHERE, OperationKind.OVERWRITE])
def test_a_rewrite_beside_an_optimize_on_a_deletion_vector_table_conflicts(kind: OperationKind) -> None:
    table = TableConfig(partition_columns=("date",), properties={"delta.enableDeletionVectors": "true"})
    rewrite = Operation(
        kind, predicate="date = '2024-01-01'" if kind is OperationKind.REPLACE_WHERE else None
    )
    optimize = Operation(OperationKind.OPTIMIZE, predicate="date = '2024-01-01'")
    assert decide(rewrite, [optimize], table, DATABRICKS).conflict


def test_a_liquid_clustered_table_is_not_advised_to_be_partitioned() -> None:
    table = TableConfig(clustering_columns=("id",), properties={"delta.enableDeletionVectors": "false"})
    first = Operation(OperationKind.DELETE, predicate="id = 1")
    second = Operation(OperationKind.DELETE, predicate="id = 2")
    decision = decide(first, [second], table, DATABRICKS)
    assert decision.conflict
    assert not any("partition the table" in item for item in decision.advice)
    assert any("clustering columns" in item for item in decision.advice)


def test_a_check_document_declares_write_scopes_and_committing_engines() -> None:
    from deltaguard.commands.check import check_documents

    base = {"table": {"partition_columns": ["date"]}}
    merge = {"operation": "MERGE", "merge_condition": "t.id = s.id AND t.date = '2024-01-01'"}
    delete = {"operation": "DELETE", "predicate": "date = '2024-01-02'"}
    spark = {"name": "delta-spark", "version": "3.2.0"}
    in_place = {**merge, "inserts": "date = '2024-01-01'"}
    declared_in_place = check_documents({**base, "engine": spark, "running": [in_place], "candidate": delete})
    inserting = check_documents(
        {**base, "engine": spark, "running": [{**merge, "inserts": None}], "candidate": delete}
    )
    # Saying nothing of the inserted rows leaves them anywhere: the source decides where they land.
    undeclared = check_documents({**base, "engine": spark, "running": [merge], "candidate": delete})
    assert (declared_in_place["verdict"], inserting["verdict"], undeclared["verdict"]) == (
        "no_conflict",
        "conflict",
        "conflict",
    )
    mixed = check_documents(
        {
            **base,
            "engine": spark,
            "running": [{**delete, "engine": {"name": "delta-rs", "version": "1.6.6"}}],
            "candidate": {"operation": "INSERT", "predicate": "date = '2024-01-03'"},
        }
    )
    assert mixed["verdict"] == "conflict"


def test_one_table_path_spelt_differently_is_one_table_in_a_check_document() -> None:
    from deltaguard.commands.check import check_documents
    from deltaguard.writes.table_uri import table_key

    assert table_key("file:/lake/t/") == table_key("/lake/t") == table_key("file:///lake//t")
    verdict = check_documents(
        {
            "engine": {"name": "delta-spark", "version": "3.2.0"},
            "running": [{"sql": "DELETE FROM delta.`/lake/t/` WHERE id = 1"}],
            "candidate": {"sql": "DELETE FROM delta.`file:/lake/t` WHERE id = 2"},
        }
    )
    assert verdict["verdict"] == "conflict"


@pytest.mark.parametrize("mode", ["name", "id", "Name"])
def test_delta_rs_on_a_column_mapped_table_separates_only_two_appends(mode: str) -> None:
    # Measured on deltalake 1.6.6 (tests/engines/test_deltars_column_mapping.py): a stale DELETE/UPDATE/
    # MERGE beside any concurrent commit panics or fails, whatever the partitions.
    table = TableConfig(partition_columns=("date",), properties={"delta.columnMapping.mode": mode})
    assert _conflict(
        "DELETE FROM t WHERE date = '2024-01-01'",
        "UPDATE t SET v = 1 WHERE date = '2024-01-02'",
        DELTA_RS,
        table,
    )
    assert _conflict(
        "INSERT INTO t VALUES (1, '2024-01-03', 0)",
        "DELETE FROM t WHERE date = '2024-01-01'",
        DELTA_RS,
        table,
    )
    assert not _conflict(
        "INSERT INTO t VALUES (1, '2024-01-03', 0)",
        "INSERT INTO t VALUES (2, '2024-01-04', 0)",
        DELTA_RS,
        table,
    )
    assert not _conflict(
        "DELETE FROM t WHERE date = '2024-01-01'",
        "UPDATE t SET v = 1 WHERE date = '2024-01-02'",
        DELTA_RS,
        TableConfig(partition_columns=("date",), properties={"delta.columnMapping.mode": "none"}),
    )


DOTTED = TableConfig(partition_columns=("a.b",))


@pytest.mark.parametrize("profile", ALL, ids=lambda p: p.name.value)
@pytest.mark.parametrize(
    "move",
    [
        "UPDATE t SET `a.b` = 'c' WHERE `a.b` = 'x'",
        "UPDATE t SET `A.B` = 'c', v = 1 WHERE `a.b` = 'x'",
        "MERGE INTO t USING s ON t.id = s.id AND t.`a.b` = 'x' WHEN MATCHED THEN UPDATE SET t.`a.b` = 'c'",
    ],
)
def test_a_quoted_dotted_column_is_one_column_not_a_struct_field(move: str, profile: EngineProfile) -> None:
    # Measured on delta-rs 1.6.6 (tests/engines/test_deltars_dotted_columns.py): the moved row lands in
    # partition 'c', so a stale DELETE of 'c' fails.
    assert _conflict(move, "DELETE FROM t WHERE `a.b` = 'c'", profile, DOTTED)
    # the dotted column still separates writes that do not move rows
    assert not _conflict(
        "UPDATE t SET v = 1 WHERE `a.b` = 'x'", "DELETE FROM t WHERE `a.b` = 'c'", profile, DOTTED
    )


@pytest.mark.parametrize("key", ["a.b", "A.b"])
def test_a_typed_key_with_dots_moves_the_column_of_that_name(key: str) -> None:
    # a spec's key names a column: "a.b" may be the column a.b (or a field of a), so its rows may move
    update = Operation(OperationKind.UPDATE, predicate="`a.b` = 'x'", assignments=((key, "'c'"),))
    delete = Operation(OperationKind.DELETE, predicate="`a.b` = 'c'")
    for profile in ALL:
        assert decide(update, [delete], DOTTED, profile).conflict


INT_PARTITION = TableConfig(partition_columns=("k",), column_types=(("k", "integer"), ("v", "long")))


@pytest.mark.parametrize("ansi", [False, None])
@pytest.mark.parametrize("engine", [DELTA_SPARK, DATABRICKS], ids=lambda p: p.name.value)
@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("DELETE FROM t WHERE k = '1.5'", "DELETE FROM t WHERE k = '1'"),
        ("DELETE FROM t WHERE k = ' 1'", "UPDATE t SET v = 1 WHERE k IN ('2', '1.9')"),
        ("DELETE FROM t WHERE k = '+2'", "DELETE FROM t WHERE k = '2'"),
    ],
)
def test_numeric_text_separates_nothing_unless_ansi_is_known_on(
    first: str, second: str, engine: EngineProfile, ansi: bool | None
) -> None:
    # Measured on delta-spark 4.4.0 with spark.sql.ansi.enabled=false: on an INT partition k = '1.5'
    # selects k = 1 (tests/spark/jars/test_session_settings_spark.py).
    profile = replace(engine, session_ansi=ansi)
    assert _conflict(first, second, profile, INT_PARTITION)


@pytest.mark.parametrize("engine", [DELTA_SPARK, DATABRICKS], ids=lambda p: p.name.value)
def test_plain_integer_text_and_string_columns_keep_their_precision(engine: EngineProfile) -> None:
    off = replace(engine, session_ansi=False)
    assert not _conflict("DELETE FROM t WHERE k = '2'", "DELETE FROM t WHERE k = '1'", off, INT_PARTITION)
    text = TableConfig(partition_columns=("k",), column_types=(("k", "string"),))
    assert not _conflict("DELETE FROM t WHERE k = '1.5'", "DELETE FROM t WHERE k = '1'", off, text)
    on = replace(engine, session_ansi=True)
    assert not _conflict("DELETE FROM t WHERE k = '1.5'", "DELETE FROM t WHERE k = '1'", on, INT_PARTITION)


def test_a_check_document_states_the_ansi_mode() -> None:
    from deltaguard.core.check_request import RequestError, parse_engine

    assert parse_engine({"name": "delta-spark", "version": "4.4.0", "ansi": False}).session_ansi is False
    assert parse_engine({"name": "databricks", "runtime": "15.4", "ansi": True}).session_ansi is True
    assert parse_engine({"name": "delta-spark", "version": "4.4.0"}).session_ansi is None
    with pytest.raises(RequestError):
        parse_engine({"name": "delta-spark", "version": "4.4.0", "ansi": "off"})


@pytest.mark.parametrize("ansi", [True, False, None])
def test_the_lease_store_keeps_the_ansi_mode(ansi: bool | None) -> None:
    from deltaguard.leases.codec import profile_from_json, profile_to_json

    profile = replace(DELTA_SPARK, session_ansi=ansi)
    assert profile_from_json(profile_to_json(profile)) == profile


def test_an_assignment_the_schema_does_not_resolve_may_change_any_column() -> None:
    typed = TableConfig(
        partition_columns=("a.b",), column_types=(("id", "long"), ("a.b", "string"), ("meta", "complex"))
    )
    delete = "DELETE FROM t WHERE `a.b` = 'c'"
    # `a`.`b` is field b of a column a the table does not have: not understood, so it may move rows anywhere
    assert _conflict("UPDATE t SET a.b = 'q' WHERE `a.b` = 'x'", delete, DELTA_SPARK, typed)
    # a struct field of a real column, and a column of any case, resolve
    assert not _conflict("UPDATE t SET meta.x = 1 WHERE `a.b` = 'x'", delete, DELTA_SPARK, typed)
    assert not _conflict("UPDATE t SET ID = 2 WHERE `a.b` = 'x'", delete, DELTA_SPARK, typed)
    assert _conflict("UPDATE t SET nothere = 2 WHERE `a.b` = 'x'", delete, DELTA_SPARK, typed)
