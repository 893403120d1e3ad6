"""``open_store``: the lease store a URL names (SQLite or PostgreSQL), created or migrated on open.

Apart from :mod:`deltaguard.leases.store`, so the interface never imports the stores that implement it.
"""

from __future__ import annotations

from deltaguard.leases.store import LeaseStore, redact_url


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
