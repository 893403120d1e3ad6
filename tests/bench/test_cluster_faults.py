"""The cluster run's fault injector (benchmarks/cluster/faults.py) on a real SQLite lease table."""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from benchmarks.cluster.faults import FaultInjector, freeze_over
from benchmarks.cluster.stack import ClusterStack


def _store(path: Path) -> str:
    url = f"sqlite:///{path}"
    engine = sa.create_engine(url)
    with engine.begin() as c:
        c.execute(sa.text("CREATE TABLE dg_leases (lease_id TEXT, owner_key TEXT, expires_at REAL)"))
        for task, expires in (("merge_sales_fr", time.time() + 60), ("merge_sales_it", time.time() - 1)):
            owner = json.dumps({"task_id": task, "run_id": "r1"})
            c.execute(
                sa.text("INSERT INTO dg_leases VALUES (:t, :o, :e)"), {"t": task, "o": owner, "e": expires}
            )
    engine.dispose()
    return url


def test_the_freeze_polls_the_lease_store_through_one_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = SimpleNamespace(lease_store_url=_store(tmp_path / "leases.db"))
    created: list[str] = []
    real = sa.create_engine

    def counting(url: str, **kwargs: object) -> sa.Engine:
        created.append(url)
        return real(url, **kwargs)

    monkeypatch.setattr(sa, "create_engine", counting)
    injector = FaultInjector(stack, (), 0, dict)  # type: ignore[arg-type]
    # live lease, expired lease, no lease: each answered from the table
    assert [injector._holds_lease(t, "r1") for t in ("merge_sales_fr", "merge_sales_it", "upsert")] == [
        True,
        False,
        False,
    ]
    assert injector._held_lease("merge_sales_fr", "r1") == "merge_sales_fr"  # the lease id, for the fence
    assert len(created) == 1, "one engine per fault, not one per poll"
    injector.stop()
    assert injector._engine is None  # disposed with the injector


def test_a_frozen_holder_is_thawed_only_after_its_fence_decision_or_the_cap() -> None:
    ttl = 90.0
    # never before its lease could expire
    assert not freeze_over(ttl + 9, ttl, awaiting_fence=False, fenced=False)
    assert not freeze_over(ttl + 9, ttl, awaiting_fence=True, fenced=True)
    # no conflicting writer brought: thawed once the lease expired, as before
    assert freeze_over(ttl + 10, ttl, awaiting_fence=False, fenced=False)
    # a writer waits: kept frozen until the store logged the fence decision...
    assert not freeze_over(ttl + 40, ttl, awaiting_fence=True, fenced=False)
    assert freeze_over(ttl + 40, ttl, awaiting_fence=True, fenced=True)
    # ...but never up to the heartbeat timeout (lease_ttl + 90) that would fail the frozen task in Airflow
    assert freeze_over(ttl + 60, ttl, awaiting_fence=True, fenced=False)
    assert ClusterStack(Path("/nonexistent"), spark=False, lease_ttl=ttl).heartbeat_timeout > ttl + 60


def test_the_fence_decision_is_read_from_the_decision_log(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as c:
        c.execute(sa.text("CREATE TABLE dg_decisions (at REAL, kind TEXT, request_id TEXT)"))
        for kind, request in (
            ("grant", "h"),
            ("expiry", "x"),
            ("remote_unfenced", "u"),
            ("remote_fenced", "f"),
        ):
            c.execute(sa.text("INSERT INTO dg_decisions VALUES (1, :k, :r)"), {"k": kind, "r": request})
    engine.dispose()
    injector = FaultInjector(SimpleNamespace(lease_store_url=url), (), 0, dict)  # type: ignore[arg-type]
    assert [injector._fence_decided(r) for r in ("h", "x", "u", "f")] == [False, False, True, True]
    injector.stop()


def test_the_conflicting_writer_dags_run_on_their_own_workers_queue() -> None:
    """The DAG file and the harness agree on the DAG ids and queues, read without importing Airflow."""
    from benchmarks.cluster.run import CONFLICTING_WRITER_PREFIX
    from benchmarks.cluster.stack import CLUSTER_DAGS, worker_queue

    text = (CLUSTER_DAGS / "pyspark_optimize_sales.py").read_text()
    assert f'DAG_ID_PREFIX = "{CONFLICTING_WRITER_PREFIX}"' in text
    assert 'queue=f"worker{i}"' in text and worker_queue(2) == "worker2"
    assert "pyspark_optimize_sales.py" in ClusterStack.CLUSTER_SPARK_DAG_FILES


def test_the_faults_option_takes_known_kinds_only() -> None:
    from benchmarks.cluster.__main__ import _kinds

    assert _kinds("stop_worker_past_lease, restart_triggerer") == (
        "stop_worker_past_lease",
        "restart_triggerer",
    )
    with pytest.raises(argparse.ArgumentTypeError):
        _kinds("stop_worker,restart_triggerer")


def test_the_external_holder_keeps_conflicting_writers_waiting_until_told(tmp_path: Path) -> None:
    """A real delta-rs table and a real SQLite lease store: an UPDATE waits while the holder holds."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from benchmarks.cluster.holder import ExternalHolder
    from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
    from deltaguard.core.operations import Operation, OperationKind
    from deltaguard.core.profiles import EngineName, EngineProfile
    from deltaguard.engines.deltars.engine import DeltaRsEngine
    from deltaguard.leases.manager import LeaseManager

    uri = str(tmp_path / "customers")
    write_deltalake(uri, pa.table({"id": [1, 2], "status": ["open", "closed"]}))
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    release = threading.Event()
    holder = ExternalHolder(url, uri, until=release.is_set, ttl_s=30.0)
    holder.start()
    manager = LeaseManager(url)
    owner = Owner(dag_id="d", run_id="r", task_id="delete_closed_customers")
    claim = TableClaim(
        uri,
        Operation(OperationKind.DELETE, predicate="status = 'closed'"),
        EngineProfile(EngineName.DELTA_RS, "1.6.6"),
        DeltaRsEngine().table_config(uri),
    )
    request = LeaseRequest((claim,), owner, ttl_s=30.0)
    try:
        assert isinstance(manager.acquire(request), Waiting)
        time.sleep(1.5)
        assert isinstance(manager.check(request.request_id), Waiting)  # still held: until() is false
        release.set()
        holder.stop()
        assert holder.errors == [] and holder.held() is not None
        assert isinstance(manager.check(request.request_id), Granted)
    finally:
        release.set()
        holder.stop()
        manager.store.close()


def test_the_freeze_waits_for_the_conflicting_writers_queued_request(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as c:
        c.execute(sa.text("CREATE TABLE dg_queue (owner_key TEXT, expires_at REAL)"))
        other = json.dumps({"dag_id": "pyspark_daily_sales", "task_id": "optimize_sales"})
        c.execute(sa.text("INSERT INTO dg_queue VALUES (:o, :e)"), {"o": other, "e": time.time() + 60})
    injector = FaultInjector(SimpleNamespace(lease_store_url=url), (), 0, dict)  # type: ignore[arg-type]
    assert not injector._writer_queued()  # the pipeline's own OPTIMIZE is not the writer brought
    writer = json.dumps(
        {"dag_id": "pyspark_optimize_sales_on_worker2", "run_id": "manual__2", "task_id": "optimize_sales"}
    )
    with engine.begin() as c:
        c.execute(sa.text("INSERT INTO dg_queue VALUES (:o, :e)"), {"o": writer, "e": time.time() - 1})
    assert not injector._writer_queued()  # an expired queue entry waits for nothing
    with engine.begin() as c:
        c.execute(sa.text("UPDATE dg_queue SET expires_at = :e"), {"e": time.time() + 60})
    assert injector._writer_queued()
    # a writer brought for an earlier freeze is not the one this freeze waits for
    assert injector._writer_queued("manual__2") and not injector._writer_queued("manual__3")
    injector.stop()
    engine.dispose()


def test_the_schedule_plans_every_kind_twice_at_increasing_grant_counts() -> None:
    from benchmarks.cluster.faults import KINDS, plan_faults

    planned = plan_faults(KINDS, seed=7, repeats=2)
    assert len(planned) == 2 * len(KINDS) >= 12
    assert sorted((f.kind, f.occurrence) for f in planned) == sorted((k, i) for k in KINDS for i in (0, 1))
    points = [f.after_grants for f in planned]
    assert points == sorted(set(points)) and points[0] >= 2
    # the seed decides the schedule, and nothing else does
    assert plan_faults(KINDS, seed=7, repeats=2) == planned
    assert plan_faults(KINDS, seed=8, repeats=2) != planned
    assert "freeze_lease_store" in KINDS


def test_a_fault_waits_for_its_grant_and_is_retried_until_it_fires(tmp_path: Path) -> None:
    """A fault fires only once the decision log holds its Nth grant, whatever the time; a fault whose
    moment did not come is tried again, not skipped; all_fired only once every planned fault fired."""
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as c:
        c.execute(sa.text("CREATE TABLE dg_decisions (at REAL, kind TEXT, request_id TEXT)"))
    injector = FaultInjector(
        SimpleNamespace(lease_store_url=url),  # type: ignore[arg-type]
        ("restart_scheduler",),
        3,
        dict,
        repeats=2,
    )
    tries: list[int] = []

    def fault(rng: object) -> bool:
        tries.append(len(tries))
        if len(tries) == 1:
            return False  # its moment did not come in the window
        injector._record("restart_scheduler", "scheduler", time.time(), 0.0)
        return True

    injector._restart_scheduler = fault  # type: ignore[method-assign]
    injector.start()
    time.sleep(3.0)
    assert tries == [] and not injector.all_fired(), "no fault before its grant"
    first, second = (f.after_grants for f in injector.planned)
    with engine.begin() as c:
        for i in range(first):
            c.execute(sa.text("INSERT INTO dg_decisions VALUES (1, 'grant', :r)"), {"r": str(i)})
    # no deadline of its own: a hang is pytest's timeout, a busy machine only a longer wait
    while len(injector.records) < 1:
        time.sleep(0.2)
    assert tries == [0, 1] and len(injector.records) == 1 and not injector.all_fired()
    with engine.begin() as c:
        for i in range(first, second):
            c.execute(sa.text("INSERT INTO dg_decisions VALUES (1, 'grant', :r)"), {"r": str(i)})
    injector._thread.join(60)  # type: ignore[union-attr]
    assert injector.all_fired() and len(injector.records) == 2
    injector.stop()
    engine.dispose()


def test_a_stopped_injector_counts_its_unfired_faults_as_not_fired(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as c:
        c.execute(sa.text("CREATE TABLE dg_decisions (at REAL, kind TEXT, request_id TEXT)"))
    engine.dispose()
    injector = FaultInjector(
        SimpleNamespace(lease_store_url=url),  # type: ignore[arg-type]
        ("restart_scheduler",),
        3,
        dict,
        repeats=2,
    )
    injector.start()
    injector.stop()
    assert not injector.all_fired() and injector.skipped == ["restart_scheduler", "restart_scheduler"]
