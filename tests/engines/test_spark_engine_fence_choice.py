"""Which fence app transaction a leased delta-spark commit carries, and when a commit that did not land is
a skip (ADR 0038). No JVM: the real runs are in ``tests/spark/jars/test_spark_engine_fence.py``."""

from __future__ import annotations

import time
from pathlib import Path

from deltaguard.core.operations import OperationKind
from deltaguard.engines.spark.engine_fence import FenceTxn, choose, refused_error, skipped_error
from deltaguard.engines.specs import AppendSpec, DeleteSpec, OptimizeSpec
from deltaguard.exceptions import CommitFencedError, ConflictKind, DeltaConflictError
from deltaguard.leases.keeper import FENCE_VERSION_STRIDE, fence_app_id
from deltaguard.leases.manager import LeaseManager
from tests.engines.leased import Clock, leased_keeper

URI = "/tables/sales"
DELETE = DeleteSpec(predicate="id = 1")


class Fence:
    """Fence ids (its own first), a version counter, and a lease that is lost or held."""

    def __init__(self, *ids: str, lost: str | None = None) -> None:
        self.ids = list(ids)
        self.lost = lost
        self.count = 0

    def fence_app_ids(self) -> list[str]:
        return list(self.ids)

    def fence_txn_version(self, table_uri: str) -> int:
        self.count += 1
        return 7 * FENCE_VERSION_STRIDE + self.count

    def still_held(self) -> str | None:
        return self.lost


def test_a_lease_that_replaced_none_carries_its_own_id() -> None:
    txn = choose(Fence("own"), URI, DELETE, lambda apps: dict.fromkeys(apps))
    assert txn == FenceTxn("own", 7 * FENCE_VERSION_STRIDE + 1)


def test_a_successor_carries_the_first_replaced_id_no_commit_carries_yet() -> None:
    recorded = {"own": None, "a": 5, "b": None, "c": None}
    assert choose(Fence("own", "a", "b", "c"), URI, DELETE, lambda apps: recorded) == FenceTxn(
        "b", 7 * FENCE_VERSION_STRIDE + 1
    )
    everything = {"own": None, "a": 5, "b": 6}
    assert choose(Fence("own", "a", "b"), URI, DELETE, lambda apps: everything).app_id == "own"


def test_no_fence_where_delta_spark_records_none_or_a_skip_could_not_be_told() -> None:
    assert choose(Fence("own"), URI, OptimizeSpec(), lambda apps: {}) is None  # OPTIMIZE records no txn
    assert choose(Fence("own"), URI, DELETE, lambda apps: None) is None  # the log is unreadable here
    assert choose(object(), URI, AppendSpec(source=None), lambda apps: {}) is None  # no lease ids


def test_a_write_below_the_logs_version_for_its_id_was_skipped() -> None:
    txn = FenceTxn("own", 10)
    assert skipped_error(txn, None, Fence(lost="reclaimed"), URI) is None  # nothing recorded: a no-op write
    assert skipped_error(txn, 9, Fence(lost="reclaimed"), URI) is None
    lost = skipped_error(txn, 10, Fence(lost="reclaimed"), URI)
    assert isinstance(lost, CommitFencedError) and "skipped" in str(lost)
    live = skipped_error(txn, 11, Fence(), URI)  # a writer that replaced the same lease won: retried
    assert isinstance(live, DeltaConflictError) and live.kind is ConflictKind.CONCURRENT_TRANSACTION


def test_a_concurrent_transaction_refusal_is_fenced_only_when_the_lease_is_lost() -> None:
    conflict = DeltaConflictError(ConflictKind.CONCURRENT_TRANSACTION, "msg", URI, "spark")
    assert isinstance(refused_error(conflict, Fence(lost="reclaimed"), URI), CommitFencedError)
    assert refused_error(conflict, Fence(), URI) is None
    append = DeltaConflictError(ConflictKind.CONCURRENT_APPEND, "msg", URI, "spark")
    assert refused_error(append, Fence(lost="reclaimed"), URI) is None


def test_a_successors_fence_version_is_above_every_version_of_the_lease_it_replaced(tmp_path: Path) -> None:
    clock = Clock(time.time())
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}", clock=clock)
    try:
        late = leased_keeper(manager, URI, OperationKind.OVERWRITE, "late")
        versions = [late.fence_txn_version(URI) for _ in range(3)]
        assert versions == sorted(set(versions))  # a lease's own commits go up one by one
        clock.now += 300  # the late lease expires and is reclaimed by the next grant
        successor = leased_keeper(manager, URI, OperationKind.OVERWRITE, "successor")
        assert fence_app_id(late.lease_id) in successor.fence_app_ids()
        assert successor.fence_txn_version(URI) > late.fence_txn_version(URI)
        assert successor.fence_txn_version("/another/table") is not None  # a lease of one table is its
    finally:
        manager.store.close()
