"""Opening a lease store whose schema is current does not wait for a writer.

On SQLite the migration lock is the store's one write lock, which every decision takes; every task start
opens the store, so an open that took it queued behind each decision of the deployment (and failed its
store timeout on a busy machine). A store that still needs its schema migrated does wait, as before.
"""

from __future__ import annotations

import contextlib
import sqlite3
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
