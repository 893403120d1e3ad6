"""Every operation of the Spark engine against real delta-spark (jar-gated: see conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable

from deltaguard.core.profiles import EngineName
from deltaguard.engines.errors import ConflictKind, DeltaConflictError, InvalidWriteError
from deltaguard.engines.spark.engine import SparkEngine
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
from lab.conformance.spark_runner import Gate, gated_spec

NONE = WriteContext()


def rows(ids: list[int], day: str, v: float = 1.0) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [day] * len(ids), "v": [v] * len(ids)})


def content(uri: str) -> list[tuple[Any, ...]]:
    table = RsTable(uri).to_pyarrow_table()
    return sorted(tuple(r.values()) for r in table.to_pylist())


@pytest.fixture
def engine(delta_spark: Any) -> SparkEngine:
    return SparkEngine(delta_spark)


@pytest.fixture
def table(engine: SparkEngine, tmp_path: Path) -> str:
    """Partitioned by ``day``: ids 1,2 on d1 and 3 on d2 (versions 0 and 1)."""
    uri = str(tmp_path / "t")
    engine.write(uri, CreateSpec(source=rows([1, 2], "d1"), partition_by=("day",)), NONE)
    engine.write(uri, AppendSpec(source=rows([3], "d2")), NONE)
    return uri


def test_profile_is_delta_spark(engine: SparkEngine) -> None:
    assert engine.profile().name is EngineName.DELTA_SPARK


def test_create_from_schema_then_config(engine: SparkEngine, tmp_path: Path) -> None:
    uri = str(tmp_path / "s")
    result = engine.write(
        uri,
        CreateSpec(
            schema={"id": "bigint", "day": "string"},
            partition_by=("day",),
            properties={"delta.appendOnly": "true"},
        ),
        NONE,
    )
    assert result.version == 0 and "CREATE" in result.operation
    config = engine.table_config(uri)
    assert config.partition_columns == ("day",) and config.flag("delta.appendOnly")
    with pytest.raises(InvalidWriteError, match="already exists"):
        engine.validate(uri, CreateSpec(schema={"id": "bigint"}), config)


def test_append_is_idempotent_per_app_id_and_version(engine: SparkEngine, table: str) -> None:
    context = WriteContext(app_id="dag.task", app_version=5, commit_metadata={"lease": "L1"})
    first = engine.write(table, AppendSpec(source=rows([4], "d2")), context)
    assert (first.version, first.operation, first.duplicate) == (2, "WRITE", False)
    again = engine.write(table, AppendSpec(source=rows([4], "d2")), context)
    older = engine.write(
        table, AppendSpec(source=rows([4], "d2")), WriteContext(app_id="dag.task", app_version=4)
    )
    assert again.duplicate and older.duplicate
    assert [r[0] for r in content(table)] == [1, 2, 3, 4]
    assert RsTable(table).transaction_version("dag.task") == 5
    history = RsTable(table).history(1)[0]
    assert json.loads(history["userMetadata"]) == {"lease": "L1"}


def test_dml_is_idempotent_through_session_confs(engine: SparkEngine, table: str) -> None:
    context = WriteContext(app_id="dag.update", app_version=1)
    first = engine.write(table, UpdateSpec(updates={"v": "v + 1"}, predicate="day = 'd1'"), context)
    second = engine.write(table, UpdateSpec(updates={"v": "v + 1"}, predicate="day = 'd1'"), context)
    assert first.operation == "UPDATE" and not first.duplicate and second.duplicate
    assert [r[2] for r in content(table) if r[1] == "d1"] == [2.0, 2.0]
    # the confs were restored: a later plain write is not skipped
    assert not engine.write(table, DeleteSpec(predicate="id = 3"), NONE).duplicate
    assert engine.session().conf.get("spark.databricks.delta.write.txnAppId", None) is None


def test_merge_with_every_clause(engine: SparkEngine, table: str) -> None:
    source = pa.table(
        {
            "id": pa.array([1, 2, 9], pa.int64()),
            "day": ["d1", "d1", "d1"],
            "v": [10.0, 20.0, 90.0],
            "op": ["U", "D", "I"],
        }
    )
    spec = MergeSpec(
        source=source,
        condition="t.id = s.id",
        target_partition_values={"day": "d1"},
        matched_delete=True,
        matched_condition="s.op = 'D'",
        matched_update={"v": "s.v"},
        not_matched_insert={"id": "s.id", "day": "s.day", "v": "s.v"},
    )
    result = engine.write(table, spec, NONE)
    assert result.operation == "MERGE" and result.metrics.get("numTargetRowsDeleted") == 1
    assert content(table) == [(1, "d1", 10.0), (3, "d2", 1.0), (9, "d1", 90.0)]


def test_merge_not_matched_by_source_delete(engine: SparkEngine, table: str) -> None:
    spec = MergeSpec(
        source=rows([1], "d1", 5.0),
        condition="t.id = s.id",
        matched_update_all=True,
        not_matched_by_source_delete=True,
    )
    engine.write(table, spec, NONE)
    assert content(table) == [(1, "d1", 5.0)]


def test_scoped_merge_by_source_delete_keeps_other_partitions(engine: SparkEngine, table: str) -> None:
    """``WHEN NOT MATCHED BY SOURCE THEN DELETE`` ranges over the whole target; a MERGE leased for partition
    d1 must delete only there: id 3 of d2 survives, id 2 of d1 (not in the source) goes."""
    spec = MergeSpec(
        source=rows([1], "d1", 5.0),
        condition="t.id = s.id",
        target_partition_values={"day": "d1"},
        matched_update_all=True,
        not_matched_by_source_delete=True,
    )
    result = engine.write(table, spec, NONE)
    assert result.metrics.get("numTargetRowsDeleted") == 1
    assert content(table) == [(1, "d1", 5.0), (3, "d2", 1.0)]


def test_writes_through_one_engine_run_concurrently(engine: SparkEngine, tmp_path: Path) -> None:
    """A write paused inside its Spark job must not hold up another write through the same engine: each
    write has its own session, so the second commits while the first still waits at its gate."""
    import threading

    from lab.conformance.scenarios import ProbeOp, ProbeWrite

    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    for uri in (first, second):
        engine.write(uri, CreateSpec(source=rows([1], "d1"), partition_by=("day",)), NONE)
    gate = Gate(tmp_path / "gate")
    append = AppendSpec(source=rows([2], "d1"))
    paused = gated_spec(ProbeWrite(ProbeOp.INSERT, "A", append, append.operation()), engine.session(), gate)
    caught: list[BaseException] = []
    worker = threading.Thread(target=lambda: _capture(caught, lambda: engine.write(first, paused, NONE)))
    worker.start()
    try:
        assert gate.wait_reached(120)
        other = engine.write(second, AppendSpec(source=rows([3], "d2")), NONE)
        assert not gate.release_file.exists()  # the first write was still inside its transaction
        assert other.version == 1 and [r[0] for r in content(second)] == [1, 3]
        assert [r[0] for r in content(first)] == [1]
    finally:
        gate.release()
        worker.join(180)
    assert not caught, caught
    assert [r[0] for r in content(first)] == [1, 2]


def test_update_delete_replace_where_overwrite(engine: SparkEngine, table: str) -> None:
    engine.write(table, UpdateSpec(updates={"v": "v * 3"}, predicate="id = 3"), NONE)
    engine.write(table, DeleteSpec(predicate="id = 1"), NONE)
    assert content(table) == [(2, "d1", 1.0), (3, "d2", 3.0)]
    engine.write(table, ReplaceWhereSpec(source=rows([7], "d1"), predicate="day = 'd1'"), NONE)
    assert content(table) == [(3, "d2", 3.0), (7, "d1", 1.0)]
    result = engine.write(table, OverwriteSpec(source=rows([8], "d3"), partition_by=("day",)), NONE)
    assert result.operation == "WRITE" and content(table) == [(8, "d3", 1.0)]


def test_optimize_compaction_and_zorder_with_partition_filter(engine: SparkEngine, table: str) -> None:
    for i in range(3):
        engine.write(table, AppendSpec(source=rows([10 + i], "d1")), NONE)
    compact = engine.write(table, OptimizeSpec(partition_filters={"day": "d1"}), NONE)
    assert compact.operation == "OPTIMIZE" and compact.metrics.get("numRemovedFiles", 0) >= 2
    engine.write(table, AppendSpec(source=rows([4], "d2")), NONE)
    zorder = engine.write(table, OptimizeSpec(zorder_by=("id",), partition_filters={"day": "d2"}), NONE)
    assert zorder.operation == "OPTIMIZE" and zorder.version == compact.version + 2
    assert json.loads(RsTable(table).history(1)[0]["operationParameters"]["zOrderBy"]) == ["id"]
    assert [r[0] for r in content(table)] == [1, 2, 3, 4, 10, 11, 12]


def test_set_properties_and_add_columns(engine: SparkEngine, table: str) -> None:
    engine.write(
        table, SetPropertiesSpec(properties={"delta.checkpointInterval": "11", "team": "o'brien"}), NONE
    )
    engine.write(table, AddColumnsSpec(columns={"note": "string", "amount": "decimal(10,2)"}), NONE)
    config = engine.table_config(table)
    assert (
        config.get_property("delta.checkpointInterval") == "11" and config.get_property("team") == "o'brien"
    )
    assert {"note", "amount"} <= set(RsTable(table).schema().to_arrow().names)


def test_catalog_table_discovery_by_name(engine: SparkEngine, delta_spark: Any) -> None:
    name = "default.dg_catalog_orders"
    delta_spark.sql(f"DROP TABLE IF EXISTS {name}")
    engine.write(name, CreateSpec(schema={"id": "bigint", "day": "string"}, partition_by=("day",)), NONE)
    engine.write(name, AppendSpec(source=pa.table({"id": pa.array([1], pa.int64()), "day": ["d1"]})), NONE)
    engine.write(name, SetPropertiesSpec(properties={"delta.appendOnly": "true"}), NONE)
    config = engine.table_config(name)
    assert config.exists and config.partition_columns == ("day",) and config.flag("delta.appendOnly")
    assert config.version == 2
    assert not engine.table_config("default.dg_no_such_table").exists


def test_a_real_conflict_becomes_a_typed_error(
    engine: SparkEngine, delta_spark: Any, table: str, tmp_path: Path
) -> None:
    """A DELETE paused inside its transaction while an UPDATE rewrites the same file: ConcurrentDeleteRead
    (or ConcurrentAppend/DeleteDelete depending on the version), always as DeltaConflictError."""
    import threading

    from lab.conformance.scenarios import ProbeOp, ProbeWrite

    # its own session for all its writes: the gate UDF is registered on that session
    stale_engine = SparkEngine(delta_spark.newSession(), session_per_write=False)
    gate = Gate(tmp_path / "gate")
    delete = DeleteSpec(predicate="day = 'd1' AND id = 1")
    stale = gated_spec(
        ProbeWrite(ProbeOp.DELETE, "B", delete, delete.operation()), stale_engine.session(), gate
    )
    caught: list[BaseException] = []
    worker = threading.Thread(target=lambda: _capture(caught, lambda: stale_engine.write(table, stale, NONE)))
    worker.start()
    assert gate.wait_reached(120)
    engine.write(table, UpdateSpec(updates={"v": "v + 1"}, predicate="day = 'd1'"), NONE)
    gate.release()
    worker.join(180)
    assert len(caught) == 1 and isinstance(caught[0], DeltaConflictError), caught
    assert caught[0].kind in (ConflictKind.CONCURRENT_DELETE_READ, ConflictKind.CONCURRENT_APPEND)
    assert caught[0].engine == "spark" and caught[0].table_uri == table


def _capture(sink: list[BaseException], action: Any) -> None:
    try:
        action()
    except BaseException as exc:
        sink.append(exc)


class _LeaseFence:
    """A commit fence whose lease the test loses on demand (the real keeper is tested in tests/leases)."""

    def __init__(self) -> None:
        self.live = True
        self.cancels: list[Any] = []

    def check(self) -> None:
        from deltaguard.exceptions import CommitFencedError

        if not self.live:
            raise CommitFencedError("lease lost")

    def on_lost(self, cancel: Any) -> Any:
        self.cancels.append(cancel)
        return lambda: self.cancels.remove(cancel)

    def lose(self) -> None:
        self.live = False
        for cancel in list(self.cancels):
            cancel()


def test_a_write_whose_lease_is_gone_does_not_start(engine: SparkEngine, table: str) -> None:
    from deltaguard.exceptions import CommitFencedError

    fence = _LeaseFence()
    fence.live = False
    with pytest.raises(CommitFencedError):
        engine.write(table, DeleteSpec(predicate="day = 'd1'"), WriteContext(fence=fence))
    assert [r[0] for r in content(table)] == [1, 2, 3]
    assert RsTable(table).version() == 1


def test_the_engine_reports_its_commit_to_the_fence_which_may_fail_it_as_late(
    engine: SparkEngine, table: str
) -> None:
    """The commit on the driver after the last job stays unchecked: the engine hands the committed
    version and its timestamp to the fence's ``after_commit``, whose error (a commit that landed after the
    lease was lost, ADR 0018) fails the write although the commit is in the table."""
    import time

    from deltaguard.exceptions import LateCommitError

    class LateFence(_LeaseFence):
        reported: list[tuple[str, int, Any]] = []

        def after_commit(self, table_uri: str, version: int, committed_at: Any) -> None:
            self.reported.append((table_uri, version, committed_at))
            raise LateCommitError("landed after the lease was lost (by the test)")

    fence = LateFence()
    started = time.time()
    with pytest.raises(LateCommitError):
        engine.write(table, DeleteSpec(predicate="day = 'd1'"), WriteContext(fence=fence))
    assert RsTable(table).version() == 2  # committed: the error says so, it cannot undo it
    ((uri, version, committed_at),) = fence.reported
    assert (uri, version) == (table, 2)
    # the storage's write time of the log entry, read only when the fence asks for it
    landed = committed_at() if callable(committed_at) else committed_at
    # written during the call (the file system's time, whole seconds on some; however long the call took)
    assert landed is not None and started - 2 <= landed <= time.time() + 2


def test_a_lease_lost_while_the_job_runs_cancels_it_before_the_commit(
    engine: SparkEngine, table: str, tmp_path: Path
) -> None:
    """The write pauses inside its Spark job; losing the lease then cancels the job group, and the write
    fails as fenced without committing."""
    import threading

    from deltaguard.exceptions import CommitFencedError
    from lab.conformance.scenarios import ProbeOp, ProbeWrite

    gate = Gate(tmp_path / "gate")
    append = AppendSpec(source=rows([4], "d1"))
    paused = gated_spec(ProbeWrite(ProbeOp.INSERT, "A", append, append.operation()), engine.session(), gate)
    fence = _LeaseFence()
    caught: list[BaseException] = []
    worker = threading.Thread(
        target=lambda: _capture(caught, lambda: engine.write(table, paused, WriteContext(fence=fence)))
    )
    worker.start()
    try:
        assert gate.wait_reached(120)
        fence.lose()
        worker.join(120)
        assert not worker.is_alive()
    finally:
        gate.release()
        worker.join(60)
    assert len(caught) == 1 and isinstance(caught[0], CommitFencedError), caught
    assert [r[0] for r in content(table)] == [1, 2, 3]
    assert RsTable(table).version() == 1
