"""Opening a lease store whose schema is current does not wait for a writer, and does wait for a checkpoint.

On SQLite the migration lock is the store's one write lock, which every decision takes; every task start
opens the store, so an open that took it queued behind each decision of the deployment (and failed its
store timeout on a busy machine). A store that still needs its schema migrated does wait, as before.

A process that closes the store's last connection holds the file's exclusive lock while it checkpoints the
write-ahead log; a task opening the store then waits for it, within the store's timeout.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deltaguard.exceptions import StoreUnavailableError
from deltaguard.leases.open import open_store
from deltaguard.leases.sql import migrations


@contextlib.contextmanager
def _write_lock_held(path: Path) -> Iterator[None]:
    """Another process's decision in progress: the database's write lock held (BEGIN IMMEDIATE)."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        yield
        other.execute("ROLLBACK")
    finally:
        other.close()


def test_a_current_store_opens_while_another_process_holds_the_write_lock(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    open_store(url).close()  # created and migrated
    # the lock is held until the block ends, so an open that waited for it could only fail ("locked")
    with _write_lock_held(tmp_path / "leases.db"):
        store = open_store(url, busy_timeout_s=2.0)
        try:
            assert store.store_id
        finally:
            store.close()


def test_a_store_needing_a_migration_still_waits_for_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "leases.db"
    url = f"sqlite:///{path}"
    open_store(url).close()
    with contextlib.closing(sqlite3.connect(path)) as conn:  # as a store left one step behind
        conn.execute("DELETE FROM dg_schema_version WHERE version = ?", (migrations.LATEST,))
        conn.commit()
    with _write_lock_held(path), pytest.raises(StoreUnavailableError, match="locked"):
        open_store(url, busy_timeout_s=0.3)


@contextlib.contextmanager
def _exclusive_lock_held(path: Path, seconds: float) -> Iterator[list[float]]:
    """The file's exclusive lock held for ``seconds`` by another connection, as a process closing the last
    connection holds it while it checkpoints: new connections cannot even set their journal mode. Yields
    a list that holds the time of the release once the lock is being let go."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("PRAGMA locking_mode=EXCLUSIVE")
    other.execute("BEGIN EXCLUSIVE")
    other.execute("COMMIT")  # in exclusive locking mode the lock stays until the connection closes
    released: list[float] = []

    def release() -> None:
        released.append(time.monotonic())  # before the lock goes, so an open that got it sees it here
        other.close()

    closer = threading.Timer(seconds, release)
    closer.start()
    try:
        yield released
    finally:
        closer.cancel()
        closer.join()
        other.close()


def test_an_open_waits_for_a_checkpoint_that_holds_the_file(tmp_path: Path) -> None:
    path = tmp_path / "leases.db"
    url = f"sqlite:///{path}"
    open_store(url).close()
    with _exclusive_lock_held(path, 0.5) as released:
        store = open_store(url, busy_timeout_s=60.0)
        try:
            assert store.store_id
        finally:
            store.close()
        # it waited for the lock to be let go (it cannot read the file before)
        assert released


def test_an_open_behind_a_lock_held_past_the_timeout_says_so(tmp_path: Path) -> None:
    path = tmp_path / "leases.db"
    url = f"sqlite:///{path}"
    open_store(url).close()
    with _exclusive_lock_held(path, 600.0), pytest.raises(StoreUnavailableError, match="locked"):
        open_store(url, busy_timeout_s=0.3)
