"""The door to the lease store for everything but the lease hook: commands, the UI, DAG-file parsing.

:func:`open_store` opens the store a URL names (SQLite or PostgreSQL), created or migrated on open;
:func:`open_existing_store` opens one only if it exists, read-only in spirit and bounded in time. The lease
hook (:mod:`deltaguard.hooks.lease`) is the other door, for task code and the triggerer. Apart from
:mod:`deltaguard.leases.store`, so the interface never imports the stores that implement it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from deltaguard.leases.store import LeaseStore, redact_url

log = logging.getLogger(__name__)


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
        return open_store(url, busy_timeout_s=timeout_s, migrate=False)
    if scheme in ("postgresql", "postgresql+psycopg", "postgres"):
        return open_store(
            url,
            pool_size=1,
            connect_timeout_s=timeout_s,
            lock_timeout_s=timeout_s,
            statement_timeout_s=timeout_s,
            keepalive_s=timeout_s,
            migrate=False,  # never create or migrate a schema while parsing DAG files
        )
    log.debug("deltaguard: unsupported lease store scheme %r", scheme)
    return None
