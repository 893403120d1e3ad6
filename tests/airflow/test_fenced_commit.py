"""A writer whose lease was lost never commits (ADR 0018), operator called directly on real tables."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.errors import CommitFencedError
from deltaguard.leases.manager import LeaseManager
from deltaguard.writes.table_uri import table_key
from tests.airflow.helpers import rows, sales_table, task_context


def _take_over(url: str, key: str) -> str:
    """Another writer's INSERT, granted by a manager whose clock is past the first lease's expiry."""
    late = LeaseManager(url, clock=lambda: time.time() + 600)
    try:
        claim = TableClaim(
            key,
            Operation(OperationKind.INSERT),
            EngineProfile(EngineName.DELTA_RS, "1.6.6"),
            TableConfig(partition_columns=("country",), exists=True),
        )
        grant = late.acquire(
            LeaseRequest(claims=(claim,), owner=Owner(dag_id="other", task_id="purge"), ttl_s=60)
        )
        assert isinstance(grant, Granted), grant  # the first lease was reclaimed as expired
        return grant.lease_id
    finally:
        late.store.close()


@pytest.mark.timeout(120)
def test_a_writer_whose_lease_was_taken_over_does_not_commit(tmp_path, lease_store_url) -> None:
    """The reproduction: the lease is lost mid-write and a conflicting INSERT is granted and commits; the
    first writer's OVERWRITE must then fail without committing. It used to commit afterwards, and delta-rs
    lets an overwrite commit over a concurrent append: the appended row was silently lost."""
    from deltaguard.operators.dml import DeltaInsertOperator

    table = sales_table(str(tmp_path / "sales"))
    key = table_key(table)
    taken: list[str] = []

    def source_while_lease_is_lost() -> pa.Table:
        taken.append(_take_over(lease_store_url, key))
        append = pa.table({"id": [9], "country": ["FR"], "amount": [90]})
        write_deltalake(table, append, mode="append")  # the new holder commits at once
        return pa.table({"id": [7], "country": ["DE"], "amount": [70]})

    op = DeltaInsertOperator(
        task_id="overwrite", table=table, mode="overwrite", source=source_while_lease_is_lost
    )
    with pytest.raises(CommitFencedError, match="lease"):
        op.execute(task_context("overwrite"))
    assert taken
    assert DeltaTable(table).version() == 1  # the setup write and the new holder's append, nothing else
    assert [r["id"] for r in rows(table)] == [1, 2, 3, 9]


@pytest.mark.timeout(120)
def test_the_heartbeat_notices_the_loss_and_cancels(tmp_path, lease_store_url, monkeypatch) -> None:
    """A lost lease seen by the heartbeat thread runs the engine's cancel callbacks during the write."""
    from deltaguard.engines.deltars.engine import DeltaRsEngine
    from deltaguard.operators.dml import DeltaInsertOperator

    # The heartbeat's interval decides how soon the loss is seen; the TTL only bounds each store call
    # (a twelfth of it): 3 s gave 0.25 s, less than opening a new SQLite store takes on a busy machine.
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_TTL", "30")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__HEARTBEAT_INTERVAL", "0.2")
    table = sales_table(str(tmp_path / "sales"))
    cancelled: list[str] = []
    real_write = DeltaRsEngine.write

    def write_registering_cancel(self, uri, spec, context=None, **kw):
        context.fence.on_lost(lambda: cancelled.append("cancelled"))
        return real_write(self, uri, spec, context, **kw)

    monkeypatch.setattr(DeltaRsEngine, "write", write_registering_cancel)

    def slow_source() -> pa.Table:
        _take_over(lease_store_url, table_key(table))
        deadline = time.time() + 10
        while not cancelled and time.time() < deadline:
            time.sleep(0.05)
        return pa.table({"id": [8], "country": ["FR"], "amount": [80]})

    op = DeltaInsertOperator(task_id="append", table=table, source=slow_source)
    with pytest.raises(CommitFencedError):
        op.execute(task_context("append"))
    assert cancelled == ["cancelled"]  # by the heartbeat, before the source ended
    assert DeltaTable(table).version() == 0


@pytest.mark.timeout(120)
def test_a_delete_that_commits_after_its_lease_was_taken_over_fails_and_flags_the_table(
    tmp_path, lease_store_url, monkeypatch
) -> None:
    """DELETE has no prepare/commit split in delta-rs: a writer frozen right after its last fence check
    commits late. Played here by taking the table over inside the check (the lease clock runs an hour in
    the past, so the takeover is logged before the commit's real timestamp). The task fails with
    LateCommitError and the decision log flags the table."""
    from airflow.sdk.exceptions import AirflowFailException

    from deltaguard.exceptions import LateCommitError
    from deltaguard.hooks.lease import DeltaLeaseHook
    from deltaguard.leases.keeper import LeaseKeeper
    from deltaguard.leases.manager import OVERRUN_KIND
    from deltaguard.operators.dml import DeltaDeleteOperator

    past = time.time() - 3600

    def manager(self: DeltaLeaseHook) -> LeaseManager:
        if self._manager is None:
            self._manager = LeaseManager(self.settings.store_url, clock=lambda: past)
        return self._manager

    monkeypatch.setattr(DeltaLeaseHook, "manager", property(manager))
    table = sales_table(str(tmp_path / "sales"))
    key = table_key(table)
    real_check = LeaseKeeper.check
    taken: list[str] = []

    def check_then_freeze(self: LeaseKeeper) -> None:
        real_check(self)
        if not taken:  # frozen after the last check, past the TTL: another writer is admitted
            late = LeaseManager(lease_store_url, clock=lambda: past + 600)
            try:
                claim = TableClaim(
                    key,
                    Operation(OperationKind.INSERT),
                    EngineProfile(EngineName.DELTA_RS, "1.6.6"),
                    TableConfig(partition_columns=("country",), exists=True),
                )
                grant = late.acquire(LeaseRequest(claims=(claim,), owner=Owner(task_id="other"), ttl_s=60))
                assert isinstance(grant, Granted)
                taken.append(grant.lease_id)
            finally:
                late.store.close()

    monkeypatch.setattr(LeaseKeeper, "check", check_then_freeze)
    op = DeltaDeleteOperator(task_id="purge", table=table, predicate="country = 'FR'")
    with pytest.raises(LateCommitError, match="after lease") as raised:
        op.execute(task_context("purge"))
    # no retry: a retry would find its own commit by app transaction and succeed as a duplicate
    assert isinstance(raised.value, AirflowFailException)
    assert taken
    assert [r["id"] for r in rows(table)] == [1, 2]  # the DELETE is in the table: the error says so
    manager_now = LeaseManager(lease_store_url)
    try:
        flagged = [d for d in manager_now.decisions(uri=key) if d.kind == OVERRUN_KIND]
    finally:
        manager_now.store.close()
    assert len(flagged) == 1 and flagged[0].detail["committed_version"] == 1
