"""End to end under the real Airflow scheduler: writers deltaguard does not run, put under its leases.

``dags_examples/leased_taskflow.py`` runs on a real stack (scheduler, dag-processor, triggerer,
api-server; LocalExecutor): ``@task.delta_write`` functions writing with delta-rs and a classic operator
that defers to Airflow's ``TimeDeltaTrigger`` before it writes, wrapped with ``with_delta_lease``. The
tests judge the run from the lease store's decision log (grants and releases per task, written by the lease
manager, not by the tasks), the task instances the REST API reports, and the Delta tables.

The lease TTL is set shorter than the deferral, so the deferred writer keeps its lease only if the
triggerer renews it: the worker that took the lease is gone while the task is deferred.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.harness.airflow_api import TaskInstanceRecord
from benchmarks.harness.airflow_runner import AirflowStack, default_dags_folder, prepare_home, stack_processes
from deltaguard.leases.codec import owner_from_text
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.views import DecisionInfo
from deltaguard.writes.table_uri import table_key
from tests.e2e.shared import error_records, start_from_migrated_db

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

DAG_ID = "deltaguard_leased_taskflow"
LEASE_TTL_S = 10.0
DEFER_S = 24.0  # longer than two TTLs: the lease survives only if the triggerer renews it
WORK_S = 6.0
BALANCES_WRITERS = {"accrue_interest", "apply_fees", "fix_balances"}
EVENTS_WRITERS = {"append_orders", "append_shipments"}


@dataclass(frozen=True)
class Outcome:
    state: str
    tis: dict[str, TaskInstanceRecord]
    decisions: list[DecisionInfo]
    data: Path
    leftover_pids: list[int]
    #: error records of the logs of tasks that did not succeed, to say why
    errors: dict[str, list[str]]


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    root = tmp_path_factory.mktemp("leased")
    dags = root / "dags"
    dags.mkdir()
    shutil.copy(default_dags_folder() / "leased_taskflow.py", dags)  # only this DAG: a quick parse
    data = root / "data"
    home = prepare_home(
        root / "airflow_home",
        dags,
        parallelism=8,
        data_dir=data,
        options={
            "deltaguard": {
                # a short TTL, so only the triggerer's renewals keep the deferred writer's lease; the
                # store timeout (SQLite's busy timeout) stays generous for tasks starting together
                "lease_ttl": str(LEASE_TTL_S),
                "heartbeat_interval": "1",
                "store_timeout": "2.5",
                "commit_margin": "1",
                "poll_interval": "2",
            }
        },
        extra_env={
            "DELTAGUARD_LEASED_WORK_SECONDS": str(WORK_S),
            "DELTAGUARD_LEASED_DEFER_SECONDS": str(DEFER_S),
        },
    )
    stack = AirflowStack(home, migrate=not start_from_migrated_db(home.home))
    with stack:
        stack.wait_for_dag(DAG_ID)
        run_id = stack.trigger(DAG_ID)
        state = stack.wait_for_run(DAG_ID, run_id, timeout=300)
        tis = {ti.task_id: ti for ti in stack.task_instances(DAG_ID, run_id)}
    manager = LeaseManager(home.lease_store_url)
    try:
        decisions = manager.decisions(limit=1000)
    finally:
        manager.store.close()
    leftovers = sorted(set(stack.leftover_processes(stack.last_snapshot)) | set(stack_processes(home.home)))
    errors = {
        task_id: [
            e
            for log in (home.log_dir / f"dag_id={DAG_ID}").rglob(f"task_id={task_id}/*.log*")
            for e in error_records(log.read_text(errors="replace"))
        ]
        for task_id, ti in tis.items()
        if ti.state != "success"
    }
    yield Outcome(state, tis, decisions, data, leftovers, errors)


def _intervals(outcome: Outcome, table: str) -> dict[str, tuple[float, float]]:
    """Per task: when the lease manager granted its lease on ``table`` and when it was released."""
    key = table_key(str(outcome.data / "leased" / table))
    grants: dict[str, float] = {}
    ends: dict[str, float] = {}
    for d in outcome.decisions:
        if d.uri != key:
            continue
        task_id = owner_from_text(d.owner_key).task_id
        if d.kind == "grant":
            grants[task_id] = d.at
        elif d.kind in ("release", "expiry"):
            ends[task_id] = d.at
    return {t: (grants[t], ends[t]) for t in grants if t in ends}


def test_run_succeeded_and_the_stack_stopped_cleanly(outcome: Outcome) -> None:
    origin = min(d.at for d in outcome.decisions)
    for table in ("events", "balances"):
        for task_id, (granted, released) in sorted(_intervals(outcome, table).items(), key=lambda kv: kv[1]):
            print(f"{table:9} {task_id:17} lease {granted - origin:6.1f} s .. {released - origin:6.1f} s")
    assert outcome.state == "success", ({t: ti.state for t, ti in outcome.tis.items()}, outcome.errors)
    assert all(ti.state == "success" and ti.try_number == 1 for ti in outcome.tis.values())
    assert outcome.leftover_pids == []


def test_every_wrapped_writer_held_a_lease_within_its_task_instance(outcome: Outcome) -> None:
    held = {**_intervals(outcome, "balances"), **_intervals(outcome, "events")}
    assert set(held) == BALANCES_WRITERS | EVENTS_WRITERS
    for task_id, (granted, released) in held.items():
        ti = outcome.tis[task_id]
        assert ti.start_date and ti.end_date
        assert ti.start_date.timestamp() - 1 <= granted < released <= ti.end_date.timestamp() + 1, task_id


def test_conflicting_writers_took_turns(outcome: Outcome) -> None:
    held = sorted(_intervals(outcome, "balances").items(), key=lambda kv: kv[1][0])
    assert [t for t, _ in held] and {t for t, _ in held} == BALANCES_WRITERS
    for (first, (_, first_end)), (second, (second_start, _)) in itertools.pairwise(held):
        assert second_start >= first_end, f"{second} was granted before {first} released"
    waited = {owner_from_text(d.owner_key).task_id for d in outcome.decisions if d.kind == "wait"}
    assert len(waited & BALANCES_WRITERS) >= 2, waited  # the later two queued behind the first


def test_compatible_writers_held_their_leases_at_once(outcome: Outcome) -> None:
    held = _intervals(outcome, "events")
    (a_start, a_end), (b_start, b_end) = held["append_orders"], held["append_shipments"]
    assert a_start < b_end and b_start < a_end, held
    waited = {owner_from_text(d.owner_key).task_id for d in outcome.decisions if d.kind == "wait"}
    assert not waited & EVENTS_WRITERS


def test_the_deferred_writer_kept_its_lease_through_the_triggerer(outcome: Outcome) -> None:
    granted, released = _intervals(outcome, "balances")["fix_balances"]
    assert released - granted >= DEFER_S  # held over the whole deferral, > 2 TTLs
    assert not [d for d in outcome.decisions if d.kind == "expiry"], (
        "a lease expired instead of being renewed"
    )
    ends = [d.kind for d in outcome.decisions if owner_from_text(d.owner_key).task_id == "fix_balances"]
    assert "release" in ends


def test_the_tables_hold_every_write(outcome: Outcome) -> None:
    from deltalake import DeltaTable

    events = DeltaTable(str(outcome.data / "leased" / "events")).to_pyarrow_table().to_pylist()
    assert sorted(r["source"] for r in events) == ["orders", "setup", "shipments"]
    balances = DeltaTable(str(outcome.data / "leased" / "balances")).to_pyarrow_table().to_pylist()
    assert sorted((r["account"], r["amount"]) for r in balances) == [("a", 3), ("b", 4)]
