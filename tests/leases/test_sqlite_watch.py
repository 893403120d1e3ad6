"""``SqliteFreedWatcher`` on a real SQLite lease store: a release wakes the waiter that named the holder,
well within one poll interval, and nobody else."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from deltaguard.core.admission import Granted, Waiting
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.sql.sqlite_watch import SqliteFreedWatcher, sqlite_path

from .conftest import op, request


def test_sqlite_path_of_store_urls(tmp_path: Path) -> None:
    assert sqlite_path(f"sqlite:///{tmp_path / 'l.db'}") == str(tmp_path / "l.db")
    assert sqlite_path("sqlite://") is None
    assert sqlite_path("postgresql+psycopg://u@h/db") is None


def test_a_release_wakes_the_waiter_that_named_the_holder(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    manager = LeaseManager(url)
    a, b = request("a", ("t1", op("UPDATE"))), request("b", ("t1", op("UPDATE")))
    other = request("c", ("t2", op("UPDATE")))
    held = manager.acquire(a)
    elsewhere = manager.acquire(other)
    waiting = manager.acquire(b)
    assert isinstance(held, Granted) and isinstance(elsewhere, Granted) and isinstance(waiting, Waiting)
    blockers = {blocker.id for blocker in waiting.blockers}
    assert blockers == {held.lease_id}

    async def scenario() -> tuple[bool, bool, float]:
        watcher = SqliteFreedWatcher(str(tmp_path / "leases.db"), interval_s=0.05)
        watcher.start()
        try:
            for _ in range(100):  # the first read marks where the log stood
                if watcher.connected:
                    break
                await asyncio.sleep(0.01)
            woken, bystander, seen = asyncio.Event(), asyncio.Event(), asyncio.Event()
            watcher.watch(woken, blockers, since=time.monotonic())
            watcher.watch(bystander, {"nobody"}, since=time.monotonic())
            # set when the watcher delivers the other table's release: every waiter it woke is set by then
            watcher.watch(seen, {elsewhere.lease_id}, since=time.monotonic())
            await asyncio.to_thread(manager.release, elsewhere.lease_id, other.owner)
            await asyncio.wait_for(seen.wait(), timeout=5.0)
            freed_elsewhere = woken.is_set()
            began = time.monotonic()
            await asyncio.to_thread(manager.release, held.lease_id, a.owner)
            await asyncio.wait_for(woken.wait(), timeout=5.0)
            return freed_elsewhere, bystander.is_set(), time.monotonic() - began
        finally:
            await watcher.close()

    try:
        freed_elsewhere, bystander, latency = asyncio.run(scenario())
    finally:
        manager.store.close()
    assert not freed_elsewhere  # another table's release names neither the holder nor its table
    assert not bystander
    assert latency < 1.0
