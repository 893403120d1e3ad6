"""Lineage read from real delta-rs 1.6.6 tables: the operation name each kind of write records, the
lifecycle change it maps to, and the schema and statistics read from its commit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, TableFeatures, write_deltalake
from deltalake.schema import Field, PrimitiveType, Schema

from deltaguard.lineage.record import (
    OutputStatistics,
    SchemaField,
    WriteRecord,
    commit_statistics,
    latest_commit,
    read_commit_facts,
    schema_fields,
)


def _rows(n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64()), "p": ["a"] * n})


def _table(path: Path) -> str:
    write_deltalake(str(path), _rows(4), partition_by=["p"])
    return str(path)


#: each kind of write delta-rs makes -> (the operation its commit records, the lifecycle change)
KINDS: dict[str, tuple[Callable[[str], Any], str, str | None]] = {
    "append": (lambda t: write_deltalake(t, _rows(2), mode="append"), "WRITE", None),
    "overwrite": (lambda t: write_deltalake(t, _rows(2), mode="overwrite"), "WRITE", "OVERWRITE"),
    "merge": (
        lambda t: (
            DeltaTable(t)
            .merge(_rows(2), "t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .execute()
        ),
        "MERGE",
        None,
    ),
    "update": (lambda t: DeltaTable(t).update({"id": "id + 10"}, predicate="id = 1"), "UPDATE", None),
    "delete": (lambda t: DeltaTable(t).delete("id = 1"), "DELETE", None),
    "optimize": (
        lambda t: (write_deltalake(t, _rows(1), mode="append"), DeltaTable(t).optimize.compact()),
        "OPTIMIZE",
        None,
    ),
    "add_columns": (
        lambda t: DeltaTable(t).alter.add_columns([Field("x", PrimitiveType("integer"))]),
        "ADD COLUMN",
        "ALTER",
    ),
    "set_properties": (
        lambda t: DeltaTable(t).alter.set_table_properties({"delta.appendOnly": "false"}),
        "SET TBLPROPERTIES",
        "ALTER",
    ),
    "add_constraint": (
        lambda t: DeltaTable(t).alter.add_constraint({"pos": "id >= 0"}),
        "ADD CONSTRAINT",
        "ALTER",
    ),
    "add_feature": (
        lambda t: DeltaTable(t).alter.add_feature(
            [TableFeatures.TimestampWithoutTimezone], allow_protocol_versions_increase=True
        ),
        "ADD FEATURE",
        "ALTER",
    ),
    "set_description": (
        lambda t: DeltaTable(t).alter.set_table_description("d"),
        "UPDATE TABLE METADATA",
        "ALTER",
    ),
    "column_metadata": (
        lambda t: DeltaTable(t).alter.set_column_metadata("id", {"comment": "c"}),
        "UPDATE FIELD METADATA",
        "ALTER",
    ),
    "replace": (
        lambda t: DeltaTable.create(t, schema=pa.schema([("a", pa.int64())]), mode="overwrite"),
        "CREATE OR REPLACE TABLE",
        "OVERWRITE",
    ),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_delta_rs_write_records_the_operation_its_lifecycle_is_mapped_from(tmp_path, kind) -> None:
    write, operation, lifecycle = KINDS[kind]
    table = _table(tmp_path / "t")
    write(table)
    version, recorded = latest_commit(table, None)
    assert recorded == operation  # measured, not assumed: the name delta-rs wrote to the log
    mode = "overwrite" if kind == "overwrite" else None
    record = WriteRecord.build(table, _Result(version, recorded), mode=mode)
    assert record.lifecycle == lifecycle


def test_dropping_not_null_is_a_change_column(tmp_path) -> None:
    table = str(tmp_path / "t")
    DeltaTable.create(table, schema=Schema([Field("a", PrimitiveType("long"), nullable=False)]))
    DeltaTable(table).alter.drop_column_not_null("a")
    version, operation = latest_commit(table, None)
    assert operation == "CHANGE COLUMN"
    assert WriteRecord.build(table, _Result(version, operation)).lifecycle == "ALTER"


def test_a_new_table_is_a_create_and_a_restore_an_overwrite(tmp_path) -> None:
    table = str(tmp_path / "t")
    DeltaTable.create(table, schema=pa.schema([("a", pa.int64())]))
    assert latest_commit(table, None) == (0, "CREATE TABLE")
    write_deltalake(table, pa.table({"a": [1]}), mode="append")
    DeltaTable(table).restore(0)
    version, operation = latest_commit(table, None)
    assert operation == "RESTORE"
    assert WriteRecord.build(table, _Result(version, operation)).lifecycle == "OVERWRITE"


def test_the_statistics_are_the_files_the_commit_added(tmp_path) -> None:
    table = _table(tmp_path / "t")
    write_deltalake(
        table, pa.table({"id": pa.array([7, 8, 9], pa.int64()), "p": ["a", "b", "b"]}), mode="append"
    )
    dt = DeltaTable(table)
    added = [a for a in pa.table(dt.get_add_actions(flatten=True)).to_pylist() if a["num_records"] in (1, 2)]
    facts = read_commit_facts(table, 1, None)
    assert facts.statistics == OutputStatistics(
        file_count=2, size=sum(a["size_bytes"] for a in added), row_count=3
    )
    assert facts.schema == (SchemaField("id", "long"), SchemaField("p", "string"))
    # two commits since the table was new: both appends counted
    assert read_commit_facts(table, 1, None, since=-1).statistics.row_count == 7


def test_nothing_written_reads_no_statistics_but_the_schema(tmp_path) -> None:
    table = _table(tmp_path / "t")
    facts = read_commit_facts(table, 0, None, since=0)
    assert facts.statistics is None and facts.schema is not None


def test_an_unreadable_table_gives_no_facts_instead_of_an_error(tmp_path) -> None:
    facts = read_commit_facts(str(tmp_path / "missing"), 3, None)
    assert facts.schema is None and facts.statistics is None
    assert latest_commit(str(tmp_path / "missing"), None) is None


def test_a_file_without_statistics_leaves_the_row_count_unknown() -> None:
    lines = [
        '{"commitInfo": {}}',
        '{"add": {"path": "a", "size": 10, "stats": "{\\"numRecords\\": 4}"}}',
        '{"add": {"path": "b", "size": 5}}',
    ]
    assert commit_statistics(lines) == OutputStatistics(2, 15, None)


def test_nested_columns_keep_their_fields() -> None:
    schema = {
        "type": "struct",
        "fields": [
            {"name": "s", "type": {"type": "struct", "fields": [{"name": "a", "type": "integer"}]}},
            {
                "name": "l",
                "type": {
                    "type": "array",
                    "elementType": {"type": "struct", "fields": [{"name": "b", "type": "string"}]},
                },
            },
        ],
    }
    assert schema_fields(schema) == (
        SchemaField("s", "struct", (SchemaField("a", "integer"),)),
        SchemaField("l", "array", (SchemaField("b", "string"),)),
    )


class _Result:
    def __init__(self, version: int, operation: str) -> None:
        self.version, self.operation = version, operation
