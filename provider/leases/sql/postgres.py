"""The PostgreSQL lease store: for executors on many machines (Celery, Kubernetes).

Each decision locks the per-table rows of exactly the tables it names with ``SELECT ... ORDER BY uri FOR
UPDATE`` (rows are locked in sorted order, so two decisions can never deadlock), then reads and writes only
those tables' lease, queue and log rows. Decisions on disjoint tables run in parallel. Schema migrations are
serialised with a transaction-scoped advisory lock. A grant on idle tables and a release are one call to a
server-side function each (ADR 0004); a decision on busy tables is made from the state the declined grant
returned and committed after a check of that state under the same locks (ADR 0007).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import psycopg
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from deltaguard.leases.sql.base import SqlLeaseStore, _Txn
from deltaguard.leases.store import (
    DecisionRow,
    IdleGrant,
    LeaseRow,
    QueuedBehind,
    RequestRow,
    SnapshotChanged,
    StoreError,
    StoreTxn,
    TableRow,
    TableSnapshot,
    WaiterRow,
)

T = TypeVar("T")

_Q_LOCK = sa.text(
    "SELECT uri, fencing, config_version, config_json FROM dg_tables WHERE uri = ANY(:uris) ORDER BY uri FOR UPDATE"
)
#: An arbitrary constant naming deltaguard's migration lock.
_MIGRATION_LOCK_KEY = 0x6467_6C65_6173

#: Planner settings for the store's sessions (ADR 0004). Every store statement is a key lookup or a short
#: index range, but the tables swing between empty and millions of rows. A plan cached while a table was
#: nearly empty kept scanning all of it sequentially once it had grown (``dg_requests`` lookups by request id
#: reached 0.5 ms each), and the fast-path functions re-planned their statements on every call because a
#: custom plan looked cheaper than a generic one. Generic plans without sequential scans fix both.
_PLANNER_OPTIONS = "-c plan_cache_mode=force_generic_plan -c enable_seqscan=off"
#: Table snapshots (ADR 0007) carry DOUBLE PRECISION values as JSON text; this setting (the default since
#: PostgreSQL 12, pinned against a role or database that lowers it) makes that text round-trip exactly.
_FLOAT_OPTIONS = "-c extra_float_digits=1"


class PostgresLeaseStore(SqlLeaseStore):
    """Leases in a PostgreSQL database.

    :param url: ``postgresql+psycopg://user:password@host:port/database``.
    :param pool_size: connections kept per process.
    :param connect_timeout_s: how long to wait for the server before failing closed.
    :param lock_timeout_s: how long a decision waits for a table row lock before failing.
    :param statement_timeout_s: the server ends any one statement after this long (ADR 0018).
    :param keepalive_s: TCP keepalives: idle seconds before the first probe, also the probe interval and,
        as ``tcp_user_timeout``, how long sent data may stay unacknowledged before the connection is
        dropped (a server host that vanished). A stopped server *process* still acknowledges at the TCP
        level; only the caller's own deadline (:mod:`deltaguard.leases.open`) ends that wait.
    :param migrate: create/migrate the schema on open.
    """

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 5,
        connect_timeout_s: float = 10.0,
        lock_timeout_s: float = 30.0,
        statement_timeout_s: float = 30.0,
        keepalive_s: float = 10.0,
        migrate: bool = True,
    ) -> None:
        for name, value in (
            ("connect_timeout_s", connect_timeout_s),
            ("lock_timeout_s", lock_timeout_s),
            ("statement_timeout_s", statement_timeout_s),
            ("keepalive_s", keepalive_s),
        ):
            if not value > 0:
                raise ValueError(f"{name} must be positive, got {value}")
        self.pool_size = pool_size
        self.connect_timeout_s = connect_timeout_s
        self.lock_timeout_s = lock_timeout_s
        self.statement_timeout_s = statement_timeout_s
        self.keepalive_s = keepalive_s
        if url.startswith("postgres://") or url.startswith("postgresql://"):
            url = "postgresql+psycopg://" + url.split("://", 1)[1]
        super().__init__(url, migrate=migrate)

    _log_order = "seq"
    has_fast_paths = True
    _keep_spare = True
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
                "connect_timeout": max(1, round(self.connect_timeout_s)),
                "options": (
                    f"-c lock_timeout={int(self.lock_timeout_s * 1000)} "
                    f"-c statement_timeout={int(self.statement_timeout_s * 1000)} "
                    f"{_PLANNER_OPTIONS} {_FLOAT_OPTIONS}"
                ),
                "application_name": "deltaguard-leases",
                "keepalives": 1,
                "keepalives_idle": max(1, round(self.keepalive_s)),
                "keepalives_interval": max(1, round(self.keepalive_s / 3)),
                "keepalives_count": 3,
                "tcp_user_timeout": int(self.keepalive_s * 1000),
            },
        )

    def _timed_out(self, exc: sa_exc.SQLAlchemyError) -> bool:
        # lock_timeout and statement_timeout, both set to the store timeout by the operators' stores
        return isinstance(
            getattr(exc, "orig", None), psycopg.errors.LockNotAvailable | psycopg.errors.QueryCanceled
        )

    def _lock_migrations(self, conn: sa.Connection) -> None:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})

    def _lock_tables(self, conn: sa.Connection, uris: list[str]) -> dict[str, TableRow]:
        return {r[0]: TableRow(*r) for r in conn.execute(_Q_LOCK, {"uris": uris})}

    def _open_txn(
        self, conn: sa.Connection, uris: list[str], request_id: str | None, release_by: str | None = None
    ) -> _Txn | None:
        # One round trip: BEGIN, lock the table rows, then (each statement with a fresh snapshot, after the
        # lock) read their holders and the request's status row, or, for a release, delete the lease.
        raw = _psycopg(conn)
        release = request_id is not None and release_by is not None
        try:
            with raw.pipeline():
                lock = raw.execute(_P_LOCK, {"uris": uris})
                if release:
                    deleted = raw.execute(_P_RELEASE, {"id": request_id, "k": release_by})
                else:
                    holders = raw.execute(_P_HOLDERS, {"uris": uris})
                    if request_id is not None:
                        request = raw.execute(_P_REQUEST, {"id": request_id})
            tables = {r[0]: TableRow(*r) for r in lock.fetchall()}
            if len(tables) != len(uris):
                return None
            txn = _PgTxn(conn, uris, tables, self.name)
            if release:
                txn.prefetch_release(
                    str(request_id), str(release_by), [LeaseRow(*r) for r in deleted.fetchall()]
                )
            else:
                txn.prefetch_holders(_split_holders(holders.fetchall()))
                if request_id is not None:
                    rows = request.fetchall()
                    txn.prefetch_request(request_id, RequestRow(*rows[0]) if rows else None)
            return txn
        except psycopg.Error as exc:
            raise _failure(self.name, conn, raw, exc) from exc

    # --- one-call fast paths (schema 3-6 functions; ADR 0004, 0009, 0010), snapshot decisions (ADR 0007) ---

    def grant_if_idle(self, grant: IdleGrant) -> dict[str, int] | QueuedBehind | TableSnapshot | None:
        if grant.waits and (len(grant.uris) != 1 or grant.wait_expires_at is None):
            raise ValueError("a one-call queue entry is for one table, with its expiry")
        claims = json.dumps(
            list(
                zip(
                    grant.uris,
                    grant.op_jsons,
                    grant.config_versions,
                    grant.config_jsons,
                    grant.details,
                    grant.compatible or tuple(() for _ in grant.uris),
                    # Only a one-table request is queued in one call (checked above).
                    (grant.waits or None,) if len(grant.uris) == 1 else tuple(None for _ in grant.uris),
                    strict=True,
                )
            )
        )
        rows = self._call(
            _P_GRANT_IF_IDLE,
            {
                "request_id": grant.request_id,
                "owner_key": grant.owner_key,
                "owner_json": grant.owner_json,
                "claims": claims,
                "now": grant.now,
                "expires_at": grant.expires_at,
                "ttl_s": grant.ttl_s,
                "rank": grant.rank,
                "payload": grant.payload,
                "wait_expires_at": grant.wait_expires_at,
            },
        )
        if not rows:
            return None
        if rows[0][0] is not None and rows[0][1] is None:  # queued: the state names the holder
            lease_id, owner_json, op_json = json.loads(rows[0][2])
            return QueuedBehind(rows[0][0], lease_id, owner_json, op_json)
        if rows[0][0] is not None:
            return {uri: int(fencing) for uri, fencing, _ in rows}
        snapshot = _parse_state(grant.uris, grant.request_id, rows[0][2])
        # A table without a row yet: the general path creates it.
        return snapshot if len(snapshot.tables) == len(grant.uris) else None

    def run_on_snapshot(self, snapshot: TableSnapshot, body: Callable[[StoreTxn], T]) -> T:
        # If the body or the commit raises, _connect rolls the transaction back.
        with self._connect() as conn:
            conn.begin()
            txn = _SnapshotTxn(conn, snapshot, self.name)
            result = body(txn)
            txn.commit()
            conn.commit()
            return result

    def release_owned(
        self, request_id: str, owner_key: str, uris: Sequence[str], reset_config: Sequence[str], now: float
    ) -> list[tuple[str, int | None]] | None:
        reset = set(reset_config)
        tables = json.dumps([(uri, uri in reset) for uri in uris])
        rows = self._call(_P_RELEASE_OWNED, {"id": request_id, "k": owner_key, "tables": tables, "now": now})
        return [(uri, None if fencing is None else int(fencing)) for uri, fencing in rows]

    def _call(self, sql: str, params: dict[str, Any], attempts: int = 3) -> list[tuple[Any, ...]]:
        """Run one statement in autocommit (one round trip, no BEGIN/COMMIT); retry a lost connection.

        Safe to retry: the statement is one transaction that either committed before the failure was seen
        (then the retry finds the rows it wrote and changes nothing) or was rolled back whole. In the first
        case the caller's general path answers from what is stored: a committed grant is found and returned
        again, while a committed release reads as "nothing was held" (``release`` returns ``False``).
        """
        for attempt in range(attempts):
            with self._connect() as conn:
                raw = _psycopg(conn)
                try:
                    raw.autocommit = True
                    try:
                        return raw.execute(sql, params).fetchall()
                    finally:
                        if not raw.closed:
                            raw.autocommit = False
                except psycopg.Error as exc:
                    error = _failure(self.name, conn, raw, exc)
                    if attempt + 1 < attempts and self._retryable_cause(exc):
                        continue
                    raise error from exc
        raise AssertionError("unreachable")

    def _retryable_cause(self, cause: BaseException | None) -> bool:
        if isinstance(cause, psycopg.Error):
            # Deadlock victim or serialisation failure (rolled back whole), or a lost connection (class 08,
            # or the server shutting down, 57P0x). A lock timeout (55P03) is not retried: it already waited.
            state = getattr(cause, "sqlstate", None) or ""
            lost = isinstance(cause, psycopg.OperationalError) and (
                not state or state[:2] == "08" or state[:4] == "57P0"
            )
            return state in ("40P01", "40001") or lost
        return super()._retryable_cause(cause)

    def _retryable(self, exc: sa_exc.DBAPIError) -> bool:
        # 40P01 deadlock_detected, 40001 serialization_failure: the transaction was rolled back whole.
        return getattr(exc.orig, "sqlstate", None) in ("40P01", "40001")


# --- the pipelined transaction ------------------------------------------------------------------------
# PostgreSQL runs the statements of one pipeline in order, each with its own snapshot (READ COMMITTED), so
# "lock the table rows, then read their holders" can travel in one round trip and still read the holders
# as they are after the lock was granted. Writes are buffered and sent with the COMMIT in one more round
# trip. An acquire costs two round trips, a release two (three when it must first look up the tables);
# see ADR 0004.

_L = "lease_id, uri, owner_key, owner_json, op_json, granted_at, expires_at, fencing, ttl_s"
_W = "request_id, uri, owner_key, owner_json, op_json, rank, expires_at"
_D = "at, kind, request_id, uri, owner_key, detail"
_R = "request_id, owner_key, status, rank, enqueued_at, expires_at, payload, updated_at, last_wait"
_P_LOCK = (
    "SELECT uri, fencing, config_version, config_json FROM dg_tables WHERE uri = ANY(%(uris)s) "
    "ORDER BY uri FOR UPDATE"
)
_P_HOLDERS = (
    f"SELECT 'L', {_L} FROM dg_leases WHERE uri = ANY(%(uris)s) UNION ALL "
    f"SELECT 'W', {_W}, 0, 0 FROM dg_queue WHERE uri = ANY(%(uris)s)"
)
_P_REQUEST = f"SELECT {_R} FROM dg_requests WHERE request_id = %(id)s"
_P_REQUESTS = f"SELECT {_R} FROM dg_requests WHERE request_id = ANY(%(ids)s)"
# The fast paths take their per-table values as one JSON text: psycopg dumps one string far cheaper than
# several arrays.
_P_GRANT_IF_IDLE = (
    "SELECT granted_uri, granted_fencing, state FROM dg_grant_if_idle(%(request_id)s, %(owner_key)s, "
    "%(owner_json)s, %(claims)s, %(now)s, %(expires_at)s, %(ttl_s)s, %(rank)s, %(payload)s, %(wait_expires_at)s)"
)
_P_CHECK_STATE = "SELECT dg_check_state(%(uris)s, %(id)s, %(state)s)"
_P_RELEASE_OWNED = (
    "SELECT released_uri, released_fencing FROM dg_release_owned(%(id)s, %(k)s, %(tables)s, %(now)s)"
)
_P_RELEASE = f"DELETE FROM dg_leases WHERE lease_id = %(id)s AND owner_key = %(k)s RETURNING {_L}"
_P_LEASE_BY_ID = f"SELECT {_L} FROM dg_leases WHERE lease_id = %(id)s"
_P_LIVE_LEASES = f"SELECT {_L} FROM dg_leases WHERE expires_at > %(now)s"
_P_DEL_LEASE = "DELETE FROM dg_leases WHERE lease_id = %(id)s AND uri = ANY(%(uris)s)"
_P_EXTEND = "UPDATE dg_leases SET expires_at = %(exp)s WHERE lease_id = %(id)s"
_P_DEL_WAITER = "DELETE FROM dg_queue WHERE request_id = %(id)s"
_P_DEL_WAITERS = "DELETE FROM dg_queue WHERE request_id = ANY(%(ids)s)"
_P_DEL_WAITER_ON = "DELETE FROM dg_queue WHERE request_id = %(id)s AND uri = ANY(%(uris)s)"
_P_UPSERT_REQUEST = (
    f"INSERT INTO dg_requests ({_R}) VALUES (%(request_id)s, %(owner_key)s, %(status)s, %(rank)s, "
    "%(enqueued_at)s, %(expires_at)s, %(payload)s, %(updated_at)s, %(last_wait)s) ON CONFLICT (request_id) "
    "DO UPDATE SET status = excluded.status, rank = excluded.rank, enqueued_at = excluded.enqueued_at, "
    "expires_at = excluded.expires_at, payload = excluded.payload, updated_at = excluded.updated_at, "
    "last_wait = excluded.last_wait"
)
_REQUEST_CONFLICT = _P_UPSERT_REQUEST[_P_UPSERT_REQUEST.index(" ON CONFLICT") :]
_P_SET_STATUS = "UPDATE dg_requests SET status = %(status)s, updated_at = %(at)s WHERE request_id = %(id)s"
_P_SET_TABLE = (
    "UPDATE dg_tables SET fencing = %(fencing)s, config_version = %(cv)s, config_json = %(cj)s "
    "WHERE uri = %(uri)s"
)
_WAITER_CONFLICT = " ON CONFLICT (request_id, uri) DO UPDATE SET expires_at = excluded.expires_at, op_json = excluded.op_json"

_Stmt = tuple[str, dict[str, Any]]


@functools.lru_cache(maxsize=64)
def _insert_sql(table: str, columns: str, n: int, suffix: str = "") -> str:
    """``INSERT ... VALUES`` for ``n`` rows with parameters named ``<column>_<row>``.

    Plain values, not ``unnest`` arrays: psycopg's text-array dumping escapes every JSON string with a
    regular expression, which costs more client CPU than the extra parameters.
    """
    names = [c.strip() for c in columns.split(",")]
    rows = ", ".join("(" + ", ".join(f"%({c}_{i})s" for c in names) + ")" for i in range(n))
    return f"INSERT INTO {table} ({columns}) VALUES {rows}{suffix}"


def _insert(table: str, columns: str, rows: Sequence[Any], suffix: str = "") -> _Stmt:
    params = {f"{k}_{i}": v for i, r in enumerate(rows) for k, v in r.__dict__.items()}
    return _insert_sql(table, columns, len(rows), suffix), params


#: rows per multi-row statement: a statement takes at most 65,535 parameters, and buffered writes to
#: different tables may be folded into one statement (:func:`_fold`), so each part stays well below
_ROWS_PER_STATEMENT = 1000


def _inserts(table: str, columns: str, rows: Sequence[Any], suffix: str = "") -> list[_Stmt]:
    """:func:`_insert` in statements of at most :data:`_ROWS_PER_STATEMENT` rows."""
    step = _ROWS_PER_STATEMENT
    return [_insert(table, columns, rows[i : i + step], suffix) for i in range(0, len(rows), step)]


class _PgTxn(_Txn):
    """A transaction on the raw psycopg connection that batches statements into pipelines.

    Reads flush the buffered writes ahead of them in the same round trip; :meth:`commit` sends the rest
    with the COMMIT. Every psycopg failure surfaces as :class:`StoreError` (the caller rolls back).
    """

    def __init__(
        self, conn: sa.Connection, uris: Sequence[str], tables: dict[str, TableRow], store_name: str
    ) -> None:
        super().__init__(conn, uris, tables)
        self._raw = _psycopg(conn)
        self._pending: list[_Stmt] = []
        self._holders: tuple[list[LeaseRow], list[WaiterRow]] | None = None
        self._request: tuple[str, RequestRow | None] | None = None
        self._released: tuple[str, str, list[LeaseRow]] | None = None
        self._name = store_name

    def prefetch_holders(self, holders: tuple[list[LeaseRow], list[WaiterRow]]) -> None:
        self._holders = holders

    def prefetch_request(self, request_id: str, row: RequestRow | None) -> None:
        self._request = (request_id, row)

    def prefetch_release(self, lease_id: str, owner_key: str, deleted: list[LeaseRow]) -> None:
        """The rows ``release_lease(lease_id, owner_key)`` already deleted (see ``release_by``)."""
        self._released = (lease_id, owner_key, deleted)

    # --- plumbing ------------------------------------------------------------------------------------

    def _pipeline(
        self, reads: Sequence[_Stmt], commit: bool = False, first: _Stmt | None = None
    ) -> list[list[tuple[Any, ...]]]:
        """Send ``first`` (if any), the buffered writes, then ``reads`` (and a COMMIT) in one round trip;
        return the reads' rows. A failed statement makes the server skip the rest of the pipeline.

        :raises StoreError: with the first psycopg error as its cause.
        """
        writes, self._pending = _fold(self._pending), []
        statements = [first, *writes] if first is not None else writes
        failure: psycopg.Error | None = None
        try:
            with self._raw.pipeline():
                try:
                    for sql, params in statements:
                        self._raw.execute(sql, params)
                    cursors = [self._raw.execute(sql, params) for sql, params in reads]
                    if commit:
                        self._raw.commit()
                except psycopg.Error as exc:
                    # An earlier statement's error surfaces at a later call inside this block. Caught here,
                    # psycopg does not also log the aborted pipeline as an ignored error on the way out.
                    failure = exc
            if failure is None:
                return [cur.fetchall() for cur in cursors]
        except psycopg.Error as exc:
            failure = failure or exc
        raise _failure(self._name, self._conn, self._raw, failure) from failure

    def _write(self, sql: str, params: dict[str, Any]) -> None:
        self._pending.append((sql, params))

    def commit(self) -> None:
        self._pipeline((), commit=True)

    # --- reads ---------------------------------------------------------------------------------------

    def leases(self) -> list[LeaseRow]:
        return self.holders()[0]

    def waiters(self) -> list[WaiterRow]:
        return self.holders()[1]

    def holders(self) -> tuple[list[LeaseRow], list[WaiterRow]]:
        # The prefetched rows are current only until this transaction writes.
        if self._holders is not None and not self._pending:
            result, self._holders = self._holders, None
            return result
        self._holders = None
        return _split_holders(self._pipeline([(_P_HOLDERS, {"uris": self._uris})])[0])

    def request(self, request_id: str) -> RequestRow | None:
        if self._request is not None and self._request[0] == request_id and not self._pending:
            row = self._request[1]
            self._request = None
            return row
        self._request = None
        rows = self._pipeline([(_P_REQUEST, {"id": request_id})])[0]
        return RequestRow(*rows[0]) if rows else None

    def requests(self, request_ids: Sequence[str]) -> list[RequestRow]:
        if not request_ids:
            return []
        rows = self._pipeline([(_P_REQUESTS, {"ids": sorted(set(request_ids))})])[0]
        return [RequestRow(*r) for r in rows]

    def release_lease(self, lease_id: str, owner_key: str) -> list[LeaseRow]:
        done, self._released = self._released, None
        if done is not None and done[:2] == (lease_id, owner_key):
            return done[2]
        rows = self._pipeline([(_P_RELEASE, {"id": lease_id, "k": owner_key})])[0]
        return [LeaseRow(*r) for r in rows]

    def lease_rows(self, lease_id: str) -> list[LeaseRow]:
        return [LeaseRow(*r) for r in self._pipeline([(_P_LEASE_BY_ID, {"id": lease_id})])[0]]

    def live_leases(self, now: float) -> list[LeaseRow]:
        return [LeaseRow(*r) for r in self._pipeline([(_P_LIVE_LEASES, {"now": now})])[0]]

    # --- writes (buffered) ---------------------------------------------------------------------------

    def delete_lease_rows(self, lease_id: str, uris: Sequence[str]) -> None:
        self._write(_P_DEL_LEASE, {"id": lease_id, "uris": list(uris)})

    def insert_lease_rows(self, rows: Sequence[LeaseRow]) -> None:
        self._pending.extend(_inserts("dg_leases", _L, rows))

    def extend_lease(self, lease_id: str, expires_at: float) -> None:
        self._write(_P_EXTEND, {"id": lease_id, "exp": expires_at})

    def delete_waiter_rows(self, request_id: str, uris: Sequence[str] | None = None) -> None:
        if uris is None:
            self._write(_P_DEL_WAITER, {"id": request_id})
        else:
            self._write(_P_DEL_WAITER_ON, {"id": request_id, "uris": list(uris)})

    def put_waiter_rows(self, rows: Sequence[WaiterRow]) -> None:
        self._pending.extend(_inserts("dg_queue", _W, rows, _WAITER_CONFLICT))

    def put_request(self, row: RequestRow) -> None:
        self._write(_P_UPSERT_REQUEST, dict(row.__dict__))

    def put_requests(self, rows: Sequence[RequestRow]) -> None:
        # one multi-row upsert: the rows are of distinct requests (a row may not be updated twice by one)
        self._pending.extend(_inserts("dg_requests", _R, rows, _REQUEST_CONFLICT))

    def delete_waiters(self, request_ids: Sequence[str]) -> None:
        step = _ROWS_PER_STATEMENT
        for i in range(0, len(request_ids), step):
            self._write(_P_DEL_WAITERS, {"ids": list(request_ids[i : i + step])})

    def set_request_status(self, request_id: str, status: str, updated_at: float) -> None:
        self._write(_P_SET_STATUS, {"id": request_id, "status": status, "at": updated_at})

    def set_table(self, uri: str, fencing: int, config_version: int | None, config_json: str | None) -> None:
        # A later set_table of the same row supersedes a buffered one (each writes the whole row): keeping
        # only the last lets the buffered writes fold into one statement (see _fold). There is at most one
        # per row, and it is near the end when one transaction grants many times (the re-admission of a
        # queue, ADR 0031): looked for from the end rather than by rebuilding the whole buffer per grant.
        for i in range(len(self._pending) - 1, -1, -1):
            sql, p = self._pending[i]
            if sql is _P_SET_TABLE and p["uri"] == uri:
                del self._pending[i]
                break
        self._write(_P_SET_TABLE, {"uri": uri, "fencing": fencing, "cv": config_version, "cj": config_json})
        self._tables[uri] = TableRow(uri, fencing, config_version, config_json)

    def log(self, rows: Sequence[DecisionRow]) -> None:
        self._pending.extend(_inserts("dg_decisions", _D, rows))


class _SnapshotTxn(_PgTxn):
    """A decision's transaction on a :class:`TableSnapshot` (ADR 0007).

    Reads answer from the snapshot and writes are buffered, with no lock held; :meth:`commit` sends the
    state check (which takes the table locks), the writes and the COMMIT in one round trip. A read the
    snapshot cannot answer raises :class:`SnapshotChanged` before anything is sent.
    """

    def __init__(self, conn: sa.Connection, snapshot: TableSnapshot, store_name: str) -> None:
        super().__init__(conn, snapshot.uris, dict(snapshot.tables), store_name)
        self._snapshot = snapshot
        self._holders = (list(snapshot.leases), list(snapshot.waiters))
        self._request_row = snapshot.request

    def holders(self) -> tuple[list[LeaseRow], list[WaiterRow]]:
        # Only before the first write: afterwards the snapshot no longer shows the transaction's own state.
        if self._holders is None or self._pending:
            raise SnapshotChanged("a decision read holders after writing; it needs the table locks")
        result, self._holders = self._holders, None
        return result

    def request(self, request_id: str) -> RequestRow | None:
        if request_id != self._snapshot.request_id:
            raise SnapshotChanged(f"the snapshot holds request {self._snapshot.request_id}, not {request_id}")
        return self._request_row

    def requests(self, request_ids: Sequence[str]) -> list[RequestRow]:
        """The holders' status rows, read now without the table locks and without sending the buffered
        writes (those go only with the state check at commit).

        Not part of the checked state: these rows only give the holders' duration estimates and enqueue
        times, which order conflicting writes but never grant beside a conflicting lease (ADR 0017).
        """
        if not request_ids:
            return []
        try:
            cursor = self._raw.execute(_P_REQUESTS, {"ids": sorted(set(request_ids))})
            return [RequestRow(*r) for r in cursor.fetchall()]
        except psycopg.Error as exc:
            raise _failure(self._name, self._conn, self._raw, exc) from exc

    def set_request_status(self, request_id: str, status: str, updated_at: float) -> None:
        # Reclaiming an expired lease or queue entry may close this very request; a later request() must
        # see that, as it would after the same UPDATE under the locks.
        super().set_request_status(request_id, status, updated_at)
        row = self._request_row
        if row is not None and row.request_id == request_id:
            self._request_row = dataclasses.replace(row, status=status, updated_at=updated_at)

    def live_leases(self, now: float) -> list[LeaseRow]:
        """Every table's live leases, read now as :meth:`requests` (without the locks and without sending the
        buffered writes): the slot gate's count only ever turns a grant into a wait, so it is not part of
        the checked state."""
        try:
            cursor = self._raw.execute(_P_LIVE_LEASES, {"now": now})
            return [LeaseRow(*r) for r in cursor.fetchall()]
        except psycopg.Error as exc:
            raise _failure(self._name, self._conn, self._raw, exc) from exc

    def release_lease(self, lease_id: str, owner_key: str) -> list[LeaseRow]:
        raise SnapshotChanged("a release needs the table locks")

    def lease_rows(self, lease_id: str) -> list[LeaseRow]:
        raise SnapshotChanged("a lease lookup by id needs the table locks")

    def commit(self) -> None:
        if not self._pending:
            return  # nothing to write: the answer stands as read at one instant under the locks
        check = {
            "uris": list(self._snapshot.uris),
            "id": self._snapshot.request_id,
            "state": self._snapshot.state,
        }
        try:
            self._pipeline((), commit=True, first=(_P_CHECK_STATE, check))
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.SerializationFailure):
                raise SnapshotChanged(
                    f"lease store {self._name}: the tables changed since the snapshot"
                ) from exc.__cause__
            raise


def _parse_state(uris: Sequence[str], request_id: str, state: str) -> TableSnapshot:
    """The :class:`TableSnapshot` in ``dg_table_state``'s JSON text.

    JSON writes a whole-valued DOUBLE PRECISION as an integer; those columns are made floats again, as the
    locking path reads them.
    """
    tables, leases, waiters, request = json.loads(state)
    return TableSnapshot(
        uris=tuple(uris),
        request_id=request_id,
        tables={t[0]: TableRow(*t) for t in tables},
        leases=[_lease_row(*r[:9]) for r in leases],
        waiters=[_waiter_row(*r[:7]) for r in waiters],
        request=_request_row(*request[:9]) if request else None,
        state=state,
    )


# One parameter per column, so each field is typed (the JSON decoder yields untyped lists); callers pass a
# row's leading columns, as many as the row type has.
def _lease_row(
    lease_id: str,
    uri: str,
    owner_key: str,
    owner_json: str,
    op_json: str,
    granted_at: float,
    expires_at: float,
    fencing: int,
    ttl_s: float,
) -> LeaseRow:
    return LeaseRow(
        lease_id,
        uri,
        owner_key,
        owner_json,
        op_json,
        float(granted_at),
        float(expires_at),
        fencing,
        float(ttl_s),
    )


def _waiter_row(
    request_id: str, uri: str, owner_key: str, owner_json: str, op_json: str, rank: float, expires_at: float
) -> WaiterRow:
    return WaiterRow(request_id, uri, owner_key, owner_json, op_json, float(rank), float(expires_at))


def _request_row(
    request_id: str,
    owner_key: str,
    status: str,
    rank: float,
    enqueued_at: float,
    expires_at: float,
    payload: str,
    updated_at: float,
    last_wait: str | None,
) -> RequestRow:
    return RequestRow(
        request_id,
        owner_key,
        status,
        float(rank),
        float(enqueued_at),
        float(expires_at),
        payload,
        float(updated_at),
        last_wait,
    )


def _psycopg(conn: sa.Connection) -> psycopg.Connection[Any]:
    """The psycopg connection under a pooled SQLAlchemy one (the store's engine is always
    ``postgresql+psycopg``; SQLAlchemy types it as the generic DB-API connection, possibly ``None``)."""
    return cast("psycopg.Connection[Any]", conn.connection.dbapi_connection)


def _failure(
    store_name: str, conn: sa.Connection, raw: psycopg.Connection[Any], exc: psycopg.Error
) -> StoreError:
    """The :class:`StoreError` for a psycopg failure; a connection the failure broke is invalidated first, so
    the pool never hands it out again."""
    if raw.closed or raw.broken:
        conn.invalidate()
    return StoreError(f"lease store {store_name} failed: {type(exc).__name__}: {exc}")


def _target(sql: str) -> str:
    """The table a buffered write modifies (the third word of ``UPDATE x``/``DELETE FROM x``/``INSERT INTO x``)."""
    words = sql.split(None, 3)
    return words[1] if words[0] == "UPDATE" else words[2]


def _fold(writes: list[_Stmt]) -> list[_Stmt]:
    """Fold buffered writes into one statement of data-modifying CTEs when that cannot change the outcome.

    psycopg's per-statement client cost dominates a decision, so one statement is cheaper than five. The
    sub-statements of one statement share a snapshot and do not see each other's effects, so folding is
    only safe when no two writes touch the same rows: each writes a different table, except updates of
    distinct ``dg_tables`` rows (``set_table`` keeps one buffered write per row). Otherwise the writes are
    sent one by one, in order, as before.

    :param writes: buffered ``(sql, params)`` statements, in order.
    :return: the statements to send.
    """
    if len(writes) < 2:
        return writes
    others = [_target(sql) for sql, _ in writes if sql is not _P_SET_TABLE]
    if len(set(others)) != len(others) or "dg_tables" in others:
        return writes
    parts: list[str] = []
    params: dict[str, Any] = {}
    for i, (sql, p) in enumerate(writes):
        # Distinct parameter names per sub-statement: the SQL text has no other "%(" than placeholders.
        parts.append(sql.replace("%(", f"%(s{i}_"))
        params.update({f"s{i}_{k}": v for k, v in p.items()})
    head = ", ".join(f"w{i} AS ({part})" for i, part in enumerate(parts[:-1]))
    return [(f"WITH {head} {parts[-1]}", params)]


def _split_holders(rows: Sequence[Sequence[Any]]) -> tuple[list[LeaseRow], list[WaiterRow]]:
    leases, waiters = [], []
    for r in rows:
        if r[0] == "L":
            leases.append(LeaseRow(*r[1:]))
        else:
            waiters.append(WaiterRow(*r[1:8]))
    return leases, waiters
