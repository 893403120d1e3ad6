"""Spark SQL statements are classified into operations, or rejected with a clear one-line error."""

from __future__ import annotations

import pytest

from deltaguard.core.operations import OperationKind
from deltaguard.core.sql.classify import ClassifiedStatement, SqlClassificationError, classify_sql
from deltaguard.core.sql.predicates import merge_target_predicate, parse_predicate, provably_disjoint

K = OperationKind


def classify(sql: str) -> ClassifiedStatement:
    result = classify_sql(sql)
    assert result.operation.sql == sql, "the original statement must be kept"
    return result


@pytest.mark.parametrize(
    ("sql", "kind", "table", "predicate", "reads_target"),
    [
        ("INSERT INTO sales.daily VALUES (1, 2)", K.INSERT, "sales.daily", None, False),
        ("INSERT INTO TABLE t SELECT * FROM staging", K.INSERT, "t", None, False),
        ("INSERT INTO t (a, b) VALUES (1, 2)", K.INSERT, "t", None, False),
        ("INSERT INTO `sales`.`daily` SELECT * FROM s", K.INSERT, "sales.daily", None, False),
        ("INSERT INTO delta.`/data/events` VALUES (1)", K.INSERT, "/data/events", None, False),
        ("INSERT INTO t PARTITION (d = '2024-01-01') VALUES (1)", K.INSERT, "t", "d = '2024-01-01'", False),
        # reading the same table makes the INSERT behave like MERGE
        ("INSERT INTO t SELECT * FROM t WHERE x = 1", K.INSERT, "t", None, True),
        ("INSERT INTO t SELECT * FROM s WHERE s.id NOT IN (SELECT id FROM t)", K.INSERT, "t", None, True),
        ("INSERT INTO sales.daily SELECT * FROM daily", K.INSERT, "sales.daily", None, True),
        ("INSERT INTO sales.daily SELECT * FROM other.daily", K.INSERT, "sales.daily", None, False),
        ("WITH c AS (SELECT * FROM t) INSERT INTO t SELECT * FROM c", K.INSERT, "t", None, True),
        ("INSERT INTO t WITH c AS (SELECT * FROM t) SELECT * FROM c", K.INSERT, "t", None, True),
        # overwrites
        ("INSERT OVERWRITE t SELECT * FROM s", K.OVERWRITE, "t", None, False),
        ("INSERT OVERWRITE TABLE t SELECT * FROM t", K.OVERWRITE, "t", None, True),
        ("INSERT OVERWRITE t PARTITION (p) SELECT * FROM s", K.OVERWRITE, "t", None, False),
        (
            "INSERT OVERWRITE t PARTITION (p = 'x', q = 1) SELECT * FROM s",
            K.REPLACE_WHERE,
            "t",
            "p = 'x' AND q = 1",
            False,
        ),
        ("INSERT OVERWRITE t PARTITION (p = 'x', q) SELECT * FROM s", K.REPLACE_WHERE, "t", "p = 'x'", False),
        (
            "INSERT INTO t REPLACE WHERE d >= '2024-01-01' SELECT * FROM s",
            K.REPLACE_WHERE,
            "t",
            "d >= '2024-01-01'",
            False,
        ),
        # UPDATE / DELETE
        ("UPDATE t SET a = 1 WHERE b = 2", K.UPDATE, "t", "b = 2", False),
        (
            "UPDATE sales.daily AS x SET a = a + 1 WHERE x.d = '2024-01-01'",
            K.UPDATE,
            "sales.daily",
            "d = '2024-01-01'",
            False,
        ),
        ("UPDATE t SET a = 1", K.UPDATE, "t", None, False),
        ("DELETE FROM t WHERE d < '2010-01-01'", K.DELETE, "t", "d < '2010-01-01'", False),
        ("DELETE FROM delta.`/data/events` WHERE a = 1", K.DELETE, "/data/events", "a = 1", False),
        ("DELETE FROM t", K.DELETE, "t", None, False),
        (
            "WITH c AS (SELECT 1 AS a) DELETE FROM t WHERE a IN (SELECT a FROM c)",
            K.DELETE,
            "t",
            "a IN (SELECT a FROM c)",
            False,
        ),
        ("INSERT INTO t BY NAME SELECT * FROM s", K.INSERT, "t", None, False),
        # OPTIMIZE / REORG
        ("OPTIMIZE t", K.OPTIMIZE, "t", None, False),
        ("OPTIMIZE t WHERE d = '2024-01-01'", K.OPTIMIZE, "t", "d = '2024-01-01'", False),
        (
            "OPTIMIZE delta.`/tmp/x y` WHERE d = 'a;b ZORDER' ZORDER BY (a, b);",
            K.OPTIMIZE,
            "/tmp/x y",
            "d = 'a;b ZORDER'",
            False,
        ),
        ("optimize t -- compact\n where d in (1, 2)", K.OPTIMIZE, "t", "d in (1, 2)", False),
        ("OPTIMIZE t FULL", K.OPTIMIZE, "t", None, False),
        ("REORG TABLE t APPLY (PURGE)", K.REORG_PURGE, "t", None, False),
        (
            "REORG TABLE db.t WHERE d >= '2024-01-01' APPLY (PURGE)",
            K.REORG_PURGE,
            "db.t",
            "d >= '2024-01-01'",
            False,
        ),
        (
            "REORG TABLE t APPLY (UPGRADE UNIFORM(ICEBERG_COMPAT_VERSION = 2))",
            K.REORG_UPGRADE,
            "t",
            None,
            False,
        ),
        # ALTER TABLE
        (
            "ALTER TABLE t SET TBLPROPERTIES ('delta.isolationLevel' = 'Serializable')",
            K.SET_TBLPROPERTIES,
            "t",
            None,
            False,
        ),
        ("ALTER TABLE t UNSET TBLPROPERTIES ('a')", K.SET_TBLPROPERTIES, "t", None, False),
        ("ALTER TABLE t ADD COLUMNS (c INT, d STRING)", K.ADD_COLUMNS, "t", None, False),
        ("ALTER TABLE t ADD COLUMN c INT", K.ADD_COLUMNS, "t", None, False),
        ("ALTER TABLE t DROP FEATURE deletionVectors", K.REORG_UPGRADE, "t", None, False),
        ("ALTER TABLE t DROP COLUMN c", K.ALTER_SCHEMA, "t", None, False),
        ("ALTER TABLE t DROP COLUMNS (c, d)", K.ALTER_SCHEMA, "t", None, False),
        ("ALTER TABLE t RENAME COLUMN a TO b", K.ALTER_SCHEMA, "t", None, False),
        ("ALTER TABLE t ALTER COLUMN a COMMENT 'x'", K.ALTER_SCHEMA, "t", None, False),
        ("ALTER TABLE t CHANGE COLUMN a a BIGINT", K.ALTER_SCHEMA, "t", None, False),
        ("ALTER TABLE t ADD CONSTRAINT positive CHECK (a > 0)", K.ALTER_SCHEMA, "t", None, False),
        ("ALTER TABLE t DROP CONSTRAINT positive", K.ALTER_SCHEMA, "t", None, False),
        ("ALTER TABLE t CLUSTER BY (a)", K.ALTER_SCHEMA, "t", None, False),
        ("alter table `db`.`t` cluster   by none", K.ALTER_SCHEMA, "db.t", None, False),
        # CREATE / REPLACE
        ("CREATE TABLE t (a INT) USING DELTA", K.CREATE_OR_REPLACE, "t", None, False),
        (
            "CREATE TABLE IF NOT EXISTS db.t (a INT) USING DELTA CLUSTER BY (a)",
            K.CREATE_OR_REPLACE,
            "db.t",
            None,
            False,
        ),
        ("CREATE OR REPLACE TABLE t AS SELECT 1 AS a", K.CREATE_OR_REPLACE, "t", None, False),
        ("CREATE TABLE t AS SELECT * FROM s", K.CREATE_OR_REPLACE, "t", None, False),
        ("REPLACE TABLE t (a INT) USING DELTA", K.CREATE_OR_REPLACE, "t", None, False),
    ],
)
def test_statement_forms(
    sql: str, kind: OperationKind, table: str, predicate: str | None, reads_target: bool
) -> None:
    result = classify(sql)
    assert result.operation.kind is kind
    assert result.table == table
    assert result.operation.predicate == predicate
    assert result.operation.reads_target is reads_target
    if predicate is not None:
        assert not parse_predicate(result.operation.predicate).is_everything


def test_optimize_keeps_its_zorder_columns() -> None:
    assert classify("OPTIMIZE t WHERE d = 1 ZORDER BY (a, b)").operation.zorder_by == ("a", "b")
    assert classify("OPTIMIZE t ZORDER BY a, b").operation.zorder_by == ("a", "b")
    assert classify("OPTIMIZE t").operation.zorder_by == ()


def test_merge_keeps_its_condition_and_target_alias() -> None:
    sql = (
        "MERGE INTO sales.daily AS t USING updates AS s "
        "ON s.user_id = t.user_id AND t.date = '2024-01-01' "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    result = classify(sql)
    operation = result.operation
    assert operation.kind is K.MERGE and result.table == "sales.daily"
    assert operation.merge_condition == "s.user_id = t.user_id AND t.date = '2024-01-01'"
    assert operation.target_alias == "t"
    target = merge_target_predicate(operation.merge_condition, operation.target_alias)
    assert provably_disjoint(target, parse_predicate("date = '2024-01-02'"), ["date"])


def test_merge_without_alias_uses_the_table_name() -> None:
    result = classify(
        "MERGE INTO db.events USING s ON events.id = s.id AND events.d = 1 WHEN MATCHED THEN DELETE"
    )
    assert result.operation.target_alias == "db.events"
    target = merge_target_predicate(result.operation.merge_condition or "", result.operation.target_alias)
    assert target.sql == "d = 1"


def test_merge_not_matched_by_source_reads_the_whole_target() -> None:
    sql = (
        "MERGE INTO t USING s ON t.id = s.id AND t.d = 1 "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED BY SOURCE THEN DELETE"
    )
    operation = classify(sql).operation
    assert operation.kind is K.MERGE
    assert operation.merge_condition is None
    assert merge_target_predicate(operation.merge_condition or "").is_everything


@pytest.mark.parametrize(
    ("sql", "fragment"),
    [
        ("", "empty"),
        ("  ;  ", "empty"),
        ("-- just a comment", "empty"),
        ("SELECT * FROM t", "SELECT is not a Delta write"),
        ("WITH c AS (SELECT 1) SELECT * FROM c", "SELECT is not a Delta write"),
        ("INSERT INTO t REPLACE USING (a) SELECT * FROM s", "USING clause is not classified"),
        ("INSERT INTO t DEFAULT VALUES", "DEFAULT clause is not classified"),
        ("UPDATE t SET a = s.a FROM s WHERE t.id = s.id", "FROM clause is not classified"),
        ("DELETE FROM t USING s WHERE t.id = s.id", "USING clause is not classified"),
        ("VACUUM t RETAIN 168 HOURS", "VACUUM is not a Delta write"),
        ("DROP TABLE t", "DROP is not a Delta write"),
        ("INSERT INTO t SELECT 1; DELETE FROM t", "2 statements"),
        ("UPDATE t SET a = 1 WHERE b =", "does not parse"),
        ("DELETE FROM t WHERE", "does not parse"),
        ("INSERT INTO t VALUES (1", "does not parse"),
        ("OPTIMIZE t WHERE", "WHERE has no condition"),
        ("OPTIMIZE t WHERE d = 1 garbage", "not a boolean condition"),
        ("OPTIMIZE t ZORDER BY", "ZORDER BY has no columns"),
        ("OPTIMIZE t ZORDER BY (a, b) extra", "unexpected EXTRA"),
        ("OPTIMIZE", "expected a table name"),
        ("REORG TABLE t APPLY (SHRINK)", "neither PURGE nor UPGRADE"),
        ("REORG t APPLY (PURGE)", "expected TABLE"),
        ("ALTER TABLE t RENAME TO u", "RENAME TO is not a change"),
        ("ALTER TABLE t SET LOCATION '/x'", "SET LOCATION is not a change"),
        ("ALTER TABLE t SET TBLPROPERTIES", "incomplete"),
        ("ALTER VIEW v AS SELECT 1", "expected TABLE"),
        ("CREATE VIEW v AS SELECT 1", "only tables"),
        ("SELECT 'unterminated", "cannot classify"),
    ],
)
def test_unclassifiable_statements_raise_one_line_errors(sql: str, fragment: str) -> None:
    with pytest.raises(SqlClassificationError) as caught:
        classify_sql(sql)
    message = str(caught.value)
    assert fragment in message
    assert "\n" not in message


def test_a_non_string_is_an_error_and_errors_are_value_errors() -> None:
    assert issubclass(SqlClassificationError, ValueError)
    with pytest.raises(SqlClassificationError, match="must be text"):
        classify_sql(None)  # type: ignore[arg-type]
