"""Re-admission of a table's whole queue in one transaction, after a release (ADR 0031).

One transaction decides for all of a table's waiters: it locks the table and reads its leases, its queue and
the waiters' request rows **once**, then goes through the queue in rank order and decides each one-table
waiter with :func:`~deltaguard.leases.decide.decide_locked` — the same decision as the waiter's own check —
on an in-memory view of the transaction (:class:`CrowdTxn`) that every earlier decision of the batch has
already changed: a waiter granted here is a lease for every waiter after it, with the next fencing token, so
two conflicting waiters are never granted together and tokens follow the queue order. A waiter whose last
blockers are still there keeps its last answer less the blockers that left (the cheap path); a granted waiter
followed by waiters *alike* to it heads a **run** granted on one proof (:meth:`_Pass.grant_run`); the writes
go to the store once, at the end of the pass (:meth:`CrowdTxn.flush`).

A waiter's queue entry is not renewed here (``renew=False``): only its owner's own check keeps it alive, so
a waiter whose owner is gone is still abandoned on time. A waiter on several tables is left to its own
check (its other tables are not locked here); it still counts as queued ahead of the waiters behind it.
"""

from __future__ import annotations

import bisect
import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from deltaguard.core.admission import DecideFn, Granted, Holder, LeaseRequest, Waiting
from deltaguard.core.model import pair_memo
from deltaguard.exceptions import LeaseError
from deltaguard.leases import codec
from deltaguard.leases.decide import Ask, decide_locked, grant_admitted
from deltaguard.leases.memo import DecisionMemo
from deltaguard.leases.remote_work import FenceRound
from deltaguard.leases.store import DecisionRow, LeaseRow, RequestRow, StoreTxn, TableRow, WaiterRow
from deltaguard.leases.views import lease_holder, waiter_holder
from deltaguard.leases.wait_texts import waiting_from_json

_Row = TypeVar("_Row", LeaseRow, WaiterRow)


def _lease_order(row: LeaseRow) -> tuple[float, str, str]:
    return (row.granted_at, row.lease_id, row.uri)


def _queue_order(row: WaiterRow) -> tuple[float, str, str]:
    return (row.rank, row.request_id, row.uri)


def _lease_id(row: LeaseRow) -> tuple[str, str]:
    return (row.lease_id, row.uri)


def _queue_id(row: WaiterRow) -> tuple[str, str]:
    return (row.request_id, row.uri)


class SortedRows(Generic[_Row]):
    """A table's lease rows (or queue rows) in the order a decision reads them, each with its plain holder
    at its place, found by ``(id, table)``: added and dropped by bisection, never re-sorted.

    :param rows: the rows, in any order.
    :param order: a row's sort key (unique per row: it ends with the row's id and table).
    :param ident: a row's ``(id, table)``.
    :param holder: a row as the admission rule sees it (no estimates).
    """

    _order: Callable[[_Row], tuple[float, str, str]]
    _ident: Callable[[_Row], tuple[str, str]]
    _holder: Callable[[_Row], Holder]

    def __init__(
        self,
        rows: Iterable[_Row],
        order: Callable[[_Row], tuple[float, str, str]],
        ident: Callable[[_Row], tuple[str, str]],
        holder: Callable[[_Row], Holder],
    ) -> None:
        self._order, self._ident, self._holder = order, ident, holder
        self.rows: list[_Row] = sorted(rows, key=order)
        self.keys = [order(r) for r in self.rows]
        self.holders = [holder(r) for r in self.rows]
        self.at: dict[tuple[str, str], _Row] = {ident(r): r for r in self.rows}

    def add(self, row: _Row) -> None:
        """Put ``row`` at its place (replacing the row of the same id and table)."""
        self.drop(self._ident(row))
        key = self._order(row)
        at = bisect.bisect_left(self.keys, key)
        self.keys.insert(at, key)
        self.rows.insert(at, row)
        self.holders.insert(at, self._holder(row))
        self.at[self._ident(row)] = row

    def drop(self, ident: tuple[str, str]) -> None:
        """Remove the row of ``(id, table)``, if there is one."""
        row = self.at.pop(ident, None)
        if row is not None:
            at = bisect.bisect_left(self.keys, self._order(row))
            del self.keys[at], self.rows[at], self.holders[at]

    def copy(self) -> SortedRows[_Row]:
        """An independent copy (the rows and holders themselves are shared: they never change)."""
        other: SortedRows[_Row] = object.__new__(SortedRows)
        other._order, other._ident, other._holder = self._order, self._ident, self._holder
        other.rows, other.keys, other.holders = list(self.rows), list(self.keys), list(self.holders)
        other.at = dict(self.at)
        return other


@dataclass(frozen=True)
class _Mark:
    """What :meth:`CrowdTxn.rollback` restores: the view as it was, and how many writes it held then."""

    leases: SortedRows[LeaseRow]
    waiters: SortedRows[WaiterRow]
    tables: dict[str, TableRow]
    requests: dict[str, RequestRow]
    writes: int


class CrowdTxn:
    """A :class:`~deltaguard.leases.store.StoreTxn` over one locked table that reads the table's rows once
    and then answers every read from memory, kept current by the writes, which it holds until
    :meth:`flush` sends them to the real transaction.

    It is the pass's view of the table, kept up to date rather than rebuilt: a grant adds its lease rows
    and drops the waiter's queue rows, each at its place in the order a decision reads them in (leases by
    grant time, the queue by rank, :class:`SortedRows`), so every decision of the pass reads the table as
    it then stands, in the order it sorts it in, and the row objects stay the same between decisions
    (their holders are found by identity, :func:`deltaguard.leases.views.lease_holder`). Since nothing is
    sent before :meth:`flush`, a tentative change can be taken back (:meth:`mark`, :meth:`rollback`).

    :param txn: the store's transaction (its table locks held).
    """

    def __init__(self, txn: StoreTxn) -> None:
        self._txn = txn
        self._tables = txn.tables()
        self._uris = tuple(self._tables)
        leases, waiters = txn.holders()
        # each row as the admission rule sees it (no estimates), at the row's place
        self._leases = SortedRows(leases, _lease_order, _lease_id, lease_holder)
        self._waiters = SortedRows(waiters, _queue_order, _queue_id, waiter_holder)
        ids = {r.lease_id for r in leases} | {w.request_id for w in waiters}
        self._requests: dict[str, RequestRow] = {r.request_id: r for r in txn.requests(sorted(ids))}
        #: the writes not yet sent: (StoreTxn method name, its arguments), in order
        self._writes: list[tuple[str, tuple[Any, ...]]] = []

    # --- reads (memory) ------------------------------------------------------------------------------

    def tables(self) -> dict[str, TableRow]:
        return dict(self._tables)

    def leases(self) -> list[LeaseRow]:
        return list(self._leases.rows)

    def waiters(self) -> list[WaiterRow]:
        return list(self._waiters.rows)

    def holders(self) -> tuple[list[LeaseRow], list[WaiterRow]]:
        return list(self._leases.rows), list(self._waiters.rows)

    def request(self, request_id: str) -> RequestRow | None:
        return self._requests.get(request_id)

    def requests(self, request_ids: Sequence[str]) -> list[RequestRow]:
        return [self._requests[i] for i in sorted(set(request_ids)) if i in self._requests]

    def lease_rows(self, lease_id: str) -> list[LeaseRow]:
        return [r for u in self._uris if (r := self._leases.at.get((lease_id, u))) is not None]

    def live_leases(self, now: float) -> list[LeaseRow]:
        """The store's unexpired leases as they were before this pass (its own grants are buffered)."""
        return self._txn.live_leases(now)

    # --- the kept view -------------------------------------------------------------------------------

    def kept_holders(
        self, uri: str, leases: Sequence[LeaseRow], waiters: Sequence[WaiterRow]
    ) -> tuple[list[Holder], list[Holder]] | None:
        """The plain holders of ``leases`` and ``waiters`` on ``uri`` when they are this view's rows in its
        order and ``uri`` its only table (what a decision read and sorted, nothing reclaimed since), else
        ``None``: a decision of the pass takes them as they are kept instead of looking each row up. (Lists
        of the same row objects compare equal without comparing any row.)"""
        if self._uris == (uri,) and leases == self._leases.rows and waiters == self._waiters.rows:
            return list(self._leases.holders), list(self._waiters.holders)
        return None

    def live_rows(self) -> tuple[Sequence[LeaseRow], Sequence[WaiterRow]]:
        """The view's lease and queue rows in decision order, not copied (to be read, not changed)."""
        return self._leases.rows, self._waiters.rows

    def mark(self) -> _Mark:
        """The view as it is now, for :meth:`rollback`."""
        return _Mark(
            self._leases.copy(),
            self._waiters.copy(),
            dict(self._tables),
            dict(self._requests),
            len(self._writes),
        )

    def rollback(self, mark: _Mark) -> None:
        """Take back every change since ``mark`` (nothing of them was sent)."""
        self._leases, self._waiters = mark.leases.copy(), mark.waiters.copy()
        self._tables, self._requests = dict(mark.tables), dict(mark.requests)
        del self._writes[mark.writes :]

    # --- writes (memory, and held for the real transaction) -------------------------------------------

    def release_lease(self, lease_id: str, owner_key: str) -> list[LeaseRow]:
        # a decision never releases, but the view stays a whole StoreTxn: whatever the store deleted is
        # gone from memory too (the store answers now, after what is held)
        self.flush()
        released = self._txn.release_lease(lease_id, owner_key)
        for r in released:
            self._leases.drop(_lease_id(r))
        return released

    def delete_lease_rows(self, lease_id: str, uris: Sequence[str]) -> None:
        for u in uris:
            self._leases.drop((lease_id, u))
        self._writes.append(("delete_lease_rows", (lease_id, list(uris))))

    def insert_lease_rows(self, rows: Sequence[LeaseRow]) -> None:
        for r in rows:
            self._leases.add(r)
        self._writes.append(("insert_lease_rows", (list(rows),)))

    def extend_lease(self, lease_id: str, expires_at: float) -> None:
        for r in self.lease_rows(lease_id):
            self._leases.add(dataclasses.replace(r, expires_at=expires_at))
        self._writes.append(("extend_lease", (lease_id, expires_at)))

    def delete_waiter_rows(self, request_id: str, uris: Sequence[str] | None = None) -> None:
        for u in self._uris if uris is None else uris:
            self._waiters.drop((request_id, u))
        self._writes.append(("delete_waiter_rows", (request_id, None if uris is None else list(uris))))

    def put_waiter_rows(self, rows: Sequence[WaiterRow]) -> None:
        for r in rows:
            self._waiters.add(r)
        self._writes.append(("put_waiter_rows", (list(rows),)))

    def put_request(self, row: RequestRow) -> None:
        self._requests[row.request_id] = row
        self._writes.append(("put_request", (row,)))

    def put_requests(self, rows: Sequence[RequestRow]) -> None:
        for row in rows:
            self.put_request(row)

    def delete_waiters(self, request_ids: Sequence[str]) -> None:
        for request_id in request_ids:
            self.delete_waiter_rows(request_id)

    def set_request_status(self, request_id: str, status: str, updated_at: float) -> None:
        row = self._requests.get(request_id)
        if row is not None:
            self._requests[request_id] = dataclasses.replace(row, status=status, updated_at=updated_at)
        self._writes.append(("set_request_status", (request_id, status, updated_at)))

    def set_table(self, uri: str, fencing: int, config_version: int | None, config_json: str | None) -> None:
        self._tables[uri] = TableRow(uri, fencing, config_version, config_json)
        self._writes.append(("set_table", (uri, fencing, config_version, config_json)))

    def log(self, rows: Sequence[DecisionRow]) -> None:
        if rows:
            self._writes.append(("log", (list(rows),)))

    def flush(self) -> None:
        """Send the held writes to the store transaction.

        When no lease, queue or request row is written twice (a pass decides each waiter once), the order
        of writes to different rows cannot matter, so they go as one call per kind: every lease row in one
        insert, every queue entry granted in one delete, every status row in one upsert, the log rows (in
        their order) in one insert, and each table row once, with its last value (each ``set_table``
        writes the whole row). Otherwise they go one by one, in order.
        """
        writes, self._writes = self._writes, []
        if not writes:
            return
        if not _rows_written_once(writes):
            for name, args in writes:
                getattr(self._txn, name)(*args)
            return
        last_table: dict[str, tuple[Any, ...]] = {}
        leases: list[LeaseRow] = []
        queued: list[WaiterRow] = []
        dequeued: list[str] = []
        statuses: list[RequestRow] = []
        logged: list[DecisionRow] = []
        singles: list[tuple[str, tuple[Any, ...]]] = []
        for name, args in writes:
            if name == "set_table":
                last_table[args[0]] = args
            elif name == "insert_lease_rows":
                leases.extend(args[0])
            elif name == "put_waiter_rows":
                queued.extend(args[0])
            elif name == "delete_waiter_rows" and args[1] is None:
                dequeued.append(args[0])
            elif name == "put_request":
                statuses.append(args[0])
            elif name == "log":
                logged.extend(args[0])
            else:  # deletions of lease rows, status changes: rare (reclaims), sent as they came
                singles.append((name, args))
        for args in last_table.values():
            self._txn.set_table(*args)
        for name, args in singles:
            getattr(self._txn, name)(*args)
        if leases:
            self._txn.insert_lease_rows(leases)
        if dequeued:
            self._txn.delete_waiters(dequeued)
        if queued:
            self._txn.put_waiter_rows(queued)
        if statuses:
            self._txn.put_requests(statuses)
        if logged:
            self._txn.log(logged)

    # --- what the batch asks ---------------------------------------------------------------------------

    def queue(self) -> list[WaiterRow]:
        """The queued rows, earliest rank first (ties by id, as the admission rule orders them)."""
        return list(self._waiters.rows)

    def alive(self, ids: set[str], now: float) -> set[str]:
        """Which of ``ids`` are an unexpired lease or queue row of the locked table."""
        found = set()
        for i in ids:
            for u in self._uris:
                rows = (self._leases.at.get((i, u)), self._waiters.at.get((i, u)))
                if any(r is not None and r.expires_at > now for r in rows):
                    found.add(i)
        return found


def _rows_written_once(writes: Sequence[tuple[str, tuple[Any, ...]]]) -> bool:
    """Whether no lease row, queue entry or status row is written by more than one of ``writes`` (rows
    named by kind and request id; the decision log and the table row are not rows of this kind)."""
    seen: set[tuple[str, str]] = set()
    for name, args in writes:
        if name in ("insert_lease_rows", "put_waiter_rows"):
            kind = "lease" if name == "insert_lease_rows" else "queue"
            ids = {(kind, r.lease_id if kind == "lease" else r.request_id) for r in args[0]}
        elif name in ("delete_lease_rows", "extend_lease"):
            ids = {("lease", args[0])}
        elif name == "delete_waiter_rows":
            ids = {("queue", args[0])}
        elif name in ("put_request", "set_request_status"):
            ids = {("request", args[0].request_id if name == "put_request" else args[0])}
        else:
            continue
        if not seen.isdisjoint(ids):
            return False
        seen |= ids
    return True


#: a pass also stops after this many times its CPU budget in wall-clock time (see :func:`readmit_locked`)
WALL_BACKSTOP = 2.0
#: the pass's clocks: CPU time of the deciding thread, and wall-clock time
_cpu_clock = time.thread_time
_wall_clock = time.monotonic
#: the most waiters one run takes (:meth:`_Pass.grant_run`); a longer crowd of alike waiters is several
#: runs, each with a decision of its own. The budget is checked between runs, so a run stays a small part
#: of it (~0.3 s of CPU at 250 members here) and a pass on a starved machine still ends within its call
RUN_MAX = 250
#: whether alike waiters after a grant form runs; ``False`` decides every waiter on its own (the reference
#: the runs are tested against)
GROUP_RUNS = True


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
    slots_left: int | None = None,
) -> Readmission:
    """Decide every one-table request queued on ``uri`` (locked in ``txn``), in rank order; return each
    answer by request id.

    :param txn: a transaction holding the lock of ``uri`` (only).
    :param uri: the table.
    :param now: the decisions' time.
    :param memo: the lease manager's memory (configurations, known verdicts).
    :param decide: the conflict model. Runs of alike waiters rely on its conflicts being monotone: an
        operation that conflicts with some running operations also conflicts with more of them.
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
    :param slots_left: how many more leases the slot gate lets this pass grant
        (:func:`deltaguard.core.slots.free_slots`; ``None``: no gate). Once they are granted, the waiters
        after them are not decided here: their own checks decide them, gated.
    """
    reclaimed.clear()
    started, wall_started = _cpu_clock(), _wall_clock()
    crowd = CrowdTxn(txn)
    one = _Pass(crowd, uri, now, memo, decide, make_ask, reclaimed, fences, slots_left)
    complete = True
    with pair_memo():
        queue = crowd.queue()
        at = 0
        while at < len(queue):
            if budget_s is not None and (
                _cpu_clock() - started > budget_s or _wall_clock() - wall_started > WALL_BACKSTOP * budget_s
            ):
                complete = False
                break
            at = one.step(queue, at)
    crowd.flush()
    return Readmission(one.answers, complete)


@dataclass(frozen=True)
class _Member:
    """A queue row the pass decides in full: its request prepared, and what makes it alike to others.

    :param alike: what a decision of it reads besides the holders and its own identity (operation but for
        its label, engine, configuration, read version); ``None`` when it is never taken into a run (it has
        a duration estimate, or file statistics, or its status row names another owner).
    """

    row: WaiterRow
    ask: Ask
    alike: tuple[object, ...] | None


class _Pass:
    """One pass over a table's queue (:func:`readmit_locked`): its view, its answers so far."""

    def __init__(
        self,
        crowd: CrowdTxn,
        uri: str,
        now: float,
        memo: DecisionMemo,
        decide: DecideFn,
        make_ask: Callable[[LeaseRequest], Ask],
        reclaimed: list[LeaseRow],
        fences: FenceRound | None,
        slots_left: int | None = None,
    ) -> None:
        self.crowd, self.uri, self.now, self.memo = crowd, uri, now, memo
        self.decide_fn, self.make_ask, self.reclaimed, self.fences = decide, make_ask, reclaimed, fences
        self.answers: dict[str, Granted | Waiting] = {}
        #: grants the slot gate still allows in this pass (``None``: no gate)
        self.slots_left = slots_left

    def _granted(self, answer: Granted | Waiting | None) -> None:
        if self.slots_left is not None and isinstance(answer, Granted):
            self.slots_left -= 1

    def step(self, queue: Sequence[WaiterRow], at: int) -> int:
        """Decide ``queue[at]`` (and, when it is granted, the run of alike waiters after it); return the
        index of the next row to decide."""
        if self.slots_left is not None and self.slots_left <= 0:
            return at + 1  # the slots are full: its own check decides it, behind the slot gate
        found = self.prepare(queue[at])
        if not isinstance(found, _Member):
            if found is not None:
                self.answers[queue[at].request_id] = found
            return at + 1
        answer = self.decide(found, self.reclaimed)
        if answer is None:
            return at + 1
        self.answers[found.row.request_id] = answer
        self._granted(answer)
        if not GROUP_RUNS or not isinstance(answer, Granted) or found.alike is None:
            return at + 1
        run = [found]
        # a run grants every member but its head at most: no more than the slot gate leaves
        run_max = RUN_MAX if self.slots_left is None else min(RUN_MAX, 1 + self.slots_left)
        for row in queue[at + 1 : at + run_max]:
            # Only the very next rows: a row between that is not decided here stays queued, ahead of the
            # rows after it, which a run's proof does not count.
            member = self.prepare(row)
            if not isinstance(member, _Member) or member.alike != found.alike:
                break
            run.append(member)
        return at + self.grant_run(run)

    def prepare(self, row: WaiterRow) -> _Member | Waiting | None:
        """``row`` made ready for a decision; or its answer without one (its last blockers are still there),
        or ``None`` when the pass does not decide it. Changes nothing."""
        if row.uri != self.uri or row.expires_at <= self.now:
            return None  # an abandoned entry is reclaimed by the next full decision, never decided for
        status = self.crowd.request(row.request_id)
        if status is None or status.status != "waiting" or status.expires_at <= self.now:
            return None
        request = self.memo.read_back_request(codec.request_from_payload(row.request_id, status.payload))
        if request.uris != (self.uri,):
            return None  # its other tables are not locked here: its own check decides
        if status.last_wait:
            last = waiting_from_json(row.request_id, status.expires_at, status.last_wait)
            ids = {b.id for b in last.blockers}
            staying = self.crowd.alive(ids, self.now) if ids else set()
            if staying:
                return dataclasses.replace(last, blockers=tuple(b for b in last.blockers if b.id in staying))
        ask = self.make_ask(request)
        return _Member(row, ask, _alike(ask, status))

    def decide(self, member: _Member, reclaimed: list[LeaseRow]) -> Granted | Waiting | None:
        """The full decision of ``member`` (``None``: it failed; its own check meets the same error and
        reports it to its owner); what it reclaims is added to ``reclaimed``."""
        mine: list[LeaseRow] = []
        try:
            return decide_locked(
                self.crowd, member.ask, self.memo, self.decide_fn, mine, renew=False, fences=self.fences
            )
        except (LeaseError, ValueError):
            return None
        finally:
            reclaimed.extend(mine)

    def grant_run(self, run: Sequence[_Member]) -> int:
        """Decide the members of ``run`` after its head (granted already); return how many of the run were
        decided (the rest go back to the pass, one by one).

        A run's members are consecutive in the queue and alike: the decision of each reads the same
        operation (labels aside: no rule reads a label), configuration and engine, and the same holders
        but for the members granted before it, which are leases then, where they were the same queued
        requests ranked ahead of it. So member *j*'s holders are member *i*'s and more, for *i* < *j*, and
        since adding running operations never takes a conflict away, *j* granted after the members before
        it are granted proves them all granted. Member *j* is decided in full (``decide_locked``, on the
        view with the members before it granted by :func:`~deltaguard.leases.decide.grant_admitted`, the
        grant's writes alone); when it is not granted the tentative grants are taken back and a shorter
        run is tried (bisection); a member decided with nothing tentative ahead of it is decided for good,
        whatever its answer.
        """
        done, bad = 0, len(run)  # granted for good up to run[done]; run[bad] known not granted after them
        hi = len(run) - 1
        while done + 1 < len(run):
            j = max(min(hi, bad - 1), done + 1)
            if j == done + 1:  # nothing tentative ahead of it: its decision is its own, for good
                answer = self.decide(run[j], self.reclaimed)
                if answer is not None:
                    self.answers[run[j].row.request_id] = answer
                    self._granted(answer)
                if not isinstance(answer, Granted):
                    return j + 1  # it stays queued (or failed): the rest are decided behind it, one by one
                done, hi = j, bad - 1
                continue
            mark = self.crowd.mark()
            live_leases, live_waiters = self.crowd.live_rows()
            try:
                between = [
                    grant_admitted(self.crowd, m.ask, self.memo, live_leases, live_waiters)
                    for m in run[done + 1 : j]
                ]
            except (LeaseError, ValueError):
                self.crowd.rollback(mark)
                return done + 1  # not what a run's members are: decided one by one from here
            reclaimed: list[LeaseRow] = []
            answer = self.decide(run[j], reclaimed)
            if isinstance(answer, Granted):
                for member, grant in zip(run[done + 1 : j], between, strict=True):
                    self.answers[member.row.request_id] = grant
                    self._granted(grant)
                self.answers[run[j].row.request_id] = answer
                self._granted(answer)
                self.reclaimed.extend(reclaimed)
                done, hi = j, bad - 1
            else:
                self.crowd.rollback(mark)
                bad, hi = j, done + (j - done) // 2
        return len(run)


def _alike(ask: Ask, status: RequestRow) -> tuple[object, ...] | None:
    """What a decision of a one-table request reads besides the holders and the request's identity
    (:class:`_Member`), or ``None`` when the request is never taken into a run: with a duration estimate
    (it may backfill) or file statistics (they rest on the holders' read versions), or when its status row
    names another owner (its decision raises)."""
    request = ask.request
    (claim,) = request.claims
    config = ask.offered[claim.uri]
    if (
        request.expected_duration_s is not None
        or (config is not None and config.file_stats is not None)
        or status.owner_key != request.owner.key
    ):
        return None
    return (claim.operation, claim.profile, config, claim.read_version)
