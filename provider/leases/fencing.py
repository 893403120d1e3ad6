"""Fencing a lease holder's server-side work before its lease is handed over (ADR 0033).

A holder that runs its write on a server (a Spark Connect session) records a fence handle on its lease; a
lease released or expired with such work not seen ended stays held until a fence confirms the work stopped
(``remote_fenced``), the server is found to have ended it and a grace passed (``remote_interrupted``), or
an operator releases it by hand. :class:`RemoteWorkFencing` is that part of the lease manager: the manager
(:class:`deltaguard.leases.manager.LeaseManager`) does admission and leases and inherits these steps.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from deltaguard.core.admission import Owner
from deltaguard.exceptions import LeaseError, LeaseLostError, LeaseOwnershipError
from deltaguard.leases.codec import owner_from_text
from deltaguard.leases.decide import log_row, reclaim_leases, refuse, warn_reclaimed
from deltaguard.leases.remote_work import (
    FENCED_KIND,
    FORCED_KIND,
    INTERRUPTED_KIND,
    RELEASE_AWAITING_FENCE_KIND,
    UNFENCED_KIND,
    FenceMemory,
    FenceRound,
    Handle,
    RemoteWorkFence,
    blocked_reason,
    describe_work,
    interrupted_by_server,
    with_handle,
    without_handle,
)
from deltaguard.leases.store import LeaseRow, LeaseStore, StoreTxn, run_in_transaction

log = logging.getLogger("deltaguard.leases")

#: how long a lease whose server closed its holder's session stays held after a fence first saw that, before
#: it is handed over as ``remote_interrupted`` (ADR 0033): above the longest an interrupted Spark Connect
#: operation was seen running on in the production-shaped run (about 260 s, ``benchmarks/results/cluster.json``)
DEFAULT_INTERRUPTED_GRACE_S = 300.0


class RemoteWorkFencing:
    """The lease manager's steps for leases whose holders run work on a server (ADR 0033).

    The attributes are the manager's (see its parameters).
    """

    store: LeaseStore
    clock: Callable[[], float]
    remote_fence: RemoteWorkFence | None
    fence_memory: FenceMemory
    fence_timeout_s: float
    fence_retry_s: float
    interrupted_grace_s: float
    sweep_every_s: float
    _outstanding_work: dict[str, set[str]]
    _last_retry: dict[str, float]

    def record_remote_work(self, lease_id: str, owner: Owner, handle: Handle, *, ended: bool = False) -> None:
        """Record on a live lease the fence handle of work its holder runs on a server (or, ``ended``, drop
        it again: the holder saw that work end). Stored in the request's payload; no schema change.

        :raises LeaseLostError: the lease is gone or expired (the work must not start).
        :raises LeaseOwnershipError: the lease belongs to another owner.
        """
        rows = self.store.read_lease(lease_id)
        if not rows:
            if ended:
                return
            raise LeaseLostError(f"lease {lease_id} does not exist (released, or expired and reclaimed)")
        now = self.clock()

        def body(txn: StoreTxn) -> bool:
            current = txn.lease_rows(lease_id)
            request = txn.request(lease_id)
            if not current or request is None:
                return ended
            if current[0].owner_key != owner.key:
                raise LeaseOwnershipError(
                    f"lease {lease_id} belongs to another owner, not {owner.describe()}"
                )
            if ended:
                payload = without_handle(request.payload, handle.get("tag", ""))
            elif min(r.expires_at for r in current) <= now:
                return False
            else:
                payload = with_handle(request.payload, handle)
            txn.put_request(dataclasses.replace(request, payload=payload))
            return True

        recorded = run_in_transaction(self.store, [r.uri for r in rows], body)
        tag = handle.get("tag", "")
        if ended:
            tags = self._outstanding_work.get(lease_id)
            if tags is not None:
                tags.discard(tag)
        elif recorded:
            self._outstanding_work.setdefault(lease_id, set()).add(tag)
        if not recorded:
            raise LeaseLostError(f"lease {lease_id} expired before its server-side work was recorded")

    def _expire_for_fence(self, lease_id: str, owner: Owner, tags: list[str], now: float) -> bool:
        """Release a lease whose recorded server-side work was not seen ended by expiring it: the table is
        then handed over only once a fence confirmed the work stopped (``decide.reclaim_leases``).

        :raises LeaseOwnershipError: the lease belongs to another owner.
        """
        rows = self.store.read_lease(lease_id)
        if not rows:
            return False
        uris = sorted({r.uri for r in rows})

        def body(txn: StoreTxn) -> bool | None:
            current = txn.lease_rows(lease_id)
            if not current:
                return False
            if current[0].owner_key != owner.key:
                refuse(txn, lease_id, uris, owner, now)
                return None
            txn.extend_lease(lease_id, min(now, min(r.expires_at for r in current)))
            detail = {"tags": tags, "reason": "server-side work not seen ended at the release"}
            txn.log(
                [
                    log_row(now, RELEASE_AWAITING_FENCE_KIND, lease_id, r.uri, r.owner_key, detail)
                    for r in current
                ]
            )
            return True

        done = run_in_transaction(
            self.store, uris, body
        )  # no release hint: the PostgreSQL store would release up front
        if done is None:
            raise LeaseOwnershipError(
                f"lease {lease_id} belongs to another owner; {owner.describe()} may not release it"
            )
        if done:
            log.warning(
                "deltaguard: lease %s released with server-side work not seen ended (%s): its tables are "
                "handed over once a fence confirms that work stopped",
                lease_id,
                ", ".join(tags),
            )
        return bool(done)

    def _end_awaiting_fence(self, lease_id: str) -> None:
        """Fence a lease this manager just expired for its outstanding server-side work, and reclaim it
        once the fence confirmed that work ended (``remote_fenced``, then ``expiry``); a failed fence is
        logged (``remote_unfenced``) and later decisions on its tables try again (ADR 0033).

        Without it such a lease ended only when another request asked for one of its tables: on a table
        nobody asked for again it stayed held, with no release or expiry logged, beyond the run. Best
        effort: the release already happened, and the lease stays held (safe) if this fails.
        """
        try:
            if self._reclaim_awaiting(lease_id):
                self._reclaim_awaiting(lease_id, fenced=True)  # decide with what the fence found
        except Exception as exc:
            log.warning("deltaguard: lease %s awaits a fence of its server-side work: %s", lease_id, exc)

    def _reclaim_awaiting(self, lease_id: str, *, fenced: bool = False) -> bool:
        """Reclaim ``lease_id`` if a fence confirmed its work ended; else, unless ``fenced``, fence it.
        Return whether a fence ran (the caller then decides once more)."""
        rows = self.store.read_lease(lease_id)
        if not rows:
            self.fence_memory.forget(lease_id)  # ended elsewhere (reclaimed, released by hand)
            return False
        now = self.clock()
        reclaimed: list[LeaseRow] = []
        fences = self.fence_memory.round()

        def body(txn: StoreTxn) -> None:
            reclaimed.clear()
            reclaim_leases(txn, txn.lease_rows(lease_id), now, reclaimed, fences)

        run_in_transaction(self.store, sorted({r.uri for r in rows}), body)
        warn_reclaimed(reclaimed, now)
        return not fenced and self._fence_pending(fences)

    def force_release(self, lease_id: str, reason: str, by: str) -> list[str]:
        """Release a lease whatever its owner or expiry, with a logged reason (``deltaguard leases release
        --force``): the way out when a holder's server-side work cannot be confirmed stopped and an operator
        has made sure it did. Returns the tables released (empty: no such lease).
        """
        rows = self.store.read_lease(lease_id)
        if not rows:
            return []
        now = self.clock()
        uris = sorted({r.uri for r in rows})

        def body(txn: StoreTxn) -> list[str]:
            current = txn.lease_rows(lease_id)
            if not current:
                return []
            txn.delete_lease_rows(lease_id, [r.uri for r in current])
            txn.set_request_status(lease_id, "released", now)
            detail = {"reason": reason, "by": by}
            txn.log(
                [
                    log_row(now, FORCED_KIND, lease_id, r.uri, r.owner_key, {**detail, "fencing": r.fencing})
                    for r in current
                ]
            )
            return sorted(r.uri for r in current)

        released: list[str] = run_in_transaction(self.store, uris, body)
        if released:
            log.warning("deltaguard: lease %s released by hand by %s: %s", lease_id, by, reason)
        return released

    def _fence_pending(self, fences: FenceRound) -> bool:
        """Fence the expired leases a decision kept held (outside any transaction); return whether a fence
        ran. The caller then decides again: with the lease reclaimed when it was confirmed, else with the
        failure in the wait reasons (a fence runs at most once per ``fence_retry_s`` per lease, so that
        second decision runs none)."""
        newly = False
        claimed = [
            (lease_id, owner_json, handles)
            for lease_id, (owner_json, handles) in fences.pending.items()
            if self.fence_memory.claim(lease_id, self.clock(), self.fence_retry_s)
        ]
        for lease_id, owner_json, handles, outcome in self._fence_all(claimed):
            owner = owner_from_text(owner_json)
            try:
                if isinstance(outcome, BaseException):
                    raise outcome
                how = outcome
            except Exception as exc:
                if interrupted_by_server(exc) and self._interrupted_long_enough(
                    lease_id, owner, handles, exc
                ):
                    newly = True
                    continue
                error = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
                self.fence_memory.fail(lease_id, error)
                text = blocked_reason(owner.describe(), handles[0] if handles else {}, error)
                log.error("deltaguard: lease %s stays held: %s", lease_id, text)
                detail: dict[str, Any] = {"reason": text}
                if interrupted_by_server(exc):
                    since = self._interrupted_since(lease_id, owner)
                    detail["interrupted_by_server"] = {
                        "first_seen": since,
                        "hand_over_at": since + self.interrupted_grace_s,
                    }
                self._log_fence(lease_id, owner, UNFENCED_KIND, detail)
                newly = True
                continue
            self.fence_memory.confirm(lease_id)
            newly = True
            log.warning(
                "deltaguard: server-side work of expired lease %s stopped: %s", lease_id, "; ".join(how)
            )
            self._log_fence(lease_id, owner, FENCED_KIND, {"confirmed": how})
        return newly

    def _fence_all(
        self, claimed: Sequence[tuple[str, str, Sequence[Handle]]]
    ) -> list[tuple[str, str, Sequence[Handle], list[str] | Exception]]:
        """Fence each claimed lease's handles, the leases side by side (each under ``fence_timeout_s``): one
        lease whose interrupted operations take long must not delay the hand-over of the others (measured in
        the production-shaped run: two such leases, 45 s each, one after the other, held a third past its
        holder's freeze). Returns each lease's confirmations, or the exception of its first failed handle."""

        def one(handles: Sequence[Handle]) -> list[str] | Exception:
            try:
                return [self._fence_one(h) for h in handles]
            except Exception as exc:
                return exc

        if len(claimed) <= 1:
            return [(lease_id, owner, handles, one(handles)) for lease_id, owner, handles in claimed]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(
            max_workers=min(len(claimed), 8), thread_name_prefix="deltaguard-fence"
        ) as pool:
            futures = [pool.submit(one, handles) for _, _, handles in claimed]
            return [
                (lease_id, owner, handles, f.result())
                for (lease_id, owner, handles), f in zip(claimed, futures, strict=True)
            ]

    def _interrupted_long_enough(
        self, lease_id: str, owner: Owner, handles: Sequence[Handle], exc: Exception
    ) -> bool:
        """Hand ``lease_id`` over (``remote_interrupted``) once ``interrupted_grace_s`` passed since a fence
        first answered that its server ended the work; return whether it did."""
        now = self.clock()
        since = self._interrupted_since(lease_id, owner)
        if now - since < self.interrupted_grace_s:
            return False
        self.fence_memory.confirm(lease_id, interrupted=True)
        text = " ".join(str(exc).split())[:500]
        log.warning(
            "deltaguard: lease %s handed over: its server ended its work %.0f s ago, end not observed: %s",
            lease_id,
            now - since,
            text,
        )
        self._log_fence(
            lease_id,
            owner,
            INTERRUPTED_KIND,
            {
                "reason": text,
                "work": describe_work(handles[0] if handles else {}),
                "first_seen": since,
                "grace_s": self.interrupted_grace_s,
                "confirmed": False,
            },
        )
        return True

    def _interrupted_since(self, lease_id: str, owner: Owner) -> float:
        """When a fence (of this process, or logged by any) first answered that ``lease_id``'s server ended
        its work."""
        return min(
            self.fence_memory.interrupted_since(lease_id, self.clock()),
            self._first_interrupted(lease_id, owner),
        )

    def _first_interrupted(self, lease_id: str, owner: Owner) -> float:
        """When a fence first logged that ``lease_id``'s server ended its work (any process's fence: a
        ``remote_unfenced`` entry with ``interrupted_by_server``), so that the grace does not start again in
        each process; ``inf`` when none is logged."""
        try:
            rows = self.store.decisions(owner_key=owner.key, kinds=[UNFENCED_KIND], limit=1000)
        except Exception:
            return math.inf
        firsts = []
        for row in rows:
            if row.request_id != lease_id:
                continue
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                first = json.loads(row.detail).get("interrupted_by_server", {}).get("first_seen")
                if isinstance(first, (int, float)):
                    firsts.append(float(first))
        return min(firsts, default=math.inf)

    def _retry_awaiting(self) -> None:
        """Fence again, unasked, the leases this process's fences could not confirm yet (at most once per
        ``fence_retry_s`` each), and every ``sweep_every_s`` the store's expired leases (:meth:`end_expired`):
        a lease nobody asks a table of would otherwise stay held beyond its end. Best effort. Run from the
        checks of waiting requests (the triggerer's), never from a release: a fence may take up to
        ``fence_timeout_s``, which a finishing task should not wait for."""
        now = self.clock()
        if self.fence_memory.claim_sweep(now, self.sweep_every_s):
            try:
                self.end_expired()
            except Exception as exc:
                log.warning("deltaguard: could not end the store's expired leases: %s", exc)
            return
        for lease_id in self.fence_memory.awaiting():
            if self.clock() - self._last_retry.get(lease_id, float("-inf")) < self.fence_retry_s:
                continue
            self._last_retry[lease_id] = self.clock()
            self._end_awaiting_fence(lease_id)

    def end_expired(self, limit: int = 100) -> dict[str, str]:
        """End the store's expired leases that no request reclaimed (any table): each is reclaimed (logged
        ``expiry``) unless it carries server-side work not confirmed stopped, which is fenced first (ADR
        0033) and stays held, with why, when the fence cannot confirm it yet. ``deltaguard leases sweep``
        runs it; managers run it every ``sweep_every_s`` on their own.

        :param limit: at most this many leases.
        :returns: lease id -> ``reclaimed`` or why it is still held.
        """
        outcome: dict[str, str] = {}
        for lease_id in self.store.expired_lease_ids(self.clock(), limit):
            self._end_awaiting_fence(lease_id)
            if self.store.read_lease(lease_id):
                outcome[lease_id] = self.fence_memory.round().failures.get(lease_id, "held")
            else:
                outcome[lease_id] = "reclaimed"
        return outcome

    def _fence_one(self, handle: Handle) -> str:
        from deltaguard.leases.open import bounded_call

        if handle.get("kind") == "unknown":
            raise LeaseError("the lease's fence handles cannot be read")
        if self.remote_fence is None:
            raise LeaseError("this lease manager has no fence for server-side work")
        from deltaguard.leases.open import StoreCallTimeout

        try:
            return str(bounded_call(self.remote_fence.fence, self.fence_timeout_s, handle))
        except StoreCallTimeout:
            raise TimeoutError(f"the fence did not finish within {self.fence_timeout_s:g} s") from None

    def _log_fence(self, lease_id: str, owner: Owner, kind: str, detail: dict[str, Any]) -> None:
        """One decision-log entry per table of the lease; best effort (the lease's state does not depend
        on it)."""
        try:
            uris = sorted({r.uri for r in self.store.read_lease(lease_id)})
            if uris:
                rows = [log_row(self.clock(), kind, lease_id, u, owner.key, detail) for u in uris]
                run_in_transaction(self.store, uris, lambda txn: txn.log(rows))
        except Exception as exc:
            log.warning("deltaguard: could not log the fence of lease %s: %s", lease_id, exc)
