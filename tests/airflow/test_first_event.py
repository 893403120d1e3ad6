"""No deltaguard trigger resumes its task before the deferring try's exit can have reached the scheduler.

Airflow 3.3 fails a task whose trigger fired and whose new run was queued before the executor's report of
the deferring process's exit arrived (:func:`deltaguard.leases.waiting.first_event_after_s`). These tests
check the rule's value, that each trigger holds its event until then even when its condition holds at
once, and that a deferring operator or sensor hands its trigger the value its worker's configuration gives.
"""

from __future__ import annotations

import asyncio
import time

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from deltaguard import config
from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases import waiting
from deltaguard.leases.manager import LeaseManager
from deltaguard.triggers.first_event import not_before
from deltaguard.triggers.lease import LeaseAvailableTrigger
from deltaguard.triggers.table_version import DeltaTableVersionTrigger
from tests.airflow.helpers import sales_table, task_context

#: the shipped margin, read before the in-process tests' fixture sets it to 0
MARGIN_S = waiting.STALE_EXIT_MARGIN_S
#: what the triggers below must wait although their condition holds when they start
HOLD_S = 1.5


def _first_event_after(trigger) -> tuple[object, float]:  # type: ignore[no-untyped-def]
    async def first():  # type: ignore[no-untyped-def]
        started = time.monotonic()
        async for event in trigger.run():
            return event, time.monotonic() - started
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(asyncio.wait_for(first(), 60))


def test_the_rule_covers_the_supervisors_exit_poll_and_the_measured_margin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(waiting, "STALE_EXIT_MARGIN_S", MARGIN_S)
    # the worst report measured came 6.07 s after its deferral with Airflow's default exit poll of 5 s
    assert waiting.first_event_after_s() > 6.07
    monkeypatch.setenv("AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL", "2")
    assert config.first_event_after_s() == 2 + MARGIN_S
    monkeypatch.delenv("AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL")
    assert config.first_event_after_s() == waiting.AIRFLOW_EXIT_POLL_S + MARGIN_S
    monkeypatch.setenv("AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL", "soon")
    with pytest.raises(ValueError, match="min_heartbeat_interval"):
        config.first_event_after_s()


def test_a_trigger_built_without_the_value_reads_the_triggerers_configuration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(waiting, "STALE_EXIT_MARGIN_S", MARGIN_S)
    monkeypatch.setenv("AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL", "1")
    before = time.monotonic()
    assert asyncio.run(not_before(None)) >= before + 1 + MARGIN_S
    before = time.monotonic()
    assert asyncio.run(not_before(0.25)) >= before + 0.25


def test_a_lease_trigger_granted_at_once_fires_no_sooner(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    manager = LeaseManager(url)
    profile, table_config = EngineProfile(EngineName.DELTA_RS, "1.6.6"), TableConfig()

    def request(name: str, kind: OperationKind) -> LeaseRequest:
        claim = TableClaim("/t/sales", Operation(kind, label=name), profile, table_config)
        return LeaseRequest(claims=(claim,), owner=Owner(name=name), ttl_s=30)

    holder = manager.acquire(request("alter", OperationKind.SET_TBLPROPERTIES))
    assert isinstance(holder, Granted)
    queued = manager.acquire(request("merge", OperationKind.MERGE))
    assert isinstance(queued, Waiting)
    manager.release(holder.lease_id, Owner(name="alter"))  # granted at the trigger's first check
    trigger = LeaseAvailableTrigger(url, queued.request_id, poll_interval=0.05, first_event_after_s=HOLD_S)
    event, after_s = _first_event_after(trigger)
    assert event.payload["status"] == "granted"
    assert after_s >= HOLD_S
    manager.store.close()


def test_a_version_trigger_whose_commit_is_there_fires_no_sooner(tmp_path) -> None:
    table = sales_table(str(tmp_path / "sales"))
    write_deltalake(table, pa.table({"id": [9], "country": ["DE"], "amount": [1]}), mode="append")
    trigger = DeltaTableVersionTrigger(
        table_uri=table, baseline_version=0, poll_interval=0.05, first_event_after_s=HOLD_S
    )
    event, after_s = _first_event_after(trigger)
    assert event.payload["commit"]["version"] == 1
    assert after_s >= HOLD_S


def test_a_deferring_operator_and_sensor_carry_their_workers_value(
    tmp_path, lease_store_url, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.sdk.exceptions import TaskDeferred

    from deltaguard.operators.dml import DeltaDeleteOperator
    from deltaguard.sensors.table_version import DeltaTableVersionSensor
    from tests.airflow.helpers import hold_lease_until_waiter

    monkeypatch.setattr(waiting, "STALE_EXIT_MARGIN_S", MARGIN_S)
    monkeypatch.setenv("AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL", "4")
    table = sales_table(str(tmp_path / "sales"))
    hold_lease_until_waiter(table, "never-seen", timeout_s=5)
    op = DeltaDeleteOperator(task_id="gated", table=table, predicate="id = 3", deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(task_context("gated"))
    assert deferred.value.trigger.serialize()[1]["first_event_after_s"] == 4 + MARGIN_S
    sensor = DeltaTableVersionSensor(task_id="wait", table=table, deferrable=True, poke_interval=1)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute(task_context("wait"))
    assert deferred.value.trigger.serialize()[1]["first_event_after_s"] == 4 + MARGIN_S
