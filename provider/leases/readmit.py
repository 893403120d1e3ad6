"""Re-admission of a table's whole queue in one transaction, after a release (ADR 0031).

When a holder leaves a table on which many requests wait, every waiter used to ask for itself: one locking
transaction per waiter, each reading the whole queue again, one after another on the table's lock. 1,000
waiters behind one release took minutes to drain. Here one transaction decides for all of them:

* it locks the table and reads its leases, its queue and the waiters' request rows **once**;
* it goes through the queue in rank order (the order the admission rule itself ranks them in) and decides
  each one-table waiter with :func:`~deltaguard.leases.decide.decide_locked` — the same decision, applied
  the same way, as the waiter's own check — on an in-memory view of the transaction
  (:class:`CrowdTxn`) that every earlier decision of the batch has already changed: a waiter granted
  here is a lease for every waiter after it, with the next fencing token, so two conflicting waiters are
  never granted together and tokens follow the queue order;
* a waiter one of whose last blockers is still there (a lease, or a request ranked ahead) still waits:
  operations never change, so that blocker still conflicts and the full decision would wait too; its
  answer is its last one less the blockers that left, and the model is not asked (as
  :meth:`LeaseManager.check <deltaguard.leases.manager.LeaseManager.check>`'s cheap path);
* the writes go to the store transaction, which buffers them (PostgreSQL sends them with the COMMIT).

A waiter's queue entry is not renewed here (``renew=False``): only its owner's own check keeps it alive, so
a waiter whose owner is gone is still abandoned on time. A waiter on several tables is left to its own
check (its other tables are not locked here); it still counts as queued ahead of the waiters behind it.
"""

from __future__ import annotations

import bisect
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from deltaguard.core.admission import DecideFn, Granted, Holder, LeaseRequest, Waiting
from deltaguard.core.model import pair_memo
from deltaguard.exceptions import LeaseError
from deltaguard.leases import codec
from deltaguard.leases.decide import Ask, decide_locked
from deltaguard.leases.memo import DecisionMemo
from deltaguard.leases.remote_work import FenceRound
from deltaguard.leases.store import DecisionRow, LeaseRow, RequestRow, StoreTxn, TableRow, WaiterRow
from deltaguard.leases.views import lease_holder, waiter_holder
from deltaguard.leases.wait_texts import waiting_from_json


def _lease_order(row: LeaseRow) -> tuple[float, str, str]:
    return (row.granted_at, row.lease_id, row.uri)


def _queue_order(row: WaiterRow) -> tuple[float, str, str]:
    return (row.rank, row.request_id, row.uri)


class CrowdTxn:
    """A :class:`~deltaguard.leases.store.StoreTxn` over one locked table that reads the table's rows once
    and then answers every read from memory, kept current by the writes, which it also passes on to the
    real transaction.

    It is the pass's view of the table, kept up to date rather than rebuilt: a grant adds its lease rows
    and drops the waiter's queue rows, each at its place in the order a decision reads them in (leases by
    grant time, the queue by rank), so every decision of the pass reads the table as it then stands, in
    the order it sorts it in, and the row objects stay the same between decisions (their holders are
    found by identity, :func:`deltaguard.leases.views.lease_holder`).

    :param txn: the store's transaction (its table locks held).
    """

    def __init__(self, txn: StoreTxn) -> None:
        self._txn = txn
        self._tables = txn.tables()
        self._uris = tuple(self._tables)
        leases, waiters = txn.holders()
        self._leases: list[LeaseRow] = sorted(leases, key=_lease_order)
        self._waiters: list[WaiterRow] = sorted(waiters, key=_queue_order)
        self._lease_keys = [_lease_order(r) for r in self._leases]
        self._waiter_keys = [_queue_order(w) for w in self._waiters]
        # each row as the admission rule sees it (no estimates), at the row's place
        self._lease_holders = [lease_holder(r) for r in self._leases]
        self._waiter_holders = [waiter_holder(w) for w in self._waiters]
        # (id, uri) -> row: lookups by id without a scan of the table
        self._lease_at = {(r.lease_id, r.uri): r for r in self._leases}
        self._waiter_at = {(w.request_id, w.uri): w for w in self._waiters}
        ids = {r.lease_id for r in self._leases} | {w.request_id for w in self._waiters}
        self._requests: dict[str, RequestRow] = {r.request_id: r for r in txn.requests(sorted(ids))}

    # --- reads (memory) ------------------------------------------------------------------------------

    def tables(self) -> dict[str, TableRow]:
        return dict(self._tables)

    def leases(self) -> list[LeaseRow]:
        return list(self._leases)

    def waiters(self) -> list[WaiterRow]:
        return list(self._waiters)

    def holders(self) -> tuple[list[LeaseRow], list[WaiterRow]]:
        return list(self._leases), list(self._waiters)

    def request(self, request_id: str) -> RequestRow | None:
        return self._requests.get(request_id)

    def requests(self, request_ids: Sequence[str]) -> list[RequestRow]:
        return [self._requests[i] for i in sorted(set(request_ids)) if i in self._requests]

    def lease_rows(self, lease_id: str) -> list[LeaseRow]:
        return [r for u in self._uris if (r := self._lease_at.get((lease_id, u))) is not None]

    # --- the kept view -------------------------------------------------------------------------------

    def kept_holders(
        self, uri: str, leases: Sequence[LeaseRow], waiters: Sequence[WaiterRow]
    ) -> tuple[list[Holder], list[Holder]] | None:
        """The plain holders of ``leases`` and ``waiters`` on ``uri`` when they are this view's rows in its
        order and ``uri`` its only table (what a decision read and sorted, nothing reclaimed since), else
        ``None``: a decision of the pass takes them as they are kept instead of looking each row up. (Lists
        of the same row objects compare equal without comparing any row.)"""
        if self._uris == (uri,) and leases == self._leases and waiters == self._waiters:
            return list(self._lease_holders), list(self._waiter_holders)
        return None

    def _add_lease(self, row: LeaseRow) -> None:
        self._drop_lease(row.lease_id, row.uri)
        key = _lease_order(row)
        at = bisect.bisect_left(self._lease_keys, key)
        self._lease_keys.insert(at, key)
        self._leases.insert(at, row)
        self._lease_holders.insert(at, lease_holder(row))
        self._lease_at[(row.lease_id, row.uri)] = row

    def _drop_lease(self, lease_id: str, uri: str) -> None:
        row = self._lease_at.pop((lease_id, uri), None)
        if row is not None:
            at = bisect.bisect_left(self._lease_keys, _lease_order(row))
            del self._lease_keys[at], self._leases[at], self._lease_holders[at]

    def _add_waiter(self, row: WaiterRow) -> None:
        self._drop_waiter(row.request_id, row.uri)
        key = _queue_order(row)
        at = bisect.bisect_left(self._waiter_keys, key)
        self._waiter_keys.insert(at, key)
        self._waiters.insert(at, row)
        self._waiter_holders.insert(at, waiter_holder(row))
        self._waiter_at[(row.request_id, row.uri)] = row

    def _drop_waiter(self, request_id: str, uri: str) -> None:
        row = self._waiter_at.pop((request_id, uri), None)
        if row is not None:
            at = bisect.bisect_left(self._waiter_keys, _queue_order(row))
            del self._waiter_keys[at], self._waiters[at], self._waiter_holders[at]

    # --- writes (memory, and passed on) --------------------------------------------------------------

    def release_lease(self, lease_id: str, owner_key: str) -> list[LeaseRow]:
        # a decision never releases, but the view stays a whole StoreTxn: whatever the store deleted is
        # gone from memory too
        released = self._txn.release_lease(lease_id, owner_key)
        for r in released:
            self._drop_lease(r.lease_id, r.uri)
        return released

    def delete_lease_rows(self, lease_id: str, uris: Sequence[str]) -> None:
        for u in uris:
            self._drop_lease(lease_id, u)
        self._txn.delete_lease_rows(lease_id, uris)

    def insert_lease_rows(self, rows: Sequence[LeaseRow]) -> None:
        for r in rows:
            self._add_lease(r)
        self._txn.insert_lease_rows(rows)

    def extend_lease(self, lease_id: str, expires_at: float) -> None:
        for r in self.lease_rows(lease_id):
            self._add_lease(dataclasses.replace(r, expires_at=expires_at))
        self._txn.extend_lease(lease_id, expires_at)

    def delete_waiter_rows(self, request_id: str, uris: Sequence[str] | None = None) -> None:
        for u in self._uris if uris is None else uris:
            self._drop_waiter(request_id, u)
        self._txn.delete_waiter_rows(request_id, uris)

    def put_waiter_rows(self, rows: Sequence[WaiterRow]) -> None:
        for r in rows:
            self._add_waiter(r)
        self._txn.put_waiter_rows(rows)

    def put_request(self, row: RequestRow) -> None:
        self._requests[row.request_id] = row
        self._txn.put_request(row)

    def set_request_status(self, request_id: str, status: str, updated_at: float) -> None:
        row = self._requests.get(request_id)
        if row is not None:
            self._requests[request_id] = dataclasses.replace(row, status=status, updated_at=updated_at)
        self._txn.set_request_status(request_id, status, updated_at)

    def set_table(self, uri: str, fencing: int, config_version: int | None, config_json: str | None) -> None:
        self._tables[uri] = TableRow(uri, fencing, config_version, config_json)
        self._txn.set_table(uri, fencing, config_version, config_json)

    def log(self, rows: Sequence[DecisionRow]) -> None:
        self._txn.log(rows)

    # --- what the batch asks ---------------------------------------------------------------------------

    def queue(self) -> list[WaiterRow]:
        """The queued rows, earliest rank first (ties by id, as the admission rule orders them)."""
        return list(self._waiters)

    def alive(self, ids: set[str], now: float) -> set[str]:
        """Which of ``ids`` are an unexpired lease or queue row of the locked table."""
        found = set()
        for i in ids:
            for u in self._uris:
                rows = (self._lease_at.get((i, u)), self._waiter_at.get((i, u)))
                if any(r is not None and r.expires_at > now for r in rows):
                    found.add(i)
        return found


#: a pass also stops after this many times its CPU budget in wall-clock time (see :func:`readmit_locked`)
WALL_BACKSTOP = 2.0
#: the pass's clocks: CPU time of the deciding thread, and wall-clock time
_cpu_clock = time.thread_time
_wall_clock = time.monotonic


@dataclass(frozen=True)
class Readmission:
    """What one re-admission of a table's queue answered.

    :param answers: the answer per request id decided (granted, or still waiting and behind whom).
    :param complete: whether every one-table waiter was reached; ``False`` when the time budget ran out
        first (the waiters after the last one reached were not decided: the next re-admission goes on
        from the queue as it then stands).
    """

    answers: dict[str, Granted | Waiting] = field(default_factory=dict)
    complete: bool = True


def readmit_locked(
    txn: StoreTxn,
    uri: str,
    now: float,
    memo: DecisionMemo,
    decide: DecideFn,
    make_ask: Callable[[LeaseRequest], Ask],
    reclaimed: list[LeaseRow],
    budget_s: float | None = None,
    fences: FenceRound | None = None,
) -> Readmission:
    """Decide every one-table request queued on ``uri`` (locked in ``txn``), in rank order; return each
    answer by request id.

    :param txn: a transaction holding the lock of ``uri`` (only).
    :param uri: the table.
    :param now: the decisions' time.
    :param memo: the lease manager's memory (configurations, known verdicts).
    :param decide: the conflict model.
    :param make_ask: the lease manager's preparation of a request for a decision (offered configuration,
        stored texts), as for its own checks.
    :param reclaimed: filled with the expired leases reclaimed (warned about after commit); cleared first,
        since a retried transaction runs this again.
    :param budget_s: stop deciding once the pass has used this much CPU time of its thread (``None``: no
        limit), or twice as much wall-clock time, so the transaction ends well within the store's call
        timeout however long the queue; the waiters decided so far are committed in queue order, the rest
        wait for the next re-admission. CPU time, because deciding is all CPU (the writes are buffered
        until the commit): on a machine whose other processes take most of the cores, a wall-clock budget
        covered a few dozen waiters per pass, and every further pass read the whole queue again. The
        wall-clock backstop keeps a starved pass within the call timeout all the same.
    :param fences: expired leases whose server-side work was confirmed stopped (ADR 0033); others stay
        held and land in its ``pending``.
    """
    reclaimed.clear()
    started, wall_started = _cpu_clock(), _wall_clock()
    crowd = CrowdTxn(txn)
    answers: dict[str, Granted | Waiting] = {}
    with pair_memo():
        for row in crowd.queue():
            if budget_s is not None and (
                _cpu_clock() - started > budget_s or _wall_clock() - wall_started > WALL_BACKSTOP * budget_s
            ):
                return Readmission(answers, complete=False)
            _readmit_one(crowd, row, uri, now, memo, decide, make_ask, reclaimed, answers, fences)
    return Readmission(answers)


def _readmit_one(
    crowd: CrowdTxn,
    row: WaiterRow,
    uri: str,
    now: float,
    memo: DecisionMemo,
    decide: DecideFn,
    make_ask: Callable[[LeaseRequest], Ask],
    reclaimed: list[LeaseRow],
    answers: dict[str, Granted | Waiting],
    fences: FenceRound | None = None,
) -> None:
    """Decide one queue row of the pass (see :func:`readmit_locked`), adding its answer to ``answers``."""
    if row.uri != uri or row.expires_at <= now:
        return  # an abandoned entry is reclaimed by the next full decision, never decided for
    status = crowd.request(row.request_id)
    if status is None or status.status != "waiting" or status.expires_at <= now:
        return
    request = codec.request_from_payload(row.request_id, status.payload)
    if request.uris != (uri,):
        return  # its other tables are not locked here: its own check decides
    if status.last_wait:
        last = waiting_from_json(row.request_id, status.expires_at, status.last_wait)
        ids = {b.id for b in last.blockers}
        staying = crowd.alive(ids, now) if ids else set()
        if staying:
            answers[row.request_id] = dataclasses.replace(
                last, blockers=tuple(b for b in last.blockers if b.id in staying)
            )
            return
    mine: list[LeaseRow] = []
    try:
        answers[row.request_id] = decide_locked(
            crowd, make_ask(request), memo, decide, mine, renew=False, fences=fences
        )
    except (LeaseError, ValueError):
        return  # its own check meets the same error and reports it to its owner
    finally:
        reclaimed.extend(mine)
