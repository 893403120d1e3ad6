"""Every lease-store call returns or fails within ``store_timeout`` while the store is frozen (ADR 0018).

A real PostgreSQL (``tests.pg``) whose every server process is stopped with SIGSTOP for longer than the
timeout: the kernel keeps the TCP connections up, so only a client-side deadline ends a call. Each path
(the task's hook, the keeper, the trigger's shared store, the admission sensor's probe) must fail with
the store-unavailable error (fail closed) within ``store_timeout`` plus a small slack.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from deltaguard.config import LeaseSettings
from deltaguard.core.admission import Owner
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.exceptions import StoreUnavailableError
from deltaguard.leases.keeper import LeaseTiming

TIMEOUT = 2.0
#: How long a call may take while the server is stopped: ten times the timeout of each store call it makes.
#: Only a hang-stopper: the server stays stopped until the test resumes it, so a call that waited for it
#: would never end (a driver's own defaults are minutes); a busy machine must not fail the test. How close
#: a call stays to the timeout is a figure for benchmarks, not an assertion here.
HANG_FACTOR = 10
TIMING = LeaseTiming(ttl_s=30, heartbeat_s=1, store_timeout_s=TIMEOUT, commit_margin_s=1)
PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")
CONFIG = TableConfig(version=1)
OWNER = Owner(dag_id="dag", task_id="load", run_id="r1", try_number=1)
#: another task: its request is a new decision, which the manager cannot answer from what it remembers
OTHER = Owner(dag_id="dag", task_id="other", run_id="r1", try_number=1)


def _settings(url: str) -> LeaseSettings:
    return LeaseSettings(
        store_url=url,
        ttl_s=30,
        heartbeat_s=1,
        poll_s=0.2,
        first_event_s=0.0,
        deferrable=False,
        retention_s=3600,
        timing=TIMING,
    )


def _fresh_database(server_url: str) -> str:
    name = f"dg_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    url = server_url.rsplit("/", 1)[0] + f"/{name}"
    # migrated ahead (``deltaguard db migrate``): creating the schema takes longer than the store timeout
    from deltaguard.leases.open import open_store

    open_store(url).close()
    return url


def _server_pids(url: str) -> list[int]:
    """The postmaster and every process it started (backends, checkpointer, walwriter ...)."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        backend = int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
        postmaster = int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])
    engine.dispose()
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                    children.append(int(entry.name))
    return [postmaster, *children]


@contextlib.contextmanager
def _frozen(url: str) -> Iterator[None]:
    """Stop the whole server (taken at entry, so the backends of the connections open now are in)."""
    pids = _server_pids(url)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def _fails_closed_in_time(call: Callable[[], Any]) -> float:
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError):
        call()
    elapsed = time.monotonic() - started
    assert elapsed < HANG_FACTOR * TIMEOUT, f"took {elapsed:.2f} s against a store_timeout of {TIMEOUT} s"
    return elapsed


def _warm(call: Callable[[], Any]) -> Any:
    """``call()`` while the server runs; on this shared test machine opening the store (connect, schema
    check) can itself take longer than the limit, which is not what the test is about."""
    from deltaguard.leases.open import StoreCallTimeout

    for _ in range(9):
        with contextlib.suppress(StoreCallTimeout):
            return call()
    return call()


def _ask(hook: Any, table: str = "s3://b/t", owner: Owner = OWNER) -> Any:
    return hook.ask(
        table_key=table,
        operation=Operation(OperationKind.INSERT),
        profile=PROFILE,
        table_config=CONFIG,
        owner=owner,
        priority=0,
        request_id=None,
    )


@pytest.fixture
def pg_store_url(pg_server: str) -> str:
    return _fresh_database(pg_server)


@pytest.mark.postgres
@pytest.mark.timeout(600)  # a hang-stopper: the bounds below add up to 180 s
def test_hook_keeper_trigger_and_sensor_fail_within_the_store_timeout_on_a_stopped_postgres(
    pg_store_url: str,
) -> None:
    from deltaguard.hooks.lease import DeltaLeaseHook, shared_store
    from deltaguard.leases.keeper import LeaseKeeper
    from deltaguard.leases.open import StoreCallTimeout
    from deltaguard.leases.sensor_checks import admission_probe

    hook = DeltaLeaseHook(_settings(pg_store_url))
    granted = _warm(lambda: _ask(hook))  # opened, pooled connection kept, a lease held
    keeper = LeaseKeeper(
        hook.manager,
        granted.lease_id,
        OWNER,
        expires_at=granted.expires_at,
        fencing=granted.fencing,
        timing=TIMING,
    )

    async def trigger_check() -> float:
        for _ in range(9):
            with contextlib.suppress(StoreCallTimeout):  # opening or warming up while the server runs
                async with shared_store(pg_store_url, _settings(pg_store_url)) as shared:
                    manager = shared.manager()
                    await shared.call(manager.check, granted.lease_id)
                    with _frozen(pg_store_url):
                        started = time.monotonic()
                        with pytest.raises(StoreUnavailableError):
                            await shared.call(manager.check, granted.lease_id)
                        return time.monotonic() - started
        raise AssertionError("the shared store never opened while the server ran")

    try:
        with _frozen(pg_store_url):
            # the task's hook: acquire (a second table: a new decision), heartbeat, a hook opened only now
            _fails_closed_in_time(lambda: _ask(hook, "s3://b/other", OTHER))
            _fails_closed_in_time(lambda: hook.manager.heartbeat(granted.lease_id, OWNER))
            fresh = DeltaLeaseHook(_settings(pg_store_url))
            _fails_closed_in_time(lambda: _ask(fresh))
            # the admission sensor opens the store from its URL
            _fails_closed_in_time(
                lambda: admission_probe(
                    pg_store_url, "s3://b/t", Operation(OperationKind.INSERT), CONFIG, PROFILE, timing=TIMING
                )
            )
            # the keeper's fence decides from the expiry it knows, within the timeout
            started = time.monotonic()
            keeper.check()
            assert time.monotonic() - started < HANG_FACTOR * 2 * TIMEOUT  # a renewal and the fencing read
            # release and close never raise, and return in time
            started = time.monotonic()
            hook.release(granted.lease_id, OWNER)
            fresh.close()
            assert time.monotonic() - started < HANG_FACTOR * 2 * TIMEOUT
        # the trigger's shared store: the check fails in time instead of holding its slot
        assert asyncio.run(trigger_check()) < HANG_FACTOR * TIMEOUT
        # and once the server runs again, the same hook works (the abandoned release went through too)
        after = Owner(dag_id="dag", task_id="after", run_id="r1", try_number=1)
        assert _warm(lambda: _ask(hook, "s3://b/after", after)).status == "granted"
    finally:
        hook.close()


@pytest.mark.timeout(60)
def test_hook_calls_fail_within_the_store_timeout_behind_a_stopped_sqlite_lock_holder(tmp_path: Path) -> None:
    from deltaguard.hooks.lease import DeltaLeaseHook

    url = f"sqlite:///{tmp_path / 'leases.db'}"
    hook = DeltaLeaseHook(_settings(url))
    granted = _warm(lambda: _ask(hook))
    holder = sqlite3.connect(str(tmp_path / "leases.db"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # a process holding the write lock, then stopped
    try:
        _fails_closed_in_time(lambda: _ask(hook, "s3://b/other", OTHER))
        _fails_closed_in_time(lambda: hook.manager.heartbeat(granted.lease_id, OWNER))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        hook.close()


@pytest.mark.timeout(60)
def test_an_ask_opens_an_unavailable_store_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening fails with the store's own error rather than the call's bound when libpq's
    ``connect_timeout`` (equal to ``store_timeout``) ends first, as on a frozen server under load; the
    duration estimate's read must not swallow it, or the request opens the store again and the ask takes
    two timeouts (measured: 4.0 s against a 2 s ``store_timeout``)."""
    import socket

    from deltaguard.hooks.lease import DeltaLeaseHook
    from deltaguard.leases import open as bounded

    with socket.socket() as probe:  # a port nothing listens on: the connection is refused at once
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    opened: list[str] = []
    real_open = bounded.open_bounded_store

    def counting_open(url: str, *args: Any, **kwargs: Any) -> Any:
        opened.append(url)
        return real_open(url, *args, **kwargs)

    monkeypatch.setattr(bounded, "open_bounded_store", counting_open)
    hook = DeltaLeaseHook(_settings(f"postgresql+psycopg://dg@127.0.0.1:{port}/dg"))
    with pytest.raises(StoreUnavailableError):
        _ask(hook)
    assert len(opened) == 1
