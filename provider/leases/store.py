"""The lease store interface: rows, errors and the atomic per-table-set transaction.

:func:`deltaguard.leases.open.open_store` opens one; it lives apart so this interface imports no store.

A store keeps one row per table (its lock and fencing counter), granted lease rows and queued request rows
indexed by table, request status rows, and the decision log. Every check-and-grant runs inside
:meth:`LeaseStore.transaction`, which locks the rows of exactly the tables involved, in sorted order, for
the whole transaction; so decisions on disjoint tables never wait for each other (on PostgreSQL) and no two
transactions can deadlock on table locks.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from deltaguard.core.oracle import UnaskedQuestions, kept_answers_only

# The store errors are defined with every other error (deltaguard.exceptions) and re-exported here.
from deltaguard.exceptions import SnapshotChanged as SnapshotChanged
from deltaguard.exceptions import StoreError as StoreError
from deltaguard.exceptions import StoreReplacedError as StoreReplacedError
from deltaguard.exceptions import StoreUnavailableError as StoreUnavailableError

T = TypeVar("T")


def redact_url(url: str) -> str:
    """The URL with any password replaced by ``***`` (for error messages and logs).

    SQLAlchemy's own rendering, so an address reads as the engine will read it (an IPv6 host keeps its
    brackets). Text it cannot read as a URL is shown up to its scheme only when it may hold credentials.
    """
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        if "@" not in url:
            return url
        scheme, found, _ = url.partition("://")
        return f"{scheme}://***" if found else "***"


@dataclass(frozen=True)
class TableRow:
    uri: str
    fencing: int
    config_version: int | None
    config_json: str | None


@dataclass(frozen=True)
class LeaseRow:
    lease_id: str
    uri: str
    owner_key: str
    owner_json: str
    op_json: str
    granted_at: float
    expires_at: float
    fencing: int
    ttl_s: float


@dataclass(frozen=True)
class WaiterRow:
    request_id: str
    uri: str
    owner_key: str
    owner_json: str
    op_json: str
    rank: float
    expires_at: float


@dataclass(frozen=True)
class RequestRow:
    """A request's status: ``waiting``, ``granted``, ``released``, ``expired`` or ``abandoned``.

    :param payload: the request as JSON (tables with operation, configuration and profile; ttl; priority),
        so a cheap ``check`` can re-evaluate a waiting request.
    :param last_wait: the last wait answer as JSON (blockers, reasons, advice, position).
    """

    request_id: str
    owner_key: str
    status: str
    rank: float
    enqueued_at: float
    expires_at: float
    payload: str
    updated_at: float
    last_wait: str | None = None


@dataclass(frozen=True)
class DecisionRow:
    """One decision-log entry: ``grant``, ``wait``, ``release``, ``expiry``, ``abandon`` or ``refuse``.

    :param at: when the deciding call started, on the decider's clock: two calls on a table can carry
        stamps in the other order than their decisions (a release and the grant it allowed, 2 ms apart).
    :param seq: the entry's place in the store's log (SQLite ``rowid``, PostgreSQL ``seq``), set when read
        back: entries on one table are written under its lock, so ``seq`` orders them as they were decided.
    """

    at: float
    kind: str
    request_id: str
    uri: str
    owner_key: str
    detail: str
    seq: int | None = None


@dataclass(frozen=True)
class IdleGrant:
    """A grant that needs no conflict-model call, for :meth:`LeaseStore.grant_if_idle`.

    Valid only while none of its tables has a lease row (live or expired), a queue row, and the request id
    has no status row: then the admission rule grants whatever the operations are. A table may also have
    one live lease whose operation text is among ``compatible`` for that table, when the decision would use
    the offered configuration: the requester's conflict model granted beside that very operation before
    (ADR 0009).

    :param uris: the tables, sorted.
    :param op_jsons: each table's operation as JSON, in ``uris`` order.
    :param config_versions: the configuration version the requester offers per table (``None``: unknown).
    :param config_jsons: the offered configuration as JSON per table (``None``: none offered; the stored
        one must exist).
    :param details: each table's grant log detail as compact key-sorted JSON *without* ``fencing``; the
        store logs it with ``"fencing"`` (the new token) added as its first key.
    :param compatible: per table in ``uris`` order, stored operation texts of a sole holder beside which
        the model granted this table's operation under its offered configuration (empty: none known).
    :param waits: for a one-table request, the wait answers its model gave behind a sole holder under the
        offered configuration: holder operation text -> the six text pieces of
        :attr:`~deltaguard.leases.wait_texts.WaitShape.pieces` for this table. The store may then queue the
        request behind such a holder in the same call (ADR 0010). Empty or ``None``: none known.
    :param wait_expires_at: when such a queue entry expires (required with ``waits``).
    """

    request_id: str
    owner_key: str
    owner_json: str
    uris: tuple[str, ...]
    op_jsons: tuple[str, ...]
    config_versions: tuple[int | None, ...]
    config_jsons: tuple[str | None, ...]
    now: float
    expires_at: float
    ttl_s: float
    rank: float
    payload: str
    details: tuple[str, ...]
    compatible: tuple[tuple[str, ...], ...] = ()
    waits: Mapping[str, Sequence[str]] | None = None
    wait_expires_at: float | None = None


@dataclass(frozen=True)
class QueuedBehind:
    """:meth:`LeaseStore.grant_if_idle` queued the request behind one live lease (ADR 0010).

    :param uri: the table.
    :param lease_id: the holder's lease id.
    :param owner_json: the holder's stored owner JSON text.
    :param op_json: the holder's stored operation text (which of the sent wait answers applies).
    """

    uri: str
    lease_id: str
    owner_json: str
    op_json: str


@dataclass(frozen=True)
class TableSnapshot:
    """Everything a decision on ``uris`` reads, as it stood at one instant under the table locks.

    :meth:`LeaseStore.grant_if_idle` returns one when the tables are busy, so the general decision can run
    on it without taking the locks first; :meth:`LeaseStore.run_on_snapshot` commits that decision only if
    the rows are still exactly these (ADR 0007).

    :param uris: the tables, sorted.
    :param request_id: the request whose status row was read.
    :param state: the store's text of these rows, compared again under the locks at commit.
    """

    uris: tuple[str, ...]
    request_id: str
    tables: dict[str, TableRow]
    leases: list[LeaseRow]
    waiters: list[WaiterRow]
    request: RequestRow | None
    state: str


class StoreTxn(Protocol):
    """Operations inside one locked transaction; only rows of the locked tables are read."""

    def tables(self) -> dict[str, TableRow]: ...

    def leases(self) -> list[LeaseRow]: ...

    def waiters(self) -> list[WaiterRow]: ...

    def holders(self) -> tuple[list[LeaseRow], list[WaiterRow]]:
        """Lease rows and queue rows of the locked tables, in one round trip."""
        ...

    def live_leases(self, now: float) -> list[LeaseRow]:
        """Unexpired lease rows on every table (the one read beyond the locked tables): what the slot gate
        counts (:mod:`deltaguard.core.slots`). On SQLite the transaction holds the database's write lock, so
        the count is exact; on PostgreSQL a decision on another table may change it before the commit."""
        ...

    def release_lease(self, lease_id: str, owner_key: str) -> list[LeaseRow]:
        """Delete the lease's rows if ``owner_key`` owns them; return the deleted rows."""
        ...

    def request(self, request_id: str) -> RequestRow | None: ...

    def requests(self, request_ids: Sequence[str]) -> list[RequestRow]:
        """Status rows of several requests (the holders a decision with a duration estimate looks at: their
        payloads carry their own estimates, and a queued one's row its enqueue time)."""
        ...

    def lease_rows(self, lease_id: str) -> list[LeaseRow]: ...

    def delete_lease_rows(self, lease_id: str, uris: Sequence[str]) -> None: ...

    def insert_lease_rows(self, rows: Sequence[LeaseRow]) -> None: ...

    def extend_lease(self, lease_id: str, expires_at: float) -> None: ...

    def delete_waiter_rows(self, request_id: str, uris: Sequence[str] | None = None) -> None: ...

    def put_waiter_rows(self, rows: Sequence[WaiterRow]) -> None: ...

    def put_request(self, row: RequestRow) -> None: ...

    def put_requests(self, rows: Sequence[RequestRow]) -> None:
        """:meth:`put_request` of each row (of distinct requests), in as few statements as the store can."""
        ...

    def delete_waiters(self, request_ids: Sequence[str]) -> None:
        """:meth:`delete_waiter_rows` of each request, on every table, in as few statements as it can."""
        ...

    def set_request_status(self, request_id: str, status: str, updated_at: float) -> None: ...

    def set_table(
        self, uri: str, fencing: int, config_version: int | None, config_json: str | None
    ) -> None: ...

    def log(self, rows: Sequence[DecisionRow]) -> None: ...


class LeaseStore(abc.ABC):
    """Where leases live. Implementations: :mod:`~deltaguard.leases.sql.sqlite`,
    :mod:`~deltaguard.leases.sql.postgres`."""

    #: the store URL without password (for messages).
    name: str

    #: whether :meth:`grant_if_idle` and :meth:`release_owned` can do anything (callers skip preparing
    #: their arguments otherwise).
    has_fast_paths: bool = False

    @abc.abstractmethod
    def transaction(self, uris: Sequence[str]) -> contextlib.AbstractContextManager[StoreTxn]:
        """Lock the rows of ``uris`` (created when missing) in sorted order until commit.

        :raises StoreError: on any store failure (the transaction is rolled back).
        """

    def grant_if_idle(self, grant: IdleGrant) -> dict[str, int] | QueuedBehind | TableSnapshot | None:
        """Grant ``grant`` in one step if none of its tables has a holder (but a known-compatible one, see
        :class:`IdleGrant`) or a queued request; or queue it in one step behind a sole live holder whose
        wait answer it brings (:attr:`IdleGrant.waits`), writing the rows the general decision would.

        An optional fast path: the result must equal what the general decision would commit (fencing
        bumped, configuration kept or replaced by a newer offered one, lease, request and log rows).
        Otherwise nothing is written, and the answer is a :class:`TableSnapshot` of the tables (a table is
        busy, the request id is known, or no configuration is known; for stores that support
        :meth:`run_on_snapshot`) or ``None`` (a table is unknown, or the store has no fast path): either
        way the caller takes the general path. The default has none.

        :return: the fencing token per table, the holder it was queued behind, a snapshot, or ``None``.
        :raises StoreError: on a store failure (nothing was granted).
        """
        return None

    def run_on_snapshot(self, snapshot: TableSnapshot, body: Callable[[StoreTxn], T]) -> T:
        """Run ``body`` on a transaction whose reads answer from ``snapshot``; commit its writes only if the
        tables' rows are still those of the snapshot, checked under the table locks in the same round trip
        as the writes (optimistic concurrency: no lock is held while ``body`` runs).

        :raises SnapshotChanged: the rows changed, or ``body`` needed a read the snapshot cannot answer;
            nothing was written. The default always raises it.
        :raises StoreError: on a store failure.
        """
        raise SnapshotChanged(f"lease store {self.name} cannot commit decisions made from snapshots")

    def release_owned(
        self, request_id: str, owner_key: str, uris: Sequence[str], reset_config: Sequence[str], now: float
    ) -> list[tuple[str, int | None]] | None:
        """Release a lease, or withdraw a queued request, of ``owner_key`` in one step.

        A lease's rows on ``uris`` are deleted, the request is marked released, the stored configuration of
        the ``reset_config`` tables is dropped and each release is logged; without a lease, a waiting
        request's queue rows on ``uris`` are deleted instead (logged as withdrawn). An optional fast path
        like :meth:`grant_if_idle`: ``None`` or an empty list means nothing was done here (someone else's
        request, already ended, or no fast path), and the caller takes the general path, which tells these
        apart.

        :return: ``(uri, fencing)`` per released lease row, ``(uri, None)`` per withdrawn queue row.
        :raises StoreError: on a store failure (nothing was released).
        """
        return None

    @abc.abstractmethod
    def read_request(self, request_id: str) -> RequestRow | None:
        """A request's status row, without locking (cheap)."""

    @abc.abstractmethod
    def alive(self, ids: Sequence[str], now: float) -> set[str]:
        """Which of ``ids`` are unexpired leases or queue entries (without locking)."""

    @abc.abstractmethod
    def read_lease(self, lease_id: str) -> list[LeaseRow]:
        """A lease's rows (one per table), without locking."""

    def read_lease_in(self, lease_id: str, store_id: str | None) -> list[LeaseRow]:
        """:meth:`read_lease`, in the store whose id is ``store_id``: a renewal's first read, which checks
        the store's identity (:meth:`verify_identity`) as it reads the lease's rows. ``None``: no check.

        The default checks, then reads; a store that can answer both in one read does.

        :raises StoreReplacedError: the store there now is another one (or none).
        :raises StoreUnavailableError: the store could not be read.
        """
        if store_id is not None:
            self.verify_identity(store_id)
        return self.read_lease(lease_id)

    @abc.abstractmethod
    def live_leases(self, now: float) -> list[LeaseRow]:
        """Unexpired lease rows on every table, without locking: what the slot gate counts
        (:mod:`deltaguard.core.slots`)."""

    @abc.abstractmethod
    def list_leases(self, uri: str) -> list[LeaseRow]:
        """Lease rows on one table (including expired ones not yet reclaimed)."""

    def expired_lease_ids(self, now: float, limit: int = 100) -> list[str]:
        """Ids of leases with a row expired at ``now`` and not reclaimed yet (any table, no lock): the
        leases no request asked a table of since, some kept for their holder's server-side work (ADR 0033).
        This default walks the tables; the SQL stores ask once."""
        found: list[str] = []
        after: str | None = None
        while len(found) < limit:
            tables = self.list_tables(after=after, limit=100)
            if not tables:
                break
            for table in tables:
                found += [r.lease_id for r in self.list_leases(table.uri) if r.expires_at <= now]
            after = tables[-1].uri
        return sorted(set(found))[:limit]

    @abc.abstractmethod
    def list_waiters(self, uri: str) -> list[WaiterRow]:
        """Queued requests on one table, earliest rank first."""

    @abc.abstractmethod
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
        """Decision-log entries, newest first, without locking.

        :param owner_key: only this owner's entries.
        :param owner_keys: only these owners' entries (an empty list matches none).
        :param uri: only this table's entries.
        :param since: only entries at or after this time.
        :param before: only entries strictly before this time (the cursor of the next page).
        :param limit: at most this many.
        :param kinds: only entries of these kinds (``grant``, ``release``, ...; an empty list matches none).
        """

    @abc.abstractmethod
    def list_tables(self, *, after: str | None = None, limit: int = 100) -> list[TableRow]:
        """Tables the store has seen, by URI, ``limit`` at a time after the cursor ``after`` (no lock)."""

    @abc.abstractmethod
    def read_table(self, uri: str) -> TableRow | None:
        """One table's row (its fencing counter and stored configuration), without locking."""

    def read_tables(self, uris: Sequence[str]) -> list[TableRow]:
        """The rows of the tables among ``uris`` the store has seen, by URI, without locking.

        A table's ``config_json`` is the newest configuration a decision on it used (written by the
        decision only when newer than the stored one, dropped when a lease that changed the table's metadata
        is released). Stores answer in one query; this default asks table by table.
        """
        rows = (self.read_table(uri) for uri in sorted(set(uris)))
        return [row for row in rows if row is not None]

    @abc.abstractmethod
    def read_requests(self, request_ids: Sequence[str]) -> list[RequestRow]:
        """Status rows of several requests, without locking."""

    @abc.abstractmethod
    def prune(self, before: float) -> int:
        """Delete decision-log entries and closed requests older than ``before``; return how many rows."""

    @abc.abstractmethod
    def schema_version(self) -> int:
        """The schema version the store is at."""

    @property
    def store_id(self) -> str | None:
        """The random id written into the store when it was created, as this handle first read it (ADR
        0018, "A store has an identity"); ``None``: the store keeps none (a schema before 9, a test store).
        """
        return None

    def verify_identity(self, expected: str) -> None:
        """Return if the store at this handle's location is still the store whose id is ``expected``.

        A lease holder calls it in every fence check: a store deleted and created anew at the same path
        knows nothing of the leases granted in the old one, and grants their tables again.

        :raises StoreReplacedError: the store there now is another one (or none).
        :raises StoreUnavailableError: the store could not be read.
        """
        return None  # a store without an identity (``store_id`` is None) is never asked

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> LeaseStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_in_transaction(
    store: LeaseStore,
    uris: Sequence[str],
    body: Callable[[StoreTxn], Any],
    request_id: str | None = None,
    release_by: str | None = None,
) -> Any:
    """Run ``body`` in one transaction of ``store`` over ``uris``, asking engines' evaluators outside it
    (:func:`asking_engines_outside`); ``request_id``/``release_by`` are prefetch hints for stores that take
    them (``release_by``: the body's first call is ``release_lease(request_id, release_by)``)."""
    runner = getattr(store, "run", None)

    def once(kept_only: Callable[[StoreTxn], Any]) -> Any:
        if runner is not None:
            if request_id is None:
                return runner(uris, kept_only)
            return runner(uris, kept_only, request_id=request_id, release_by=release_by)
        with store.transaction(uris) as txn:
            return kept_only(txn)

    return asking_engines_outside(once, body)


#: transactions one decision may take: each one that met questions no engine's evaluator was asked before
#: ends, they are asked, and it runs again; the last one refuses those still unasked instead (closed world)
ASK_ROUNDS = 4


def asking_engines_outside(
    run_body: Callable[[Callable[[StoreTxn], T]], T], body: Callable[[StoreTxn], T]
) -> T:
    """``run_body(body)``, with no engine's evaluator asked while the transaction is open (ADR 0037).

    The body runs under :func:`~deltaguard.core.oracle.kept_answers_only`. Until the last round it explores:
    a question with no kept answer is recorded and answered as separating, so that the decision goes on and
    meets its other questions; such a transaction never commits (:class:`~deltaguard.core.oracle.
    UnaskedQuestions` rolls it back whole, whatever the body returned or raised), the questions are asked
    with no lock held and outside the store's call timeout, and the transaction runs again with their
    answers kept. The last round refuses what is still unasked. A committed decision so rests only on the
    engine's answers, the same as asked inside; only the locks are shorter.

    :param run_body: runs a body in one store transaction and returns what it returned.
    :param body: the decision.
    """
    for round_ in range(1, ASK_ROUNDS + 1):
        exploring = round_ < ASK_ROUNDS

        def kept_only(txn: StoreTxn, exploring: bool = exploring) -> T:
            with kept_answers_only(exploring=exploring) as unasked:
                try:
                    result = body(txn)
                except Exception:
                    if exploring and unasked:  # decided on assumed answers: decide again on the engine's
                        raise UnaskedQuestions(unasked) from None
                    raise
            if exploring and unasked:
                raise UnaskedQuestions(unasked)
            return result

        try:
            return run_body(kept_only)
        except UnaskedQuestions as questions:
            questions.ask()
    raise AssertionError("unreachable: the last round returns or raises")
