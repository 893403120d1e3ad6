"""Every write spec through DeltaRsEngine on real tables: rows, result, commit metadata."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from deltaguard.core.profiles import EngineName
from deltaguard.engines.deltars.engine import COMMIT_ID_KEY, DeltaRsEngine
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.specs import (
    AddColumnsSpec,
    AppendSpec,
    CreateSpec,
    DeleteSpec,
    MergeSpec,
    OptimizeSpec,
    OverwriteSpec,
    ReplaceWhereSpec,
    SetPropertiesSpec,
    UpdateSpec,
    WriteContext,
)
from tests.engines.helpers import ids, rows, table_rows


def test_profile_and_name(engine: DeltaRsEngine) -> None:
    import deltalake

    profile = engine.profile()
    assert profile.name is EngineName.DELTA_RS and profile.version == deltalake.__version__
    assert engine.name == "delta-rs"


def test_create_from_schema_then_append(engine: DeltaRsEngine, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    created = engine.write(
        uri,
        CreateSpec(
            schema={"id": "bigint", "day": "string", "v": "double"},
            partition_by=("day",),
            properties={"delta.isolationLevel": "WriteSerializable"},
        ),
    )
    assert (created.version, created.operation, created.committed) == (0, "CREATE TABLE", True)
    config = engine.table_config(uri)
    assert config.partition_columns == ("day",)
    assert config.get_property("delta.isolationLevel") == "WriteSerializable"
    appended = engine.write(uri, AppendSpec(rows([1, 2], "2024-01-01")))
    assert appended.version == 1 and appended.operation == "WRITE"
    assert appended.metrics["num_added_rows"] == 2
    assert appended.elapsed_s > 0
    assert ids(uri) == [1, 2]


def test_create_from_source_with_schema_casts(engine: DeltaRsEngine, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    source = pd.DataFrame({"id": [1, 2], "amount": ["1.50", "2.25"]})
    engine.write(uri, CreateSpec(schema={"id": "int", "amount": "decimal(10,2)"}, source=source))
    schema = DeltaTable(uri).to_pyarrow_table().schema
    assert str(schema.field("id").type) == "int32" and str(schema.field("amount").type) == "decimal128(10, 2)"
    with pytest.raises(InvalidWriteError, match="already exists"):
        engine.write(uri, CreateSpec(schema={"id": "int"}))


def test_create_replace(engine: DeltaRsEngine, partitioned: str) -> None:
    result = engine.write(
        partitioned,
        CreateSpec(source=pa.table({"k": ["x"]}), replace=True, properties={"delta.checkpointInterval": "7"}),
    )
    assert result.committed and result.version == 4  # CREATE OR REPLACE (3), then the data (4)
    assert DeltaTable(partitioned).history(1)[0]["operation"] == "WRITE"
    assert DeltaTable(partitioned).to_pyarrow_table().to_pylist() == [{"k": "x"}]
    config = engine.table_config(partitioned)
    assert config.partition_columns == () and dict(config.properties) == {"delta.checkpointInterval": "7"}
    engine.write(
        partitioned, CreateSpec(schema={"a": "int", "b": "string"}, partition_by=("b",), replace=True)
    )
    assert engine.table_config(partitioned).partition_columns == ("b",)
    assert DeltaTable(partitioned).to_pyarrow_table().num_rows == 0


def test_append_creates_a_missing_table(engine: DeltaRsEngine, tmp_path: Path) -> None:
    uri = str(tmp_path / "new")
    result = engine.write(uri, AppendSpec(rows([5], "2024-02-01"), partition_by=("day",)))
    assert result.version == 0
    assert engine.table_config(uri).partition_columns == ("day",)


def test_append_checks_declared_partition_values(engine: DeltaRsEngine, partitioned: str) -> None:
    engine.write(partitioned, AppendSpec(rows([5], "2024-01-03"), partition_values={"day": "2024-01-03"}))
    mixed = pa.concat_tables([rows([6], "2024-01-03"), rows([7], "2024-01-04")])
    with pytest.raises(InvalidWriteError, match="partition_values"):
        engine.write(partitioned, AppendSpec(mixed, partition_values={"day": "2024-01-03"}))
    assert ids(partitioned) == [1, 2, 3, 4, 5]


def test_overwrite(engine: DeltaRsEngine, partitioned: str) -> None:
    result = engine.write(partitioned, OverwriteSpec(rows([9], "2024-03-01")))
    assert result.operation == "WRITE" and result.version == 3
    assert ids(partitioned) == [9]


def test_replace_where(engine: DeltaRsEngine, partitioned: str) -> None:
    engine.write(partitioned, ReplaceWhereSpec(rows([10, 11], "2024-01-01"), "day = '2024-01-01'"))
    assert ids(partitioned) == [3, 4, 10, 11]
    with pytest.raises(InvalidWriteError):  # rows outside the predicate: delta-rs refuses, nothing written
        engine.write(partitioned, ReplaceWhereSpec(rows([12], "2024-01-09"), "day = '2024-01-01'"))
    assert DeltaTable(partitioned).version() == 3


def test_merge_upsert_and_delete_clauses(engine: DeltaRsEngine, partitioned: str) -> None:
    source = pa.table({"id": pa.array([1, 5], pa.int64()), "day": ["2024-01-01"] * 2, "v": [100.0, 500.0]})
    result = engine.write(
        partitioned,
        MergeSpec(
            source,
            "t.id = s.id",
            target_partition_values={"day": "2024-01-01"},
            matched_update={"v": "s.v"},
            not_matched_insert_all=True,
        ),
    )
    assert result.operation == "MERGE" and result.metrics["num_target_rows_updated"] == 1
    assert result.metrics["num_target_rows_inserted"] == 1
    assert {r["id"]: r["v"] for r in table_rows(partitioned)} == {1: 100.0, 2: 2.0, 3: 3.0, 4: 4.0, 5: 500.0}
    engine.write(
        partitioned,
        MergeSpec(source, "t.id = s.id", matched_delete=True, matched_condition="s.v > 400"),
    )
    assert ids(partitioned) == [1, 2, 3, 4]
    engine.write(
        partitioned,
        MergeSpec(
            source.slice(0, 1),
            "t.id = s.id",
            target_partition_values={"day": "2024-01-01"},
            not_matched_by_source_delete=True,
        ),
    )
    # the declared target partition limits NOT MATCHED BY SOURCE too: 2024-01-02 is untouched
    assert ids(partitioned) == [1, 3, 4]


def test_merge_target_partition_value_stays_a_literal(engine: DeltaRsEngine, partitioned: str) -> None:
    """``x' OR '1'='1`` must match nothing: if it escaped the literal it would update every row."""
    before = table_rows(partitioned)
    source = pa.table(
        {"id": pa.array([1, 2, 3, 4], pa.int64()), "day": ["x' OR '1'='1"] * 4, "v": [-1.0] * 4}
    )
    result = engine.write(
        partitioned,
        MergeSpec(
            source, "t.id = s.id", target_partition_values={"day": "x' OR '1'='1"}, matched_update_all=True
        ),
    )
    assert result.metrics["num_target_rows_updated"] == 0
    assert not result.committed  # nothing matched, so delta-rs committed nothing
    assert table_rows(partitioned) == before


def test_merge_quoted_partition_value_matches_exactly_its_partition(
    engine: DeltaRsEngine, tmp_path: Path
) -> None:
    """A value with quotes is escaped, not dropped: it matches its own partition and nothing else."""
    uri = str(tmp_path / "quoted")
    tricky = "x' OR '1'='1"
    engine.write(
        uri, AppendSpec(pa.concat_tables([rows([1], tricky), rows([2], "x"), rows([3], "1")]), ("day",))
    )
    source = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "day": [tricky, "x", "1"], "v": [-1.0] * 3})
    result = engine.write(
        uri,
        MergeSpec(
            source, "t.id = s.id", target_partition_values={"day": tricky}, matched_update={"v": "s.v"}
        ),
    )
    assert result.committed and result.metrics["num_target_rows_updated"] == 1
    assert {r["id"]: r["v"] for r in table_rows(uri)} == {1: -1.0, 2: 2.0, 3: 3.0}


def test_merge_with_date_partition_value(engine: DeltaRsEngine, tmp_path: Path) -> None:
    uri = str(tmp_path / "dated")
    data = pa.table(
        {"id": pa.array([1, 2], pa.int64()), "d": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2)])}
    )
    engine.write(uri, AppendSpec(data, partition_by=("d",)))
    source = pa.table(
        {"id": pa.array([1, 2], pa.int64()), "d": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2)])}
    )
    result = engine.write(
        uri,
        MergeSpec(
            source, "t.id = s.id", target_partition_values={"d": dt.date(2024, 1, 1)}, matched_delete=True
        ),
    )
    assert result.metrics["num_target_rows_deleted"] == 1
    assert ids(uri) == [2]


def test_update_and_delete(engine: DeltaRsEngine, partitioned: str) -> None:
    updated = engine.write(partitioned, UpdateSpec({"v": "v * 10"}, "day = '2024-01-02'"))
    assert updated.operation == "UPDATE" and updated.metrics["num_updated_rows"] == 2
    assert {r["id"]: r["v"] for r in table_rows(partitioned)} == {1: 1.0, 2: 2.0, 3: 30.0, 4: 40.0}
    deleted = engine.write(partitioned, DeleteSpec("id = 1"))
    assert deleted.operation == "DELETE" and deleted.metrics["num_deleted_rows"] == 1
    assert ids(partitioned) == [2, 3, 4]
    engine.write(partitioned, DeleteSpec())
    assert ids(partitioned) == []


def test_delete_matching_nothing_commits_nothing(engine: DeltaRsEngine, partitioned: str) -> None:
    result = engine.write(partitioned, DeleteSpec("id = 999"))
    assert not result.committed and result.version == 2
    assert DeltaTable(partitioned).version() == 2


def test_optimize_compact_with_partition_filter_and_zorder(engine: DeltaRsEngine, partitioned: str) -> None:
    engine.write(partitioned, AppendSpec(rows([5], "2024-01-01")))
    compacted = engine.write(partitioned, OptimizeSpec(partition_filters={"day": "2024-01-01"}))
    assert compacted.operation == "OPTIMIZE" and compacted.metrics["numFilesRemoved"] == 2
    assert compacted.metrics["numFilesAdded"] == 1
    zordered = engine.write(partitioned, OptimizeSpec(zorder_by=("id", "v")))
    assert zordered.operation == "OPTIMIZE" and zordered.version == compacted.version + 1  # type: ignore[operator]
    assert ids(partitioned) == [1, 2, 3, 4, 5]


def test_set_properties(engine: DeltaRsEngine, partitioned: str) -> None:
    result = engine.write(partitioned, SetPropertiesSpec({"delta.isolationLevel": "Serializable"}))
    assert result.operation == "SET TBLPROPERTIES" and result.version == 3
    assert engine.table_config(partitioned).properties["delta.isolationLevel"] == "Serializable"


def test_add_columns(engine: DeltaRsEngine, partitioned: str) -> None:
    result = engine.write(partitioned, AddColumnsSpec({"note": "string", "price": "decimal(10,2)"}))
    assert result.operation == "ADD COLUMN"
    names = [f.name for f in DeltaTable(partitioned).schema().fields]
    assert names == ["id", "day", "v", "note", "price"]
    with pytest.raises(InvalidWriteError, match="already exists"):
        engine.write(partitioned, AddColumnsSpec({"NOTE": "string"}))


def test_add_columns_if_not_exists_overlapping_runs(engine: DeltaRsEngine, partitioned: str) -> None:
    """Two runs of one pipeline add the same column: the first commits, the second (its own app id, as a
    run for another date has) finds the column there and commits nothing instead of failing; a spec naming
    a present and an absent column adds only the absent one."""
    spec = AddColumnsSpec({"note": "string"}, if_not_exists=True)
    first = engine.write(partitioned, spec, WriteContext(app_id="dag.add@run1", app_version=1))
    assert first.committed and first.operation == "ADD COLUMN"
    second = engine.write(partitioned, spec, WriteContext(app_id="dag.add@run2", app_version=1))
    assert (second.committed, second.version) == (False, first.version)
    assert DeltaTable(partitioned).version() == first.version
    both = engine.write(
        partitioned, AddColumnsSpec({"NOTE": "string", "price": "bigint"}, if_not_exists=True)
    )
    assert both.committed and both.version == first.version + 1
    assert [f.name for f in DeltaTable(partitioned).schema().fields] == ["id", "day", "v", "note", "price"]


def test_commit_metadata_in_history(engine: DeltaRsEngine, partitioned: str) -> None:
    context = WriteContext(
        app_id="dag.task", app_version=7, commit_metadata={"airflow.run_id": "r1", "lease": "L9"}
    )
    specs = [
        AppendSpec(rows([5], "2024-01-01")),
        OptimizeSpec(),  # compacts the two files of 2024-01-01
        UpdateSpec({"v": "v + 1"}, "id = 1"),
        DeleteSpec("id = 2"),
        SetPropertiesSpec({"delta.appendOnly": "false"}),
        AddColumnsSpec({"extra": "int"}),
    ]
    for number, spec in enumerate(specs):
        result = engine.write(
            partitioned,
            spec,
            WriteContext(
                app_id=f"{context.app_id}{number}", app_version=7, commit_metadata=context.commit_metadata
            ),
        )
        assert result.committed
        commit = DeltaTable(partitioned).history(1)[0]
        assert commit["version"] == result.version
        assert commit["airflow.run_id"] == "r1" and commit["lease"] == "L9"
        assert commit["deltaguard.app_id"] == f"dag.task{number}" and commit["deltaguard.app_version"] == 7
        assert commit["deltaguard.operation"] == spec.operation().kind.value
        assert len(commit[COMMIT_ID_KEY]) == 32
