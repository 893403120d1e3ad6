"""Where the lease store is: a URL from an Airflow connection, and references that carry no password.

A trigger's keyword arguments are stored in Airflow's metadata database, shown by the REST API with the
task instance and written into triggerer logs, so they must never hold the store's password. A trigger
therefore keeps a *reference*: the store URL with its password removed. The triggerer turns it back into
a URL with :func:`deltaguard.config.resolve_store_reference`, which takes the password from its own
configuration (the ``[deltaguard] lease_store_conn_id`` connection, resolved through the secrets backend,
or ``lease_store_url``) when the reference names the configured store. This module reads no
configuration itself, so the lease layer stays free of Airflow.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: connection types a lease store connection may have
POSTGRES_CONN_TYPES = frozenset({"postgres", "postgresql"})

#: connection extras passed on to libpq (the PostgreSQL provider's extras that are libpq parameters)
LIBPQ_EXTRAS = frozenset(
    {
        "sslmode",
        "sslcert",
        "sslkey",
        "sslrootcert",
        "sslcrl",
        "sslpassword",
        "sslnegotiation",
        "gssencmode",
        "application_name",
        "connect_timeout",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "target_session_attrs",
        "options",
        "client_encoding",
    }
)


def url_from_connection(conn: Any) -> str:
    """The SQLAlchemy URL of a ``postgres`` Airflow connection (password included: never log it).

    Host, port, login, password and schema (the database) are taken as the PostgreSQL provider reads
    them; extras that are libpq parameters (``sslmode``, ``sslrootcert``, ...) become URL parameters.

    :param conn: an Airflow connection (``airflow.sdk.Connection`` or ``airflow.models.Connection``).
    :raises ValueError: for a connection of another type or without a host.
    """
    from sqlalchemy.engine import URL

    conn_type = (conn.conn_type or "").lower()
    if conn_type not in POSTGRES_CONN_TYPES:
        raise ValueError(
            f"[deltaguard] lease_store_conn_id {conn.conn_id!r} is a {conn_type or 'typeless'} connection; "
            "the lease store needs a postgres connection (or set lease_store_url for SQLite)"
        )
    if not conn.host:
        raise ValueError(f"[deltaguard] lease_store_conn_id {conn.conn_id!r} has no host")
    extras = conn.extra_dejson if isinstance(conn.extra_dejson, Mapping) else {}
    query = {key: str(value) for key, value in extras.items() if key in LIBPQ_EXTRAS and value is not None}
    url = URL.create(
        "postgresql+psycopg",
        username=conn.login or None,
        password=conn.password or None,
        host=conn.host,
        port=int(conn.port) if conn.port else None,
        database=conn.schema or None,
        query=query,
    )
    return url.render_as_string(hide_password=False)


def store_reference(url: str) -> str:
    """``url`` without its password: what a trigger may serialize. Idempotent.

    :param url: a lease store URL.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return url  # not a URL at all: open_store will refuse it with its own message
    if parsed.password is None:
        return url
    # URL.set(password=None) leaves the password as it is; URL is a named tuple, so replace the field
    return parsed._replace(password=None).render_as_string(hide_password=False)
