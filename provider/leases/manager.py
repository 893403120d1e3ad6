"""The lease manager: conflict-aware admission of Delta writes over a lease store.

Every state change (acquire, check of a waiting request, heartbeat, release) is one store transaction over
the rows of exactly the tables involved: expired leases and abandoned queue entries on those tables are
reclaimed (and logged with their dead owner), the pure :func:`~deltaguard.core.admission.admit` decides, and
the grant (with per-table fencing tokens) or the queue entry is written, all atomically. A store may also
answer a decision on busy tables with a snapshot of their rows and commit the decision made from it only if
those rows are unchanged under the locks (ADR 0007); otherwise the locking transaction decides.

This module holds the protocol verbs only (acquire, check, heartbeat, release, and the reads of leases,
queue and decision log); the decision in a transaction is :mod:`~deltaguard.leases.decide`'s, what the
manager remembers between calls is :mod:`~deltaguard.leases.memo`'s, the stored texts are
:mod:`~deltaguard.leases.codec`'s and the read-only views :mod:`~deltaguard.leases.views`'. Duration
estimates for tasks that state none are learned from the decision log here too (:func:`learned_duration`,
ADR 0024); a wrong estimate only changes the order of conflicting writes, never lets them overlap.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from deltaguard.core.admission import (
    DEFAULT_AGEING_S,
    DEFAULT_MAX_OVERTAKE_S,
    Closed,
    DecideFn,
    Granted,
    LeaseRequest,
    Owner,
    Waiting,
    default_decide,
)

# The lease errors are defined with every other error (deltaguard.exceptions) and re-exported here.
from deltaguard.core.slots import free_slots, slot_open
from deltaguard.exceptions import LeaseError as LeaseError
from deltaguard.exceptions import LeaseLostError as LeaseLostError
from deltaguard.exceptions import LeaseOwnershipError as LeaseOwnershipError
from deltaguard.exceptions import RequestClosedError as RequestClosedError
from deltaguard.exceptions import StoreUnavailableError
from deltaguard.leases import codec
from deltaguard.leases.codec import op_from_text, owner_from_text
from deltaguard.leases.decide import (
    Ask,
    decide_locked,
    grant_if_idle,
    log_row,
    reclaim_leases,
    refuse,
    slots_left,
    warn_reclaimed,
    withdraw,
)
from deltaguard.leases.fencing import DEFAULT_INTERRUPTED_GRACE_S, RemoteWorkFencing
from deltaguard.leases.memo import ConfigLoader, DecisionMemo, OracleLoader
from deltaguard.leases.open import open_store
from deltaguard.leases.readmit import Readmission, readmit_locked
from deltaguard.leases.remote_work import (
    FenceMemory,
    RemoteWorkFence,
    handles_in,
)
from deltaguard.leases.restate import restate_locked
from deltaguard.leases.store import (
    DecisionRow,
    LeaseRow,
    LeaseStore,
    RequestRow,
    StoreError,
    StoreTxn,
    asking_engines_outside,
    run_in_transaction,
)
from deltaguard.leases.views import (
    DecisionInfo,
    LeaseInfo,
    WaiterInfo,
    decision_info,
    granted,
    lease_info,
    waiter_info,
)
from deltaguard.leases.wait_texts import waiting_from_json

__all__ = [
    "ConfigLoader",
    "DecisionInfo",
    "LeaseError",
    "LeaseInfo",
    "LeaseLostError",
    "LeaseManager",
    "LeaseOwnershipError",
    "RequestClosedError",
    "WaiterInfo",
]

#: the decision-log kind of a write that may have committed outside its lease (a wrapped operator that
#: lost its lease, a commit that landed after the lease was lost)
OVERRUN_KIND = "unfenced_overrun"

log = logging.getLogger("deltaguard.leases")

#: how long decision-log entries and closed requests are kept unless the caller says (the default of
#: ``[deltaguard] decision_log_retention``, 30 days; the lease hook passes the configured value)
DEFAULT_RETENTION_S = 30 * 86400.0


class LeaseManager(RemoteWorkFencing):
    """Grants, queues, renews and releases leases; fences holders' server-side work through
    :class:`~deltaguard.leases.fencing.RemoteWorkFencing`.

    :param store: a :class:`~deltaguard.leases.store.LeaseStore` or a store URL.
    :param decide: the conflict model (default: :func:`deltaguard.core.model.decide`).
    :param clock: seconds since the epoch; injectable for tests. All processes sharing a store must have
        synchronised clocks (expiry compares their timestamps).
    :param ageing_s: seconds of waiting worth one priority level.
    :param max_overtake_s: a queued request that has waited longer than this is never backfilled past
        (backfilling needs duration estimates on the requests, ADR 0017).
    :param retention_s: how long decision-log entries and closed requests are kept.
    :param prune_every_s: how often (at most) an acquire prunes old entries.
    :param config_ttl_s: how long a loaded table configuration is reused without reloading.
    :param config_loader: loads a table's configuration when a request carries none (or the cached one is
        older than ``config_ttl_s``).
    :param oracle_loader: attaches the engine's evaluator of partition predicates to a configuration read
        back from the store (a waiting request decided again, the table's stored copy), as the writer's own
        process had it (ADR 0037); the Airflow hooks pass :func:`deltaguard.engines.sources.attach_oracle`.
        ``None``: no partition separation of such a configuration is granted unconfirmed
        (:meth:`DecisionMemo.read_back <deltaguard.leases.memo.DecisionMemo.read_back>`).
    :param remote_fence: stops a holder's server-side work (Spark Connect) and confirms it ended, before an
        expired lease that recorded such work is reclaimed (ADR 0033). ``None``: such a lease stays held
        until a manager with a fence confirms it, or an operator releases it by hand.
    :param fence_timeout_s: how long one fence may take before it counts as not confirmed.
    :param fence_retry_s: after a fence failed, how long this manager waits before it tries that lease
        again (decisions in between keep it held without calling the server).
    :param fence_memory: fence outcomes shared with other managers of the process (default: this
        manager's own).
    :param interrupted_grace_s: how long after a fence first answered that the server itself ended a
        holder's work (its Connect session closed on the server that ran it) the lease is handed over,
        logged ``remote_interrupted`` (ADR 0033).
    :param sweep_every_s: how often the managers of a process end the store's expired leases nobody asked
        for (:meth:`end_expired`), from their checks of waiting requests.
    :param worker_slots: the slot gate (:mod:`deltaguard.core.slots`, ADR 0028): the worker slots the
        writes asking through this manager run in. While as many leases as that are held, a request the
        conflict model admits waits instead (``None``: no gate). Only for callers that give up their slot
        while they wait (a deferring task, the triggerer): one that waits in its worker would hold a slot
        a granted write may need.
    """

    def __init__(
        self,
        store: LeaseStore | str,
        *,
        decide: DecideFn | None = None,
        clock: Callable[[], float] = time.time,
        ageing_s: float = DEFAULT_AGEING_S,
        max_overtake_s: float = DEFAULT_MAX_OVERTAKE_S,
        retention_s: float = DEFAULT_RETENTION_S,
        prune_every_s: float = 60.0,
        config_ttl_s: float = 30.0,
        config_loader: ConfigLoader | None = None,
        oracle_loader: OracleLoader | None = None,
        remote_fence: RemoteWorkFence | None = None,
        fence_timeout_s: float = 60.0,
        fence_retry_s: float = 10.0,
        fence_memory: FenceMemory | None = None,
        interrupted_grace_s: float = DEFAULT_INTERRUPTED_GRACE_S,
        sweep_every_s: float = 60.0,
        worker_slots: int | None = None,
    ) -> None:
        free_slots(worker_slots, 0)  # checks it
        self.worker_slots = worker_slots
        self.store = open_store(store) if isinstance(store, str) else store
        self.remote_fence = remote_fence
        self.interrupted_grace_s = interrupted_grace_s
        self.sweep_every_s = sweep_every_s
        self.fence_timeout_s = fence_timeout_s
        self.fence_retry_s = fence_retry_s
        #: expired leases whose server-side work a fence confirmed ended, the last failure per lease
        self.fence_memory = fence_memory if fence_memory is not None else FenceMemory()
        self._decide = decide
        self.clock = clock
        self.ageing_s = ageing_s
        self.max_overtake_s = max_overtake_s
        self.retention_s = retention_s
        self.prune_every_s = prune_every_s
        self.memo = DecisionMemo(config_ttl_s, config_loader, oracle_loader)
        self._last_prune = float("-inf")
        #: lease id -> tags of server-side work this manager recorded and did not see end (ADR 0033)
        self._outstanding_work: dict[str, set[str]] = {}
        #: lease id -> when :meth:`_retry_awaiting` last tried it
        self._last_retry: dict[str, float] = {}

    @property
    def decide(self) -> DecideFn:
        if self._decide is None:
            self._decide = default_decide()
        return self._decide

    # --- the protocol --------------------------------------------------------------------------------

    def acquire(self, request: LeaseRequest) -> Granted | Waiting:
        """Grant the request now or queue it.

        Asking again with the same ``request_id`` keeps the queue place; once granted it returns the same
        lease (without renewing it).

        :raises RequestClosedError: the request id belongs to a lease that already ended.
        :raises LeaseLostError: the request was granted but its lease expired.
        :raises LeaseOwnershipError: the request id belongs to another owner.
        :raises StoreError: the store failed; nothing was granted.
        """
        result = self._evaluate(request)
        self._maybe_prune()
        return result

    def check(self, request_id: str) -> Granted | Waiting | Closed:
        """The request's status; a waiting request is re-evaluated (and its queue entry kept alive).

        Granted and closed requests cost one primary-key read; a waiting one costs one decision on its own
        tables only.
        """
        row = self.store.read_request(request_id)
        if row is None:
            return Closed(request_id, "unknown")
        if row.status == "granted":
            leases = self.store.read_lease(request_id)
            now = self.clock()
            if leases and all(lease.expires_at > now for lease in leases):
                return granted(request_id, leases)
            return Closed(request_id, "expired", "the lease was not renewed before it expired")
        if row.status == "waiting":
            self._retry_awaiting()
            cached = self._still_blocked(row)
            if cached is not None:
                return cached
            try:
                # Its own queue entry keeps the tables busy: the one-step grant cannot apply.
                stored = self.memo.read_back_request(codec.request_from_payload(request_id, row.payload))
                return self._evaluate(stored, fast=False)
            except RequestClosedError:
                pass
            row = self.store.read_request(request_id) or row
        status = row.status if row.status in ("released", "expired", "abandoned") else "unknown"
        # one of Closed's literal statuses, checked just above: mypy does not narrow a str by `in`
        return Closed(request_id, status)  # type: ignore[arg-type]

    def _still_blocked(self, row: RequestRow) -> Waiting | None:
        """The last wait answer if every blocker is still there and the queue entry is not due for
        renewal (half its wait ttl left); ``None`` when a full decision is needed.

        Sound: a blocker that still exists still conflicts (its operation did not change), so the full
        decision would also wait; it only costs an unlocked read instead of a locking transaction.
        """
        if not row.last_wait:
            return None
        now = self.clock()
        if now >= row.expires_at - (row.expires_at - row.updated_at) / 2:
            return None
        last = waiting_from_json(row.request_id, row.expires_at, row.last_wait)
        ids = {b.id for b in last.blockers}
        if not ids or self.store.alive(sorted(ids), now) != ids:
            return None
        return last

    def readmit(self, uri: str, budget_s: float | None = None) -> Readmission:
        """Decide, in one locking transaction, every request queued on ``uri`` alone, in queue order; return
        each answer by request id (:mod:`~deltaguard.leases.readmit`, ADR 0031).

        What a release in front of a crowd of waiters calls once, instead of one check per waiter: the
        decisions are each waiter's own (:func:`~deltaguard.leases.decide.decide_locked`), made one after
        another on what the earlier ones granted. A waiter's queue entry is not renewed; requests queued on
        several tables, and any whose decision fails, are left out (their own checks decide them).

        :param budget_s: stop deciding after this many seconds of the deciding thread's CPU time (or twice
            as many of wall-clock time); the rest of the queue is left for the next call
            (:attr:`Readmission.complete <deltaguard.leases.readmit.Readmission.complete>` says so).
        """
        now = self.clock()
        decide = self.decide
        reclaimed: list[LeaseRow] = []
        fences = self.fence_memory.round()

        def body(txn: StoreTxn) -> Readmission:
            return readmit_locked(
                txn,
                uri,
                now,
                self.memo,
                decide,
                lambda request: self._ask(request, now),
                reclaimed,
                budget_s,
                fences,
                slots_left(txn, self.worker_slots, now),
            )

        result: Readmission = self._run([uri], body)
        warn_reclaimed(reclaimed, now)
        if self._fence_pending(fences):
            return self.readmit(uri, budget_s)  # fenced: decide again (reclaimed, or with why not)
        return result

    def heartbeat(self, lease_id: str, owner: Owner, *, store_id: str | None = None) -> float:
        """Extend a lease by its ttl; return the new expiry.

        :param store_id: the identity of the store that granted the lease (ADR 0018), checked in the
            renewal's first read; ``None``: not checked.
        :raises LeaseLostError: the lease is gone or already expired (an expired lease is reclaimed now).
        :raises LeaseOwnershipError: the lease belongs to another owner.
        :raises StoreReplacedError: the store is not the one whose id is ``store_id``.
        """
        rows = self.store.read_lease_in(lease_id, store_id)
        if not rows:
            raise LeaseLostError(f"lease {lease_id} does not exist (released, or expired and reclaimed)")
        now = self.clock()
        reclaimed: list[LeaseRow] = []
        # An expired lease with server-side work stays held (the holder's keeper interrupts that work once
        # it hears the lease is lost); the fence runs in the deciders' calls, not in a renewal.
        fences = self.fence_memory.round()

        def body(txn: StoreTxn) -> float | None:
            reclaimed.clear()
            current = txn.lease_rows(lease_id)
            if not current:
                return None
            if current[0].owner_key != owner.key:
                raise LeaseOwnershipError(
                    f"lease {lease_id} belongs to {owner_from_text(current[0].owner_json).describe()}, not {owner.describe()}"
                )
            if min(r.expires_at for r in current) <= now:
                reclaim_leases(txn, current, now, reclaimed, fences)
                return None
            expires = now + current[0].ttl_s
            txn.extend_lease(lease_id, expires)
            return expires

        expires = self._run([r.uri for r in rows], body)
        warn_reclaimed(reclaimed, now)
        if expires is None:
            raise LeaseLostError(f"lease {lease_id} expired before this heartbeat; stop writing")
        return float(expires)

    def release(self, lease_id: str, owner: Owner) -> bool:
        """Release a lease (or withdraw a queued request). Idempotent: ``False`` when nothing was held.

        :raises LeaseOwnershipError: the lease belongs to another owner (the refusal is logged).
        """
        now = self.clock()
        outstanding = self._outstanding_work.pop(lease_id, None)
        if outstanding:
            # The holder's server-side work was not seen ended (an interrupted Spark Connect operation may
            # still commit): freeing the table now could admit a conflicting writer before that commit.
            expired = self._expire_for_fence(lease_id, owner, sorted(outstanding), now)
            if expired:
                self._end_awaiting_fence(lease_id)
            return expired
        known = self.memo.take_known(lease_id)
        # A request's tables never change, so the ones this manager answered need no read.
        if known is not None:
            uris, reset, is_lease = known
        else:
            rows = self.store.read_lease(lease_id)
            uris = [r.uri for r in rows]
            reset = [r.uri for r in rows if op_from_text(r.op_json).changes_metadata]
            is_lease = bool(rows)
        if uris and self.store.has_fast_paths:
            released = self.store.release_owned(lease_id, owner.key, uris, reset, now)
            if released:
                if reset and any(fencing is not None for _, fencing in released):
                    for uri in reset:
                        self.memo.forget_config(uri)
                return True
            # Not done in one step (another owner's, already ended, or no fast path): the general path
            # below tells these apart.
        if is_lease:
            rows_uris = uris
        elif known is not None:  # this manager saw it queued; another process may have granted it since
            rows_uris = [r.uri for r in self.store.read_lease(lease_id)]
        else:  # nothing read above: no lease
            rows_uris = []
        if not rows_uris:
            request = self.store.read_request(lease_id)
            if request is None:
                return False
            uris = list(json.loads(request.payload)["uris"])
            if request.owner_key != owner.key:
                self._run(uris, lambda txn: refuse(txn, lease_id, uris, owner, now))
                raise LeaseOwnershipError(f"request {lease_id} belongs to another owner")
            if request.status == "waiting":
                return bool(self._run(uris, lambda txn: withdraw(txn, request, now)))
            return False

        def body(txn: StoreTxn) -> bool | None:
            deleted = txn.release_lease(lease_id, owner.key)
            if not deleted:
                if txn.lease_rows(lease_id):
                    refuse(txn, lease_id, rows_uris, owner, now)
                    return None
                return False
            txn.set_request_status(lease_id, "released", now)
            tables = txn.tables()
            for r in deleted:
                # ``reset``: the request's tables whose operation changes metadata, as remembered or read
                # above (a request's operations never change, so its rows need not be parsed again here)
                if r.uri in reset:
                    # The table's configuration changed: force the next decision to use a fresh one.
                    txn.set_table(r.uri, tables[r.uri].fencing, None, None)
                    self.memo.forget_config(r.uri)
            txn.log(
                [
                    log_row(now, "release", lease_id, r.uri, r.owner_key, {"fencing": r.fencing})
                    for r in deleted
                ]
            )
            return True

        released = self._run(rows_uris, body, lease_id, owner.key)
        if released is None:
            raise LeaseOwnershipError(
                f"lease {lease_id} belongs to another owner; {owner.describe()} may not release it"
            )
        return bool(released)

    def restate(self, request: LeaseRequest) -> dict[str, int | None]:
        """Move a granted lease to the read versions its claims now carry, if it is still compatible with
        every other lease on its tables; return the read version per table its write must use
        (:mod:`~deltaguard.leases.restate`, ADR 0020).

        :param request: the granted request (same id and owner) with each claim's new configuration and
            ``read_version``.
        :raises LeaseLostError: the lease is gone or expired.
        :raises LeaseOwnershipError: the lease belongs to another owner.
        """
        now = self.clock()
        decide = self.decide
        return dict(self._run(request.uris, lambda txn: restate_locked(txn, request, now, decide)))

    def record_overrun(
        self, lease_id: str, owner: Owner, uris: Sequence[str], detail: dict[str, Any]
    ) -> None:
        """Log that ``owner``'s write may have committed to ``uris`` outside its lease (an
        ``unfenced_overrun`` entry per table, which the UI's table page flags).

        :param lease_id: the lost lease.
        :param owner: its owner.
        :param uris: the tables.
        :param detail: what happened (``reason``, ``committed_version``, ``granted_since``, ...).
        """
        now = self.clock()
        rows = [log_row(now, OVERRUN_KIND, lease_id, uri, owner.key, detail) for uri in sorted(uris)]
        self._run(sorted(uris), lambda txn: txn.log(rows))
        log.error(
            "deltaguard: %s may have written %s outside its lease %s: %s",
            owner.describe(),
            ", ".join(sorted(uris)),
            lease_id,
            detail.get("reason", ""),
        )

    def grants_since(self, uri: str, since: float, owner: Owner, until: float | None = None) -> list[str]:
        """Other owners granted a lease on ``uri`` at or after ``since`` (and at or before ``until``).

        :returns: the granted owners, described, oldest first.
        """
        rows = self.store.decisions(uri=uri, since=since, kinds=["grant"], limit=100)
        return [
            owner_from_text(r.owner_key).describe()
            for r in reversed(rows)
            if r.owner_key != owner.key and (until is None or r.at <= until)
        ]

    # --- read-only queries ---------------------------------------------------------------------------

    def leases(self, uri: str) -> list[LeaseInfo]:
        """Granted leases on a table: the unexpired ones, and expired ones whose holder's server-side work
        is not yet confirmed stopped (they still hold the table, ADR 0033)."""
        now = self.clock()
        rows = self.store.list_leases(uri)
        expired = sorted({r.lease_id for r in rows if r.expires_at <= now})
        held: set[str] = set()
        if expired:
            for request in self.store.read_requests(expired):
                try:
                    if handles_in(request.payload):
                        held.add(request.request_id)
                except ValueError:
                    held.add(request.request_id)
        return [lease_info(r) for r in rows if r.expires_at > now or r.lease_id in held]

    def waiters(self, uri: str) -> list[WaiterInfo]:
        """Unexpired queued requests on a table, in queue order."""
        now = self.clock()
        return [waiter_info(w) for w in self.store.list_waiters(uri) if w.expires_at > now]

    def decisions(
        self,
        *,
        owner: Owner | None = None,
        uri: str | None = None,
        since: float | None = None,
        limit: int = 100,
    ) -> list[DecisionInfo]:
        """Decision-log entries for an owner and/or a table, newest first."""
        rows = self.store.decisions(owner_key=owner.key if owner else None, uri=uri, since=since, limit=limit)
        return [decision_info(r) for r in rows]

    def prune(self) -> int:
        """Delete decision-log entries and closed requests older than the retention; return the count."""
        return self.store.prune(self.clock() - self.retention_s)

    # --- internals -----------------------------------------------------------------------------------

    def _run(
        self,
        uris: Sequence[str],
        body: Callable[[StoreTxn], Any],
        request_id: str | None = None,
        release_by: str | None = None,
    ) -> Any:
        """Run ``body`` in one store transaction (:func:`~deltaguard.leases.store.run_in_transaction`)."""
        return run_in_transaction(self.store, uris, body, request_id, release_by)

    def _maybe_prune(self) -> None:
        """Prune old entries at most every ``prune_every_s``. It runs after the ask's decision has committed,
        so a store that fails or stalls here is logged and tried again later: the caller must not read a
        grant it holds as a :class:`StoreError` ("nothing was granted")."""
        now = self.clock()
        if now - self._last_prune >= self.prune_every_s:
            self._last_prune = now
            try:
                self.store.prune(now - self.retention_s)
            except StoreError as exc:
                log.warning(
                    "deltaguard: pruning the decision log failed, tried again in %.0f s: %s",
                    self.prune_every_s,
                    exc,
                )

    def _ask(self, request: LeaseRequest, now: float) -> Ask:
        """``request`` prepared for a decision at ``now`` (configuration and stored texts, before any lock)."""
        return Ask(
            request=request,
            now=now,
            offered={c.uri: self.memo.loaded_config(c, now) for c in request.claims},
            # Stored texts, encoded once for the one-call attempt and the decision alike.
            payload=codec.request_payload(request),
            # The committing engine travels with the stored operation, so a holder is judged by its own rules too.
            op_texts={
                c.uri: codec.op_text(dataclasses.replace(c.operation, engine=c.profile))
                for c in request.claims
            },
            ageing_s=self.ageing_s,
            max_overtake_s=self.max_overtake_s,
        )

    def _slots_full(self, now: float) -> bool:
        """Whether the slot gate is closed by an unlocked count, before the one-call grant (which does not
        count): then the decision takes the locking path, which counts in its transaction."""
        if self.worker_slots is None:
            return False
        held = self.store.live_leases(now)
        return not slot_open(self.worker_slots, len({row.lease_id for row in held}))

    def _evaluate(self, request: LeaseRequest, fast: bool = True) -> Granted | Waiting:
        """Decide on ``request``: first by the store's one-step grant (when it has one and ``fast``); on busy
        tables from the snapshot that attempt returned (committed only if the tables did not change since,
        ADR 0007); else by the general locking transaction (:func:`~deltaguard.leases.decide.decide_locked`)."""
        now = self.clock()
        ask = self._ask(request, now)
        snapshot = None
        if fast and self.store.has_fast_paths and not self._slots_full(now):
            answer = grant_if_idle(self.store, self.memo, ask)
            if isinstance(answer, Granted | Waiting):
                self.memo.remember(
                    request.request_id, request.uris, request.claims, isinstance(answer, Granted)
                )
                return answer
            snapshot = answer
        decide = self.decide
        reclaimed: list[LeaseRow] = []  # warned about once the decision committed (a body may run twice)
        fences = self.fence_memory.round()

        def body(txn: StoreTxn) -> Granted | Waiting:
            return decide_locked(
                txn, ask, self.memo, decide, reclaimed, fences=fences, slots=self.worker_slots
            )

        result: Granted | Waiting | None = None
        if snapshot is not None:
            try:
                result = asking_engines_outside(
                    lambda kept_only: self.store.run_on_snapshot(snapshot, kept_only), body
                )
            except StoreUnavailableError:
                raise  # the locking transaction would meet the same store: fail within one store timeout
            except (StoreError, LeaseError, ValueError) as exc:
                # The tables changed since the snapshot, or the decision raised: decide again under the
                # locks, which is authoritative for the answer and for any error alike.
                log.debug("request %s: deciding again under the table locks (%s)", request.request_id, exc)
                result = None
        if result is None:
            result = self._run(request.uris, body, request.request_id)
        warn_reclaimed(reclaimed, now)
        self.memo.remember(request.request_id, request.uris, request.claims, isinstance(result, Granted))
        if isinstance(result, Waiting) and self._fence_pending(fences):
            # a holder's server-side work was just fenced: decide again, with its lease reclaimed or with why not
            return self._evaluate(request, fast=False)
        return result


#: how many recent holds the median is taken over
DEFAULT_SAMPLES = 5
#: how many recent grants and releases of the table are read to find them (one indexed read; the larger
#: wait entries are left out)
DEFAULT_SCAN = 500


def same_task(owner: Owner, other: Owner) -> bool:
    """Whether two owners are runs of the same task (any run, try or map index; or the same free name)."""
    if owner.dag_id or owner.task_id:
        return (owner.dag_id, owner.task_id) == (other.dag_id, other.task_id)
    return owner.name == other.name


def hold_durations(rows: Sequence[DecisionRow], owner: Owner) -> list[float]:
    """How long ``owner``'s task held the leases it released, newest first.

    :param rows: decision-log entries of one table, in any order.
    :param owner: any run of the task.
    """
    granted_at: dict[str, float] = {}
    holds: list[tuple[float, float]] = []  # (release time, held seconds)
    for row in sorted(rows, key=lambda r: r.at):
        if row.kind == "grant" and same_task(owner, owner_from_text(row.owner_key)):
            granted_at[row.request_id] = row.at
        elif row.kind == "release" and row.request_id in granted_at:
            start = granted_at.pop(row.request_id)
            holds.append((row.at, max(0.0, row.at - start)))
    return [held for _, held in sorted(holds, reverse=True)]


def learned_duration(
    store: LeaseStore, owner: Owner, uri: str, *, samples: int = DEFAULT_SAMPLES, scan: int = DEFAULT_SCAN
) -> float | None:
    """The median of the task's last ``samples`` hold durations on ``uri``; ``None`` when it has none
    among the table's last ``scan`` grants and releases (then the request stays FIFO).

    :param store: the lease store (one unlocked read of the log by table).
    :param owner: any run of the task.
    :param uri: the table.
    """
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    rows = store.decisions(uri=uri, limit=scan, kinds=("grant", "release"))
    durations = hold_durations(rows, owner)[:samples]
    return float(statistics.median(durations)) if durations else None
