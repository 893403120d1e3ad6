"""A commit whose outcome is unknown never duplicates (ADR 0038, "A commit whose outcome is unknown").

When the answer to the log-entry write is lost (an object store timeout after the PUT landed), delta-rs
either fails the call or commits the same actions again at the next version (delta-rs does not
deduplicate by app id). Both are played on a real local table by wrapping deltalake's commit call: it
commits, then raises as a lost answer would, or commits a second time from the same snapshot as delta-rs'
retry would. The engine must find its commit in the log before believing the error, and the second
attempt must be refused by the lease's own fence transaction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.specs import AppendSpec, WriteContext
from deltaguard.leases.keeper import LeaseKeeper
from deltaguard.leases.manager import LeaseManager

NEW = pa.table({"id": pa.array([100, 101, 102], pa.int64())})


class Holds:
    """A fence that holds: appends are then staged and committed through ``create_write_transaction``."""

    def check(self) -> None:
        return None

    def on_lost(self, cancel: Any) -> Any:
        return lambda: None


def _table(path: Path) -> str:
    write_deltalake(str(path), pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    return str(path)


def _ids(uri: str) -> list[int]:
    return sorted(r["id"] for r in DeltaTable(uri).to_pyarrow_table().to_pylist())


def _keeper(tmp_path: Path, uri: str) -> tuple[LeaseManager, LeaseKeeper]:
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}")
    owner = Owner(task_id="append")
    claim = TableClaim(
        uri, Operation(OperationKind.INSERT), EngineProfile(EngineName.DELTA_RS, "1.6.6"), TableConfig()
    )
    grant = manager.acquire(LeaseRequest(claims=[claim], owner=owner, ttl_s=120))
    assert isinstance(grant, Granted)
    return manager, LeaseKeeper(
        manager, grant.lease_id, owner, expires_at=grant.expires_at, fencing=grant.fencing
    )


def test_a_commit_that_landed_but_raised_is_reported_and_its_retry_writes_nothing(
    tmp_path, monkeypatch
) -> None:
    uri = _table(tmp_path / "sales")
    commit = DeltaTable.create_write_transaction

    def landed_then_lost(self: DeltaTable, *args: Any, **kwargs: Any) -> Any:
        commit(self, *args, **kwargs)
        raise OSError("Generic S3 error: error sending request: operation timed out")

    monkeypatch.setattr(DeltaTable, "create_write_transaction", landed_then_lost)
    calls = []
    monkeypatch.setattr(Holds, "check", lambda self: calls.append(1))
    context = WriteContext(app_id="dag/append@run", app_version=0, fence=Holds())
    result = DeltaRsEngine().write(uri, AppendSpec(source=NEW), context)
    assert result.committed and result.version == 1 and not result.duplicate
    assert calls  # the staged path, whose commit call was wrapped, ran
    monkeypatch.undo()
    again = DeltaRsEngine().write(uri, AppendSpec(source=NEW), context)  # Airflow's retry of the task
    assert again.duplicate and again.version == 1
    assert _ids(uri) == [1, 2, 3, 100, 101, 102]  # 0 duplicated rows


def test_a_commit_tried_again_after_a_lost_answer_is_refused_by_its_own_fence(tmp_path, monkeypatch) -> None:
    """A leased write without an idempotency id (a task run outside a scheduler): the second attempt from
    the same snapshot meets the first, which carries the same lease fence id, and is refused; the write
    reports the first commit. Without the fence id the second attempt commits the rows again."""
    uri = _table(tmp_path / "sales")
    manager, keeper = _keeper(tmp_path, uri)
    commit = DeltaTable.create_write_transaction

    def committed_twice(self: DeltaTable, *args: Any, **kwargs: Any) -> Any:
        commit(self, *args, **kwargs)  # landed; its answer lost
        return commit(self, *args, **kwargs)  # delta-rs tries the same commit again

    monkeypatch.setattr(DeltaTable, "create_write_transaction", committed_twice)
    try:
        result = DeltaRsEngine().write(uri, AppendSpec(source=NEW), WriteContext(fence=keeper))
        assert result.committed and result.version == 1
        assert DeltaTable(uri).version() == 1
        assert _ids(uri) == [1, 2, 3, 100, 101, 102]
    finally:
        manager.store.close()


@pytest.mark.parametrize("fails", [OSError("disk gone"), RuntimeError("boom")])
def test_a_write_that_failed_before_its_commit_still_fails(tmp_path, monkeypatch, fails) -> None:
    uri = _table(tmp_path / "sales")

    def never_commits(self: DeltaTable, *args: Any, **kwargs: Any) -> Any:
        raise fails

    monkeypatch.setattr(DeltaTable, "create_write_transaction", never_commits)
    with pytest.raises(type(fails)):
        DeltaRsEngine().write(
            uri, AppendSpec(source=NEW), WriteContext(app_id="a", app_version=0, fence=Holds())
        )
    assert DeltaTable(uri).version() == 0


def test_a_commit_that_landed_but_raised_is_looked_for_with_one_read_of_the_log(
    tmp_path, monkeypatch
) -> None:
    """After the failed call, its commit is looked for once and the one found is reported: the log is not
    opened again (the write's own handle is brought up to date) and its history is read once."""
    uri = _table(tmp_path / "sales")
    commit = DeltaTable.create_write_transaction
    counts = {"opened": 0, "history": 0}

    def landed_then_lost(self: DeltaTable, *args: Any, **kwargs: Any) -> Any:
        commit(self, *args, **kwargs)
        counts.update(opened=0, history=0)  # what the write reads from here on
        raise OSError("Generic S3 error: error sending request: operation timed out")

    def counting(name: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(DeltaTable, "create_write_transaction", landed_then_lost)
    monkeypatch.setattr(DeltaTable, "__init__", counting("opened", DeltaTable.__init__))
    monkeypatch.setattr(DeltaTable, "history", counting("history", DeltaTable.history))
    result = DeltaRsEngine().write(uri, AppendSpec(source=NEW), WriteContext(fence=Holds()))
    assert result.committed and result.version == 1 and not result.duplicate
    assert counts == {"opened": 0, "history": 1}, counts
    monkeypatch.undo()
    assert _ids(uri) == [1, 2, 3, 100, 101, 102]
