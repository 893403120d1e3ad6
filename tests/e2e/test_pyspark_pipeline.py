"""End to end under the real Airflow scheduler: the example pipeline with PySpark-built sources.

``pyspark_daily_sales`` builds its MERGE and append sources as Spark DataFrames (``SparkSource``) and
commits them through the delta-rs engine (``toArrow()``). One module-scoped run starts the same stack as
``make demo`` (SQLite metadata DB, LocalExecutor, scheduler, dag-processor, triggerer, api-server) and the
tests judge it from the REST API's task instances, the task logs and the Delta log of each table.

Expected final table contents are computed here with plain Python from the example's seed rules and the
documented per-day rules, never with Spark.
"""

from __future__ import annotations

import os
import re
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
from benchmarks.harness.run_analysis import (
    PairCheck,
    WriteRecord,
    collect_writes,
    judged_writes,
    pair_checks,
    upstream_closure,
)
from tests.e2e.shared import CONFLICT_TEXT, error_records, load_example_pipeline

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(900)]

DAG_ID = "pyspark_daily_sales"
VARIANT = "pyspark"
DAY = "2026-11-21"
#: The conf key ``pyspark_daily_sales`` puts on its drivers' command lines (``DATA_DIR_CONF`` there).
DATA_DIR_CONF = "spark.deltaguard.example.dataDir"
TABLE_NAMES = ("sales_fact", "events", "customers")
SPARK_TASKS = (
    "merge_sales_de",
    "merge_sales_fr",
    "merge_sales_it",
    "merge_sales_es",
    "log_events_orders",
    "log_events_shipments",
)
WRITE_TASKS = (
    *SPARK_TASKS,
    "update_customer_tiers",
    "delete_closed_customers",
    "add_loyalty_column",
    "optimize_sales",
)


@dataclass(frozen=True)
class Outcome:
    state: str
    task_instances: list[TaskInstanceRecord]
    writes: list[WriteRecord]
    pairs: list[PairCheck]
    tables: dict[str, str]
    home: AirflowHome
    data_dir: Path
    wall_s: float
    leftover_pids: list[int]


def _create_pools(stack: AirflowStack, tables: dict[str, str]) -> None:
    """This DAG's per-table pools: the cluster policy routes each write to one, so they must exist."""
    from deltaguard.pools import PoolsConfig, desired_pools
    from deltaguard.writes.table_uri import table_key

    for spec in desired_pools(PoolsConfig(), [table_key(uri) for uri in tables.values()]):
        # deferred tasks (waiting for a lease in the triggerer) must not hold pool slots
        stack.api.set_pool(spec.name, spec.slots, spec.description, include_deferred=False)


def _spark_drivers(marker: str) -> list[int]:
    """Live JVMs started by this DAG's sources (their command line carries the data directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker.encode() in cmdline and b"java" in cmdline:
            found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    root = tmp_path_factory.mktemp("e2e_pyspark")
    data_dir = (root / "data").resolve()
    home = prepare_home(
        root / "airflow_home",
        default_dags_folder(),
        parallelism=8,
        data_dir=data_dir,
        extra_env={"DELTAGUARD_EXAMPLE_SCHEDULE": "none", "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    tables = {name: str(data_dir / VARIANT / name) for name in TABLE_NAMES}
    started = time.monotonic()
    stack = AirflowStack(home)
    with stack:
        _create_pools(stack, tables)
        stack.wait_for_dag(DAG_ID)
        run_id = stack.trigger(DAG_ID, {"date": DAY})
        state = stack.wait_for_run(DAG_ID, run_id, timeout=600)
        tis, writes = collect_writes(stack.api, DAG_ID, run_id, tables.values())
        upstream = upstream_closure(stack.api.downstream(DAG_ID))
        pairs = pair_checks(writes, judged_writes(home.lease_store_url, writes), upstream)
    leftovers = set(stack.leftover_processes(stack.last_snapshot)) | set(stack_processes(home.home))
    leftovers |= set(_spark_drivers(f"{DATA_DIR_CONF}={data_dir}"))
    yield Outcome(
        state, tis, writes, pairs, tables, home, data_dir, time.monotonic() - started, sorted(leftovers)
    )


def _rows(uri: str) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return DeltaTable(uri).to_pyarrow_table().to_pylist()


def test_stack_and_spark_drivers_stopped_without_orphans(outcome: Outcome) -> None:
    assert outcome.leftover_pids == []
    print(f"pyspark e2e wall time {outcome.wall_s:.0f} s")


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


def _task_log(outcome: Outcome, task_id: str) -> str:
    root = outcome.home.log_dir / f"dag_id={DAG_ID}"
    logs = [log for log in root.rglob("*.log*") if f"task_id={task_id}" in log.parts]
    assert logs, f"no log for {task_id}"
    return "\n".join(log.read_text(errors="replace") for log in logs)


def test_no_task_log_reports_a_delta_conflict(outcome: Outcome) -> None:
    errors = [e for task_id in WRITE_TASKS for e in error_records(_task_log(outcome, task_id))]
    # waiting tasks legitimately *name* the exception they avoid; only errors would mean a failed commit
    assert [e for e in errors if CONFLICT_TEXT.search(e)] == []


def test_sources_were_built_by_spark_in_the_task_processes(outcome: Outcome) -> None:
    # A starting driver JVM announces its logging set-up on the task's stderr (at Spark's default WARN
    # level nothing else is certain to appear); only the source tasks start one.
    spark_started = re.compile(r"Spark's default log4j profile|Running Spark version")
    for task_id in SPARK_TASKS:
        assert spark_started.search(_task_log(outcome, task_id)), f"{task_id} started no Spark session"
    for task_id in set(WRITE_TASKS) - set(SPARK_TASKS):
        assert not spark_started.search(_task_log(outcome, task_id)), task_id


def test_compatible_writes_ran_without_waiting_and_conflicting_ones_never_overlapped(
    outcome: Outcome,
) -> None:
    by_task = {w.task_id: w for w in outcome.writes}
    for pair in outcome.pairs:
        first, second = by_task[pair.first], by_task[pair.second]
        if pair.compatible:
            if not pair.ordered:
                # Spark start-up makes these writes long: compatible ones must have run side by side
                assert pair.overlapped, f"{pair.first} and {pair.second} may run together but did not"
                assert not second.waited_behind, f"{pair.second} waited although nothing conflicted"
        else:
            assert not pair.overlapped, f"{pair.first} and {pair.second} conflict but ran together"
            assert second.write_start >= first.write_end  # type: ignore[operator]
    assert any(not p.compatible and not p.ordered for p in outcome.pairs), "customers writes must contend"
    free_tables = {p.table.rsplit("/", 1)[-1] for p in outcome.pairs if p.compatible and not p.ordered}
    assert free_tables >= {"sales_fact", "events"}


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
