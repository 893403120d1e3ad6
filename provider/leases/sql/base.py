"""The SQL lease store shared by SQLite and PostgreSQL (SQLAlchemy 2 Core, plain SQL).

Subclasses supply the engine and the table-locking statement; everything else (reads by table, writes,
decision log, pruning) is the same SQL on both databases. Every query is by primary key or by an index on
``uri``/``owner_key``/``at``, so its cost does not grow with the number of tables or the size of the log.
"""

from __future__ import annotations

import abc
import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc

from deltaguard.leases.sql import migrations
from deltaguard.leases.store import (
    DecisionRow,
    LeaseRow,
    LeaseStore,
    RequestRow,
    StoreError,
    StoreReplacedError,
    StoreUnavailableError,
    TableRow,
    WaiterRow,
    redact_url,
)

T = TypeVar("T")

log = logging.getLogger("deltaguard.leases")

_LEASE_COLS = "lease_id, uri, owner_key, owner_json, op_json, granted_at, expires_at, fencing, ttl_s"
_WAITER_COLS = "request_id, uri, owner_key, owner_json, op_json, rank, expires_at"
_REQUEST_COLS = "request_id, owner_key, status, rank, enqueued_at, expires_at, payload, updated_at, last_wait"
_DECISION_COLS = "at, kind, request_id, uri, owner_key, detail"
_Q_STORE_ID = sa.text("SELECT MIN(store_id) FROM dg_store")


def _in(name: str) -> sa.BindParameter[Any]:
    return sa.bindparam(name, expanding=True)


_Q_LEASES = sa.text(f"SELECT {_LEASE_COLS} FROM dg_leases WHERE uri IN :uris").bindparams(_in("uris"))
_Q_WAITERS = sa.text(f"SELECT {_WAITER_COLS} FROM dg_queue WHERE uri IN :uris").bindparams(_in("uris"))
_Q_HOLDERS = sa.text(
    f"SELECT 'L', {_LEASE_COLS} FROM dg_leases WHERE uri IN :uris UNION ALL "
    f"SELECT 'W', {_WAITER_COLS}, 0, 0 FROM dg_queue WHERE uri IN :uris2"
).bindparams(_in("uris"), _in("uris2"))
_RELEASE = sa.text(f"DELETE FROM dg_leases WHERE lease_id = :id AND owner_key = :k RETURNING {_LEASE_COLS}")
_Q_ALIVE = sa.text(
    "SELECT lease_id FROM dg_leases WHERE lease_id IN :ids AND expires_at > :now UNION "
    "SELECT request_id FROM dg_queue WHERE request_id IN :ids2 AND expires_at > :now"
).bindparams(_in("ids"), _in("ids2"))
_Q_REQUEST = sa.text(f"SELECT {_REQUEST_COLS} FROM dg_requests WHERE request_id = :id")
_Q_REQUESTS = sa.text(f"SELECT {_REQUEST_COLS} FROM dg_requests WHERE request_id IN :ids").bindparams(
    _in("ids")
)
_TABLE_COLS = "uri, fencing, config_version, config_json"
_Q_TABLE = sa.text(f"SELECT {_TABLE_COLS} FROM dg_tables WHERE uri = :uri")
_Q_TABLES_IN = sa.text(f"SELECT {_TABLE_COLS} FROM dg_tables WHERE uri IN :uris ORDER BY uri").bindparams(
    _in("uris")
)
_Q_TABLES = sa.text(f"SELECT {_TABLE_COLS} FROM dg_tables ORDER BY uri LIMIT :limit")
_Q_TABLES_AFTER = sa.text(f"SELECT {_TABLE_COLS} FROM dg_tables WHERE uri > :after ORDER BY uri LIMIT :limit")
_Q_LIVE_LEASES = sa.text(f"SELECT {_LEASE_COLS} FROM dg_leases WHERE expires_at > :now")
_Q_LEASE_BY_ID = sa.text(f"SELECT {_LEASE_COLS} FROM dg_leases WHERE lease_id = :id")
#: the store's id and a lease's rows in one read: one row with NULL lease columns when there are none
_Q_LEASE_IN_STORE = sa.text(
    "SELECT s.store_id, "
    + ", ".join(f"l.{column.strip()}" for column in _LEASE_COLS.split(","))
    + " FROM (SELECT MIN(store_id) AS store_id FROM dg_store) s LEFT JOIN dg_leases l ON l.lease_id = :id"
)
_Q_LEASES_OF = sa.text(f"SELECT {_LEASE_COLS} FROM dg_leases WHERE uri = :uri ORDER BY granted_at")
_Q_EXPIRED_LEASES = sa.text(
    "SELECT DISTINCT lease_id FROM dg_leases WHERE expires_at <= :now ORDER BY lease_id LIMIT :limit"
)
_Q_WAITERS_OF = sa.text(f"SELECT {_WAITER_COLS} FROM dg_queue WHERE uri = :uri ORDER BY rank, request_id")
_DEL_LEASE = sa.text("DELETE FROM dg_leases WHERE lease_id = :id AND uri IN :uris").bindparams(_in("uris"))
_INS_LEASE = sa.text(
    f"INSERT INTO dg_leases ({_LEASE_COLS}) VALUES (:lease_id, :uri, :owner_key, :owner_json, :op_json, "
    ":granted_at, :expires_at, :fencing, :ttl_s)"
)
_EXTEND_LEASE = sa.text("UPDATE dg_leases SET expires_at = :exp WHERE lease_id = :id")
_DEL_WAITER = sa.text("DELETE FROM dg_queue WHERE request_id = :id")
_DEL_WAITER_ON = sa.text("DELETE FROM dg_queue WHERE request_id = :id AND uri IN :uris").bindparams(
    _in("uris")
)
_UPSERT_WAITER = sa.text(
    f"INSERT INTO dg_queue ({_WAITER_COLS}) VALUES (:request_id, :uri, :owner_key, :owner_json, :op_json, "
    ":rank, :expires_at) ON CONFLICT (request_id, uri) DO UPDATE SET expires_at = excluded.expires_at, "
    "op_json = excluded.op_json"
)
_UPSERT_REQUEST = sa.text(
    f"INSERT INTO dg_requests ({_REQUEST_COLS}) VALUES (:request_id, :owner_key, :status, :rank, :enqueued_at, "
    ":expires_at, :payload, :updated_at, :last_wait) ON CONFLICT (request_id) DO UPDATE SET "
    "status = excluded.status, rank = excluded.rank, enqueued_at = excluded.enqueued_at, "
    "expires_at = excluded.expires_at, payload = excluded.payload, updated_at = excluded.updated_at, "
    "last_wait = excluded.last_wait"
)
_SET_STATUS = sa.text("UPDATE dg_requests SET status = :status, updated_at = :at WHERE request_id = :id")
_SET_TABLE = sa.text(
    "UPDATE dg_tables SET fencing = :fencing, config_version = :cv, config_json = :cj WHERE uri = :uri"
)
_INS_DECISION = sa.text(
    f"INSERT INTO dg_decisions ({_DECISION_COLS}) VALUES (:at, :kind, :request_id, :uri, :owner_key, :detail)"
)
_ENSURE_TABLE = sa.text("INSERT INTO dg_tables (uri, fencing) VALUES (:uri, 0) ON CONFLICT (uri) DO NOTHING")


class _Txn:
    """:class:`~deltaguard.leases.store.StoreTxn` over one SQLAlchemy connection in a transaction."""

    def __init__(self, conn: sa.Connection, uris: Sequence[str], tables: dict[str, TableRow]) -> None:
        self._conn = conn
        self._uris = list(uris)
        self._tables = tables

    def tables(self) -> dict[str, TableRow]:
        return dict(self._tables)

    def leases(self) -> list[LeaseRow]:
        return [LeaseRow(*r) for r in self._conn.execute(_Q_LEASES, {"uris": self._uris})]

    def waiters(self) -> list[WaiterRow]:
        return [WaiterRow(*r) for r in self._conn.execute(_Q_WAITERS, {"uris": self._uris})]

    def holders(self) -> tuple[list[LeaseRow], list[WaiterRow]]:
        leases, waiters = [], []
        for r in self._conn.execute(_Q_HOLDERS, {"uris": self._uris, "uris2": self._uris}):
            if r[0] == "L":
                leases.append(LeaseRow(*r[1:]))
            else:
                waiters.append(WaiterRow(*r[1:8]))
        return leases, waiters

    def live_leases(self, now: float) -> list[LeaseRow]:
        return [LeaseRow(*r) for r in self._conn.execute(_Q_LIVE_LEASES, {"now": now})]

    def release_lease(self, lease_id: str, owner_key: str) -> list[LeaseRow]:
        return [LeaseRow(*r) for r in self._conn.execute(_RELEASE, {"id": lease_id, "k": owner_key})]

    def request(self, request_id: str) -> RequestRow | None:
        row = self._conn.execute(_Q_REQUEST, {"id": request_id}).first()
        return RequestRow(*row) if row else None

    def requests(self, request_ids: Sequence[str]) -> list[RequestRow]:
        if not request_ids:
            return []
        return [RequestRow(*r) for r in self._conn.execute(_Q_REQUESTS, {"ids": sorted(set(request_ids))})]

    def lease_rows(self, lease_id: str) -> list[LeaseRow]:
        return [LeaseRow(*r) for r in self._conn.execute(_Q_LEASE_BY_ID, {"id": lease_id})]

    def delete_lease_rows(self, lease_id: str, uris: Sequence[str]) -> None:
        self._conn.execute(_DEL_LEASE, {"id": lease_id, "uris": list(uris)})

    def insert_lease_rows(self, rows: Sequence[LeaseRow]) -> None:
        self._conn.execute(_INS_LEASE, [r.__dict__ for r in rows])

    def extend_lease(self, lease_id: str, expires_at: float) -> None:
        self._conn.execute(_EXTEND_LEASE, {"id": lease_id, "exp": expires_at})

    def delete_waiter_rows(self, request_id: str, uris: Sequence[str] | None = None) -> None:
        if uris is None:
            self._conn.execute(_DEL_WAITER, {"id": request_id})
        else:
            self._conn.execute(_DEL_WAITER_ON, {"id": request_id, "uris": list(uris)})

    def put_waiter_rows(self, rows: Sequence[WaiterRow]) -> None:
        self._conn.execute(_UPSERT_WAITER, [r.__dict__ for r in rows])

    def put_request(self, row: RequestRow) -> None:
        self._conn.execute(_UPSERT_REQUEST, row.__dict__)

    def put_requests(self, rows: Sequence[RequestRow]) -> None:
        if rows:
            self._conn.execute(_UPSERT_REQUEST, [r.__dict__ for r in rows])

    def delete_waiters(self, request_ids: Sequence[str]) -> None:
        if request_ids:
            self._conn.execute(_DEL_WAITER, [{"id": i} for i in request_ids])

    def set_request_status(self, request_id: str, status: str, updated_at: float) -> None:
        self._conn.execute(_SET_STATUS, {"id": request_id, "status": status, "at": updated_at})

    def set_table(self, uri: str, fencing: int, config_version: int | None, config_json: str | None) -> None:
        self._conn.execute(
            _SET_TABLE, {"uri": uri, "fencing": fencing, "cv": config_version, "cj": config_json}
        )
        self._tables[uri] = TableRow(uri, fencing, config_version, config_json)

    def log(self, rows: Sequence[DecisionRow]) -> None:
        if rows:
            self._conn.execute(_INS_DECISION, [r.__dict__ for r in rows])

    def commit(self) -> None:
        """Send what is still buffered (nothing here: every call above executes at once)."""


class SqlLeaseStore(LeaseStore):
    """A lease store on an SQL database through SQLAlchemy.

    :param url: the SQLAlchemy URL.
    :param migrate: create/migrate the schema on open (default). Tests pass ``False`` to build old schemas.
    """

    def __init__(self, url: str, *, migrate: bool = True) -> None:
        self.url = url
        self.name = redact_url(url)
        #: connections kept checked out between uses (see ``_keep_spare``): usually one, two only if threads
        #: put theirs back at the same instant; list pop/append are atomic, so no two threads get the same one
        self._spare: list[sa.Connection] = []
        try:
            self.engine = self._make_engine(url)
            created = False
            self._store_id: str | None = None
            self._store_id_read = False
            if migrate:
                created = self._migrate_on_open()
                self._store_id, self._store_id_read = self._read_store_id(), True
        except (
            sa_exc.SQLAlchemyError,
            migrations.SchemaTooNewError,
            migrations.MigrationPendingError,
        ) as exc:
            if hasattr(self, "engine"):
                self.engine.dispose()
            raise StoreUnavailableError(f"lease store {self.name} is unavailable: {_cause(exc)}") from exc
        if created:
            # Not silent: a store created where one existed knows nothing of the leases granted there; their
            # holders' fence checks fail on its new id (ADR 0018, "A store has an identity").
            log.warning("deltaguard: created a new lease store at %s (store id %s)", self.name, self.store_id)

    # --- dialect hooks -------------------------------------------------------------------------------

    @abc.abstractmethod
    def _make_engine(self, url: str) -> sa.Engine: ...

    @abc.abstractmethod
    def _lock_migrations(self, conn: sa.Connection) -> None:
        """Serialise schema migrations across processes (inside the migration transaction)."""

    @abc.abstractmethod
    def _lock_tables(self, conn: sa.Connection, uris: list[str]) -> dict[str, TableRow]:
        """Lock the table rows (which exist) in sorted order; return them."""

    def _open_txn(
        self, conn: sa.Connection, uris: list[str], request_id: str | None, release_by: str | None = None
    ) -> _Txn | None:
        """Lock the table rows and return the transaction object, or ``None`` when some rows are missing.

        The default locks with :meth:`_lock_tables`; a dialect may override this to lock and prefetch the
        rows every decision reads (holders, the request's status) in the same round trip.

        :param request_id: the request the transaction is about, when known (prefetch hint only).
        :param release_by: an owner key: the body promises that its first call is
            ``release_lease(request_id, release_by)``, so a dialect may run that delete with the lock.
        """
        tables = self._lock_tables(conn, uris)
        return _Txn(conn, uris, tables) if len(tables) == len(uris) else None

    def _retryable_cause(self, cause: BaseException | None) -> bool:
        """Whether a transaction that failed with ``cause`` was rolled back whole and may be re-run."""
        return isinstance(cause, sa_exc.DBAPIError) and (
            cause.connection_invalidated or self._retryable(cause)
        )

    #: execution options of unlocked reads: SQLite begins a deferred (shared) transaction instead of
    #: taking the write lock; PostgreSQL reads in autocommit (no BEGIN/ROLLBACK round trips).
    _read_options: dict[str, Any] = {"dg_read_only": True}

    #: Keep one connection checked out between uses instead of returning it to the pool. A pool
    #: check-out and check-in cost the client more CPU than a one-call decision's own statement (ADR 0004);
    #: the dialect opts in when its connections may be reused from any thread.
    _keep_spare = False

    #: the column that orders log entries with equal timestamps (insertion order).
    _log_order = "rowid"

    def _timed_out(self, exc: sa_exc.SQLAlchemyError) -> bool:
        """Whether a call failed on one of the store's own time limits (a lock or statement held longer
        than the store timeout): reported as :class:`StoreUnavailableError`, like a call abandoned by
        :mod:`deltaguard.leases.open`."""
        return False

    def _retryable(self, exc: sa_exc.DBAPIError) -> bool:
        """Whether a failed transaction may simply be retried (e.g. a deadlock victim)."""
        return False

    # --- schema --------------------------------------------------------------------------------------

    def migrate(self, target: int = migrations.LATEST, *, allow_breaking: bool = False) -> int:
        """Create or migrate the schema to ``target``; return the version reached.

        Opening a store applies the additive steps only; a breaking one is ``deltaguard db migrate
        --allow-breaking``'s (:data:`~deltaguard.leases.sql.migrations.COMPATIBLE_FROM`).

        :raises SchemaTooNewError: the schema is newer than this deltaguard may use.
        :raises MigrationPendingError: a breaking step is pending and ``allow_breaking`` is false.
        """
        with self.engine.begin() as conn:
            self._lock_migrations(conn)
            return migrations.migrate(conn, target, allow_breaking=allow_breaking)

    def _migrate_on_open(self) -> bool:
        """Apply the additive migration steps; return whether the schema was created (an empty database)."""
        # Nearly every open finds the schema current: that is read without the migration lock, which on
        # SQLite is the store's one write lock, so starting tasks do not queue behind every decision.
        with self.engine.connect() as conn:
            conn.execution_options(**self._read_options)
            if migrations.current_version(conn) == migrations.LATEST:
                return False
        with self.engine.begin() as conn:
            self._lock_migrations(conn)
            created = migrations.current_version(conn) == 0
            migrations.migrate(conn, migrations.LATEST, allow_breaking=False)
        return created

    @property
    def store_id(self) -> str | None:
        if not self._store_id_read:  # opened without migrating: read once, on first use
            try:
                self._store_id = self._read_store_id()
            except sa_exc.SQLAlchemyError as exc:
                raise StoreUnavailableError(f"lease store {self.name} is unreachable: {_cause(exc)}") from exc
            self._store_id_read = True
        return self._store_id

    def _read_store_id(self) -> str | None:
        with self.engine.connect() as conn:
            conn.execution_options(**self._read_options)  # a read: never behind another writer's lock
            if migrations.current_version(conn) < migrations.STORE_ID_VERSION:
                return None
            value = conn.execute(_Q_STORE_ID).scalar()
        return None if value is None else str(value)

    def verify_identity(self, expected: str) -> None:
        with self._identity_read() as conn:
            found = conn.execute(_Q_STORE_ID).scalar()
        self._check_identity(found, expected)

    def read_lease_in(self, lease_id: str, store_id: str | None) -> list[LeaseRow]:
        if store_id is None:
            return self.read_lease(lease_id)
        with self._identity_read() as conn:  # the identity in the renewal's own read, not a read of its own
            result = conn.execute(_Q_LEASE_IN_STORE, {"id": lease_id}).all()
            conn.rollback()
        self._check_identity(result[0][0] if result else None, store_id)
        return [LeaseRow(*r[1:]) for r in result if r[1] is not None]

    @contextlib.contextmanager
    def _identity_read(self) -> Iterator[sa.Connection]:
        """An unlocked read of the store's identity; a store without ``dg_store`` is another store."""
        try:
            with self._connect(read_only=True) as conn:
                yield conn
        except StoreUnavailableError:
            raise
        except StoreError as exc:
            if not _names_missing_store_table(exc):
                # a connection the server dropped (a restart's "terminating connection due to administrator
                # command", AdminShutdown) says nothing of which store answers next: the renewal fails
                # and is tried again, the known expiry holds (read as a replacement, every holder of a
                # restarted store lost its lease)
                raise StoreUnavailableError(f"lease store {self.name} is unavailable: {exc}") from exc
            # no dg_store table: an empty database took the old one's place
            raise StoreReplacedError(
                f"lease store {self.name} is not the store this holder opened: {exc}"
            ) from exc

    def _check_identity(self, found: object, expected: str) -> None:
        if found != expected:
            raise StoreReplacedError(
                f"lease store {self.name} has store id {found}, not {expected}: it was created anew since this "
                "holder opened it, and knows nothing of the leases granted before"
            )

    def pending_migrations(self) -> list[int]:
        """The migration steps not yet applied (empty when the schema is current or newer)."""
        with self.engine.connect() as conn:
            return migrations.pending(conn)

    def schema_version(self) -> int:
        with self._connect(read_only=True) as conn:
            return migrations.current_version(conn)

    # --- transactions --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _connect(self, read_only: bool = False) -> Iterator[sa.Connection]:
        conn = self._take_spare() if self._keep_spare and not read_only else None
        if conn is None:
            try:
                conn = self.engine.connect()
                if read_only:
                    conn.execution_options(**self._read_options)
            except sa_exc.SQLAlchemyError as exc:
                raise StoreUnavailableError(f"lease store {self.name} is unreachable: {_cause(exc)}") from exc
        try:
            yield conn
        except sa_exc.SQLAlchemyError as exc:
            if self._timed_out(exc):
                raise StoreUnavailableError(
                    f"lease store {self.name} did not answer in time: {_cause(exc)}"
                ) from exc
            raise StoreError(f"lease store {self.name} failed: {_cause(exc)}") from exc
        finally:
            if conn.in_transaction():  # never hand a connection back mid-transaction
                conn.rollback()
            # Read-only connections carry their execution options, and a connection a failure broke
            # (invalidated) must never be used again: those go back to the pool.
            if self._keep_spare and not read_only and not conn.invalidated and not self._spare:
                self._spare.append(conn)
            else:
                conn.close()

    def _take_spare(self) -> sa.Connection | None:
        try:
            return self._spare.pop()
        except IndexError:
            return None

    def _ensure_tables(self, uris: list[str]) -> None:
        # Created in their own short transaction, sorted, and only when the lock found them missing; so
        # the locking transaction only ever locks existing rows in sorted order (no lock-order inversion
        # between an "insert" phase and a "lock" phase) and costs nothing extra for known tables.
        with self._connect() as conn, conn.begin():
            conn.execute(_ENSURE_TABLE, [{"uri": u} for u in uris])

    @contextlib.contextmanager
    def transaction(
        self, uris: Sequence[str], request_id: str | None = None, release_by: str | None = None
    ) -> Iterator[_Txn]:
        ordered = sorted(set(uris))
        with self._connect() as conn:
            trans = conn.begin()
            try:
                txn = self._open_txn(conn, ordered, request_id, release_by)
                if txn is None:
                    trans.rollback()
                    self._ensure_tables(ordered)
                    trans = conn.begin()
                    txn = self._open_txn(conn, ordered, request_id, release_by)
                    if txn is None:  # only possible if someone deletes rows by hand
                        raise StoreError(f"lease store {self.name}: table rows missing for {ordered}")
                yield txn
                txn.commit()
            except BaseException:
                if trans.is_active:
                    trans.rollback()
                raise
            if trans.is_active:
                trans.commit()

    def run(
        self,
        uris: Sequence[str],
        body: Callable[[_Txn], T],
        attempts: int = 5,
        request_id: str | None = None,
        release_by: str | None = None,
    ) -> T:
        """Run ``body(txn)`` in :meth:`transaction`, retrying deadlock victims and dropped connections a bounded
        number of times.

        :param request_id: the request the body decides on, when known (lets the store prefetch its row).
        :param release_by: see :meth:`_open_txn` (a promise about the body's first call).
        """
        for attempt in range(attempts):
            try:
                with self.transaction(uris, request_id, release_by) as txn:
                    return body(txn)
            except StoreError as exc:
                if attempt + 1 < attempts and self._retryable_cause(exc.__cause__):
                    # A deadlock victim, or a connection the server dropped (restart): the transaction was
                    # rolled back whole, so running it again is safe.
                    continue
                raise
        raise AssertionError("unreachable")

    # --- unlocked reads ------------------------------------------------------------------------------

    def read_request(self, request_id: str) -> RequestRow | None:
        with self._connect(read_only=True) as conn:
            row = conn.execute(_Q_REQUEST, {"id": request_id}).first()
            conn.rollback()
            return RequestRow(*row) if row else None

    def alive(self, ids: Sequence[str], now: float) -> set[str]:
        if not ids:
            return set()
        with self._connect(read_only=True) as conn:
            found = {r[0] for r in conn.execute(_Q_ALIVE, {"ids": list(ids), "ids2": list(ids), "now": now})}
            conn.rollback()
            return found

    def read_lease(self, lease_id: str) -> list[LeaseRow]:
        with self._connect(read_only=True) as conn:
            rows = [LeaseRow(*r) for r in conn.execute(_Q_LEASE_BY_ID, {"id": lease_id})]
            conn.rollback()
            return rows

    def live_leases(self, now: float) -> list[LeaseRow]:
        with self._connect(read_only=True) as conn:
            rows = [LeaseRow(*r) for r in conn.execute(_Q_LIVE_LEASES, {"now": now})]
            conn.rollback()
            return rows

    def list_leases(self, uri: str) -> list[LeaseRow]:
        with self._connect(read_only=True) as conn:
            rows = [LeaseRow(*r) for r in conn.execute(_Q_LEASES_OF, {"uri": uri})]
            conn.rollback()
            return rows

    def expired_lease_ids(self, now: float, limit: int = 100) -> list[str]:
        return [str(r[0]) for r in self._read(_Q_EXPIRED_LEASES, {"now": now, "limit": int(limit)})]

    def list_waiters(self, uri: str) -> list[WaiterRow]:
        with self._connect(read_only=True) as conn:
            rows = [WaiterRow(*r) for r in conn.execute(_Q_WAITERS_OF, {"uri": uri})]
            conn.rollback()
            return rows

    def decisions(
        self,
        *,
        owner_key: str | None = None,
        owner_keys: Sequence[str] | None = None,
        uri: str | None = None,
        since: float | None = None,
        before: float | None = None,
        limit: int = 100,
        kinds: Sequence[str] | None = None,
    ) -> list[DecisionRow]:
        if (owner_keys is not None and not owner_keys) or (kinds is not None and not kinds):
            return []
        clauses: list[str] = []
        params: dict[str, Any] = {"limit": int(limit)}
        binds: list[sa.BindParameter[Any]] = []
        if owner_key is not None:
            clauses.append("owner_key = :owner_key")
            params["owner_key"] = owner_key
        if owner_keys is not None:
            clauses.append("owner_key IN :owner_keys")
            params["owner_keys"] = list(owner_keys)
            binds.append(_in("owner_keys"))
        if kinds is not None:
            clauses.append("kind IN :kinds")
            params["kinds"] = list(kinds)
            binds.append(_in("kinds"))
        if uri is not None:
            clauses.append("uri = :uri")
            params["uri"] = uri
        if since is not None:
            clauses.append("at >= :since")
            params["since"] = since
        if before is not None:
            clauses.append("at < :before")
            params["before"] = before
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        query = sa.text(
            f"SELECT {_DECISION_COLS}, {self._log_order} FROM dg_decisions {where} "
            f"ORDER BY at DESC, {self._log_order} DESC LIMIT :limit"
        )
        if binds:
            query = query.bindparams(*binds)
        return [DecisionRow(*r) for r in self._read(query, params)]

    def list_tables(self, *, after: str | None = None, limit: int = 100) -> list[TableRow]:
        query = _Q_TABLES_AFTER if after is not None else _Q_TABLES
        return [TableRow(*r) for r in self._read(query, {"after": after, "limit": int(limit)})]

    def read_table(self, uri: str) -> TableRow | None:
        rows = self._read(_Q_TABLE, {"uri": uri})
        return TableRow(*rows[0]) if rows else None

    def read_tables(self, uris: Sequence[str]) -> list[TableRow]:
        if not uris:
            return []
        return [TableRow(*r) for r in self._read(_Q_TABLES_IN, {"uris": sorted(set(uris))})]

    def read_requests(self, request_ids: Sequence[str]) -> list[RequestRow]:
        if not request_ids:
            return []
        return [RequestRow(*r) for r in self._read(_Q_REQUESTS, {"ids": sorted(set(request_ids))})]

    def _read(self, query: sa.TextClause, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Rows of one read-only query, outside any table lock."""
        with self._connect(read_only=True) as conn:
            rows = [tuple(r) for r in conn.execute(query, params)]
            conn.rollback()
            return rows

    def prune(self, before: float) -> int:
        with self._connect() as conn, conn.begin():
            logged = conn.execute(sa.text("DELETE FROM dg_decisions WHERE at < :t"), {"t": before}).rowcount
            closed = conn.execute(
                sa.text(
                    # enqueued_at <= updated_at, so the first condition only lets the index (schema 7) find
                    # the candidates.
                    "DELETE FROM dg_requests WHERE enqueued_at < :t "
                    "AND status IN ('released', 'expired', 'abandoned') AND updated_at < :t"
                ),
                {"t": before},
            ).rowcount
            return int(logged or 0) + int(closed or 0)

    def close(self) -> None:
        while (spare := self._take_spare()) is not None:
            spare.close()
        self.engine.dispose()


def _cause(exc: BaseException) -> str:
    """The driver's own message, first line only (SQLAlchemy appends long background links)."""
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).strip().splitlines()
    return f"{type(inner).__name__}: {text[0] if text else ''}"


def _names_missing_store_table(exc: BaseException) -> bool:
    """Whether a store error is the database's "no such table" for ``dg_store`` (PostgreSQL's
    ``UndefinedTable``, SQLite's ``no such table``, MySQL's ``doesn't exist``), not a lost connection."""
    text = f"{exc} {exc.__cause__}".lower()
    return "dg_store" in text and any(
        words in text for words in ("does not exist", "no such table", "doesn't exist", "undefined")
    )
