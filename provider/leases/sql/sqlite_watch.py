"""``SqliteFreedWatcher``: wake waiting triggers when a holder leaves an SQLite lease store.

SQLite has no notifications, so one loop per triggerer process and store reads the decision log every
:data:`DEFAULT_INTERVAL_S` for rows that free a holder or queue entry since the last read (``release``,
``expiry``, ``abandon``, ``refuse``, and ``grant``, which turns a queued request ahead into a lease and may
open a backfill) and wakes the waiters that named it, as PostgreSQL's LISTEN/NOTIFY does
(:mod:`deltaguard.leases.sql.listen`). One indexed read of a local file per interval for the whole process
replaces each waiter's own check every ``poll_interval``.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import sqlalchemy as sa

from deltaguard.leases.sql.watch import FreedWatcher

log = logging.getLogger(__name__)

#: seconds between reads of the decision log
DEFAULT_INTERVAL_S = 0.5
#: decision kinds after which a waiter may be admitted
FREEING_KINDS = ("release", "expiry", "abandon", "refuse", "grant")
_QUERY = (
    "SELECT at, request_id, uri FROM dg_decisions WHERE at >= ? AND kind IN ("
    + ", ".join("?" for _ in FREEING_KINDS)
    + ") ORDER BY at"
)


def sqlite_path(url: str) -> str | None:
    """The database file of an SQLite store URL, or ``None`` for an in-memory or non-SQLite one."""
    parsed = sa.engine.make_url(url)
    if not parsed.drivername.startswith("sqlite") or not parsed.database or parsed.database == ":memory:":
        return None
    return parsed.database


class SqliteFreedWatcher(FreedWatcher):
    """Read an SQLite store's decision log in a background loop and wake the waiters it frees.

    :param path: the store's database file.
    :param interval_s: seconds between reads.
    """

    def __init__(self, path: str, *, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        super().__init__()
        self.path = path
        self.interval_s = interval_s
        self._conn: sqlite3.Connection | None = None
        self._since: float | None = None
        self._seen_at_since: set[tuple[str, str]] = set()

    def _read(self) -> list[tuple[float, str, str]]:
        if self._conn is None:
            uri = Path(self.path).resolve().as_uri() + "?mode=ro"
            # one connection, used only from the loop's worker thread, one call at a time
            self._conn = sqlite3.connect(uri, uri=True, timeout=1.0, check_same_thread=False)
            if self._since is None:
                newest = self._conn.execute("SELECT max(at) FROM dg_decisions").fetchone()[0]
                self._since = float(newest) if newest is not None else 0.0
        assert self._since is not None
        return [
            (float(at), str(request_id), str(uri))
            for at, request_id, uri in self._conn.execute(_QUERY, (self._since, *FREEING_KINDS))
        ]

    def _close_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def _run(self) -> None:
        try:
            while True:
                try:
                    rows = await asyncio.to_thread(self._read)
                except (sqlite3.Error, OSError) as exc:
                    if self.connected:
                        log.warning("deltaguard: cannot read the lease store's log (%s); waiters poll", exc)
                    self.connected = False
                    await asyncio.to_thread(self._close_conn)
                    await asyncio.sleep(self.interval_s * 4)
                    continue
                if not self.connected:
                    self.connected = True
                    self._wake_all()  # whatever was freed while nothing was read: every waiter checks once
                self._deliver_rows(rows)
                await asyncio.sleep(self.interval_s)
        finally:
            await asyncio.to_thread(self._close_conn)

    def _deliver_rows(self, rows: list[tuple[float, str, str]]) -> None:
        """Deliver rows not delivered before (rows at the last read's newest time are read again)."""
        for at, request_id, uri in rows:
            key = (request_id, uri)
            if self._since is not None and at == self._since and key in self._seen_at_since:
                continue
            if self._since is None or at > self._since:
                self._since, self._seen_at_since = at, set()
            self._seen_at_since.add(key)
            self._freed(request_id, uri)
