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
_PG_NOTIFY_FREED = _function("notify_freed_8.sql")

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
    (
        8,
        (
            # The oldest schema whose code may still run against this one (see COMPATIBLE_FROM): read by
            # every deltaguard from this version on before it uses a schema newer than it knows.
            "ALTER TABLE dg_schema_version ADD COLUMN compatible_from INTEGER",
            # Wake-ups for waiting triggers (ADR 0025): a NOTIFY on commit when a holder leaves a table on
            # which some request waits. Additive: no statement of an older deltaguard changes meaning.
            ("postgresql", _PG_NOTIFY_FREED),
            (
                "postgresql",
                "CREATE TRIGGER dg_leases_freed AFTER DELETE ON dg_leases "
                "FOR EACH ROW EXECUTE FUNCTION dg_notify_freed('lease_id')",
            ),
            (
                "postgresql",
                "CREATE TRIGGER dg_queue_freed AFTER DELETE ON dg_queue "
                "FOR EACH ROW EXECUTE FUNCTION dg_notify_freed('request_id')",
            ),
        ),
    ),
    (
        9,
        (
            # The store's identity (ADR 0018): a random id written once, when the schema is created or
            # migrated here. A lease holder compares it in every fence check, so a store deleted and created
            # anew at the same location cannot pass for the one that granted its lease.
            "CREATE TABLE dg_store (store_id TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL)",
            (
                "sqlite",
                "INSERT INTO dg_store (store_id, created_at) "
                "VALUES (lower(hex(randomblob(16))), (julianday('now') - 2440587.5) * 86400.0)",
            ),
            (
                "postgresql",
                "INSERT INTO dg_store (store_id, created_at) VALUES "
                "(md5(CAST(random() AS TEXT) || CAST(clock_timestamp() AS TEXT) || CAST(pg_backend_pid() AS TEXT)), "
                "extract(epoch from clock_timestamp()))",
            ),
        ),
    ),
)

LATEST = MIGRATIONS[-1][0]

#: the schema version from which a store keeps its identity (``dg_store``)
STORE_ID_VERSION = 9

#: The schema version from which the rule below is stored in ``dg_schema_version.compatible_from``.
FIRST_COMPATIBILITY_VERSION = 8

#: step -> the oldest schema version whose code may keep running against the schema this step produces.
#: ``version - 1`` marks an additive step: code that knew the previous schema stays correct (it never reads
#: what the step adds). A step that changes what an older deltaguard's statements mean must name itself
#: (``version``): it is *breaking*, opening a store never applies it, and ``deltaguard db migrate`` applies it
#: only with ``--allow-breaking`` once every older worker and triggerer has stopped (docs/deployment.md).
#: Every step from FIRST_COMPATIBILITY_VERSION on must be listed (tests/leases/test_migrate_command.py).
COMPATIBLE_FROM: dict[int, int] = {8: 7, 9: 8}


class SchemaTooNewError(RuntimeError):
    """The database was migrated by a newer deltaguard that this one cannot run beside; refusing to guess."""


class MigrationPendingError(RuntimeError):
    """The schema lacks a breaking step this deltaguard needs; only ``deltaguard db migrate`` applies it."""


def compatible_from(step: int) -> int:
    """The oldest schema version whose code may run against the schema ``step`` produces.

    Steps before :data:`FIRST_COMPATIBILITY_VERSION` were applied on open and were additive.
    """
    if step < FIRST_COMPATIBILITY_VERSION:
        return step - 1
    return COMPATIBLE_FROM[step]


def breaking(step: int) -> bool:
    """Whether code that knew only the schema before ``step`` must stop before ``step`` is applied."""
    return compatible_from(step) >= step


def _stored_rule(version: int) -> int:
    """The oldest code schema that may use schema ``version``: a breaking step stays binding after it."""
    return max(compatible_from(s) for s, _ in MIGRATIONS if FIRST_COMPATIBILITY_VERSION <= s <= version)


def current_version(conn: sa.Connection) -> int:
    """The schema version (0 for an empty database)."""
    if not sa.inspect(conn).has_table("dg_schema_version"):
        return 0
    value = conn.execute(sa.text("SELECT MAX(version) FROM dg_schema_version")).scalar()
    return int(value or 0)


def stored_compatible_from(conn: sa.Connection, version: int) -> int | None:
    """What the database says about the oldest code that may use it (``None`` before schema 8)."""
    if version < FIRST_COMPATIBILITY_VERSION:
        return None
    value = conn.execute(sa.text("SELECT MAX(compatible_from) FROM dg_schema_version")).scalar()
    return None if value is None else int(value)


def check_usable(conn: sa.Connection) -> int:
    """The schema version, once it is known that this deltaguard may run against it.

    A newer schema is usable only when the migrator that produced it recorded that code knowing
    :data:`LATEST` may still run (every step since was additive); anything else fails closed, before this
    deltaguard reads or writes a row.

    :raises SchemaTooNewError: the schema is newer and not declared compatible with this deltaguard.
    """
    version = current_version(conn)
    if version > LATEST:
        oldest = stored_compatible_from(conn, version)
        if oldest is None or oldest > LATEST:
            raise SchemaTooNewError(
                f"lease store schema version {version} is newer than this deltaguard knows ({LATEST}) and "
                f"requires code that knows schema {oldest if oldest is not None else version} or later: "
                f"upgrade airflow-provider-deltaguard on this worker (see docs/deployment.md, rolling "
                f"upgrades); nothing was read or written"
            )
    return version


def pending(conn: sa.Connection, target: int = LATEST) -> list[int]:
    """The steps a migration to ``target`` would apply (empty when the schema is at or past it)."""
    version = current_version(conn)
    return [step for step, _ in MIGRATIONS if version < step <= target]


def migrate(conn: sa.Connection, target: int = LATEST, *, allow_breaking: bool = True) -> int:
    """Apply the missing steps up to ``target`` inside the caller's transaction; return the new version.

    :param conn: a connection inside a transaction that holds the store's migration lock.
    :param target: the version to reach (tests use older targets to build old schemas).
    :param allow_breaking: apply breaking steps too (``deltaguard db migrate --allow-breaking``); without,
        a pending breaking step raises and nothing is applied.
    :raises SchemaTooNewError: when the database is newer than this package may use.
    :raises MigrationPendingError: a breaking step is pending and ``allow_breaking`` is false.
    """
    version = check_usable(conn)
    # :func:`pending` of the version just read (reading it a third time would find the same, under the lock)
    steps = [step for step, _ in MIGRATIONS if version < step <= target]
    blocked = [step for step in steps if breaking(step)]
    if blocked and not allow_breaking:
        raise MigrationPendingError(
            f"lease store schema version {version} needs breaking migration step(s) {blocked}, which change "
            f"what older deltaguard workers' statements mean: stop every worker and triggerer running an "
            f"older deltaguard, then run `deltaguard db migrate --allow-breaking`"
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
            if step >= FIRST_COMPATIBILITY_VERSION:
                conn.execute(
                    sa.text("UPDATE dg_schema_version SET compatible_from = :c"), {"c": _stored_rule(step)}
                )
            version = step
    return version
