"""Lease timing rules, bounded store calls, and the keeper that renews a lease and fences its commit."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time

import pytest
import sqlalchemy as sa

from deltaguard.core.admission import Granted, Owner
from deltaguard.leases.keeper import (
    LeaseKeeper,
    LeaseTiming,
    LeaseTimingError,
    StoreCallTimeout,
    bounded_call,
)
from deltaguard.leases.manager import LeaseLostError, LeaseManager
from deltaguard.leases.open import open_store, store_options
from tests.leases.conftest import op, request

FAST = LeaseTiming(ttl_s=6.0, heartbeat_s=0.5, store_timeout_s=0.5, commit_margin_s=1.0)


def _granted(
    manager: LeaseManager, owner: str = "writer", kind: str = "DELETE", ttl_s: float = 6.0
) -> Granted:
    grant = manager.acquire(request(owner, ("s3://b/t", op(kind)), ttl_s=ttl_s))
    assert isinstance(grant, Granted)
    return grant


def _keeper(manager: LeaseManager, grant: Granted, timing: LeaseTiming = FAST) -> LeaseKeeper:
    owner = Owner(dag_id="dag", task_id="writer")
    return LeaseKeeper(
        manager, grant.lease_id, owner, expires_at=grant.expires_at, fencing=grant.fencing, timing=timing
    )


def test_timing_refuses_combinations_a_short_stall_would_break() -> None:
    with pytest.raises(LeaseTimingError, match="renews less than three times"):
        LeaseTiming(ttl_s=60, heartbeat_s=30)
    with pytest.raises(LeaseTimingError, match="at least a quarter of the TTL"):
        LeaseTiming(ttl_s=60, heartbeat_s=15, store_timeout_s=10, commit_margin_s=11)
    with pytest.raises(LeaseTimingError, match="store_timeout must be a positive"):
        LeaseTiming(store_timeout_s=0)


def test_store_options_bound_every_store_call(pg_url: str) -> None:
    timing = LeaseTiming(ttl_s=24, heartbeat_s=4, store_timeout_s=2, commit_margin_s=3)
    assert store_options("sqlite:////tmp/x.db", timing.store_timeout_s) == {"busy_timeout_s": 2}
    store = open_store(pg_url, **store_options(pg_url, timing.store_timeout_s))
    try:
        with store.engine.connect() as conn:  # type: ignore[attr-defined]
            assert conn.execute(sa.text("SHOW statement_timeout")).scalar() == "2s"
            assert conn.execute(sa.text("SHOW lock_timeout")).scalar() == "2s"
            # the server cancels it ("statement timeout"): the 30 s sleep is not waited for
            with pytest.raises(sa.exc.OperationalError, match="statement timeout"):
                conn.execute(sa.text("SELECT pg_sleep(30)"))
    finally:
        store.close()


def test_bounded_call_abandons_a_call_that_hangs() -> None:
    # The call hangs until the test lets it go, which it does only after bounded_call has given up on it:
    # returning at all proves the call was abandoned, however slow the machine.
    released = threading.Event()
    try:
        with pytest.raises(StoreCallTimeout):
            bounded_call(released.wait, 0.2)
    finally:
        released.set()
    assert bounded_call(lambda x: x + 1, 60, 41) == 42  # generous: only a hang may fail it


def test_check_renews_a_live_lease(store_url: str) -> None:
    manager = LeaseManager(store_url)
    try:
        grant = _granted(manager)
        keeper = _keeper(manager, grant)
        time.sleep(0.1)
        keeper.check()
        assert keeper.known_expiry > grant.expires_at and keeper.renewals == 1
    finally:
        manager.store.close()


def test_a_reclaimed_lease_fails_the_fence_and_the_heartbeat_cancels(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    manager = LeaseManager(url)
    late = LeaseManager(url, clock=lambda: time.time() + 600)  # sees the first lease as expired
    cancelled: list[str] = []
    try:
        grant = _granted(manager)
        with _keeper(manager, grant) as keeper:
            keeper.on_lost(lambda: cancelled.append("cancel"))
            keeper.check()
            _granted(late, owner="other", kind="OPTIMIZE")  # reclaims the first lease, grants a conflict
            deadline = time.time() + 10
            while not cancelled and time.time() < deadline:
                time.sleep(0.05)
            assert cancelled == ["cancel"]  # the heartbeat thread saw the loss
            # "expired before this heartbeat" when the thread's renewal read the lease just before the reclaim
            with pytest.raises(LeaseLostError, match=r"does not exist|expired before this heartbeat"):
                keeper.check()
    finally:
        manager.store.close()
        late.store.close()


def test_a_lease_near_its_expiry_fails_the_fence(tmp_path) -> None:
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}")
    try:
        grant = _granted(manager, ttl_s=1.5)  # renewals extend it by its own 1.5 s ttl
        keeper = _keeper(
            manager, grant, LeaseTiming(ttl_s=8, heartbeat_s=1, store_timeout_s=0.5, commit_margin_s=2)
        )
        with pytest.raises(LeaseLostError, match="less than the commit margin"):
            keeper.check()
    finally:
        manager.store.close()


@pytest.mark.timeout(60)
def test_a_frozen_sqlite_lock_holder_does_not_hang_the_fence(tmp_path) -> None:
    """A process holding SQLite's write lock and then stopped: renewals time out, the fence decides from
    the expiry it knows (live for a while, then refused), and nothing waits for the store's 30 s default."""
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    timing = LeaseTiming(ttl_s=6, heartbeat_s=1, store_timeout_s=0.5, commit_margin_s=1)
    manager = LeaseManager(open_store(url, **store_options(url, timing.store_timeout_s)))
    holder = sqlite3.connect(str(tmp_path / "leases.db"), isolation_level=None)
    try:
        grant = _granted(manager, ttl_s=20)
        keeper = _keeper(manager, grant, timing)
        holder.execute("BEGIN IMMEDIATE")  # the frozen lock holder, until the test lets go
        # The renewal times out and the fence passes on the 20 s of lease it knows: had it waited for the
        # store's 30 s default, the known lease would have run out and the check raised LeaseLostError.
        keeper.check()
        assert keeper.renewals == 0
        keeper.known_expiry = time.time() + 0.5  # as if the stall had outlasted the lease
        with pytest.raises(LeaseLostError):
            keeper.check()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        manager.store.close()


@pytest.mark.postgres
@pytest.mark.timeout(90)
def test_a_stopped_postgres_backend_does_not_hang_the_heartbeat(pg_url: str) -> None:
    """SIGSTOP of the backend serving the keeper: TCP stays up, so only the client-side deadline helps."""
    timing = LeaseTiming(ttl_s=8, heartbeat_s=1, store_timeout_s=1, commit_margin_s=1)
    store = open_store(pg_url, pool_size=1, **store_options(pg_url, timing.store_timeout_s))
    manager = LeaseManager(store)
    try:
        grant = _granted(manager, ttl_s=20)
        keeper = _keeper(manager, grant, timing)
        keeper.check()
        with store.engine.connect() as conn:  # type: ignore[attr-defined]
            pids = [
                r[0]
                for r in conn.execute(
                    sa.text(
                        "SELECT pid FROM pg_stat_activity WHERE application_name = 'deltaguard-leases' "
                        "AND pid <> pg_backend_pid()"
                    )
                )
            ]
        assert pids
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            # The renewal is abandoned after 1 s and the known expiry still covers the commit: a check that
            # waited for the stopped backend would raise LeaseLostError once the 20 s lease ran out (the
            # backend stays stopped until the test resumes it), or hang until pytest-timeout.
            renewed = keeper.renewals
            keeper.check()
            assert keeper.renewals == renewed
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
    finally:
        store.close()


def test_a_held_sqlite_lock_is_a_store_error_not_a_driver_error(tmp_path) -> None:
    """Deciding behind a stopped lock holder fails as StoreError after the timeout (opening a store whose
    schema is current takes no lock: tests/leases/test_open_beside_a_writer.py)."""
    from deltaguard.leases.store import StoreError

    url = f"sqlite:///{tmp_path / 'leases.db'}"
    LeaseManager(url).store.close()
    holder = sqlite3.connect(str(tmp_path / "leases.db"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        store = open_store(url, busy_timeout_s=0.2)
        try:
            with pytest.raises(StoreError):
                LeaseManager(store).acquire(request("writer", ("s3://b/t", op("DELETE"))))
        finally:
            store.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_lease_whose_fencing_tokens_changed_is_lost(tmp_path) -> None:
    """The store renews the lease but holds other fencing tokens than the holder was granted (the table was
    granted again meanwhile): the commit fence refuses, and a check after unfenced work reports the loss."""
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}")
    try:
        grant = _granted(manager)
        assert grant.fencing
        stale = {uri: token + 1 for uri, token in grant.fencing.items()}
        owner = Owner(dag_id="dag", task_id="writer")

        def keeper() -> LeaseKeeper:
            return LeaseKeeper(
                manager, grant.lease_id, owner, expires_at=grant.expires_at, fencing=stale, timing=FAST
            )

        with pytest.raises(LeaseLostError, match="fencing tokens changed"):
            keeper().check()
        assert "fencing tokens changed" in (keeper().still_held() or "")
        assert _keeper(manager, grant).still_held() is None  # the granted tokens still match
    finally:
        manager.store.close()
