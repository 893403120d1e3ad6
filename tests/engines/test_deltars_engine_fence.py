"""The engine as the fence (ADR 0038): delta-rs refuses a late commit of a lost lease, whichever commits
first, because every leased commit carries its lease's application transaction id and a successor's
commit also carries the ids of the leases it replaced.

First the measured behaviour of delta-rs 1.6.6's conflict checker that the design rests on (real tables,
two handles read at the same version), then the fence end to end with a real SQLite lease store: a writer
"frozen" after its last check is played, as in ``test_deltars_late_commit.py``, by expiring its lease and
letting the conflicting successor work inside that check.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import CommitProperties, Transaction

from deltaguard.core.operations import OperationKind
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.specs import AppendSpec, OverwriteSpec, WriteContext
from deltaguard.exceptions import CommitFencedError, DeltaConflictError, LateCommitError
from deltaguard.leases.keeper import LeaseKeeper, fence_app_id
from deltaguard.leases.manager import LeaseManager
from tests.engines.leased import Clock, leased_keeper

ROW = pa.table({"id": pa.array([9], pa.int64())})


def _table(path: Path, ids: list[int] | None = None) -> str:
    write_deltalake(str(path), pa.table({"id": pa.array(ids or [1, 2, 3], pa.int64())}))
    return str(path)


def _props(*apps: str) -> CommitProperties:
    return CommitProperties(
        app_transactions=[Transaction(a, 1, int(time.time() * 1000)) for a in apps] or None
    )


def _write(table: DeltaTable, mode: str, *apps: str) -> None:
    write_deltalake(table, ROW, mode=mode, commit_properties=_props(*apps))


# -- what delta-rs does ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("loser", "winner", "refused"),
    [
        (("append", "L1"), ("append", "L1"), True),  # the same id on both sides: the later one fails
        (("append", "L1"), ("append", "L2"), False),  # compatible writers with their own ids: both commit
        (("append", "L1"), ("append", "L2", "L1"), True),  # the winner carries the replaced lease's id
        (("append",), ("append", "L1"), False),  # the loser must carry the id itself
        (("overwrite", "L1"), ("append", "L2"), False),  # unfenced, an overwrite drops the appended row
        (("overwrite", "L1"), ("append", "L2", "L1"), True),
        (("delete", "L1"), ("append", "L2", "L1"), True),
    ],
)
def test_delta_rs_refuses_a_commit_whose_app_id_a_concurrent_winner_carries(tmp_path, loser, winner, refused):
    uri = _table(tmp_path / "t")
    stale, fresh = DeltaTable(uri), DeltaTable(uri)  # both read version 0
    _write(fresh, winner[0], *winner[1:])
    try:
        if loser[0] == "delete":
            stale.delete("id = 1", commit_properties=_props(*loser[1:]))
        else:
            _write(stale, loser[0], *loser[1:])
    except CommitFailedError as exc:
        assert refused and "Concurrent transaction failed" in str(exc)
        assert DeltaTable(uri).version() == 1
    else:
        assert not refused
        assert DeltaTable(uri).version() == 2
    assert deltalake.__version__ == "1.6.6"  # the measurement is of this version


@pytest.mark.parametrize("how", ["compact", "z_order"])
def test_delta_rs_drops_app_transactions_from_optimize_commits(tmp_path, how) -> None:
    """So OPTIMIZE commits carry no fence: OPTIMIZE stays fenced on the writer's side only."""
    uri = _table(tmp_path / "t")
    for i in range(3):
        write_deltalake(uri, pa.table({"id": pa.array([10 + i], pa.int64())}), mode="append")
    optimize = DeltaTable(uri).optimize
    if how == "compact":
        optimize.compact(commit_properties=_props("L1"))
    else:
        optimize.z_order(["id"], commit_properties=_props("L1"))
    table = DeltaTable(uri)
    assert table.history(1)[0]["operation"] == "OPTIMIZE"
    assert table.transaction_version("L1") is None


@pytest.mark.parametrize("how", ["compact", "z_order"])
@pytest.mark.parametrize(
    ("winner", "refused", "ids"),
    [("delete", True, [10, 12]), ("overwrite", True, [9]), ("append", False, [9, 10, 11, 12])],
)
def test_a_stale_optimize_is_refused_where_a_winner_removed_what_it_read(
    tmp_path, how, winner, refused, ids
) -> None:
    """Without a fence, what keeps a late OPTIMIZE from losing rows is delta-rs' own check: a winner that
    removed files the OPTIMIZE read refuses it (ConcurrentDeleteRead); beside an append it commits and
    loses nothing (it rewrites only the files it read)."""
    uri = _table(tmp_path / "t", [10])
    for i in (11, 12):
        write_deltalake(uri, pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    stale, fresh = DeltaTable(uri), DeltaTable(uri)
    if winner == "delete":
        fresh.delete("id = 11")
    else:
        _write(fresh, winner)
    try:
        stale.optimize.compact() if how == "compact" else stale.optimize.z_order(["id"])
    except CommitFailedError as exc:
        assert refused and "concurrent transaction deleted data this operation read" in str(exc)
    else:
        assert not refused
    assert sorted(DeltaTable(uri).to_pyarrow_table()["id"].to_pylist()) == ids


# -- the fence end to end --------------------------------------------------------------------------------


def _freeze_after_check(keeper: LeaseKeeper, clock: Clock, then: Any, last: int = 2) -> None:
    """The keeper's ``last`` check passes (a staged append or overwrite checks twice: before delta-rs
    starts and before the commit), then the writer "stops" past its TTL and ``then`` runs meanwhile."""
    real_check = keeper.check
    checks = [0]

    def check_then_freeze() -> None:
        real_check()
        checks[0] += 1
        if checks[0] == last:
            clock.now += 300  # frozen past the TTL: the lease expires and is reclaimed by the next grant
            then()

    keeper.check = check_then_freeze  # type: ignore[method-assign]


def _ids(uri: str) -> list[int]:
    return sorted(r["id"] for r in DeltaTable(uri).to_pyarrow_table().to_pylist())


def test_a_late_overwrite_is_refused_by_the_engine_when_its_successor_committed_first(tmp_path) -> None:
    """The overwrite's holder stops after its last check; an append is granted the table and commits;
    the overwrite then reaches delta-rs from its old snapshot. Unfenced, delta-rs commits it and the
    appended row is gone (the probe above); with the fence, delta-rs refuses it: nothing committed."""
    uri = _table(tmp_path / "sales")
    clock = Clock(time.time())
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}", clock=clock)
    engine = DeltaRsEngine()
    late = leased_keeper(manager, uri, OperationKind.OVERWRITE, "overwrite")
    successor: list[LeaseKeeper] = []

    def successor_commits() -> None:
        successor.append(leased_keeper(manager, uri, OperationKind.INSERT, "append"))
        assert fence_app_id(late.lease_id) in successor[0].fence_app_ids()
        engine.write(uri, AppendSpec(source=ROW), WriteContext(fence=successor[0]))

    _freeze_after_check(late, clock, successor_commits)
    try:
        with pytest.raises(CommitFencedError, match="refused by Delta's conflict checker"):
            engine.write(
                uri,
                OverwriteSpec(source=pa.table({"id": pa.array([7], pa.int64())})),
                WriteContext(fence=late),
            )
        assert _ids(uri) == [1, 2, 3, 9]  # the appended row survives; the overwrite is not in the table
        assert DeltaTable(uri).version() == 1
    finally:
        manager.store.close()


def test_a_successor_reading_before_a_late_commit_is_refused_by_the_engine(tmp_path) -> None:
    """The other order: the late append lands first (and fails loudly after its commit, as before), while
    the successor's overwrite read the table before it. Unfenced, the overwrite would commit over the
    append and drop its row; fenced, delta-rs refuses the overwrite (a conflict: its own lease is live)."""
    uri = _table(tmp_path / "sales")
    clock = Clock(time.time() - 3600)  # lease decisions an hour before the storage's clock: the grant
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}", clock=clock)  # precedes the late commit
    engine = DeltaRsEngine()
    late = leased_keeper(manager, uri, OperationKind.INSERT, "append")
    successor: list[Any] = []

    def successor_reads() -> None:
        keeper = leased_keeper(manager, uri, OperationKind.OVERWRITE, "overwrite")
        successor.append((keeper, engine.open_table(uri)))  # its snapshot predates the late append

    _freeze_after_check(late, clock, successor_reads)
    try:
        with pytest.raises(LateCommitError):
            engine.write(uri, AppendSpec(source=ROW), WriteContext(fence=late))
        keeper, snapshot = successor[0]
        with pytest.raises(DeltaConflictError, match="Concurrent transaction"):
            engine.write(
                uri,
                OverwriteSpec(source=pa.table({"id": pa.array([7], pa.int64())})),
                WriteContext(fence=keeper),
                snapshot=snapshot,
            )
        assert _ids(uri) == [1, 2, 3, 9]
    finally:
        manager.store.close()


def test_compatible_leased_writers_do_not_refuse_each_other(tmp_path) -> None:
    uri = _table(tmp_path / "sales")
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}")
    engine = DeltaRsEngine()
    try:
        first = leased_keeper(manager, uri, OperationKind.INSERT, "append_a")
        second = leased_keeper(manager, uri, OperationKind.INSERT, "append_b")
        snapshot = engine.open_table(uri)
        engine.write(uri, AppendSpec(source=ROW), WriteContext(fence=first))
        result = engine.write(uri, AppendSpec(source=ROW), WriteContext(fence=second), snapshot=snapshot)
        assert result.version == 2 and _ids(uri) == [1, 2, 3, 9, 9]
        table = DeltaTable(uri)
        assert table.transaction_version(fence_app_id(first.lease_id)) == 1
        assert table.transaction_version(fence_app_id(second.lease_id)) == 1
    finally:
        manager.store.close()


class _Fence:
    """A fence that always passes and carries ``ids`` (its own first), as a keeper does."""

    def __init__(self, *ids: str) -> None:
        self.ids = list(ids)

    def check(self) -> None:
        return None

    def fence_app_ids(self) -> list[str]:
        return list(self.ids)


def test_a_replaced_id_already_in_the_snapshot_is_not_carried_again(tmp_path) -> None:
    """Once a commit carrying a lost lease's id has landed, the lost holder's late commit meets it; two
    compatible writers started after it must not both carry that id, or the second is refused."""
    uri = _table(tmp_path / "sales")
    engine = DeltaRsEngine()
    lost = fence_app_id("lost-lease")
    engine.write(uri, AppendSpec(source=ROW), WriteContext(fence=_Fence(fence_app_id("first"), lost)))
    snapshot = engine.open_table(uri)  # holds the lost lease's id
    engine.write(uri, AppendSpec(source=ROW), WriteContext(fence=_Fence(fence_app_id("a"), lost)))
    result = engine.write(
        uri, AppendSpec(source=ROW), WriteContext(fence=_Fence(fence_app_id("b"), lost)), snapshot=snapshot
    )
    assert result.version == 3
    assert DeltaTable(uri).transaction_version(fence_app_id("b")) == 1


def test_compatible_successors_of_one_lost_lease_do_not_refuse_each_other(tmp_path: Path) -> None:
    """Two compatible writers granted together after one lease ended both carry its id. Read from the same
    snapshot, the second meets the first's commit carrying that id (delta-rs: ConcurrentTransaction): the
    engine writes it again from the table as it is now instead of failing a write no conflict stands
    against (measured in the production-shaped run: three MERGEs into other partitions refused each other)."""
    uri = _table(tmp_path / "sales")
    engine = DeltaRsEngine()
    lost = fence_app_id("lost-lease")
    snapshot = engine.open_table(uri)  # read before either successor committed
    engine.write(uri, AppendSpec(source=ROW), WriteContext(fence=_Fence(fence_app_id("a"), lost)))
    result = engine.write(
        uri, AppendSpec(source=ROW), WriteContext(fence=_Fence(fence_app_id("b"), lost)), snapshot=snapshot
    )
    assert result.committed and result.version == 2
    assert _ids(uri) == [1, 2, 3, 9, 9]
    assert DeltaTable(uri).transaction_version(fence_app_id("b")) == 1


def test_a_commit_meeting_its_own_lease_id_is_not_written_again(tmp_path: Path) -> None:
    """The same lease's commit already landed (an unknown outcome retried from the old snapshot): the
    refusal stands, whatever replaced ids the two carry; nothing is written twice."""
    uri = _table(tmp_path / "sales")
    engine = DeltaRsEngine()
    lost, own = fence_app_id("lost-lease"), fence_app_id("a")
    snapshot = engine.open_table(uri)
    engine.write(uri, AppendSpec(source=ROW), WriteContext(fence=_Fence(own, lost)))
    with pytest.raises(DeltaConflictError):
        engine.write(uri, AppendSpec(source=ROW), WriteContext(fence=_Fence(own, lost)), snapshot=snapshot)
    assert _ids(uri) == [1, 2, 3, 9]
