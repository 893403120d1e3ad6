"""Waking waiting triggers when a holder leaves: the part every store's watcher shares.

A watcher keeps, per triggerer process and store, the waiters (an :class:`asyncio.Event` each) and the ids
and tables they wait on; a freed id or table sets the events that name it. How frees are learnt is the
store's: PostgreSQL pushes them (:class:`~deltaguard.leases.sql.listen.FreedListener`, LISTEN/NOTIFY),
SQLite is read in one short loop per process (:class:`~deltaguard.leases.sql.sqlite_watch.SqliteFreedWatcher`).

A wake-up is a hint, never a grant: the woken trigger asks the lease manager as before, and keeps a slower
poll for what no watcher reports (an expired lease, a lost connection).
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import time
from collections.abc import Iterable

#: how long a freed id is remembered for waiters that register after it was freed
RECENT_S = 120.0


class FreedWatcher(abc.ABC):
    """Set the events of the waiters a freed id or table names. Use from one event loop only.

    Subclasses learn frees in :meth:`_run` and report each with :meth:`_freed`.
    """

    def __init__(self) -> None:
        self._watchers: dict[str, set[asyncio.Event]] = {}
        self._keys: dict[asyncio.Event, frozenset[str]] = {}
        #: freed id or table -> when it was learnt (monotonic), for late registrations
        self._recent: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None
        #: whether frees are being learnt; waiters poll at the normal interval while they are not
        self.connected = False
        #: frees learnt (for measurements and tests)
        self.received = 0

    def start(self) -> None:
        """Start learning frees in the background (idempotent)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="deltaguard-watch")

    async def close(self) -> None:
        """Stop learning frees."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.connected = False

    @abc.abstractmethod
    async def _run(self) -> None:
        """Learn frees for as long as the watcher runs (each store has its own way)."""

    def watch(self, event: asyncio.Event, keys: Iterable[str], since: float) -> None:
        """Set ``event`` when a free names one of ``keys`` (ids or table uris); replaces the waiter's
        earlier keys. Sets it at once if one of them was freed after ``since``.

        :param since: :func:`time.monotonic` when the waiter's last check began.
        """
        self.unwatch(event)
        wanted = frozenset(keys)
        self._keys[event] = wanted
        for key in wanted:
            self._watchers.setdefault(key, set()).add(event)
            if self._recent.get(key, float("-inf")) >= since:
                event.set()

    def unwatch(self, event: asyncio.Event) -> None:
        """Forget a waiter (when its trigger ends)."""
        for key in self._keys.pop(event, ()):
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.discard(event)
                if not watchers:
                    del self._watchers[key]

    @property
    def waiters(self) -> int:
        return len(self._keys)

    def _wake_all(self) -> None:
        for event in self._keys:
            event.set()

    def _freed(self, freed_id: str, uri: str) -> None:
        self.received += 1
        now = time.monotonic()
        for key in (freed_id, uri):
            if not key:
                continue
            self._recent[key] = now
            for event in self._watchers.get(key, ()):
                event.set()
        if len(self._recent) > 10_000 or self.received % 1000 == 0:
            cutoff = now - RECENT_S
            self._recent = {k: t for k, t in self._recent.items() if t >= cutoff}
