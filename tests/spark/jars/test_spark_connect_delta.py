"""Spark Connect like production: a local Connect server with Delta's jars and extensions stands in for the
cluster, and the Spark engine writes through the apache-spark provider's ``spark_connect`` connection."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable

from benchmarks.harness.connect_server import LocalConnectServer, group_members
from deltaguard.engines.spark.engine import SparkEngine
from deltaguard.engines.specs import AppendSpec, CreateSpec, DeleteSpec, MergeSpec, UpdateSpec, WriteContext
from lab.conformance.spark_runner import Gate

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars]
NONE = WriteContext()


def rows(ids: list[int], day: str, v: float = 1.0) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [day] * len(ids), "v": [v] * len(ids)})


def content(uri: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in RsTable(uri).to_pyarrow_table().to_pylist())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalConnectServer]:
    log = tmp_path_factory.mktemp("connect") / "server.log"
    running = LocalConnectServer(log_file=log)
    running.start()
    pid = running.process.pid if running.process else None
    yield running
    # Connect clients left open would try to reach the stopped server again at interpreter exit
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    for session in (RemoteSparkSession.getActiveSession(), RemoteSparkSession._default_session):
        if session is not None:
            session.stop()
    running.stop()
    # no orphan JVM: nothing of the server's process group is left
    assert pid is not None and group_members(pid) == []


@pytest.fixture
def connect_conn(server: LocalConnectServer, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(
        "AIRFLOW_CONN_DG_CONNECT",
        json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1", "port": server.port}),
    )
    return "dg_connect"


@pytest.fixture
def connect_engine(connect_conn: str) -> Iterator[SparkEngine]:
    engine = SparkEngine(connect_conn_id=connect_conn)
    yield engine
    engine.close()


def test_every_dml_through_the_spark_connect_connection(connect_engine: SparkEngine, tmp_path: Path) -> None:
    engine = connect_engine
    engine.check_setup()  # the server has Delta's extension: accepted
    assert type(engine.session()).__module__.startswith("pyspark.sql.connect")
    uri = str(tmp_path / "t")
    engine.write(uri, CreateSpec(source=rows([1, 2], "d1"), partition_by=("day",)), NONE)
    engine.write(uri, AppendSpec(source=rows([3], "d2")), WriteContext(app_id="dag.t", app_version=1))
    again = engine.write(uri, AppendSpec(source=rows([3], "d2")), WriteContext(app_id="dag.t", app_version=1))
    assert again.duplicate
    merge = MergeSpec(
        source=rows([1], "d1", 5.0),
        condition="t.id = s.id",
        target_partition_values={"day": "d1"},
        matched_update_all=True,
        not_matched_by_source_delete=True,
    )
    result = engine.write(uri, merge, WriteContext(commit_metadata={"run": "r1"}))
    assert result.operation == "MERGE" and result.metrics.get("numTargetRowsDeleted") == 1
    assert content(uri) == [(1, "d1", 5.0), (3, "d2", 1.0)]  # d2 survives the scoped by-source delete
    engine.write(uri, UpdateSpec(updates={"v": "v * 2"}, predicate="day = 'd2'"), NONE)
    engine.write(uri, DeleteSpec(predicate="id = 1"), NONE)
    assert content(uri) == [(3, "d2", 2.0)]
    assert engine.table_config(uri).partition_columns == ("day",)


def test_merge_scope_read_and_guarded_through_spark_connect(
    connect_engine: SparkEngine, tmp_path: Path
) -> None:
    """ADR 0019 over Spark Connect: the source's keys are read on the server, the claim's conjunct runs in the
    ON condition, and the server-side guard refuses the source once it holds a day the lease did not claim."""
    from deltalake import write_deltalake

    from deltaguard.core.merge_scope import ScopeLimits
    from deltaguard.engines.errors import InvalidWriteError
    from deltaguard.engines.merge_scope import scoped_merge

    engine, uri, landing = connect_engine, str(tmp_path / "t"), str(tmp_path / "landing")
    engine.write(uri, CreateSpec(source=rows([1, 2], "d1"), partition_by=("day",)), NONE)
    engine.write(uri, AppendSpec(source=rows([3], "d2")), NONE)
    write_deltalake(landing, rows([1, 9], "d1", 5.0))

    def landed(spark: Any) -> Any:
        return spark.read.format("delta").load(landing)

    declared = MergeSpec(
        source=landed,
        condition="t.id = s.id AND t.day = s.day",
        matched_update_all=True,
        not_matched_insert_all=True,
    )
    spec, _ = scoped_merge(declared, engine.table_config(uri), engine, limits=ScopeLimits())
    assert spec.scope_conjunct() == "t.day IN ('d1')" and spec.operation().inserts == "day IN ('d1')"
    engine.write(uri, spec, NONE)
    assert content(uri) == [(1, "d1", 5.0), (2, "d1", 1.0), (3, "d2", 1.0), (9, "d1", 5.0)]
    version = RsTable(uri).version()
    write_deltalake(landing, rows([4], "d2", 7.0), mode="append")
    with pytest.raises(InvalidWriteError, match="holds day = d2, outside the scope read from it"):
        engine.write(uri, spec, NONE)
    assert RsTable(uri).version() == version


def test_two_writes_through_one_connect_engine_overlap(connect_engine: SparkEngine, tmp_path: Path) -> None:
    """The first write waits inside its Spark job (a gate UDF on the server) while the second commits: they
    overlap in time through one engine and one server."""
    from pyspark.sql.connect.functions import (
        col,
        udf,
    )  # Connect's own: this process also has a classic session

    from deltaguard.engines.spark.sources import SparkSource

    engine = connect_engine
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    for uri in (first, second):
        engine.write(uri, CreateSpec(source=rows([1], "d1")), NONE)
    gate = Gate(tmp_path / "gate")
    gate_udf = udf(gate.function(), "bigint")

    def paused_source(session: Any) -> Any:
        return session.createDataFrame(rows([2], "d1").to_pandas()).withColumn("id", gate_udf(col("id")))

    caught: list[BaseException] = []

    def paused_write() -> None:
        try:
            engine.write(first, AppendSpec(source=SparkSource(paused_source)), NONE)
        except BaseException as exc:
            caught.append(exc)

    worker = threading.Thread(target=paused_write)
    worker.start()
    try:
        assert gate.wait_reached(240), "the first write never reached its gate"
        engine.write(second, AppendSpec(source=rows([3], "d1")), NONE)
        assert not gate.release_file.exists() and worker.is_alive()
        assert [r[0] for r in content(second)] == [1, 3] and [r[0] for r in content(first)] == [1]
    finally:
        gate.release()
        worker.join(240)
    assert not caught, caught
    assert [r[0] for r in content(first)] == [1, 2]


def test_server_figures_for_the_readme(server: LocalConnectServer) -> None:
    rss = server.rss_bytes()
    assert server.startup_seconds is not None and rss is not None and rss > 50 * 2**20
    print(f"spark-connect-server startup_s={server.startup_seconds:.1f} rss_mib={rss / 2**20:.0f}")
    assert os.environ.get("SPARK_REMOTE") is None  # the tests never switched the process to Connect mode


def test_close_releases_its_own_connect_session_but_not_a_borrowed_one(connect_conn: str) -> None:
    from deltaguard.engines.spark.session import connect_session

    own = SparkEngine(connect_conn_id=connect_conn)
    session = own.session()
    assert session.range(2).count() == 2
    own.close()
    assert session.is_stopped  # released on the server, channel closed
    # the task's own Connect session exists first: getOrCreate() hands the engine that one, which it keeps
    users = connect_session(connect_conn)
    borrowing = SparkEngine(connect_conn_id=connect_conn)
    assert borrowing.session() is users
    borrowing.close()
    assert not users.is_stopped and users.range(3).count() == 3
    users.stop()


@pytest.mark.slow
def test_a_frozen_holders_connect_write_is_fenced_before_its_table_is_handed_over(
    connect_engine: SparkEngine, tmp_path: Path
) -> None:
    """ADR 0033 on a real Connect server: the holder's write runs under a lease with a short TTL and sleeps in
    a UDF; its keeper stops renewing without running ``on_lost`` (a frozen worker). A second writer is
    granted the table only after the fence interrupted the write and saw it end, and the write never commits.
    """
    import time
    import uuid

    from deltalake import write_deltalake

    from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
    from deltaguard.core.operations import Operation, OperationKind
    from deltaguard.core.table_config import TableConfig
    from deltaguard.engines.fencing import default_remote_fence
    from deltaguard.leases.keeper import LeaseKeeper, LeaseTiming
    from deltaguard.leases.manager import LeaseManager
    from deltaguard.leases.remote_work import FENCED_KIND, UNFENCED_KIND, handles_in

    engine, uri = connect_engine, str(tmp_path / "t")
    write_deltalake(uri, rows([1, 2], "d1"))  # version 0, without a Spark job
    store = f"sqlite:///{tmp_path / 'leases.db'}"
    merge = Operation(OperationKind.MERGE, merge_condition="t.id = s.id")
    profile = engine.profile()

    def ask(task: str, ttl_s: float) -> LeaseRequest:
        return LeaseRequest(
            claims=(TableClaim(uri, merge, profile, TableConfig(version=0, uri=uri)),),
            owner=Owner(dag_id="dag", task_id=task),
            ttl_s=ttl_s,
            request_id=f"{task}-{uuid.uuid4().hex[:8]}",
        )

    holder_manager = LeaseManager(store)
    writer_manager = LeaseManager(store, remote_fence=default_remote_fence(), fence_retry_s=0.0)
    timing = LeaseTiming(ttl_s=8.0, heartbeat_s=1.0, store_timeout_s=1.0, commit_margin_s=1.0)
    holder = ask("frozen", timing.ttl_s)
    lease = holder_manager.acquire(holder)
    assert isinstance(lease, Granted)
    keeper = LeaseKeeper(
        holder_manager,
        lease.lease_id,
        holder.owner,
        expires_at=lease.expires_at,
        fencing=lease.fencing,
        timing=timing,
    )
    keeper.start()

    def slow_rows(spark: Any) -> Any:
        from pyspark.sql.connect import functions as F
        from pyspark.sql.connect.functions import udf
        from pyspark.sql.types import LongType

        @udf(LongType())
        def hold(x: int) -> int:
            import time as clock

            clock.sleep(25)
            return x

        return spark.range(10, 12, 1, 1).select(
            hold("id").alias("id"), F.lit("d1").alias("day"), F.lit(9.0).alias("v")
        )

    outcome: dict[str, Any] = {}

    def write() -> None:
        try:
            outcome["result"] = engine.write(
                uri,
                AppendSpec(source=slow_rows),
                WriteContext(fence=keeper, commit_metadata={"by": "frozen"}),
            )
        except BaseException as exc:  # the outcome is asserted below
            outcome["error"] = exc
        outcome["ended"] = time.time()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not handles_in(holder_manager.store.read_request(lease.lease_id).payload):  # type: ignore[union-attr]
        assert time.monotonic() < deadline and thread.is_alive(), outcome
        time.sleep(0.2)
    time.sleep(2)  # the operation runs on the server
    keeper._stop.set()  # frozen: no more renewals, and on_lost never runs
    time.sleep(timing.ttl_s + 1)
    assert thread.is_alive()  # the server still runs the write past the lease's expiry

    writer = ask("writer", 60.0)
    answer = writer_manager.acquire(writer)
    deadline = time.monotonic() + 60
    while not isinstance(answer, Granted):
        assert isinstance(answer, Waiting) and time.monotonic() < deadline, answer
        time.sleep(0.5)
        answer = writer_manager.check(writer.request_id)
    thread.join(60)
    assert not thread.is_alive()
    # the holder's call failed (its operation was interrupted), and the fence confirmed that before the grant
    assert "error" in outcome, outcome
    # the first write never committed: the log still ends at the table's creation
    time.sleep(2)
    history = RsTable(uri).history()
    assert [h["version"] for h in history] == [0], history
    kinds = [d.kind for d in reversed(writer_manager.decisions(uri=uri))]
    # The expired lease was not reclaimed on its TTL alone: a fence was asked first. It confirms the work
    # stopped (remote_fenced), or, when the holder's own session had already ended (this holder is a thread,
    # not a frozen process: under load its write can end first), it cannot tell (remote_unfenced) and the
    # table waits until the holder drops the handle of work it saw end. Either way no commit came after.
    asked = [i for i, kind in enumerate(kinds) if kind in (FENCED_KIND, UNFENCED_KIND)]
    assert asked and asked[0] < kinds.index("grant", asked[0]), kinds
    holder_manager.store.close()
    writer_manager.store.close()


@pytest.mark.slow
def test_a_lease_whose_connect_session_the_server_closed_ends_named_as_interrupted(
    connect_engine: SparkEngine, server: LocalConnectServer, tmp_path: Path
) -> None:
    """ADR 0033 on a real Connect server: a holder's write sleeps in a UDF under a short lease, its keeper
    stops renewing (a frozen worker), and its Connect session is closed on the server (``ReleaseSession``,
    as when the worker's process is torn down). The fence then finds the session gone on the same
    application: not a confirmation. The lease stays held for the grace, then ends logged as
    ``remote_interrupted`` (never ``remote_fenced``) and the waiting writer is granted. Before, such a
    lease answered ``remote_unfenced`` forever and held its table until an operator released it by hand.
    """
    import time
    import uuid

    from deltalake import write_deltalake
    from pyspark.sql.connect.client import SparkConnectClient

    from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
    from deltaguard.core.operations import Operation, OperationKind
    from deltaguard.core.table_config import TableConfig
    from deltaguard.engines.fencing import default_remote_fence
    from deltaguard.leases.keeper import LeaseKeeper, LeaseTiming
    from deltaguard.leases.manager import LeaseManager
    from deltaguard.leases.remote_work import (
        FENCED_KIND,
        INTERRUPTED_KIND,
        SERVER_WORK_INTERRUPTED,
        UNFENCED_KIND,
        handles_in,
    )

    engine, uri = connect_engine, str(tmp_path / "t")
    write_deltalake(uri, rows([1, 2], "d1"))  # version 0, without a Spark job
    store = f"sqlite:///{tmp_path / 'leases.db'}"
    merge = Operation(OperationKind.MERGE, merge_condition="t.id = s.id")
    profile = engine.profile()

    def ask(task: str, ttl_s: float) -> LeaseRequest:
        return LeaseRequest(
            claims=(TableClaim(uri, merge, profile, TableConfig(version=0, uri=uri)),),
            owner=Owner(dag_id="dag", task_id=task),
            ttl_s=ttl_s,
            request_id=f"{task}-{uuid.uuid4().hex[:8]}",
        )

    grace_s = 5.0
    holder_manager = LeaseManager(store)
    writer_manager = LeaseManager(
        store, remote_fence=default_remote_fence(), fence_retry_s=1.0, interrupted_grace_s=grace_s
    )
    timing = LeaseTiming(ttl_s=8.0, heartbeat_s=1.0, store_timeout_s=1.0, commit_margin_s=1.0)
    holder = ask("closed", timing.ttl_s)
    lease = holder_manager.acquire(holder)
    assert isinstance(lease, Granted)
    keeper = LeaseKeeper(
        holder_manager,
        lease.lease_id,
        holder.owner,
        expires_at=lease.expires_at,
        fencing=lease.fencing,
        timing=timing,
    )
    keeper.start()

    def slow_rows(spark: Any) -> Any:
        from pyspark.sql.connect import functions as F
        from pyspark.sql.connect.functions import udf
        from pyspark.sql.types import LongType

        @udf(LongType())
        def hold(x: int) -> int:
            import time as clock

            clock.sleep(25)
            return x

        return spark.range(10, 12, 1, 1).select(
            hold("id").alias("id"), F.lit("d1").alias("day"), F.lit(9.0).alias("v")
        )

    outcome: dict[str, Any] = {}

    def write() -> None:
        try:
            outcome["result"] = engine.write(uri, AppendSpec(source=slow_rows), WriteContext(fence=keeper))
        except BaseException as exc:  # the outcome is asserted below
            outcome["error"] = exc

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    handles: list[dict[str, str]] = []
    while not handles:  # the engine records its handle before its write's first operation
        assert thread.is_alive(), outcome
        handles = handles_in(holder_manager.store.read_request(lease.lease_id).payload)  # type: ignore[union-attr]
        time.sleep(0.2)
    time.sleep(2)  # the operation runs on the server
    keeper._stop.set()  # frozen: no more renewals, and on_lost never runs
    # the server closes the holder's session while its write runs
    handle = handles[0]
    params = f"session_id={handle['session_id']}" + (
        f";user_id={handle['user_id']}" if handle.get("user_id") else ""
    )
    closer = SparkConnectClient(f"{server.url}/;{params}")
    closer.release_session()
    closer.close()
    thread.join(120)
    assert not thread.is_alive() and "error" in outcome, outcome  # the server interrupted the write
    expires_at = max(r.expires_at for r in holder_manager.store.read_lease(lease.lease_id))  # last renewal
    while time.time() < expires_at + 1:
        time.sleep(0.5)

    writer = ask("writer", 120.0)
    answer = writer_manager.acquire(writer)
    assert isinstance(answer, Waiting), answer  # the session is gone: nothing confirmed, the table held
    first = [d for d in writer_manager.decisions(uri=uri) if d.kind == UNFENCED_KIND]
    assert first and "closed by the server that ran it" in first[0].detail["reason"], first
    assert first[0].detail["interrupted_by_server"]["hand_over_at"] == pytest.approx(
        first[0].detail["interrupted_by_server"]["first_seen"] + grace_s
    )
    while not isinstance(answer, Granted):  # the grace is this test's own; each check may fence again
        assert isinstance(answer, Waiting), answer
        time.sleep(0.5)
        answer = writer_manager.check(writer.request_id)
    log = list(reversed(writer_manager.decisions(uri=uri)))
    kinds = [d.kind for d in log]
    assert FENCED_KIND not in kinds, kinds  # never handed over as if a fence had confirmed it
    ended = next(d for d in log if d.kind == INTERRUPTED_KIND)
    assert ended.detail["confirmed"] is False and "interrupted its operations" in ended.detail["reason"]
    assert ended.at - first[0].detail["interrupted_by_server"]["first_seen"] >= grace_s
    expiry = next(d for d in log if d.kind == "expiry")
    assert expiry.detail["server_work"] == SERVER_WORK_INTERRUPTED
    assert (
        kinds.index(INTERRUPTED_KIND)
        < kinds.index("expiry")
        < max(i for i, k in enumerate(kinds) if k == "grant")
    )
    # the closed session's write never committed: the log still ends at the table's creation
    assert [h["version"] for h in RsTable(uri).history()] == [0]
    holder_manager.store.close()
    writer_manager.store.close()


def test_the_engine_fence_travels_over_spark_connect(connect_engine: SparkEngine, tmp_path: Path) -> None:
    """ADR 0038 over Connect: a successor's DELETE (session confs) carries the lost lease's fence id, and
    the lost lease's append (writer options), frozen after its last check, is skipped by delta-spark and
    fails instead of passing as a write that changed nothing."""
    import time

    from deltalake import write_deltalake

    from deltaguard.core.operations import OperationKind
    from deltaguard.exceptions import CommitFencedError
    from deltaguard.leases.keeper import FENCE_VERSION_STRIDE, fence_app_id
    from deltaguard.leases.manager import LeaseManager
    from tests.engines.leased import Clock, leased_keeper

    engine, uri = connect_engine, str(tmp_path / "t")
    write_deltalake(uri, rows([1, 2], "d1"), partition_by=["day"])  # version 0, without a Spark job
    clock = Clock(time.time())
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}", clock=clock)
    late = leased_keeper(manager, uri, OperationKind.INSERT, "late")
    # its server-side work is ADR 0033's concern (tested above): here the table is handed over at once
    late.remote_work = None  # type: ignore[assignment,method-assign]
    real_check, checks, successor = late.check, [0], []

    def check_then_freeze() -> None:
        real_check()
        checks[0] += 1
        if checks[0] == 2:
            clock.now += 300
            successor.append(leased_keeper(manager, uri, OperationKind.OVERWRITE, "successor"))
            successor[0].remote_work = None  # type: ignore[assignment,method-assign]
            engine.write(uri, DeleteSpec(predicate="id = 1"), WriteContext(fence=successor[0]))

    late.check = check_then_freeze  # type: ignore[method-assign]
    try:
        with pytest.raises(CommitFencedError, match="delta-spark skipped the write"):
            engine.write(uri, AppendSpec(source=rows([9], "d1")), WriteContext(fence=late))
        table = RsTable(uri)
        token = next(iter(successor[0].fencing.values()))
        assert table.transaction_version(fence_app_id(late.lease_id)) == token * FENCE_VERSION_STRIDE + 1
        assert [r[0] for r in content(uri)] == [2]  # the DELETE landed, the append did not
    finally:
        manager.store.close()
