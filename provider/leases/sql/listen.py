"""``FreedListener``: one PostgreSQL LISTEN connection that wakes waiting triggers when a holder leaves.

Schema 8 makes the store send ``NOTIFY deltaguard_freed, '<id> <table uri>'`` when a lease or queue row is
deleted from a table on which some request waits (``functions/notify_freed_8.sql``, ADR 0025). A triggerer
process keeps one listener per store, on an asyncio connection of psycopg 3 (``AsyncConnection.notifies``),
so listening never takes a thread nor blocks the event loop. Waiters register the ids and tables they wait
for together with an :class:`asyncio.Event`; a notification naming any of them sets it.

A notification is a hint, never a grant: the woken trigger asks the lease manager as before. Notifications
can be missed (the connection drops, or the holder leaves between a waiter's check and its registration;
the second case is closed by :meth:`FreedListener.watch`'s look at what was freed since the check began),
and an expired lease sends nothing until a decision reclaims it, so every waiter keeps a slower poll.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.conninfo import make_conninfo

from deltaguard.leases.sql.watch import RECENT_S, FreedWatcher

__all__ = ["CHANNEL", "RECENT_S", "FreedListener", "conninfo"]

log = logging.getLogger(__name__)

#: the channel ``dg_notify_freed`` sends on
CHANNEL = "deltaguard_freed"


def conninfo(url: str, *, connect_timeout_s: float = 10.0, keepalive_s: float = 10.0) -> str:
    """A libpq connection string for an SQLAlchemy PostgreSQL URL (with its password and query options).

    :param url: ``postgresql+psycopg://user:password@host:port/database?sslmode=...``.
    :param connect_timeout_s: how long to wait for the server.
    :param keepalive_s: TCP keepalive idle time and user timeout (as the store's own connections).
    """
    parsed = sa.engine.make_url(url)
    query = {k: v if isinstance(v, str) else v[-1] for k, v in parsed.query.items()}
    return make_conninfo(
        "",
        host=parsed.host,
        port=parsed.port,
        user=parsed.username,
        password=parsed.password,
        dbname=parsed.database,
        connect_timeout=max(1, round(connect_timeout_s)),
        application_name="deltaguard-listen",
        keepalives=1,
        keepalives_idle=max(1, round(keepalive_s)),
        keepalives_interval=max(1, round(keepalive_s / 3)),
        keepalives_count=3,
        tcp_user_timeout=int(keepalive_s * 1000),
        **query,
    )


class FreedListener(FreedWatcher):
    """Listen on :data:`CHANNEL` and set the events of the waiters a notification names.

    Use from one event loop only (the triggerer's). :meth:`start` returns at once; the connection is made
    (and remade after a failure, every ``retry_s``) by a background task.

    :param conninfo: the libpq connection string (:func:`conninfo`).
    :param retry_s: seconds between connection attempts after a failure.
    """

    def __init__(self, conninfo: str, *, retry_s: float = 1.0) -> None:
        super().__init__()
        self._conninfo = conninfo
        self.retry_s = retry_s
        self._conn: psycopg.AsyncConnection[Any] | None = None

    def _deliver(self, payload: str) -> None:
        """One notification's payload: ``'<freed id> <table uri>'``."""
        freed_id, _, uri = payload.partition(" ")
        self._freed(freed_id, uri)

    # ------------------------------------------------------------------------------------ connection
    async def _run(self) -> None:
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
            except (psycopg.Error, OSError) as exc:
                log.warning("deltaguard: cannot listen for lease releases (%s); waiters poll", exc)
                await asyncio.sleep(self.retry_s)
                continue
            self._conn = conn
            try:
                await conn.execute(f"LISTEN {CHANNEL}")
                self.connected = True
                # Whatever was freed while no connection listened is lost: every waiter checks once.
                self._wake_all()
                async for notify in conn.notifies():
                    self._deliver(notify.payload)
            except (psycopg.Error, OSError) as exc:
                log.warning("deltaguard: lease-release listener lost its connection (%s); waiters poll", exc)
            finally:
                self.connected = False
                self._conn = None
                await conn.close()
            self._wake_all()
            await asyncio.sleep(self.retry_s)
