"""One lease-store handle per store URL and event loop, shared by every deltaguard trigger in a triggerer.

Before this module each waiting :class:`~deltaguard.triggers.lease.LeaseAvailableTrigger` opened its own
store (its own engine and pool, a schema check, and one connection kept open for the whole wait), so a
triggerer holding 1,000 waiting writes held about 1,000 PostgreSQL connections (ADR 0025 has the
measurement). Here the first trigger for a store opens it, the others share it, and the last one to leave
closes it. Store calls run in worker threads (:func:`asyncio.to_thread`, the event loop never blocks) at most
:data:`MAX_CALLS` at a time, over a pool of at most ``2 x`` :data:`POOL_SIZE` connections; a PostgreSQL store
adds one LISTEN connection (:class:`~deltaguard.leases.sql.listen.FreedListener`), an SQLite store one
decision-log reader (:class:`~deltaguard.leases.sql.sqlite_watch.SqliteFreedWatcher`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from deltaguard.config import LeaseSettings
    from deltaguard.hooks.lease_readmissions import Readmissions
    from deltaguard.leases.manager import LeaseManager
    from deltaguard.leases.remote_work import FenceMemory
    from deltaguard.leases.sql.watch import FreedWatcher
    from deltaguard.leases.store import LeaseStore

T = TypeVar("T")

#: connections a shared PostgreSQL store keeps; it may open as many again under a burst (SQLAlchemy's
#: ``max_overflow``), so a triggerer uses at most 2 x 4 + 1 (listener) = 9 connections per store
POOL_SIZE = 4
#: store calls in flight at once per shared store (each holds one connection while it runs)
MAX_CALLS = POOL_SIZE


@dataclasses.dataclass(eq=False)
class SharedStore:
    """The store handle shared by the triggers of one event loop.

    :param url: the store URL (with its password: never logged nor serialized).
    :param settings: the lease options the store was opened with.
    """

    url: str
    settings: LeaseSettings
    key: tuple[int, str] = (0, "")
    users: int = 0
    store: LeaseStore | None = None
    listener: FreedWatcher | None = None
    ready: asyncio.Future[None] | None = None
    limit: asyncio.Semaphore = dataclasses.field(default_factory=lambda: asyncio.Semaphore(MAX_CALLS))
    closed: bool = False
    #: store calls still running in worker threads (a cancelled caller does not stop its thread)
    inflight: set[asyncio.Future[Any]] = dataclasses.field(default_factory=set)
    #: one re-admission of a table's queue for all the waiters one release wakes (ADR 0031)
    crowd: Readmissions | None = None
    #: fence outcomes of server-side work shared by the triggers' lease managers (ADR 0033), so one
    #: expired lease's server is asked at most once per retry interval, not once per waiting trigger
    fences: FenceMemory = dataclasses.field(default_factory=lambda: _fence_memory())

    def readmissions(self) -> Readmissions:
        """The handle's batcher of re-admissions (made on first use)."""
        if self.crowd is None:
            from deltaguard.hooks.lease_readmissions import Readmissions

            self.crowd = Readmissions(self)
        return self.crowd

    async def call(
        self, fn: Callable[..., T], *args: object, on_start: Callable[[], None] | None = None
    ) -> T:
        """Run a blocking store call in a worker thread, at most :data:`MAX_CALLS` at once.

        A caller cancelled meanwhile returns at once, but its call keeps its slot until the thread ends,
        and the store is closed only after it: a thread never finishes on a closed store.

        :param on_start: called in the event loop once the call has its slot, just before its thread starts.
        """
        await self.limit.acquire()
        if on_start is not None:
            on_start()
        future: asyncio.Future[T] = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        self.inflight.add(future)
        future.add_done_callback(self._done)
        return await asyncio.shield(future)

    def _done(self, future: asyncio.Future[Any]) -> None:
        self.inflight.discard(future)
        self.limit.release()
        if not future.cancelled():
            future.exception()  # retrieved: the caller may have been cancelled and never will

    def manager(self) -> LeaseManager:
        """A lease manager over the shared store (its caches are the caller's own)."""
        from deltaguard import config
        from deltaguard.engines.fencing import default_remote_fence
        from deltaguard.engines.sources import attach_oracle
        from deltaguard.leases.manager import LeaseManager

        assert self.store is not None
        # expired leases of Spark Connect work are fenced before they are reclaimed (ADR 0033)
        return LeaseManager(
            self.store,
            retention_s=self.settings.retention_s,
            remote_fence=default_remote_fence(),
            fence_memory=self.fences,
            # a waiting request decided again from the store is judged with the engine's evaluator (ADR 0037)
            oracle_loader=attach_oracle,
            # the triggerer decides for deferred writes, which hold no worker slot: the slot gate (ADR 0028)
            worker_slots=config.worker_slots(),
        )


def _fence_memory() -> FenceMemory:
    from deltaguard.leases.remote_work import FenceMemory

    return FenceMemory()


#: (id of the event loop, store URL) -> the handle; entries leave when their last user does
_SHARED: dict[tuple[int, str], SharedStore] = {}
#: closings in flight (kept referenced so they finish; :func:`closed` awaits them)
_CLOSING: set[asyncio.Task[None]] = set()


def _open_blocking(entry: SharedStore) -> None:
    from deltaguard.leases.bounded import open_bounded_store

    # every store call (the opening too) returns or fails within store_timeout (ADR 0018): a frozen store
    # fails the trigger's check instead of holding one of the MAX_CALLS slots for the whole freeze
    options: dict[str, object] = {}
    if entry.url.split(":", 1)[0].lower().startswith("postgres"):
        options["pool_size"] = POOL_SIZE
    entry.store = open_bounded_store(entry.url, entry.settings.lease_timing, **options)


def _listen_configured() -> bool:
    from deltaguard import config

    return config.lease_store_listen()


def sqlite_path(url: str) -> str | None:
    from deltaguard.leases.sql.sqlite_watch import sqlite_path as path_of

    return path_of(url)


async def _open(entry: SharedStore) -> None:
    assert entry.ready is not None
    try:
        await asyncio.to_thread(_open_blocking, entry)
        listen = await asyncio.to_thread(_listen_configured)
        if listen and entry.url.split(":", 1)[0].lower().startswith("postgres"):
            from deltaguard.leases.sql.listen import FreedListener, conninfo

            timeout = entry.settings.lease_timing.store_timeout_s
            entry.listener = FreedListener(
                conninfo(entry.url, connect_timeout_s=timeout, keepalive_s=timeout)
            )
            entry.listener.start()
        elif listen and (path := sqlite_path(entry.url)) is not None:
            # SQLite sends nothing: one short read of the decision log per process stands in for NOTIFY
            from deltaguard.leases.sql.sqlite_watch import SqliteFreedWatcher

            entry.listener = SqliteFreedWatcher(path)
            entry.listener.start()
    except BaseException as exc:
        if entry.store is not None:
            await asyncio.to_thread(entry.store.close)
        if _SHARED.get(entry.key) is entry:
            del _SHARED[entry.key]  # the next trigger tries to open it again
        entry.ready.set_exception(exc)
        raise
    entry.ready.set_result(None)
    if entry.users == 0:  # every trigger that waited for it is gone already
        if _SHARED.get(entry.key) is entry:
            del _SHARED[entry.key]
        _schedule_close(entry)


async def _close(entry: SharedStore) -> None:
    await asyncio.gather(*list(entry.inflight), return_exceptions=True)
    if entry.listener is not None:
        await entry.listener.close()
    if entry.store is not None:
        await asyncio.to_thread(entry.store.close)
    entry.closed = True


def _schedule_close(entry: SharedStore) -> None:
    task = asyncio.get_running_loop().create_task(_close(entry), name="deltaguard-close-store")
    _CLOSING.add(task)
    task.add_done_callback(_CLOSING.discard)


@contextlib.asynccontextmanager
async def shared_store(url: str, settings: LeaseSettings) -> AsyncIterator[SharedStore]:
    """Use the event loop's handle for ``url`` (opened by the first user, closed after the last).

    Leaving the block (also by cancellation, when the triggerer cancels the trigger) gives the handle back
    without awaiting anything; the last user's leaving schedules the close.

    :raises StoreUnavailableError: the store could not be opened (the next user tries again).
    """
    loop = asyncio.get_running_loop()
    key = (id(loop), url)
    entry = _SHARED.get(key)
    if entry is not None and entry.ready is not None and entry.ready.get_loop() is not loop:
        entry = None  # left by a loop that was closed while triggers still held it (its id is reused)
    if entry is None:
        entry = SharedStore(url, settings, key=key, ready=loop.create_future())
        _SHARED[key] = entry
        # a task of its own: a trigger cancelled while the store opens must not orphan the open store
        opening = loop.create_task(_open(entry), name="deltaguard-open-store")
        opening.add_done_callback(lambda t: t.cancelled() or t.exception())
    entry.users += 1
    try:
        assert entry.ready is not None
        await asyncio.shield(entry.ready)
        yield entry
    finally:
        entry.users -= 1
        # Not yet open: the opening task closes it when it finds no user. Failed to open: nothing to close.
        opened = entry.ready is not None and entry.ready.done() and entry.ready.exception() is None
        if entry.users == 0 and opened and _SHARED.get(key) is entry:
            del _SHARED[key]
            _schedule_close(entry)


def open_handles() -> int:
    """Shared handles open in this process (for tests and measurements)."""
    return len(_SHARED)


async def closed() -> None:
    """Wait until every scheduled close has finished (for tests and measurements)."""
    while _CLOSING:
        await asyncio.gather(*list(_CLOSING), return_exceptions=True)
