"""The SQLite lease store: one file, safe across processes on one machine (LocalExecutor).

Every decision runs in a ``BEGIN IMMEDIATE`` transaction, which takes SQLite's single write lock up front:
decisions are serialised across all processes, so check-and-grant is atomic. WAL mode lets the cheap
read-only queries (``check``, listings) run beside a writer; a busy timeout makes writers queue instead of
failing while another process holds the lock.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import time
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from deltaguard.leases.sql.base import SqlLeaseStore
from deltaguard.leases.store import LeaseRow, StoreReplacedError, StoreUnavailableError, TableRow

_Q_TABLES = sa.text(
    "SELECT uri, fencing, config_version, config_json FROM dg_tables WHERE uri IN :uris ORDER BY uri"
).bindparams(sa.bindparam("uris", expanding=True))


class SqliteLeaseStore(SqlLeaseStore):
    """Leases in an SQLite file.

    :param url: ``sqlite:///path/to/leases.db`` (the directory must exist; ``:memory:`` is refused because
        a lease store must be shared between processes).
    :param busy_timeout_s: how long a decision waits for another process's write lock before failing.
    :param migrate: create/migrate the schema on open.
    """

    def __init__(self, url: str, *, busy_timeout_s: float = 30.0, migrate: bool = True) -> None:
        self.busy_timeout_s = busy_timeout_s
        database = make_url(url).database
        if not database or database == ":memory:":
            raise ValueError(f"an SQLite lease store needs a file, got {url!r}")
        if not Path(database).parent.is_dir():
            raise StoreUnavailableError(
                f"lease store {url} is unavailable: directory {Path(database).parent} does not exist"
            )
        self.path = os.path.abspath(database)
        if not os.path.exists(self.path):
            # The file is created here, once, when the store is opened; the engine's connections open it
            # read-write without creating it (``mode=rw``), so a connection made after the file was deleted
            # fails instead of starting an empty store under the holders of the old one.
            try:
                with contextlib.closing(sqlite3.connect(self.path)):
                    pass
            except sqlite3.Error as exc:
                raise StoreUnavailableError(f"lease store {url} is unavailable: {exc}") from exc
        super().__init__(url, migrate=migrate)
        try:
            opened = os.stat(self.path)
        except OSError as exc:
            self.close()
            raise StoreUnavailableError(f"lease store {self.name} is unavailable: {exc}") from exc
        #: the file this handle opened (device, inode): its connections keep reading it even once another
        #: file takes its path
        self.file_id = (opened.st_dev, opened.st_ino)

    def verify_identity(self, expected: str) -> None:
        self._verify_file()
        super().verify_identity(expected)

    def read_lease_in(self, lease_id: str, store_id: str | None) -> list[LeaseRow]:
        if store_id is not None:
            self._verify_file()
        return super().read_lease_in(lease_id, store_id)

    def _verify_file(self) -> None:
        """The file at the store's path is the one this handle opened (its connections keep reading an
        unlinked file, whose store id is the old one)."""
        try:
            now = os.stat(self.path)
        except FileNotFoundError as exc:
            raise StoreReplacedError(
                f"lease store {self.name} was deleted: {self.path} no longer exists"
            ) from exc
        except OSError as exc:
            raise StoreUnavailableError(f"lease store {self.name} is unavailable: {exc}") from exc
        if (now.st_dev, now.st_ino) != self.file_id:
            raise StoreReplacedError(
                f"lease store {self.name}: {self.path} is another file than the one this holder opened "
                "(the store was deleted or replaced)"
            )

    def _make_engine(self, url: str) -> sa.Engine:
        # the same file, as an SQLite URI that never creates it (see __init__)
        rw_url = f"sqlite:///file:{quote(self.path)}?mode=rw&uri=true"
        engine = sa.create_engine(rw_url, connect_args={"timeout": 0.05})
        busy_ms = 50

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            # Take transaction control from the driver so BEGIN IMMEDIATE is ours to issue.
            dbapi_conn.isolation_level = None
            cursor = dbapi_conn.cursor()
            # A process closing the store's last connection holds the file's exclusive lock while it
            # checkpoints the WAL, which on a busy machine outlasts the short wait below: a new connection
            # waits for it up to the store's timeout, as a decision waits for the write lock.
            cursor.execute(f"PRAGMA busy_timeout={max(busy_ms, int(self.busy_timeout_s * 1000))}")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            # Only statements after BEGIN IMMEDIATE (e.g. a checkpoint) use SQLite's own busy wait.
            cursor.execute(f"PRAGMA busy_timeout={busy_ms}")
            cursor.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn: sa.Connection) -> None:
            # pysqlite's connection (SQLAlchemy types the driver's connection loosely, possibly None: it is
            # there while a connection is checked out, as one being begun is)
            raw = cast("sqlite3.Connection", conn.connection.driver_connection)
            if conn.get_execution_options().get("dg_read_only", False):
                raw.execute("BEGIN")
                return
            # Poll for the write lock with short, jittered sleeps instead of SQLite's busy handler, whose
            # growing back-off (up to 100 ms per try) lets newcomers overtake a long waiter again and again.
            deadline = time.monotonic() + self.busy_timeout_s
            while True:
                try:
                    raw.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() >= deadline:
                        # Raised inside an event hook, the driver's error would escape SQLAlchemy's own
                        # wrapping and the store's StoreError with it (callers retrying on StoreError
                        # then crashed on a held lock).
                        raise sa_exc.OperationalError("BEGIN IMMEDIATE", None, exc) from exc
                time.sleep(random.uniform(0.0002, 0.002))

        return engine

    def _timed_out(self, exc: sa_exc.SQLAlchemyError) -> bool:
        # the write lock was not free within busy_timeout_s (another process holds it, maybe stopped)
        return isinstance(exc, sa_exc.OperationalError) and "locked" in str(getattr(exc, "orig", exc))

    def _lock_migrations(self, conn: sa.Connection) -> None:
        # BEGIN IMMEDIATE already holds the database's write lock.
        return None

    def _lock_tables(self, conn: sa.Connection, uris: list[str]) -> dict[str, TableRow]:
        # BEGIN IMMEDIATE already serialises all writers; the rows only need reading.
        return {r[0]: TableRow(*r) for r in conn.execute(_Q_TABLES, {"uris": uris})}
