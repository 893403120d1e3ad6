"""Versioned DDL for the lease stores: the package creates and migrates its schema, never a human.

Each step moves the schema from ``version - 1`` to ``version``; ``dg_schema_version`` holds the current
version. Steps are plain SQL that SQLite and PostgreSQL both accept, applied in one transaction (both
databases have transactional DDL) while the caller holds the store's migration lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources

import sqlalchemy as sa

# The PostgreSQL fast-path functions, one whole file per function and schema version (functions/*.sql;
# `diff` two versions to see what a step changed). sa.text reads ":word" as a bind parameter, so no colon
# in them is followed by a letter (JSON text is glued with || instead), and there is no "%".


def _function(name: str) -> str:
    """The text of ``functions/<name>``, without its leading ``--`` comment lines."""
    text = resources.files("deltaguard.leases.sql").joinpath("functions", name).read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("--"):
        lines.pop(0)
    return "".join(lines)


_PG_GRANT_IF_IDLE = _function("grant_if_idle_3.sql")
_PG_RELEASE_OWNED = _function("release_owned_3.sql")
_PG_TABLE_STATE = _function("table_state_4.sql")
_PG_CHECK_STATE = _function("check_state_4.sql")
_PG_GRANT_IF_IDLE_4 = _function("grant_if_idle_4.sql")
_PG_GRANT_IF_IDLE_5 = _function("grant_if_idle_5.sql")
_PG_OWNER_NAME = _function("owner_name_6.sql")
_PG_GRANT_IF_IDLE_6 = _function("grant_if_idle_6.sql")

#: The largest ``autovacuum_analyze_threshold`` PostgreSQL accepts: automatic ANALYZE never starts.
_NEVER = 2_147_483_647
#: An insert-triggered VACUUM once the table has taken as many new rows as it holds (the default is a fifth).
_INSERTS_DOUBLE = "autovacuum_vacuum_insert_scale_factor = 1.0"

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
    (
        3,
        (
            # One-statement fast paths for the PostgreSQL store (see ADR 0004): a grant on tables with no
            # lease, queue or request row, and a release by the owner. Each runs as one call in autocommit;
            # PL/pgSQL gives every statement a fresh snapshot, so the checks after the row locks see what
            # transactions that held the locks before committed (one plain statement could not).
            ("postgresql", _PG_GRANT_IF_IDLE),
            ("postgresql", _PG_RELEASE_OWNED),
        ),
    ),
    (
        4,
        (
            # Optimistic decisions on busy tables (ADR 0007): the one-call grant returns the tables' state
            # when it cannot grant, and a decision made from that state commits after one check.
            ("postgresql", _PG_TABLE_STATE),
            ("postgresql", "DROP FUNCTION dg_grant_if_idle"),
            ("postgresql", _PG_GRANT_IF_IDLE_4),
            ("postgresql", _PG_CHECK_STATE),
        ),
    ),
    (
        5,
        (
            # A grant beside a holder the requester already knows to be compatible, in one call (ADR 0009).
            ("postgresql", "DROP FUNCTION dg_grant_if_idle"),
            ("postgresql", _PG_GRANT_IF_IDLE_5),
        ),
    ),
    (
        6,
        (
            # A queue entry behind a holder the requester already knows to conflict, in one call (ADR 0010).
            ("postgresql", _PG_OWNER_NAME),
            ("postgresql", "DROP FUNCTION dg_grant_if_idle"),
            ("postgresql", _PG_GRANT_IF_IDLE_6),
        ),
    ),
    (
        7,
        (
            # Less work for autovacuum (ADR 0011): every VACUUM or ANALYZE of a table makes every session
            # re-plan the statements that read it, all at once.
            #
            # Closing a request changes its status and update time. With no index on either, PostgreSQL
            # rewrites the row in place (a HOT update, given room on the page), so closed requests leave no
            # dead index entries for VACUUM to scan the indexes for. Pruning finds old requests by enqueue
            # time, which closing does not change.
            "DROP INDEX dg_requests_closed",
            "CREATE INDEX dg_requests_enqueued ON dg_requests (enqueued_at)",
            # The store's plans are generic index lookups that no column statistic changes, so automatic
            # ANALYZE only costs (a manual ANALYZE still works). The small churning tables are still vacuumed,
            # without truncating their tail (that needs an ACCESS EXCLUSIVE lock, which stalls every
            # decision). The two growing tables are vacuumed for their inserts once they have doubled rather
            # than after every fifth more rows. dg_requests keeps 30 % of each page free for the in-place
            # updates above.
            *(
                ("postgresql", f"ALTER TABLE {table} SET ({options})")
                for table, options in (
                    ("dg_tables", f"autovacuum_analyze_threshold = {_NEVER}"),
                    ("dg_leases", f"autovacuum_analyze_threshold = {_NEVER}, vacuum_truncate = false"),
                    ("dg_queue", f"autovacuum_analyze_threshold = {_NEVER}, vacuum_truncate = false"),
                    (
                        "dg_requests",
                        f"autovacuum_analyze_threshold = {_NEVER}, {_INSERTS_DOUBLE}, fillfactor = 70",
                    ),
                    ("dg_decisions", f"autovacuum_analyze_threshold = {_NEVER}, {_INSERTS_DOUBLE}"),
                )
            ),
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
