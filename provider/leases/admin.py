"""The door to the lease store for commands, the UI and DAG-file parsing (ADR 0023).

:func:`open_store` opens the store a URL names, created or migrated on open; :func:`open_existing_store`
opens one only if it exists, read-only in spirit and bounded in time; :func:`open_manager` is the lease
manager of the ``deltaguard leases`` command. The lease hook (:mod:`deltaguard.hooks.lease`) is the other
door, for task code and the triggerer; ``tests/test_import_graph.py`` checks that nothing else outside
:mod:`deltaguard.leases` opens a store or builds a lease manager.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from deltaguard.leases.open import open_store, store_options
from deltaguard.leases.store import LeaseStore

if TYPE_CHECKING:
    from deltaguard.leases.manager import LeaseManager
    from deltaguard.leases.remote_work import RemoteWorkFence

__all__ = ["open_existing_store", "open_manager", "open_store"]

log = logging.getLogger("deltaguard.leases")


def open_manager(url: str, remote_fence: RemoteWorkFence | None = None) -> LeaseManager:
    """The lease manager of the ``deltaguard leases`` command, over the store at ``url`` (created or
    migrated on open); close it with ``manager.store.close()``.

    No fence for server-side work unless one is given, so looking at leases or releasing one by hand never
    reaches a Spark Connect server (ADR 0033); ``leases sweep`` gives the engines' fence.

    :param remote_fence: the fence of holders' server-side work (``deltaguard leases sweep`` gives one).
    :raises ValueError: for an unsupported or malformed URL.
    :raises StoreUnavailableError: when the store cannot be reached.
    """
    from deltaguard.leases.manager import LeaseManager  # not at import: DAG-file parsing needs none of it

    return LeaseManager(url, remote_fence=remote_fence)


def open_existing_store(url: str, timeout_s: float) -> LeaseStore | None:
    """The store at ``url`` without creating or migrating anything, every call bounded by ``timeout_s``;
    ``None`` when there is no store yet (an SQLite file nobody has used) or the scheme is unsupported.

    For readers that must stay cheap and side-effect free, such as a DAG file being parsed.

    :param url: the store URL.
    :param timeout_s: the bound of the connection, the locks and each statement.
    :raises StoreUnavailableError: when the store cannot be reached.
    """
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        from sqlalchemy.engine import make_url

        database = make_url(url).database
        # Opening an SQLite URL creates the file: a store nobody has used yet records nothing.
        if not database or database == ":memory:" or not Path(database).is_file():
            log.debug("deltaguard: no lease store file at %s yet", database)
            return None
        return open_store(url, migrate=False, **store_options(url, timeout_s))
    if scheme in ("postgresql", "postgresql+psycopg", "postgres"):
        # never create or migrate a schema while parsing DAG files
        return open_store(url, pool_size=1, migrate=False, **store_options(url, timeout_s))
    log.debug("deltaguard: unsupported lease store scheme %r", scheme)
    return None
