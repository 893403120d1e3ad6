"""Wrapped work whose renewals stall: a longer grace before its lease is handed on, and an honest failure.

deltaguard does not make a wrapped operator's commit, so it cannot fence it. Reproduced before: with the
heartbeats blocked, a conflicting writer was granted one TTL later while the wrapped OVERWRITE still ran;
the OVERWRITE then committed (erasing the other writer's row) and the task succeeded.

A real SQLite lease store and real delta-rs tables; the store stall is a patched ``heartbeat`` and the
passing of time an injected clock shared by every lease manager, so nothing sleeps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException
from deltalake import write_deltalake

from deltaguard import config
from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.exceptions import WrappedLeaseLostError
from deltaguard.leases.codec import owner_from_text
from deltaguard.leases.manager import OVERRUN_KIND, LeaseManager
from deltaguard.leases.store import StoreError
from deltaguard.writes.table_uri import table_key
from tests.airflow.helpers import rows, sales_table, task_context


class Clock:
    def __init__(self) -> None:
        import time

        self.now = time.time()

    def __call__(self) -> float:
        return self.now


class Scripted(BaseOperator):
    """Runs a callable as its work (the wrapped write)."""

    def __init__(self, *, work: Callable[[], Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.work = work

    def execute(self, context: Any) -> Any:
        return self.work()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch, lease_store_url: str) -> Clock:
    """Every lease manager the hook opens runs on this clock."""
    from deltaguard.hooks.lease import DeltaLeaseHook

    shared = Clock()

    def manager(self: DeltaLeaseHook) -> LeaseManager:
        if self._manager is None:
            self._manager = LeaseManager(self.settings.store_url, clock=shared)
        return self._manager

    monkeypatch.setattr(DeltaLeaseHook, "manager", property(manager))
    return shared


def _block_heartbeats(monkeypatch: pytest.MonkeyPatch) -> dict[str, bool]:
    """Renewals fail as against a stalled store while ``blocked["on"]``."""
    blocked = {"on": True}
    real = LeaseManager.heartbeat

    def stalled(self: LeaseManager, lease_id: str, owner: Owner, **kwargs: Any) -> float:
        if blocked["on"]:
            raise StoreError("the lease store does not answer (blocked by the test)")
        return real(self, lease_id, owner, **kwargs)

    monkeypatch.setattr(LeaseManager, "heartbeat", stalled)
    return blocked


def _other_writer(url: str, key: str, clock: Clock) -> Granted | Waiting:
    manager = LeaseManager(url, clock=clock)
    try:
        claim = TableClaim(
            key,
            Operation(OperationKind.INSERT, label="other"),
            EngineProfile(EngineName.DELTA_RS, "1.6.6"),
            TableConfig(),
        )
        return manager.acquire(LeaseRequest(claims=(claim,), owner=Owner(name="other"), ttl_s=120))
    finally:
        manager.store.close()


def _decisions(url: str, key: str) -> list[Any]:
    manager = LeaseManager(url)
    try:
        return manager.decisions(uri=key)
    finally:
        manager.store.close()


def _wrap(work: Callable[[], Any], table: str) -> Any:
    from deltaguard.operators.leased import with_delta_lease

    return with_delta_lease(
        Scripted(task_id="overwrite", work=work),
        tables=table,
        operation="OVERWRITE",
        engine="delta-rs",
        deferrable=False,
    )


def test_stalled_renewals_do_not_hand_an_unfenced_lease_on_after_one_ttl(
    tmp_path, lease_store_url, clock, monkeypatch
) -> None:
    """Renewals stall for longer than the TTL: the conflicting writer still waits, and the work, which
    kept its lease, succeeds."""
    ttl = config.lease_settings(None, None).ttl_s
    table = sales_table(str(tmp_path / "sales"))
    key = table_key(table)
    answers: list[Any] = []

    def work() -> str:
        blocked = _block_heartbeats(monkeypatch)
        clock.now += 2 * ttl  # twice the TTL without a renewal
        answers.append(_other_writer(lease_store_url, key, clock))
        blocked["on"] = False  # the store answers again
        return "done"

    assert _wrap(work, table).execute(task_context("overwrite")) == "done"
    assert isinstance(answers[0], Waiting)
    assert OVERRUN_KIND not in [d.kind for d in _decisions(lease_store_url, key)]


def test_wrapped_work_that_outlives_its_lease_fails_and_flags_the_table(
    tmp_path, lease_store_url, clock, monkeypatch
) -> None:
    """Renewals stall past the grace; another writer is granted and appends; the wrapped OVERWRITE then
    commits. The task fails naming what happened, and the decision log flags the table."""
    ttl = config.lease_settings(None, None).ttl_s
    table = sales_table(str(tmp_path / "sales"))
    key = table_key(table)
    answers: list[Any] = []

    def work() -> str:
        _block_heartbeats(monkeypatch)
        clock.now += 6 * ttl  # past the default grace of 5 TTLs
        answers.append(_other_writer(lease_store_url, key, clock))
        write_deltalake(table, pa.table({"id": [9], "country": ["IT"], "amount": [90]}), mode="append")
        # the wrapped overwrite commits late, erasing the other writer's row: deltaguard cannot stop it
        write_deltalake(
            table,
            pa.table({"id": [1], "country": ["DE"], "amount": [1]}),
            mode="overwrite",
            partition_by=["country"],
        )
        return "done"

    with pytest.raises(WrappedLeaseLostError, match="may have committed outside its lease") as raised:
        _wrap(work, table).execute(task_context("overwrite"))
    assert isinstance(raised.value, AirflowFailException)  # no retry: it would run the wrapped work again
    assert isinstance(answers[0], Granted)
    assert [r["id"] for r in rows(table)] == [1]  # the other writer's row is gone: the damage is real
    flagged = [d for d in _decisions(lease_store_url, key) if d.kind == OVERRUN_KIND]
    assert len(flagged) == 1
    assert owner_from_text(flagged[0].owner_key).task_id == "overwrite"
    assert "outside its lease" not in flagged[0].detail["reason"]  # says what happened, in its own words
    assert "lease was lost" in flagged[0].detail["reason"]
