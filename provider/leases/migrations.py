"""Versioned DDL for the lease stores: the package creates and migrates its schema, never a human.

Each step moves the schema from ``version - 1`` to ``version``; ``dg_schema_version`` holds the current
version. Steps are plain SQL that SQLite and PostgreSQL both accept, applied in one transaction (both
databases have transactional DDL) while the caller holds the store's migration lock.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

#: (version, statements). Never edit a released step: append a new one.
#: A statement is SQL for every dialect, or ``(dialect, sql)`` for one dialect only.
MIGRATIONS: Sequence[tuple[int, Sequence[str | tuple[str, str]]]] = (
    (
        1,
        (
            "CREATE TABLE dg_schema_version (version INTEGER NOT NULL)",
            # One row per table: the lock taken by every decision on the table, and its fencing counter.
            "CREATE TABLE dg_tables (uri TEXT PRIMARY KEY, fencing BIGINT NOT NULL DEFAULT 0, "
            "config_version BIGINT, config_json TEXT)",
            "CREATE TABLE dg_leases (lease_id TEXT NOT NULL, uri TEXT NOT NULL, owner_key TEXT NOT NULL, "
            "owner_json TEXT NOT NULL, op_json TEXT NOT NULL, granted_at DOUBLE PRECISION NOT NULL, "
            "expires_at DOUBLE PRECISION NOT NULL, fencing BIGINT NOT NULL, ttl_s DOUBLE PRECISION NOT NULL, "
            "PRIMARY KEY (lease_id, uri))",
            "CREATE INDEX dg_leases_uri ON dg_leases (uri)",
            "CREATE TABLE dg_queue (request_id TEXT NOT NULL, uri TEXT NOT NULL, owner_key TEXT NOT NULL, "
            "owner_json TEXT NOT NULL, op_json TEXT NOT NULL, rank DOUBLE PRECISION NOT NULL, "
            "expires_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (request_id, uri))",
            "CREATE INDEX dg_queue_uri ON dg_queue (uri, rank)",
            "CREATE TABLE dg_requests (request_id TEXT PRIMARY KEY, owner_key TEXT NOT NULL, "
            "status TEXT NOT NULL, rank DOUBLE PRECISION NOT NULL, enqueued_at DOUBLE PRECISION NOT NULL, "
            "expires_at DOUBLE PRECISION NOT NULL, payload TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL)",
            "CREATE TABLE dg_decisions (at DOUBLE PRECISION NOT NULL, kind TEXT NOT NULL, "
            "request_id TEXT NOT NULL, uri TEXT NOT NULL, owner_key TEXT NOT NULL, detail TEXT NOT NULL)",
            "CREATE INDEX dg_decisions_uri ON dg_decisions (uri, at)",
            "CREATE INDEX dg_decisions_at ON dg_decisions (at)",
            "INSERT INTO dg_schema_version (version) VALUES (0)",
        ),
    ),
    (
        2,
        (
            # The last wait answer: a polling waiter whose blockers are all still there gets it back without a
            # locking transaction, and a wait is logged only when its blockers change.
            "ALTER TABLE dg_requests ADD COLUMN last_wait TEXT",
            # Decisions for one owner (task logs) and pruning of closed requests, without full scans.
            "CREATE INDEX dg_decisions_owner ON dg_decisions (owner_key, at)",
            "CREATE INDEX dg_requests_closed ON dg_requests (status, updated_at)",
            # Insertion order breaks ties between log entries with equal timestamps (SQLite has rowid).
            ("postgresql", "ALTER TABLE dg_decisions ADD COLUMN seq BIGSERIAL"),
        ),
    ),
)

LATEST = MIGRATIONS[-1][0]


class SchemaTooNewError(RuntimeError):
    """The database was migrated by a newer deltaguard; refusing to guess its meaning."""


def current_version(conn: sa.Connection) -> int:
    """The schema version (0 for an empty database)."""
    if not sa.inspect(conn).has_table("dg_schema_version"):
        return 0
    value = conn.execute(sa.text("SELECT MAX(version) FROM dg_schema_version")).scalar()
    return int(value or 0)


def migrate(conn: sa.Connection, target: int = LATEST) -> int:
    """Apply the missing steps up to ``target`` inside the caller's transaction; return the new version.

    :param conn: a connection inside a transaction that holds the store's migration lock.
    :param target: the version to reach (tests use older targets to build old schemas).
    :raises SchemaTooNewError: when the database is newer than this package knows.
    """
    version = current_version(conn)
    if version > LATEST:
        raise SchemaTooNewError(
            f"lease store schema version {version} is newer than this deltaguard ({LATEST})"
        )
    for step, statements in MIGRATIONS:
        if version < step <= target:
            for statement in statements:
                if isinstance(statement, tuple):
                    dialect, statement = statement
                    if conn.dialect.name != dialect:
                        continue
                conn.execute(sa.text(statement))
            conn.execute(sa.text("UPDATE dg_schema_version SET version = :v"), {"v": step})
            version = step
    return version
