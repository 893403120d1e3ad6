"""Keeping a granted lease alive during a write, and fencing the write's commit (ADR 0018).

:class:`LeaseKeeper` renews the lease every ``heartbeat_s`` in a background thread and is the writer's
commit fence (:class:`deltaguard.engines.fencing.CommitFence`): :meth:`LeaseKeeper.check` returns only when
the lease is certainly live for at least ``commit_margin_s`` more seconds, and callbacks registered with
:meth:`LeaseKeeper.on_lost` run as soon as the lease is known to be lost.

"Certainly live" is judged from the expiry the store last granted, on the local clock: nobody can reclaim
the lease before that instant (every process sharing a store must have synchronised clocks, as the manager
already requires). Every store call runs under a client-side deadline (``store_timeout_s``): a frozen store
(a stopped PostgreSQL backend keeps the TCP connection open, so neither keepalives nor server-side
timeouts end the call) can delay a renewal but never hang the keeper, and once the known expiry is near the
lease counts as lost whatever the store says later.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from deltaguard.core.admission import Owner
from deltaguard.leases.bounded import StoreCallTimeout, bounded_call
from deltaguard.leases.manager import LeaseError, LeaseLostError, LeaseManager
from deltaguard.leases.timing import LeaseTiming

log = logging.getLogger("deltaguard.leases")

__all__ = ["LeaseKeeper", "StoreCallTimeout", "bounded_call"]


class LeaseKeeper:
    """Renews one lease while a write runs and fences the write's commit.

    Use as a context manager around the engine call; pass the keeper as ``WriteContext.fence``.

    :param manager: the lease manager that granted the lease.
    :param lease_id: the lease.
    :param owner: its owner.
    :param expires_at: the expiry the grant returned.
    :param fencing: the per-table fencing tokens the grant returned; the check compares them with the
        store's rows of the lease.
    :param timing: TTL, heartbeat interval, store timeout and commit margin.
    :param clock: seconds since the epoch (the manager's clock by default).
    """

    def __init__(
        self,
        manager: LeaseManager,
        lease_id: str,
        owner: Owner,
        *,
        expires_at: float,
        fencing: Mapping[str, int] | None = None,
        timing: LeaseTiming | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.manager = manager
        self.lease_id = lease_id
        self.owner = owner
        self.timing = timing or LeaseTiming()
        self.clock = clock or manager.clock
        self.fencing = dict(fencing or {})
        self.known_expiry = expires_at
        self.renewals = 0
        self.failed_renewals = 0
        self.lost_reason: str | None = None
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._cancels: list[Callable[[], None]] = []
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------------------

    def __enter__(self) -> LeaseKeeper:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._beat, name=f"deltaguard-heartbeat-{self.lease_id}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            # a renewal in flight is bounded by the store timeout
            self._thread.join(timeout=self.timing.store_timeout_s + 1)

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    # --- the fence -----------------------------------------------------------------------------------

    def check(self) -> None:
        """Return if the lease is live for at least ``commit_margin_s``; raise otherwise.

        Renews the lease (bounded by the store timeout) and reads its rows to compare the fencing tokens;
        if the store does not answer, the expiry known from the last renewal decides.

        :raises LeaseLostError: the lease is lost, taken over, or too close to its expiry.
        """
        if self.lost:
            raise LeaseLostError(f"lease {self.lease_id} is lost: {self.lost_reason}")
        self._renew()
        if self.lost:
            raise LeaseLostError(f"lease {self.lease_id} is lost: {self.lost_reason}")
        if self.fencing:
            try:
                rows = bounded_call(self.manager.store.read_lease, self.timing.store_timeout_s, self.lease_id)
            except Exception as exc:
                log.warning(
                    "deltaguard: could not read lease %s for its fencing check: %s", self.lease_id, exc
                )
            else:
                found = {r.uri: r.fencing for r in rows if r.owner_key == self.owner.key}
                if found != self.fencing:
                    self._mark_lost(f"its fencing tokens changed (granted {self.fencing}, store has {found})")
                    raise LeaseLostError(f"lease {self.lease_id} is lost: {self.lost_reason}")
        left = self.known_expiry - self.clock()
        if left < self.timing.commit_margin_s:
            raise LeaseLostError(
                f"lease {self.lease_id} has {left:.1f} s left, less than the commit margin of "
                f"{self.timing.commit_margin_s:g} s (the store has not confirmed a renewal)"
            )

    def on_lost(self, cancel: Callable[[], None]) -> Callable[[], None]:
        """Call ``cancel`` once the lease is lost (at once if it already is); return an unregister function."""
        with self._lock:
            if not self.lost:
                self._cancels.append(cancel)
                return lambda: self._unregister(cancel)
        _run_cancel(cancel)
        return lambda: None

    # --- internals -----------------------------------------------------------------------------------

    def _unregister(self, cancel: Callable[[], None]) -> None:
        with self._lock:
            if cancel in self._cancels:
                self._cancels.remove(cancel)

    def _beat(self) -> None:
        wait = self.timing.heartbeat_s
        while not self._stop.wait(wait):
            self._renew()
            if self.lost:
                return
            # after a failed renewal, try again sooner: the stall may be over
            wait = self.timing.heartbeat_s if self.failed_renewals == 0 else self.timing.store_timeout_s

    def _renew(self) -> None:
        try:
            expiry = bounded_call(
                self.manager.heartbeat, self.timing.store_timeout_s, self.lease_id, self.owner
            )
        except LeaseError as exc:
            self._mark_lost(str(exc))
            return
        except Exception as exc:  # store failure or timeout: the known expiry still holds
            self.failed_renewals += 1
            log.warning("deltaguard: lease %s renewal failed: %s", self.lease_id, exc)
            if self.clock() >= self.known_expiry - self.timing.commit_margin_s:
                self._mark_lost(
                    f"not renewed since the store stopped answering, and its expiry is "
                    f"{self.known_expiry - self.clock():.1f} s away"
                )
            return
        with self._lock:
            self.known_expiry = max(self.known_expiry, expiry)
            self.renewals += 1
            self.failed_renewals = 0

    def _mark_lost(self, reason: str) -> None:
        with self._lock:
            if self.lost:
                return
            self.lost_reason = reason
            self._lost.set()
            cancels, self._cancels = self._cancels, []
        log.error("deltaguard: lease %s is lost (%s); the write will not commit", self.lease_id, reason)
        for cancel in cancels:
            _run_cancel(cancel)


def _run_cancel(cancel: Callable[[], None]) -> None:
    try:
        cancel()
    except Exception as exc:  # a failing cancel must not stop the others; the fence still holds
        log.warning("deltaguard: cancelling the write after a lost lease failed: %s", exc)
