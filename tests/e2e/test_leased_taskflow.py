"""End to end under the real Airflow scheduler: writers deltaguard does not run, put under its leases.

``dags_examples/leased_taskflow.py`` runs on the shared user's stack (:mod:`tests.e2e.user_stack`:
scheduler, dag-processor, triggerer, api-server; LocalExecutor): ``@task.delta_write`` functions writing
with delta-rs and a classic operator that defers to Airflow's ``TimeDeltaTrigger`` before it writes, wrapped
with ``with_delta_lease``. The tests judge the run from the lease store's decision log (grants and releases
per task on this DAG's two tables, written by the lease manager, not by the tasks), the task instances the
REST API reports, and the Delta tables.

While ``fix_balances`` is deferred no worker runs it, so only the triggerer can renew its lease. A wrapped
operator's lease lives ``unfenced_grace`` TTLs without a renewal (5 by default: 150 s on the shared home,
and 50 s with the 10 s TTL this module's own home had), longer than any deferral here, so neither the lease
surviving the deferral nor the absence of an expiry proves a renewal. The test samples the lease store
while the task is deferred instead: the lease's expiry must move forward (measured: with the trigger's
renewal loop removed the run still succeeds, with no expiry in the decision log, and only this check fails).

The DAG's timing comes from the stack's environment (:data:`~tests.e2e.user_stack.LEASED_WORK_SECONDS`,
:data:`~tests.e2e.user_stack.LEASED_DEFER_SECONDS`), not from options of a home of its own. That no process
of the stack outlives it is checked after the stack's last user (``tests/e2e/conftest.py``).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.harness.airflow_api import TaskInstanceRecord
from deltaguard.leases.codec import owner_from_text
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.views import DecisionInfo
from deltaguard.writes.table_uri import table_key
from tests.e2e.shared import error_records
from tests.e2e.user_stack import LEASE_TTL, LEASED_DEFER_SECONDS, UserStack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

DAG_ID = "deltaguard_leased_taskflow"
LEASE_TTL_S = float(LEASE_TTL)
#: the triggerer renews every ``lease_ttl / 6`` seconds (the shared home sets no heartbeat interval)
HEARTBEAT_S = LEASE_TTL_S / 6
#: seconds after the grant by which the worker has certainly deferred the task (it defers at once)
DEFERRED_BY_S = 8.0
DEFER_S = float(LEASED_DEFER_SECONDS)
BALANCES_WRITERS = {"accrue_interest", "apply_fees", "fix_balances"}
EVENTS_WRITERS = {"append_orders", "append_shipments"}


@dataclass(frozen=True)
class Outcome:
    state: str
    tis: dict[str, TaskInstanceRecord]
    decisions: list[DecisionInfo]
    data: Path
    #: error records of the logs of tasks that did not succeed, to say why
    errors: dict[str, list[str]]
    #: what the lease store listed as live on ``balances`` about every second of the run:
    #: ``(when, {task_id: expires_at})`` (see :func:`_watch_balances`)
    samples: list[tuple[float, dict[str, float]]]


def _watch_balances(
    store_url: str, uri: str, over: threading.Event, samples: list[tuple[float, dict[str, float]]]
) -> None:
    """Sample the live leases on ``balances`` and their expiries every second until ``over``: while a task is
    deferred, only the triggerer can move its lease's expiry forward."""
    manager = LeaseManager(store_url)
    try:
        while not over.wait(1.0):
            live = {
                info.owner.task_id: info.expires_at
                for info in manager.leases(uri)
                if info.owner.dag_id == DAG_ID
            }
            samples.append((time.time(), live))
    finally:
        manager.store.close()


@pytest.fixture(scope="module")
def outcome(user_stack: UserStack) -> Iterator[Outcome]:
    home, stack, data = user_stack.home, user_stack.stack, user_stack.data
    stack.wait_for_dag(DAG_ID)
    samples: list[tuple[float, dict[str, float]]] = []
    over = threading.Event()
    watcher = threading.Thread(
        target=_watch_balances,
        args=(home.lease_store_url, table_key(str(data / "leased" / "balances")), over, samples),
        daemon=True,
    )
    watcher.start()
    try:
        run_id = stack.trigger(DAG_ID)
        state = stack.wait_for_run(DAG_ID, run_id, timeout=300)
    finally:
        over.set()
        watcher.join(timeout=30)
    tis = {ti.task_id: ti for ti in stack.task_instances(DAG_ID, run_id)}
    manager = LeaseManager(home.lease_store_url)
    try:
        # the store is shared with the stack's other users: only this DAG's tables and tasks
        decisions = [
            d
            for table in ("events", "balances")
            for d in manager.decisions(uri=table_key(str(data / "leased" / table)), limit=1000)
            if owner_from_text(d.owner_key).dag_id == DAG_ID
        ]
    finally:
        manager.store.close()
    errors = {
        task_id: [
            e
            for log in (home.log_dir / f"dag_id={DAG_ID}").rglob(f"task_id={task_id}/*.log*")
            for e in error_records(log.read_text(errors="replace"))
        ]
        for task_id, ti in tis.items()
        if ti.state != "success"
    }
    yield Outcome(state, tis, decisions, data, errors, samples)


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


def test_run_succeeded(outcome: Outcome) -> None:
    origin = min(d.at for d in outcome.decisions)
    for table in ("events", "balances"):
        for task_id, (granted, released) in sorted(_intervals(outcome, table).items(), key=lambda kv: kv[1]):
            print(f"{table:9} {task_id:17} lease {granted - origin:6.1f} s .. {released - origin:6.1f} s")
    assert outcome.state == "success", ({t: ti.state for t, ti in outcome.tis.items()}, outcome.errors)
    assert all(ti.state == "success" and ti.try_number == 1 for ti in outcome.tis.values())


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
    assert released - granted >= DEFER_S  # held over the whole deferral
    assert not [d for d in outcome.decisions if d.kind == "expiry"], (
        "a lease expired instead of being renewed"
    )
    ends = [d.kind for d in outcome.decisions if owner_from_text(d.owner_key).task_id == "fix_balances"]
    assert "release" in ends
    # the store listed the lease as live at every sample of its hold
    held = [(at, live) for at, live in outcome.samples if granted + 1 < at < released - 1]
    lapsed = [round(at - granted, 1) for at, live in held if "fix_balances" not in live]
    assert held and lapsed == [], f"the lease was not live {lapsed} s after its grant"
    # and its expiry moved forward while the task was certainly deferred (after the worker deferred it, before
    # the deferral could have ended): renewals by the triggerer, at least two of them
    deferred = [
        (round(at - granted, 1), round(live["fix_balances"] - granted, 1))
        for at, live in held
        if granted + DEFERRED_BY_S <= at <= granted + DEFER_S - 1
    ]
    print("fix_balances while deferred: (seconds after grant, its expiry after grant)", deferred)
    assert len(deferred) >= 5, deferred
    moved = deferred[-1][1] - deferred[0][1]
    assert moved >= 1.5 * HEARTBEAT_S, f"the expiry moved {moved} s while deferred: not renewed {deferred}"


def test_the_tables_hold_every_write(outcome: Outcome) -> None:
    from deltalake import DeltaTable

    events = DeltaTable(str(outcome.data / "leased" / "events")).to_pyarrow_table().to_pylist()
    assert sorted(r["source"] for r in events) == ["orders", "setup", "shipments"]
    balances = DeltaTable(str(outcome.data / "leased" / "balances")).to_pyarrow_table().to_pylist()
    assert sorted((r["account"], r["amount"]) for r in balances) == [("a", 3), ("b", 4)]
