"""The lease is released when a write fails and when the task is killed (operator called directly)."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from deltaguard.leases.manager import LeaseManager
from deltaguard.writes.table_uri import table_key
from tests.airflow.helpers import sales_table, task_context, wait_until_unleased


def _decision_kinds(url: str, key: str) -> list[str]:
    manager = LeaseManager(url)
    try:
        assert manager.leases(key) == []  # nothing left held
        return [d.kind for d in manager.decisions(uri=key)]
    finally:
        manager.store.close()


def test_failed_write_releases_the_lease(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.dml import DeltaReplaceWhereOperator

    table = sales_table(str(tmp_path / "sales"))

    def broken_source() -> pa.Table:
        raise RuntimeError("upstream extract failed")

    op = DeltaReplaceWhereOperator(
        task_id="replace", table=table, predicate="country = 'FR'", source=broken_source
    )
    with pytest.raises(Exception, match="upstream extract failed"):
        op.execute(task_context("replace"))
    assert _decision_kinds(lease_store_url, table_key(table))[:2] == ["release", "grant"]  # newest first


def test_on_kill_releases_the_lease(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.dml import DeltaInsertOperator

    table = sales_table(str(tmp_path / "sales"))
    writing, killed = threading.Event(), threading.Event()

    def slow_source() -> pa.Table:
        writing.set()
        killed.wait(60)
        raise RuntimeError("killed")

    op = DeltaInsertOperator(task_id="append", table=table, source=slow_source)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            op.execute(task_context("append"))
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert writing.wait(120), "the write never started"
    manager = LeaseManager(lease_store_url)
    assert len(manager.leases(table_key(table))) == 1  # held while writing
    op.on_kill()
    assert manager.leases(table_key(table)) == []  # released by on_kill, before the write ended
    manager.store.close()
    killed.set()
    worker.join(60)
    assert errors and "killed" in str(errors[0])


def test_heartbeat_keeps_the_lease_through_a_write_longer_than_its_ttl(
    tmp_path, lease_store_url, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from deltaguard.operators.dml import DeltaInsertOperator

    # store calls bounded at 1 s, not the twelfth of the TTL (0.125 s at 1.5 s) a busy machine can miss
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_TTL", "6")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__HEARTBEAT_INTERVAL", "0.5")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__STORE_TIMEOUT", "1")
    table = sales_table(str(tmp_path / "sales"))
    key = table_key(table)
    observed: list[int] = []

    def slow_source() -> pa.Table:
        manager = LeaseManager(lease_store_url)
        try:
            for _ in range(8):  # 12 s: twice the 6 s TTL
                time.sleep(1.5)
                observed.append(len(manager.leases(key)))  # unexpired leases only
        finally:
            manager.store.close()
        return pa.table({"id": [11], "country": ["DE"], "amount": [1]})

    op = DeltaInsertOperator(task_id="slow", table=table, source=slow_source)
    result = op.execute(task_context("slow"))
    assert observed == [1] * 8  # never expired while writing
    assert result["version"] == 1
    assert _decision_kinds(lease_store_url, key)[0] == "release"


@pytest.mark.timeout(180)
def test_a_lease_that_expired_before_resume_is_asked_for_anew(tmp_path, lease_store_url) -> None:
    """The trigger granted the try's request, but the task resumed after the TTL: it must queue anew."""

    from deltaguard.core.admission import Granted, LeaseRequest, TableClaim
    from deltaguard.core.operations import Operation, OperationKind
    from deltaguard.core.profiles import EngineName, EngineProfile
    from deltaguard.core.table_config import TableConfig
    from deltaguard.hooks.lease import task_owner, task_request_id
    from deltaguard.operators.dml import DeltaDeleteOperator

    table = sales_table(str(tmp_path / "sales"))
    owner = task_owner("adhoc", "r1", "late", -1, 1)
    claim = TableClaim(
        table_key(table),
        Operation(OperationKind.DELETE),
        EngineProfile(EngineName.DELTA_RS, "1.6.6"),
        TableConfig(),
    )
    manager = LeaseManager(lease_store_url)
    stale = manager.acquire(
        LeaseRequest(claims=(claim,), owner=owner, ttl_s=0.5, request_id=task_request_id(owner))
    )
    assert isinstance(stale, Granted)
    manager.store.close()
    wait_until_unleased(lease_store_url, table)  # the 0.5 s TTL has passed: the grant is stale

    result = DeltaDeleteOperator(task_id="late", table=table, predicate="id = 3").execute(
        task_context("late")
    )
    assert result["version"] == 1 and result["lease_id"] != stale.lease_id


def test_trigger_timeout_withdraws_the_queued_request(tmp_path, lease_store_url) -> None:
    from airflow.sdk.bases.operator import TRIGGER_FAIL_REPR, TriggerFailureReason
    from airflow.sdk.exceptions import TaskDeferred

    from deltaguard.operators.base import LeaseWaitTimeout
    from deltaguard.operators.dml import DeltaDeleteOperator
    from tests.airflow.helpers import hold_lease_until_waiter

    table = sales_table(str(tmp_path / "sales"))
    key = table_key(table)
    hold_lease_until_waiter(table, "never-seen", timeout_s=5)  # an exclusive lease, released after 5 s
    op = DeltaDeleteOperator(task_id="gated", table=table, predicate="id = 3", deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(task_context("gated"))
    assert deferred.value.trigger.serialize()[0] == "deltaguard.triggers.lease.LeaseAvailableTrigger"
    manager = LeaseManager(lease_store_url)
    assert [w.owner.task_id for w in manager.waiters(key)] == ["gated"]
    with pytest.raises(LeaseWaitTimeout):
        op.resume_execution(
            TRIGGER_FAIL_REPR, {"error": TriggerFailureReason.TRIGGER_TIMEOUT}, task_context("gated")
        )
    assert manager.waiters(key) == []  # withdrawn, not left to expire
    manager.store.close()
