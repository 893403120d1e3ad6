"""The engine as the fence on delta-spark (ADR 0038), with real delta-spark and a real SQLite lease store.

A leased commit without an idempotency pair carries its lease's fence app transaction; a successor that
replaced a lost lease carries that lease's id. A writer is "frozen" as in the delta-rs fence tests: its
lease clock jumps past the TTL and the conflicting successor is granted and commits meanwhile. Either the
stale writer is paused inside its Spark job (its transaction read the table before the successor's
commit: delta-spark's conflict checker refuses it), or it stops at its last check (its transaction reads
the table after the successor's commit: delta-spark skips it, and the engine must fail it).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable

from deltaguard.core.operations import OperationKind
from deltaguard.engines.spark.engine import SparkEngine
from deltaguard.engines.specs import (
    AppendSpec,
    CreateSpec,
    DeleteSpec,
    OverwriteSpec,
    ReplaceWhereSpec,
    WriteContext,
)
from deltaguard.exceptions import CommitFencedError
from deltaguard.leases.keeper import FENCE_VERSION_STRIDE, LeaseKeeper, fence_app_id
from deltaguard.leases.manager import LeaseManager
from lab.conformance.scenarios import ProbeOp, ProbeWrite
from lab.conformance.spark_runner import Gate, gated_spec
from tests.engines.leased import Clock, leased_keeper


def rows(ids: list[int], day: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [day] * len(ids)})


def ids(uri: str) -> list[int]:
    return sorted(r["id"] for r in RsTable(uri).to_pyarrow_table().to_pylist())


@pytest.fixture
def engine(delta_spark: Any) -> SparkEngine:
    return SparkEngine(delta_spark)


@pytest.fixture
def uri(engine: SparkEngine, tmp_path: Path) -> str:
    """Partitioned by ``day``: ids 1, 2 on d1 and 3 on d2 (versions 0 and 1)."""
    path = str(tmp_path / "t")
    engine.write(path, CreateSpec(source=rows([1, 2], "d1"), partition_by=("day",)), WriteContext())
    engine.write(path, AppendSpec(source=rows([3], "d2")), WriteContext())
    return path


@pytest.fixture
def manager(tmp_path: Path) -> Any:
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}", clock=Clock(time.time()))
    yield manager
    manager.store.close()


def _expire_and_grant(manager: LeaseManager, uri: str, kind: OperationKind, late: LeaseKeeper) -> LeaseKeeper:
    """The late writer's lease runs out (its holder is frozen) and ``kind`` is granted the table."""
    manager.clock.now += 300  # type: ignore[attr-defined]
    successor = leased_keeper(manager, uri, kind, "successor")
    assert fence_app_id(late.lease_id) in successor.fence_app_ids()
    return successor


@pytest.mark.parametrize(
    ("late_kind", "probe", "late_spec"),
    [
        (OperationKind.INSERT, ProbeOp.INSERT, AppendSpec(source=rows([9], "d1"))),
        (OperationKind.DELETE, ProbeOp.DELETE, DeleteSpec(predicate="day = 'd1' AND id = 1")),
    ],
    ids=["append", "delete"],
)
def test_a_stale_writer_is_refused_by_delta_spark_after_its_successor_committed(
    engine: SparkEngine,
    delta_spark: Any,
    manager: LeaseManager,
    uri: str,
    tmp_path: Path,
    late_kind: OperationKind,
    probe: ProbeOp,
    late_spec: AppendSpec | DeleteSpec,
) -> None:
    """The stale writer's transaction read the table, then its lease was handed to a REPLACE WHERE of d2
    that committed. Unfenced, delta-spark commits the stale append (it reads nothing) and the stale DELETE
    of d1 (no file it read changed): the late commit lands. Fenced, the successor carries the stale lease's
    id, which the stale write read, and delta-spark refuses the stale write: nothing of it is in the log."""
    late = leased_keeper(manager, uri, late_kind, "late")
    stale_engine = SparkEngine(delta_spark.newSession(), session_per_write=False)  # the gate UDF's session
    gate = Gate(tmp_path / "gate")
    spec = gated_spec(ProbeWrite(probe, "A", late_spec, late_spec.operation()), stale_engine.session(), gate)
    caught: list[BaseException] = []

    def stale() -> None:
        try:
            stale_engine.write(uri, spec, WriteContext(fence=late))
        except BaseException as exc:  # the outcome under test
            caught.append(exc)

    worker = threading.Thread(target=stale)
    worker.start()
    try:
        assert gate.wait_reached(120)
        successor = _expire_and_grant(manager, uri, OperationKind.OVERWRITE, late)
        replaced = engine.write(
            uri,
            ReplaceWhereSpec(source=rows([7], "d2"), predicate="day = 'd2'"),
            WriteContext(fence=successor),
        ).version
    finally:
        gate.release()
        worker.join(180)
    assert len(caught) == 1 and isinstance(caught[0], CommitFencedError), caught
    assert "refused by Delta's conflict checker" in str(caught[0])
    table = RsTable(uri)
    assert table.version() == replaced  # the log ends with the successor's commit
    assert ids(uri) == [1, 2, 7]
    token = next(iter(successor.fencing.values()))
    assert table.transaction_version(fence_app_id(late.lease_id)) == token * FENCE_VERSION_STRIDE + 1


def test_a_stale_writer_whose_transaction_starts_after_its_successor_commit_fails_not_skips(
    engine: SparkEngine, manager: LeaseManager, uri: str
) -> None:
    """The stale append stops at its last check; an overwrite is granted and commits; then the append's
    transaction reads the table, which now holds its fence id at a higher version, and delta-spark skips
    it without an error. The engine must fail it, not report a write that changed nothing."""
    late = leased_keeper(manager, uri, OperationKind.INSERT, "late")
    real_check = late.check
    checks = [0]
    successor: list[LeaseKeeper] = []

    def check_then_freeze() -> None:
        real_check()
        checks[0] += 1
        if checks[0] == 2:  # the engine's check, then the one right before the writing statement
            successor.append(_expire_and_grant(manager, uri, OperationKind.OVERWRITE, late))
            engine.write(uri, OverwriteSpec(source=rows([7], "d2")), WriteContext(fence=successor[0]))

    late.check = check_then_freeze  # type: ignore[method-assign]
    with pytest.raises(CommitFencedError, match="delta-spark skipped the write"):
        engine.write(uri, AppendSpec(source=rows([9], "d1")), WriteContext(fence=late))
    assert checks[0] == 2
    assert ids(uri) == [7]  # the log: the successor's overwrite is the last commit, the append is not in it
    assert RsTable(uri).history(1)[0]["operation"] == "WRITE"


def test_compatible_leased_writers_side_by_side_are_not_refused(
    engine: SparkEngine, delta_spark: Any, manager: LeaseManager, uri: str, tmp_path: Path
) -> None:
    """Two appends hold leases side by side; the first is paused inside its job while the second commits.
    Each carries its own lease's id, so delta-spark refuses neither; both are in the log."""
    first = leased_keeper(manager, uri, OperationKind.INSERT, "append_a")
    second = leased_keeper(manager, uri, OperationKind.INSERT, "append_b")
    paused_engine = SparkEngine(delta_spark.newSession(), session_per_write=False)
    gate = Gate(tmp_path / "gate")
    append = AppendSpec(source=rows([8], "d1"))
    spec = gated_spec(
        ProbeWrite(ProbeOp.INSERT, "A", append, append.operation()), paused_engine.session(), gate
    )
    caught: list[BaseException] = []

    def paused() -> None:
        try:
            paused_engine.write(uri, spec, WriteContext(fence=first))
        except BaseException as exc:
            caught.append(exc)

    worker = threading.Thread(target=paused)
    worker.start()
    try:
        assert gate.wait_reached(120)
        engine.write(uri, AppendSpec(source=rows([9], "d2")), WriteContext(fence=second))
    finally:
        gate.release()
        worker.join(180)
    assert not caught, caught
    assert ids(uri) == [1, 2, 3, 8, 9]
    table = RsTable(uri)
    assert table.transaction_version(fence_app_id(first.lease_id)) is not None
    assert table.transaction_version(fence_app_id(second.lease_id)) is not None


def test_an_idempotent_leased_write_keeps_its_idempotency_pair(
    engine: SparkEngine, manager: LeaseManager, uri: str
) -> None:
    """The one app transaction place stays the task instance's: a retry of it is still a duplicate."""
    keeper = leased_keeper(manager, uri, OperationKind.INSERT, "idempotent")
    context = WriteContext(app_id="dag/task@run", app_version=0, fence=keeper)
    engine.write(uri, AppendSpec(source=rows([9], "d1")), context)
    again = engine.write(uri, AppendSpec(source=rows([9], "d1")), context)
    assert again.duplicate and ids(uri) == [1, 2, 3, 9]
    table = RsTable(uri)
    assert table.transaction_version("dag/task@run") == 0
    assert table.transaction_version(fence_app_id(keeper.lease_id)) is None
