"""End to end under the real Airflow scheduler: the example pipeline built AND committed by Spark.

``pyspark_daily_sales`` builds its MERGE and append sources as Spark DataFrames (``SparkSource``) and commits
every write through delta-spark (``engine="spark"``) on a real Spark Connect server with Delta's jars
(:class:`~benchmarks.harness.spark_connect.BackgroundConnectServer`, one for the module, started while
Airflow starts). One module-scoped run starts the same stack as ``make demo`` (SQLite metadata DB,
LocalExecutor, scheduler, dag-processor, triggerer, api-server); the tests judge it from the REST API's task
instances, the task logs, the lease store's decision log and the Delta log of each table.

A job outside the DAG holds the ``customers`` lease until the DAG's three writers of that table have
queued, so those conflicting writers must take turns whatever the timing of task start-up.

Expected final table contents are computed here with plain Python from the example's seed rules and the
documented per-day rules, never with Spark.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from benchmarks.harness.airflow_api import TaskInstanceRecord
from benchmarks.harness.airflow_runner import (
    AirflowHome,
    AirflowStack,
    default_dags_folder,
    prepare_home,
    stack_processes,
)
from benchmarks.harness.connect_server import group_members
from benchmarks.harness.run_analysis import (
    PairCheck,
    WriteRecord,
    collect_writes,
    judged_writes,
    pair_checks,
    upstream_closure,
)
from benchmarks.harness.spark_connect import BackgroundConnectServer
from deltaguard.core.admission import Owner
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.views import DecisionInfo
from tests.e2e.shared import (
    CONFLICT_TEXT,
    error_records,
    hold_customers,
    load_example_pipeline,
    start_from_migrated_db,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.delta_jars, pytest.mark.timeout(900)]

DAG_ID = "pyspark_daily_sales"
VARIANT = "pyspark"
DAY = "2026-11-21"
#: Seconds each source builder stands in for its upstream job: long enough that writes started together
#: are still running when the slowest of them starts, short enough for a small test.
WRITE_SECONDS = 4
TABLE_NAMES = ("sales_fact", "events", "customers")
SOURCE_TASKS = (
    "merge_sales_de",
    "merge_sales_fr",
    "merge_sales_it",
    "merge_sales_es",
    "log_events_orders",
    "log_events_shipments",
)
CUSTOMERS_TASKS = ("update_customer_tiers", "delete_closed_customers", "add_loyalty_column")
WRITE_TASKS = (*SOURCE_TASKS, *CUSTOMERS_TASKS, "optimize_sales")
#: the job holding ``customers`` until the DAG's writers of that table have all queued
HOLDER = Owner(dag_id="customers_backfill", run_id="manual__e2e", task_id="rewrite_customers", try_number=1)


@dataclass(frozen=True)
class Outcome:
    state: str
    task_instances: list[TaskInstanceRecord]
    writes: list[WriteRecord]
    pairs: list[PairCheck]
    decisions: list[DecisionInfo]
    tables: dict[str, str]
    home: AirflowHome
    data_dir: Path
    wall_s: float
    leftover_pids: list[int]
    connect_leftovers: list[int]
    connect_cpu_s: float | None


def _create_pools(stack: AirflowStack, tables: dict[str, str]) -> None:
    """This DAG's per-table pools: the cluster policy routes each write to one, so they must exist."""
    from deltaguard.pools import PoolsConfig, desired_pools
    from deltaguard.writes.table_uri import table_key

    for spec in desired_pools(PoolsConfig(), [table_key(uri) for uri in tables.values()]):
        # deferred tasks (waiting for a lease in the triggerer) must not hold pool slots
        stack.api.set_pool(spec.name, spec.slots, spec.description, include_deferred=False)


def _release_when_queued(
    lease_store_url: str, uri: str, run_over: threading.Event, timeout: float = 300.0
) -> None:
    """Release the holder's lease once every ``customers`` writer of the DAG has a wait in the decision log
    (or after ``timeout``, or when the run is over, so a broken run fails on its assertions rather than
    hanging). Runs in its own thread, with its own store connection."""
    manager = LeaseManager(lease_store_url)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            waiting = {d.owner_key for d in manager.decisions(uri=uri, limit=500) if d.kind == "wait"}
            if len(waiting - {HOLDER.key}) >= len(CUSTOMERS_TASKS) or run_over.wait(1.0):
                break
        manager.release("e2e-holder", HOLDER)
    finally:
        manager.store.close()


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    root = tmp_path_factory.mktemp("e2e_spark")
    data_dir = (root / "data").resolve()
    tables = {name: str(data_dir / VARIANT / name) for name in TABLE_NAMES}
    started = time.monotonic()
    # one Connect server for the module; its JVM starts while Airflow starts
    with BackgroundConnectServer(root / "connect-server.log") as connect:
        home = prepare_home(
            root / "airflow_home",
            default_dags_folder(),
            parallelism=12,
            data_dir=data_dir,
            extra_env={
                "DELTAGUARD_EXAMPLE_SCHEDULE": "none",
                "DELTAGUARD_EXAMPLE_WRITE_SECONDS": str(WRITE_SECONDS),
                **connect.env(),
            },
        )
        stack = AirflowStack(home, migrate=not start_from_migrated_db(home.home))
        with stack:
            _create_pools(stack, tables)
            manager = LeaseManager(home.lease_store_url)
            try:
                hold_customers(manager, tables["customers"], HOLDER, "e2e-holder")
            finally:
                manager.store.close()
            stack.wait_for_dag(DAG_ID)
            connect.wait_ready()
            server_group = connect.server.process.pid  # type: ignore[union-attr]
            run_over = threading.Event()
            releaser = threading.Thread(
                target=_release_when_queued,
                args=(home.lease_store_url, tables["customers"], run_over),
                daemon=True,
            )
            releaser.start()
            try:
                run_id = stack.trigger(DAG_ID, {"date": DAY})
                state = stack.wait_for_run(DAG_ID, run_id, timeout=480)
            finally:
                run_over.set()
                releaser.join(timeout=60)
            tis, writes = collect_writes(stack.api, DAG_ID, run_id, tables.values())
            upstream = upstream_closure(stack.api.downstream(DAG_ID))
            pairs = pair_checks(writes, judged_writes(home.lease_store_url, writes), upstream)
            manager = LeaseManager(home.lease_store_url)
            try:
                decisions = [d for uri in tables.values() for d in manager.decisions(uri=uri, limit=500)]
            finally:
                manager.store.close()
    leftovers = set(stack.leftover_processes(stack.last_snapshot)) | set(stack_processes(home.home))
    yield Outcome(
        state,
        tis,
        writes,
        pairs,
        decisions,
        tables,
        home,
        data_dir,
        time.monotonic() - started,
        sorted(leftovers),
        group_members(server_group),
        connect.cpu_seconds,
    )


def _rows(uri: str) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return DeltaTable(uri).to_pyarrow_table().to_pylist()


def test_stack_and_connect_server_stopped_without_orphans(outcome: Outcome) -> None:
    assert outcome.leftover_pids == []
    assert outcome.connect_leftovers == []
    print(f"spark e2e wall time {outcome.wall_s:.0f} s, Connect server CPU {outcome.connect_cpu_s} s")


def test_run_succeeded_with_no_failed_or_retried_task(outcome: Outcome) -> None:
    assert outcome.state == "success", [(t.task_id, t.state) for t in outcome.task_instances]
    assert {t.task_id for t in outcome.task_instances} == {"setup_tables", *WRITE_TASKS}
    for ti in outcome.task_instances:
        assert ti.state == "success", ti
        assert ti.try_number == 1, f"{ti.task_id} was retried"
    # every write committed exactly once, from its first try, into this variant's own tables
    assert {w.task_id for w in outcome.writes} == set(WRITE_TASKS)
    for write in outcome.writes:
        assert write.commit is not None, write.task_id
        assert write.commit.info.get("airflow.try_number") == "1"
        assert Path(write.table).is_relative_to(outcome.data_dir / VARIANT)


def test_every_write_was_committed_by_delta_spark(outcome: Outcome) -> None:
    # delta-spark's commitInfo names the Spark build and the cluster; delta-rs writes neither and records
    # the commit metadata as keys of its own instead of one userMetadata JSON
    for write in outcome.writes:
        info = write.commit.info  # type: ignore[union-attr]
        assert str(info.get("engineInfo", "")).startswith("Apache-Spark/"), (write.task_id, info)
        assert '"airflow.task_id"' in str(info.get("userMetadata")), (write.task_id, info)
        assert write.xcom.get("table_uri") == write.table


def _task_log(outcome: Outcome, task_id: str) -> str:
    root = outcome.home.log_dir / f"dag_id={DAG_ID}"
    logs = [log for log in root.rglob("*.log*") if f"task_id={task_id}" in log.parts]
    assert logs, f"no log for {task_id}"
    return "\n".join(log.read_text(errors="replace") for log in logs)


def test_no_task_log_reports_a_delta_conflict(outcome: Outcome) -> None:
    errors = [e for task_id in WRITE_TASKS for e in error_records(_task_log(outcome, task_id))]
    # waiting tasks legitimately *name* the exception they avoid; only errors would mean a failed commit
    assert [e for e in errors if CONFLICT_TEXT.search(e)] == []


def test_the_task_processes_started_no_jvm(outcome: Outcome) -> None:
    # Connect clients only: a driver JVM starting in a task would announce its logging set-up on stderr
    spark_started = re.compile(r"Spark's default log4j profile|Running Spark version")
    for task_id in WRITE_TASKS:
        assert not spark_started.search(_task_log(outcome, task_id)), task_id


def test_compatible_writes_committed_in_parallel_from_the_same_snapshot(outcome: Outcome) -> None:
    free = [p for p in outcome.pairs if p.compatible and not p.ordered]
    # the four per-country MERGEs and the two event appends are independent and compatible for delta-spark
    assert {p.table.rsplit("/", 1)[-1] for p in free} >= {"sales_fact", "events"}
    by_task = {w.task_id: w for w in outcome.writes}
    for pair in free:
        assert pair.overlapped, f"{pair.first} and {pair.second} may run together but did not"
        assert not by_task[pair.second].waited_behind, f"{pair.second} waited although nothing conflicted"
    # the Delta log proves true concurrency: a later MERGE read a snapshot older than an earlier one's commit
    merges = [p for p in free if p.table.endswith("sales_fact")]
    assert any(p.snapshot_overlap for p in merges), [(p.first, p.second, p.snapshot_overlap) for p in merges]


def test_conflicting_writes_were_serialized(outcome: Outcome) -> None:
    conflicting = [p for p in outcome.pairs if not p.compatible]
    assert {(p.first, p.second) for p in conflicting if not p.ordered}, "customers writes must contend"
    by_task = {w.task_id: w for w in outcome.writes}
    for pair in conflicting:
        first, second = by_task[pair.first], by_task[pair.second]
        assert not pair.overlapped, f"{pair.first} and {pair.second} conflict but ran together"
        assert second.write_start >= first.write_end  # type: ignore[operator]
        # delta-spark records the snapshot every non-blind write read: the later one read the earlier commit
        assert second.commit.read_version is not None  # type: ignore[union-attr]
        assert second.commit.read_version >= first.commit.version  # type: ignore[union-attr]
    customers = [w for w in outcome.writes if w.task_id in CUSTOMERS_TASKS]
    assert all(HOLDER.describe() in w.waited_behind for w in customers), [w.waited_behind for w in customers]


def test_decision_log_holds_each_writes_lease(outcome: Outcome) -> None:
    by_request: dict[str, list[DecisionInfo]] = {}
    for decision in outcome.decisions:
        by_request.setdefault(decision.request_id, []).append(decision)
    for write in outcome.writes:
        assert write.lease_id, write.task_id
        assert write.commit.lease_id == write.lease_id  # type: ignore[union-attr]
        kinds = [d.kind for d in sorted(by_request.get(write.lease_id, []), key=lambda d: d.at)]
        assert "grant" in kinds and kinds[-1] == "release", (write.task_id, kinds)
        grant = next(d for d in by_request[write.lease_id] if d.kind == "grant")
        release = next(d for d in by_request[write.lease_id] if d.kind == "release")
        assert grant.uri == write.table or grant.uri.endswith(write.table), (grant.uri, write.table)
        # the commit happened while the lease was held
        assert grant.at - 1 <= write.write_end.timestamp() <= release.at + 1  # type: ignore[union-attr]
    waited = {w.task_id for w in outcome.writes if w.waited_behind}
    assert set(CUSTOMERS_TASKS) <= waited
    waits = {d.request_id for d in outcome.decisions if d.kind == "wait"}
    assert {w.lease_id for w in outcome.writes if w.task_id in CUSTOMERS_TASKS} <= waits


def _expected_sales_row(day: str, country: str, sku: int) -> dict[str, Any]:
    """The documented rule for a day's sale, restated here (the DAG computes it with PySpark)."""
    qty = (sku * 7 + ord(country[0]) * 3 + ord(country[1]) + date.fromisoformat(day).toordinal()) % 40 + 1
    price = 2.5 + sku * 1.25
    return {"date": day, "country": country, "sku": sku, "qty": qty, "amount": round(qty * price, 2)}


def test_final_tables_equal_the_expected_contents(outcome: Outcome) -> None:
    p = load_example_pipeline("example_pipeline_for_pyspark_tests")
    tables = outcome.tables

    expected_sales: dict[tuple[str, str, int], dict[str, Any]] = {}
    for row in p.seed_sales_rows(DAY):
        expected_sales[(row["date"], row["country"], row["sku"])] = row
    for country in p.COUNTRIES:  # MERGE = upsert on (date, country, sku)
        for sku in range(1, p.SKUS_PER_DAY + 1):
            expected_sales[(DAY, country, sku)] = _expected_sales_row(DAY, country, sku)
    actual_sales = {(r["date"], r["country"], r["sku"]): r for r in _rows(tables["sales_fact"])}
    assert actual_sales == expected_sales
    assert len(actual_sales) == 2 * len(p.COUNTRIES) * p.SKUS_PER_DAY

    expected_events = sorted(
        (DAY, s, i, f"{s} batch {i} for {DAY}") for s in p.EVENT_SOURCES for i in range(5)
    )
    actual_events = sorted((r["date"], r["source"], r["seq"], r["message"]) for r in _rows(tables["events"]))
    assert actual_events == expected_events

    expected_customers = {}
    for row in p.seed_customer_rows():
        if row["status"] == "closed":
            continue
        tier = "gold" if row["lifetime_value"] > 1000 else row["tier"]
        expected_customers[row["id"]] = dict(row, tier=tier, loyalty_points=None)
    assert {r["id"]: r for r in _rows(tables["customers"])} == expected_customers
    assert len(expected_customers) == 24


def test_optimize_compacted_the_merged_partitions(outcome: Outcome) -> None:
    optimize = next(w for w in outcome.writes if w.task_id == "optimize_sales")
    merges = [w for w in outcome.writes if w.task_id.startswith("merge_sales_")]
    assert optimize.commit is not None
    assert optimize.commit.version > max(m.commit.version for m in merges)  # type: ignore[union-attr]
    assert optimize.ti.start_date >= max(m.ti.end_date for m in merges)  # type: ignore[operator,type-var]


def test_tables_are_this_variants_own(outcome: Outcome) -> None:
    # the other example DAGs were not triggered, so nothing else wrote under the data directory
    assert sorted(os.listdir(outcome.data_dir)) == [VARIANT]
