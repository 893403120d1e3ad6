"""Idempotent retries and conflict translation, on real tables with real concurrent commits."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.errors import ConflictKind, DeltaConflictError, TableAccessError
from deltaguard.engines.specs import (
    AddColumnsSpec,
    AppendSpec,
    DeleteSpec,
    OptimizeSpec,
    SetPropertiesSpec,
    UpdateSpec,
    WriteContext,
)
from tests.engines.helpers import ids, rows


def ctx(version: int, app_id: str = "dag.task") -> WriteContext:
    return WriteContext(app_id=app_id, app_version=version, commit_metadata={"who": "test"})


def test_retry_with_same_pair_is_a_noop_reporting_the_original(
    engine: DeltaRsEngine, partitioned: str
) -> None:
    first = engine.write(partitioned, AppendSpec(rows([5], "2024-01-01")), ctx(3))
    engine.write(partitioned, AppendSpec(rows([6], "2024-01-01")))  # someone else commits afterwards
    again = engine.write(partitioned, AppendSpec(rows([5], "2024-01-01")), ctx(3))
    assert again.duplicate and not first.duplicate
    assert again.version == first.version == 3
    assert again.operation == "WRITE" and again.metrics["num_added_rows"] == 1
    lower = engine.write(partitioned, AppendSpec(rows([5], "2024-01-01")), ctx(2))
    assert lower.duplicate
    assert ids(partitioned) == [1, 2, 3, 4, 5, 6]
    higher = engine.write(partitioned, AppendSpec(rows([7], "2024-01-01")), ctx(4))
    assert not higher.duplicate and higher.version == 5
    assert DeltaTable(partitioned).transaction_version("dag.task") == 4
    assert ids(partitioned) == [1, 2, 3, 4, 5, 6, 7]


def test_other_app_ids_are_independent(engine: DeltaRsEngine, partitioned: str) -> None:
    engine.write(partitioned, UpdateSpec({"v": "v + 1"}, "id = 1"), ctx(1, "a"))
    result = engine.write(partitioned, UpdateSpec({"v": "v + 1"}, "id = 1"), ctx(1, "b"))
    assert not result.duplicate
    assert engine.write(partitioned, UpdateSpec({"v": "v + 1"}, "id = 1"), ctx(1, "a")).duplicate
    assert {r["id"]: r["v"] for r in DeltaTable(partitioned).to_pyarrow_table().to_pylist()}[1] == 3.0


def test_duplicate_of_metadata_operations(engine: DeltaRsEngine, partitioned: str) -> None:
    first = engine.write(partitioned, AddColumnsSpec({"note": "string"}), ctx(1))
    # the same retry would now fail validation ("already exists") if it ran; the pair stops it first
    again = engine.write(partitioned, AddColumnsSpec({"note": "string"}), ctx(1))
    assert again.duplicate and again.version == first.version
    props = engine.write(partitioned, SetPropertiesSpec({"delta.appendOnly": "false"}), ctx(2))
    assert (
        engine.write(partitioned, SetPropertiesSpec({"delta.appendOnly": "false"}), ctx(2)).version
        == props.version
    )


def test_optimize_retry_is_recognised_from_commit_metadata(engine: DeltaRsEngine, partitioned: str) -> None:
    """delta-rs drops app transactions from OPTIMIZE commits; the engine finds the pair in the history."""
    engine.write(partitioned, AppendSpec(rows([5], "2024-01-01")))
    first = engine.write(partitioned, OptimizeSpec(), ctx(9, "maint.optimize"))
    assert first.committed
    assert DeltaTable(partitioned).transaction_version("maint.optimize") is None  # the engine's quirk
    engine.write(partitioned, AppendSpec(rows([6], "2024-01-01")))
    again = engine.write(partitioned, OptimizeSpec(), ctx(9, "maint.optimize"))
    assert again.duplicate and again.version == first.version


def test_stale_duplicate_is_caught_by_the_engine(engine: DeltaRsEngine, partitioned: str) -> None:
    """Two runs of the same task from the same version: the second commit fails with ConcurrentTransaction."""
    stale = engine.open_table(partitioned)
    engine.write(partitioned, AppendSpec(rows([5], "2024-01-01")), ctx(1))
    with pytest.raises(DeltaConflictError) as info:
        engine.write(partitioned, AppendSpec(rows([5], "2024-01-01")), ctx(1), snapshot=stale)
    assert info.value.kind is ConflictKind.CONCURRENT_TRANSACTION
    assert ids(partitioned) == [1, 2, 3, 4, 5]


def test_real_conflict_delete_delete_read(engine: DeltaRsEngine, partitioned: str) -> None:
    first, second = engine.open_table(partitioned), engine.open_table(partitioned)
    assert first.version() == second.version() == 2
    engine.write(partitioned, DeleteSpec("day = '2024-01-01'"), snapshot=first)
    with pytest.raises(DeltaConflictError) as info:
        engine.write(partitioned, DeleteSpec("day = '2024-01-01'"), snapshot=second)
    error = info.value
    assert error.kind is ConflictKind.CONCURRENT_DELETE_READ
    assert error.table_uri == partitioned and error.engine == "delta-rs"
    assert "concurrent transaction deleted data this operation read" in error.original_message
    assert ids(partitioned) == [3, 4]


def test_real_conflict_append_then_update(engine: DeltaRsEngine, partitioned: str) -> None:
    stale = engine.open_table(partitioned)
    engine.write(partitioned, AppendSpec(rows([5], "2024-01-02")))
    with pytest.raises(DeltaConflictError) as info:
        engine.write(partitioned, UpdateSpec({"v": "0"}, "day = '2024-01-02'"), snapshot=stale)
    assert info.value.kind is ConflictKind.CONCURRENT_APPEND


def test_real_conflict_metadata_changed(engine: DeltaRsEngine, partitioned: str) -> None:
    stale = engine.open_table(partitioned)
    engine.write(partitioned, SetPropertiesSpec({"delta.checkpointInterval": "20"}))
    with pytest.raises(DeltaConflictError) as info:
        engine.write(partitioned, AppendSpec(rows([5], "2024-01-01")), snapshot=stale)
    assert info.value.kind is ConflictKind.METADATA_CHANGED


def test_non_conflicting_stale_write_rebases_and_reports_its_version(
    engine: DeltaRsEngine, partitioned: str
) -> None:
    stale = engine.open_table(partitioned)
    engine.write(partitioned, AppendSpec(rows([5], "2024-01-01")))
    engine.write(partitioned, AppendSpec(rows([6], "2024-01-01")))
    result = engine.write(partitioned, AppendSpec(rows([7], "2024-01-02")), snapshot=stale)
    assert result.version == 5 and stale.version() == 5
    assert DeltaTable(partitioned).history(1)[0]["deltaguard.operation"] == "INSERT"


def test_retries_exhausted(partitioned: str) -> None:
    engine = DeltaRsEngine(max_commit_retries=0)
    stale = engine.open_table(partitioned)
    engine.write(partitioned, AppendSpec(rows([5], "2024-01-01")))
    with pytest.raises(DeltaConflictError) as info:
        engine.write(partitioned, AppendSpec(rows([6], "2024-01-02")), snapshot=stale)
    assert info.value.kind is ConflictKind.RETRIES_EXHAUSTED
    # the per-write setting overrides the engine default
    stale = engine.open_table(partitioned, version=2)
    result = engine.write(
        partitioned, AppendSpec(rows([7], "2024-01-02")), WriteContext(max_commit_retries=5), snapshot=stale
    )
    assert result.committed and result.version == 4


def test_open_table_at_an_old_version_and_missing_table(
    engine: DeltaRsEngine, partitioned: str, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    assert engine.open_table(partitioned, version=1).version() == 1
    with pytest.raises(TableAccessError, match="no Delta table"):
        engine.open_table(str(tmp_path / "missing"))


def test_real_conflict_protocol_changed(engine: DeltaRsEngine, partitioned: str) -> None:
    from deltalake import TableFeatures

    stale = engine.open_table(partitioned)
    DeltaTable(partitioned).alter.add_feature(
        TableFeatures.DeletionVectors, allow_protocol_versions_increase=True
    )
    with pytest.raises(DeltaConflictError) as info:
        engine.write(partitioned, DeleteSpec("id = 1"), snapshot=stale)
    assert info.value.kind is ConflictKind.PROTOCOL_CHANGED


def test_corrupt_log_and_unsupported_features_are_access_errors(
    engine: DeltaRsEngine, partitioned: str
) -> None:
    import json
    from pathlib import Path

    log = Path(partitioned) / "_delta_log"
    protocol = {
        "minReaderVersion": 1,
        "minWriterVersion": 7,
        "writerFeatures": ["appendOnly", "quantumWrites"],
    }
    (log / f"{3:020d}.json").write_text(json.dumps({"protocol": protocol}) + "\n")
    with pytest.raises(TableAccessError, match="cannot write"):
        engine.write(partitioned, AppendSpec(rows([5], "2024-01-01")))
    (log / f"{4:020d}.json").write_text("{ not json\n")
    with pytest.raises(TableAccessError, match=partitioned):
        engine.write(partitioned, AppendSpec(rows([5], "2024-01-01")))
