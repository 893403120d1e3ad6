"""Waiting lease triggers in one event loop (as the triggerer runs them) share one bounded store handle, wake
on NOTIFY from a real PostgreSQL, fall back to their poll, and give the handle back when they end or are
cancelled (ADR 0025)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
import sqlalchemy as sa

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.hooks import lease as shared_store
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.sql.listen import CHANNEL
from deltaguard.triggers.lease import NOTIFY_POLL_POLLS, LeaseAvailableTrigger
from tests.airflow.helpers import open_store_handles, store_handles_closed

pytestmark = pytest.mark.postgres

PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")
CONFIG = TableConfig(partition_columns=("country",))


def _request(owner: str, kind: OperationKind, table: str = "/t/sales") -> LeaseRequest:
    claim = TableClaim(table, Operation(kind, label=owner), PROFILE, CONFIG)
    return LeaseRequest(claims=(claim,), owner=Owner(name=owner), ttl_s=60, wait_ttl_s=120)


@pytest.fixture
def pg_url(pg_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = f"dg_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(pg_server, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    url = pg_server.rsplit("/", 1)[0] + f"/{name}"
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", url)
    yield url
    engine.dispose()


def _connections(url: str) -> int:
    """Open server connections of the triggers' store handles and listeners on the test database."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        n = conn.execute(
            sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name IN ('deltaguard-leases', 'deltaguard-listen')"
            )
        ).scalar()
    engine.dispose()
    return int(n or 0)


async def _until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait for ``condition`` (checked every 20 ms), failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the triggers never reached the expected state"
        await asyncio.sleep(0.02)


def _waiting_on_listener(count: int) -> Callable[[], bool]:
    """Whether ``count`` triggers did their first check and now wait on the connected listener."""

    def reached() -> bool:
        listeners = [e.listener for e in shared_store._SHARED.values() if e.listener is not None]
        return any(w.connected and w.waiters >= count for w in listeners)

    return reached


async def _first(trigger: LeaseAvailableTrigger) -> tuple[dict, float]:
    async for event in trigger.run():
        return event.payload, time.monotonic()
    raise AssertionError("the trigger ended without an event")


def _holder_and_waiters(url: str, n: int, tables: int = 1) -> tuple[LeaseManager, list[Granted], list[str]]:
    """One blocking holder per table and ``n`` waiting requests spread over the tables."""
    manager = LeaseManager(url)
    holders = []
    for t in range(tables):
        held = manager.acquire(_request(f"alter{t}", OperationKind.SET_TBLPROPERTIES, f"/t/{t}"))
        assert isinstance(held, Granted)
        holders.append(held)
    waiting = []
    for i in range(n):
        answer = manager.acquire(_request(f"merge{i}", OperationKind.MERGE, f"/t/{i % tables}"))
        assert isinstance(answer, Waiting)
        waiting.append(answer.request_id)
    return manager, holders, waiting


def test_waiting_triggers_share_a_bounded_pool_and_cancelled_ones_give_it_back(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 40
    manager, _, waiting = _holder_and_waiters(pg_url, n, tables=n)  # one table each: all wait
    manager.store.close()  # only the triggers' connections are counted from here on
    assert _connections(pg_url) == 0
    checks: dict[str, int] = {}
    real_check = LeaseManager.check

    def counted(self: LeaseManager, request_id: str):  # type: ignore[no-untyped-def]
        answer = real_check(self, request_id)
        checks[request_id] = checks.get(request_id, 0) + 1
        return answer

    monkeypatch.setattr(LeaseManager, "check", counted)

    async def scenario() -> tuple[int, int, int, int]:
        tasks = [
            asyncio.create_task(_first(LeaseAvailableTrigger(pg_url, rid, poll_interval=0.1)))
            for rid in waiting
        ]
        await _until(_waiting_on_listener(n))  # every trigger has checked and waits
        # and each has polled once more while waiting (the safety poll, NOTIFY_POLL_POLLS x 0.1 s), through
        # the shared pool: the pool must stay bounded
        await _until(lambda: all(checks.get(rid, 0) >= 2 for rid in waiting))
        during = await asyncio.to_thread(_connections, pg_url)
        handles = open_store_handles()
        # the triggerer cancels triggers (their task instances were cleared): each gives its handle back
        for task in tasks[: n // 2]:
            task.cancel()
        await asyncio.gather(*tasks[: n // 2], return_exceptions=True)  # each has given its handle back
        assert not any(t.done() for t in tasks[n // 2 :])
        half = await asyncio.to_thread(_connections, pg_url)
        for task in tasks[n // 2 :]:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await store_handles_closed()
        # a closed connection's server process exits a moment after the client closed it
        deadline = time.monotonic() + 5.0
        while (after := await asyncio.to_thread(_connections, pg_url)) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        return during, handles, half, after

    during, handles, half, after = asyncio.run(scenario())
    bound = 2 * shared_store.POOL_SIZE + 1
    assert 2 <= during <= bound, f"{n} waiting triggers held {during} connections (bound {bound})"
    assert handles == 1
    assert 2 <= half <= bound  # the handle stays open while triggers still use it (listener and pool)
    assert after == 0 and open_store_handles() == 0  # closed when the last trigger left


def test_notify_wakes_a_waiter_long_before_its_poll(pg_url: str) -> None:
    manager, (holder,), (rid,) = _holder_and_waiters(pg_url, 1)
    poll = 1.0  # safety poll with a listener: NOTIFY_POLL_POLLS x 1 s

    async def scenario() -> tuple[dict, float]:
        task = asyncio.create_task(_first(LeaseAvailableTrigger(pg_url, rid, poll_interval=poll)))
        await _until(_waiting_on_listener(1))  # first check done, now waiting on the listener
        released = time.monotonic()
        await asyncio.to_thread(manager.release, holder.lease_id, Owner(name="alter0"))
        payload, fired = await asyncio.wait_for(task, 30)
        await store_handles_closed()
        return payload, fired - released

    payload, latency = asyncio.run(scenario())
    assert payload["status"] == "granted" and payload["request_id"] == rid
    assert latency < NOTIFY_POLL_POLLS * poll / 3, f"woke {latency:.2f} s after the release"
    manager.store.close()


def test_a_missed_notification_falls_back_to_the_poll(pg_url: str) -> None:
    manager, (holder,), (rid,) = _holder_and_waiters(pg_url, 1)
    # no notification will come: as if the listener had missed it
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE dg_leases DISABLE TRIGGER dg_leases_freed"))
    engine.dispose()
    poll = 0.3

    async def scenario() -> tuple[dict, float, int]:
        task = asyncio.create_task(_first(LeaseAvailableTrigger(pg_url, rid, poll_interval=poll)))
        await _until(_waiting_on_listener(1))
        released = time.monotonic()
        await asyncio.to_thread(manager.release, holder.lease_id, Owner(name="alter0"))
        (entry,) = shared_store._SHARED.values()
        assert entry.listener is not None and entry.listener.connected
        payload, fired = await asyncio.wait_for(task, 30)
        received = entry.listener.received
        await store_handles_closed()
        return payload, fired - released, received

    payload, latency, received = asyncio.run(scenario())
    assert received == 0 and payload["status"] == "granted"
    assert latency <= NOTIFY_POLL_POLLS * poll + 1.0, f"the safety poll took {latency:.2f} s"
    manager.store.close()


def test_the_store_notifies_only_when_someone_waits(pg_url: str) -> None:
    manager = LeaseManager(pg_url)
    with psycopg.connect(pg_url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as listen:
        listen.execute(f"LISTEN {CHANNEL}")
        alone = manager.acquire(_request("alter", OperationKind.SET_TBLPROPERTIES))
        assert isinstance(alone, Granted)
        manager.release(alone.lease_id, Owner(name="alter"))
        assert list(listen.notifies(timeout=1.0)) == []  # nobody waited: no NOTIFY
        held = manager.acquire(_request("alter", OperationKind.SET_TBLPROPERTIES))
        queued = manager.acquire(_request("merge", OperationKind.MERGE))
        assert isinstance(held, Granted) and isinstance(queued, Waiting)
        manager.release(held.lease_id, Owner(name="alter"))
        (notify,) = list(listen.notifies(timeout=1.0, stop_after=1))
        assert notify.payload == f"{held.lease_id} /t/sales"
    manager.store.close()


def test_a_lost_listen_connection_is_remade_and_waiters_poll_meanwhile(pg_url: str) -> None:
    manager, (holder,), (rid,) = _holder_and_waiters(pg_url, 1)
    poll = 0.5

    async def scenario() -> tuple[dict, bool, bool]:
        task = asyncio.create_task(_first(LeaseAvailableTrigger(pg_url, rid, poll_interval=poll)))
        await _until(_waiting_on_listener(1))
        (entry,) = shared_store._SHARED.values()
        assert entry.listener is not None and entry.listener.connected
        engine = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
        with engine.connect() as conn:  # the server ends the LISTEN connection (a restart, a network cut)
            conn.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'deltaguard-listen' AND datname = current_database()"
                )
            )
        engine.dispose()
        deadline = time.monotonic() + 5
        while entry.listener.connected and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        dropped = not entry.listener.connected
        deadline = time.monotonic() + 10  # remade after retry_s (1 s)
        while not entry.listener.connected and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        remade = entry.listener.connected
        await asyncio.to_thread(manager.release, holder.lease_id, Owner(name="alter0"))
        payload, _ = await asyncio.wait_for(task, 30)
        await store_handles_closed()
        return payload, dropped, remade

    payload, dropped, remade = asyncio.run(scenario())
    assert dropped and remade and payload["status"] == "granted"
    manager.store.close()
