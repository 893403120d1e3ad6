"""The one waiting rule (:func:`deltaguard.leases.waiting.next_step`) and how the operator, the lease hook
and the configuration carry it out: invalid input fails without retry, the store is opened once per try,
and ``[deltaguard] decision_log_retention`` is what the store prunes by."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltaguard import config
from deltaguard.leases.keeper import LeaseTimingError
from deltaguard.leases.waiting import Defer, Proceed, Sleep, TimeOut, next_step
from tests.airflow.helpers import hold_lease_until_waiter, sales_table, task_context, wait_until_unleased

seconds = st.floats(min_value=0, max_value=1e6, allow_nan=False)


def test_admitted_proceeds_whatever_the_wait() -> None:
    assert next_step(admitted=True, waited_s=1e9, timeout_s=1.0, poll_s=5, deferrable=True) == Proceed()


def test_a_spent_timeout_times_out_even_when_deferrable() -> None:
    assert next_step(admitted=False, waited_s=10, timeout_s=10, poll_s=5, deferrable=True) == TimeOut(10)


def test_deferrable_defers_with_the_time_left() -> None:
    assert next_step(admitted=False, waited_s=4, timeout_s=10, poll_s=5, deferrable=True) == Defer(6)
    assert next_step(admitted=False, waited_s=4, timeout_s=None, poll_s=5, deferrable=True) == Defer(None)


def test_in_the_worker_it_sleeps_one_poll_but_never_past_the_timeout() -> None:
    assert next_step(admitted=False, waited_s=0, timeout_s=None, poll_s=5, deferrable=False) == Sleep(5)
    assert next_step(admitted=False, waited_s=8, timeout_s=10, poll_s=5, deferrable=False) == Sleep(2)


@given(
    waited=seconds,
    slack=st.none() | st.floats(min_value=-120, max_value=120),
    poll=st.floats(0.01, 60),
    deferrable=st.booleans(),
)
def test_a_wait_never_outlasts_its_timeout(waited, slack, poll, deferrable) -> None:
    timeout = None if slack is None else max(0.0, waited + slack)
    step = next_step(admitted=False, waited_s=waited, timeout_s=timeout, poll_s=poll, deferrable=deferrable)
    if timeout is not None:
        match step:
            case Sleep(seconds=s):
                assert s > 0 and waited + s <= timeout + 1e-9
            case Defer(timeout_s=t):
                assert t is not None and t > 0 and waited + t <= timeout + 1e-9
            case TimeOut():
                assert waited >= timeout
            case _:
                pytest.fail(f"not admitted, yet {step}")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"table": "ftp://host/sales", "predicate": "id = 1"}, "scheme"),
        ({"predicate": "id = = 1"}, "cannot be parsed"),
        # valid Spark 4 SQL that delta-rs (DataFusion) cannot plan: refused before the lease, not by delta-rs
        ({"predicate": "country COLLATE UTF8_LCASE = 'de'"}, "COLLATE"),
    ],
)
def test_invalid_input_fails_the_task_without_retry(tmp_path, lease_store_url, kwargs, message) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    from deltaguard.exceptions import InvalidWriteError
    from deltaguard.leases.manager import LeaseManager
    from deltaguard.operators.dml import DeltaDeleteOperator

    table = sales_table(str(tmp_path / "sales"))
    op = DeltaDeleteOperator(task_id="bad", **{"table": table, **kwargs})
    with pytest.raises(AirflowFailException, match=message) as raised:
        op.execute(task_context("bad"))
    assert isinstance(raised.value, InvalidWriteError)  # callers catching deltaguard's error still do
    manager = LeaseManager(lease_store_url)
    try:
        assert manager.decisions(limit=10) == []  # refused before any lease was asked for
    finally:
        manager.store.close()


def test_a_resumed_try_opens_the_lease_store_once(tmp_path, lease_store_url, monkeypatch) -> None:
    """Resumed without its kwargs (as ``dag.test()`` resumes), a try reads its wait from the decision log,
    asks for the lease and writes: all through one store connection."""
    from airflow.sdk.exceptions import TaskDeferred

    from deltaguard.leases import open as open_module
    from deltaguard.operators.dml import DeltaDeleteOperator

    table = sales_table(str(tmp_path / "sales"))
    hold_lease_until_waiter(table, "resumed", timeout_s=1)
    op = DeltaDeleteOperator(task_id="resumed", table=table, predicate="id = 3", deferrable=True)
    with pytest.raises(TaskDeferred):
        op.execute(task_context("resumed"))
    wait_until_unleased(lease_store_url, table)  # the holder has released

    opened: list[str] = []
    real_open = open_module.open_store

    def counting_open(url: str, **options: object):
        opened.append(url)
        return real_open(url, **options)

    monkeypatch.setattr(open_module, "open_store", counting_open)
    result = op.execute_complete(task_context("resumed"), event={"status": "granted"})
    assert result["version"] == 1 and result["waited_behind"]  # the wait was restored from the log
    assert opened == [lease_store_url]


def test_decision_log_retention_is_what_the_store_prunes_by(tmp_path, monkeypatch) -> None:
    from deltaguard.hooks.lease import DeltaLeaseHook
    from deltaguard.leases.store import DecisionRow

    monkeypatch.setenv("AIRFLOW__DELTAGUARD__DECISION_LOG_RETENTION", "2")
    settings = config.lease_settings(f"sqlite:///{tmp_path / 'leases.db'}")
    assert settings.retention_s == 2 * 86400
    day = 86400.0
    now = time.time()
    with DeltaLeaseHook(settings) as leases:
        store = leases.manager.store
        with store.transaction(["t"]) as txn:
            txn.log([DecisionRow(now - age * day, "grant", f"r{age}", "t", "o", "{}") for age in (1, 3)])
        assert leases.manager.prune() == 1
        assert [d.request_id for d in store.decisions(uri="t")] == ["r1"]


def test_settings_are_checked_when_read(monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_TTL", "30")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__HEARTBEAT_INTERVAL", "20")
    with pytest.raises(LeaseTimingError, match="renews less than three times"):
        config.lease_settings("sqlite:///x.db")  # refused, not silently capped (ADR 0018)
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__HEARTBEAT_INTERVAL", "5")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__STORE_TIMEOUT", "7")
    with pytest.raises(LeaseTimingError, match="at least a quarter of the TTL"):
        config.lease_settings("sqlite:///x.db")  # 30 - 5 - 2 * 7 - 30 / 8 = 7.25 s < 7.5 s
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__STORE_TIMEOUT", "2")
    timing = config.lease_settings("sqlite:///x.db").timing
    assert (timing.heartbeat_s, timing.store_timeout_s, timing.commit_margin_s) == (5, 2, 30 / 8)
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__POLL_INTERVAL", "-1")
    with pytest.raises(ValueError, match="poll_interval"):
        config.lease_settings("sqlite:///x.db")


def test_waited_s_counts_the_wait_not_the_write(tmp_path, lease_store_url) -> None:
    import pyarrow as pa

    from deltaguard.operators.dml import DeltaInsertOperator

    table = sales_table(str(tmp_path / "sales"))

    def slow_source() -> pa.Table:
        time.sleep(1.5)
        return pa.table({"id": [4], "country": ["FR"], "amount": [40]})

    result = DeltaInsertOperator(task_id="slow", table=table, source=slow_source).execute(
        task_context("slow")
    )
    assert result["version"] == 1
    assert result["waited_s"] < 1.0 and result["decision"].startswith("deltaguard: lease granted at once")


def test_waited_s_does_not_count_preparing_the_write(tmp_path, lease_store_url, monkeypatch) -> None:
    from deltaguard.operators.base import DeltaWriteOperator
    from deltaguard.operators.dml import DeltaDeleteOperator

    table = sales_table(str(tmp_path / "sales"))
    prepare = DeltaWriteOperator.prepare_try

    def slow_prepare(self: DeltaWriteOperator, context: Any) -> Any:
        time.sleep(1.5)  # as building a Spark session does, before any lease is asked for
        return prepare(self, context)

    monkeypatch.setattr(DeltaWriteOperator, "prepare_try", slow_prepare)
    result = DeltaDeleteOperator(task_id="slow", table=table, predicate="country = 'FR'").execute(
        task_context("slow")
    )
    assert result["waited_s"] < 1.0 and result["decision"].startswith("deltaguard: lease granted at once")
