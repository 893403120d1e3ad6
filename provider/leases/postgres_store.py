"""The PostgreSQL lease store: for executors on many machines (Celery, Kubernetes).

Each decision locks the per-table rows of exactly the tables it names with ``SELECT ... ORDER BY uri FOR
UPDATE`` (rows are locked in sorted order, so two decisions can never deadlock), then reads and writes only
those tables' lease, queue and log rows. Decisions on disjoint tables run in parallel. Schema migrations are
serialised with a transaction-scoped advisory lock.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from deltaguard.leases.sql_store import SqlLeaseStore
from deltaguard.leases.store import TableRow

_Q_LOCK = sa.text(
    "SELECT uri, fencing, config_version, config_json FROM dg_tables WHERE uri = ANY(:uris) ORDER BY uri FOR UPDATE"
)
#: An arbitrary constant naming deltaguard's migration lock.
_MIGRATION_LOCK_KEY = 0x6467_6C65_6173


class PostgresLeaseStore(SqlLeaseStore):
    """Leases in a PostgreSQL database.

    :param url: ``postgresql+psycopg://user:password@host:port/database``.
    :param pool_size: connections kept per process.
    :param connect_timeout_s: how long to wait for the server before failing closed.
    :param lock_timeout_s: how long a decision waits for a table row lock before failing.
    :param migrate: create/migrate the schema on open.
    """

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 5,
        connect_timeout_s: float = 10.0,
        lock_timeout_s: float = 30.0,
        migrate: bool = True,
    ) -> None:
        self.pool_size = pool_size
        self.connect_timeout_s = connect_timeout_s
        self.lock_timeout_s = lock_timeout_s
        if url.startswith("postgres://") or url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url.split("://", 1)[1]
        super().__init__(url, migrate=migrate)

    _log_order = "seq"
    _read_options = {"isolation_level": "AUTOCOMMIT"}

    def _make_engine(self, url: str) -> sa.Engine:
        return sa.create_engine(
            url,
            pool_size=self.pool_size,
            max_overflow=self.pool_size,
            # Every use ends its own transaction (commit/rollback, or autocommit reads), so the pool's
            # extra ROLLBACK round trip on each return is pure cost.
            pool_reset_on_return=None,
            connect_args={
                "connect_timeout": max(1, int(self.connect_timeout_s)),
                "options": f"-c lock_timeout={int(self.lock_timeout_s * 1000)}",
                "application_name": "deltaguard-leases",
            },
        )

    def _lock_migrations(self, conn: sa.Connection) -> None:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})

    def _lock_tables(self, conn: sa.Connection, uris: list[str]) -> dict[str, TableRow]:
        return {r[0]: TableRow(*r) for r in conn.execute(_Q_LOCK, {"uris": uris})}

    def _retryable(self, exc: sa_exc.DBAPIError) -> bool:
        # 40P01 deadlock_detected, 40001 serialization_failure: the transaction was rolled back whole.
        return getattr(exc.orig, "sqlstate", None) in ("40P01", "40001")
