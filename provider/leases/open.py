"""Opening the lease store, and every call of the lease hook's store bounded in time (ADR 0018).

:func:`open_store` opens the store a URL names (SQLite or PostgreSQL), created or migrated on open; the lease
manager opens a URL through it. :func:`open_bounded_store` is the store the lease hook
(:mod:`deltaguard.hooks.lease`, the door of task code and the triggerer) opens. Commands, the UI and DAG-file
parsing open the store through the other door, :mod:`deltaguard.leases.admin`; no other module outside
:mod:`deltaguard.leases` opens a store or builds a lease manager (ADR 0023, checked by
``tests/test_import_graph.py``).

A store call can hang on a frozen server: PostgreSQL's ``statement_timeout`` is enforced by the server
process, so a stopped one (SIGSTOP, a VM pause) never ends the statement, and the kernel keeps acknowledging
its TCP segments, so neither keepalives nor ``tcp_user_timeout`` break the connection; psycopg 3 has no
per-call client timeout; libpq's ``connect_timeout`` is at least 2 s. Measured with PostgreSQL 16 stopped by
SIGSTOP (``tests/leases/test_frozen_store.py``): acquire and heartbeat through the task's hook hung for the
whole freeze. So every call of a :class:`BoundedStore` runs in a worker thread and the caller waits at most
``store_timeout_s`` for it. A call that does not answer in time is abandoned (its thread stays blocked until
the store answers or the connection breaks, holding only its one connection) and the caller gets
:class:`StoreCallTimeout`, a :class:`~deltaguard.exceptions.StoreUnavailableError`: nothing was granted as
far as the caller knows (fail closed). An abandoned decision may still commit once the store resumes: its
lease (or queue entry) then expires after its TTL unless the same request asks again, which gets the same
answer. Workers are daemon threads kept idle for reuse, so a call costs a hand-over between two threads
rather than a thread start, and a blocked worker never delays the interpreter's exit. Closing a store ends the
idle ones: a task process then ends with no thread of deltaguard's left.

Apart from :mod:`deltaguard.leases.store`, so the interface never imports the stores that implement it.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

from deltaguard.exceptions import StoreUnavailableError
from deltaguard.leases.store import LeaseStore, redact_url

T = TypeVar("T")

log = logging.getLogger("deltaguard.leases")


def open_store(url: str, **options: object) -> LeaseStore:
    """Open (and create or migrate) the lease store at ``url``.

    ``sqlite:///path/to/leases.db`` or ``postgresql+psycopg://user:pw@host:port/db``.

    :param url: the store URL.
    :param options: passed to the store's constructor.
    :raises StoreUnavailableError: when the store cannot be reached; the message names it and the cause.
    :raises ValueError: for an unsupported URL scheme.
    """
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        from deltaguard.leases.sql.sqlite import SqliteLeaseStore

        # the options pass through as given (typed `object` here); an unknown one fails in the constructor
        return SqliteLeaseStore(url, **options)  # type: ignore[arg-type]
    if scheme in ("postgresql", "postgresql+psycopg", "postgres"):
        from deltaguard.leases.sql.postgres import PostgresLeaseStore

        # the options pass through untyped, as above
        return PostgresLeaseStore(url, **options)  # type: ignore[arg-type]
    raise ValueError(
        f"unsupported lease store URL {redact_url(url)!r}: use sqlite:/// or postgresql+psycopg://"
    )


#: store methods that are not one call: ``transaction`` hands a context manager to the caller, whose body
#: runs in the caller's thread (only the UI's reads use it; the manager runs decisions through ``run``)
_UNBOUNDED = frozenset({"transaction"})


class StoreCallTimeout(StoreUnavailableError, TimeoutError):
    """A store call did not answer within the store timeout (it is abandoned, not cancelled)."""


class _Worker:
    """One daemon thread running the calls handed to it, one at a time."""

    def __init__(self, pool: _Workers) -> None:
        self.pool = pool
        # a job, or None: the sign to end
        self.jobs: queue.SimpleQueue[tuple[Callable[[], Any], dict[str, Any], threading.Event] | None] = (
            queue.SimpleQueue()
        )
        self.thread = threading.Thread(target=self._loop, name="deltaguard-store-call", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            item = self.jobs.get()
            if item is None:
                return
            job, box, done = item
            try:
                box["value"] = job()
            except BaseException as exc:  # handed to the caller
                box["error"] = exc
            # idle again before the caller hears back, so a store closed by this call ends this worker too
            kept = self.pool.put_back(self)
            done.set()
            if not kept:
                return


class _Workers:
    """Idle workers to reuse; a call takes one (or starts one) and the worker returns when it is done."""

    #: idle workers kept; more are started when calls overlap or hang, and end when not needed
    KEEP = 4

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    def take(self) -> _Worker:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return _Worker(self)

    def put_back(self, worker: _Worker) -> bool:
        with self._lock:
            if len(self._idle) < self.KEEP:
                self._idle.append(worker)
                return True
        return False

    def end_idle(self) -> None:
        """End the idle workers and wait for them; a call made later starts a new one. Workers running
        or abandoned in a call are not idle and are left alone."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.jobs.put(None)
        for worker in idle:
            worker.thread.join(timeout=1.0)  # an idle worker ends at once; the bound only guards


_WORKERS = _Workers()


def bounded_call(fn: Callable[..., T], timeout_s: float, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a worker thread, waited for at most ``timeout_s`` seconds.

    :raises StoreCallTimeout: when the call did not finish in time (it goes on in its thread, abandoned).
    """
    box: dict[str, Any] = {}
    done = threading.Event()
    _WORKERS.take().jobs.put((lambda: fn(*args, **kwargs), box, done))
    if not done.wait(timeout_s):
        name = getattr(fn, "__name__", "call")
        raise StoreCallTimeout(
            f"the lease store did not answer {name} within {timeout_s:g} s (store_timeout)"
        )
    if "error" in box:
        raise box["error"]
    return cast(T, box["value"])


class BoundedStore:
    """A lease store whose every method call returns or fails within ``timeout_s`` (see the module).

    Attributes that are not methods (``name``, ``has_fast_paths``, ...) are the store's own.

    :param store: the store to call.
    :param timeout_s: the limit on one call, ``LeaseTiming.store_timeout_s``.
    """

    def __init__(self, store: LeaseStore, timeout_s: float) -> None:
        if not timeout_s > 0:
            raise ValueError(f"the store timeout must be positive, got {timeout_s}")
        self.inner = store
        self.timeout_s = timeout_s

    def close(self) -> None:
        """Close the store; a close the frozen store does not answer is abandoned and logged, not raised
        (it must not hide the outcome of the write that ends with it)."""
        try:
            bounded_call(self.inner.close, self.timeout_s)
        except StoreCallTimeout as exc:
            log.warning("deltaguard: closing lease store %s: %s", getattr(self.inner, "name", "?"), exc)
        _WORKERS.end_idle()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name.startswith("_") or name in _UNBOUNDED or not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            return bounded_call(value, self.timeout_s, *args, **kwargs)

        call.__name__ = name
        return call


def open_bounded_store(url: str, timeout_s: float, **options: Any) -> LeaseStore:
    """Open the store at ``url`` with every timeout at ``timeout_s``, the opening itself bounded too.

    Opening connects and checks (or migrates) the schema: a frozen server would hang it like any call.

    :param timeout_s: the limit on one store call, ``LeaseTiming.store_timeout_s``.
    :param options: more store constructor options (``pool_size``).
    :raises StoreUnavailableError: the store cannot be opened, or did not answer within the timeout.
    """
    kwargs = {**store_options(url, timeout_s), **options}
    store = bounded_call(open_store, timeout_s, url, **kwargs)
    return cast(LeaseStore, BoundedStore(store, timeout_s))


def store_options(url: str, timeout_s: float) -> dict[str, float]:
    """The store constructor's timeouts for ``url``, all ``timeout_s``.

    SQLite: the busy timeout (how long a decision waits for another process's write lock, e.g. one held
    by a stopped process). PostgreSQL: connect, lock-wait and statement timeouts, and TCP keepalives.
    """
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        return {"busy_timeout_s": timeout_s}
    if scheme.startswith("postgres"):
        return {
            "connect_timeout_s": timeout_s,
            "lock_timeout_s": timeout_s,
            "statement_timeout_s": timeout_s,
            "keepalive_s": timeout_s,
        }
    return {}
