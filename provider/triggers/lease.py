"""A trigger that waits, in the triggerer, until a queued lease request can be granted.

The trigger asks :meth:`LeaseManager.check <deltaguard.leases.manager.LeaseManager.check>`, which
re-evaluates the waiting request (and keeps its queue place alive); what follows each answer is
:func:`deltaguard.leases.waiting.next_step`'s, as for the task. Every trigger of a triggerer shares one store
handle per store (:mod:`deltaguard.hooks.lease`, a bounded pool); the blocking store call runs in a
worker thread so the event loop never stalls. On PostgreSQL a release of a blocker wakes the trigger at once
through LISTEN/NOTIFY and the poll slows to a safety net; on SQLite it polls every ``poll_interval``
(ADR 0025). With ``early_wake`` (off by default), when every blocker is a granted lease expected to leave
within :data:`~deltaguard.leases.imminent.WAKE_LEAD_S` (ADR 0024 estimates) and a worker slot is free of
lease holders, the trigger fires an ``imminent`` event so the task is back in its worker, waiting there, when
the release comes (:mod:`deltaguard.leases.imminent`).
The event is only a hint: the resumed task asks the lease manager again with the same request id and may
defer again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from deltaguard.core.admission import Closed, Granted, Waiting
from deltaguard.leases.imminent import expected_wait_in, wake_in_s, worker_slot_free
from deltaguard.leases.waiting import Sleep, next_step
from deltaguard.triggers.first_event import hold_until, not_before
from deltaguard.triggers.wake import wait_woken

if TYPE_CHECKING:
    from deltaguard.hooks.lease import SharedStore
    from deltaguard.leases.manager import LeaseManager

#: after this many consecutive store failures the trigger hands control back to the task, which then
#: fails loudly (fail closed) or re-defers
MAX_CONSECUTIVE_ERRORS = 5
#: with a LISTEN connection up, a waiting trigger still checks every this many poll intervals: for a holder
#: whose lease expired (no notification) and for a notification the connection lost (ADR 0025)
NOTIFY_POLL_POLLS = 6


class LeaseAvailableTrigger(BaseTrigger):
    """Fire when a queued lease request is granted (or its queue entry is gone).

    :param store_url: the lease store URL (as the task used it). Only its password-free reference is
        kept and serialized; the triggerer takes the password from its own configuration
        (:func:`~deltaguard.config.resolve_store_reference`).
    :param request_id: the queued request.
    :param poll_interval: seconds between checks.
    :param first_event_after_s: seconds from the trigger's start to its first check, at least a poll
        interval (:func:`deltaguard.leases.waiting.first_event_after_s`; ``None``: from the triggerer's
        configuration).
    :param early_wake: fire an ``imminent`` event ahead of an expected release
        (:mod:`deltaguard.leases.imminent`). Off by default: measured, the writes it woke outnumbered the free
        worker slots and waited in the scheduler with nobody asking for their requests (docs/benchmarks.md,
        "Sweep with the early wake").
    """

    def __init__(
        self,
        store_url: str,
        request_id: str,
        poll_interval: float = 5.0,
        early_wake: bool = False,
        first_event_after_s: float | None = None,
    ) -> None:
        from deltaguard.leases.store_location import store_reference

        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's BaseTrigger.__init__ is unannotated
        self.store_url = store_reference(store_url)
        self.request_id = request_id
        self.poll_interval = float(poll_interval)
        self.early_wake = bool(early_wake)
        self.first_event_after_s = None if first_event_after_s is None else float(first_event_after_s)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "store_url": self.store_url,
                "request_id": self.request_id,
                "poll_interval": self.poll_interval,
                "early_wake": self.early_wake,
                "first_event_after_s": self.first_event_after_s,
            },
        )

    def _event(self, answer: Granted | Closed) -> dict[str, Any]:
        if isinstance(answer, Granted):
            return {"status": "granted", "request_id": self.request_id, "lease_id": answer.lease_id}
        return {"status": "closed", "request_id": self.request_id, "message": f"request is {answer.status}"}

    def _imminent_event(self, expected_s: float) -> dict[str, Any]:
        return {"status": "imminent", "request_id": self.request_id, "expected_wait_s": round(expected_s, 1)}

    async def _expected_wait(
        self, shared: SharedStore, manager: LeaseManager, answer: Waiting
    ) -> float | None:
        """Seconds until the answer's blockers are expected to leave, ``None`` when unforeseeable or unread (an
        optimisation only: the trigger then waits as without it)."""
        try:
            return await shared.call(expected_wait_in, manager, answer.blockers)
        except Exception:  # the estimate never decides a grant; a failed read means "no early wake"
            return None

    async def _slot_free(self, shared: SharedStore, manager: LeaseManager) -> bool:
        """Whether a worker slot is free for an early wake (:func:`~deltaguard.leases.imminent.worker_slot_free`)."""
        try:
            return await shared.call(worker_slot_free, manager)
        except Exception:  # no early wake: the write waits as without it
            return False

    def _next_wait(self, shared: SharedStore, answer: Waiting, seconds: float) -> float:
        """How long to wait before the next check when nothing wakes the trigger.

        Without a listening connection (SQLite, or the listener is down): the poll interval. With one, a
        release wakes the trigger, so it only polls for what sends no notification (an expired holder) or
        what a dropped connection lost: every :data:`NOTIFY_POLL_POLLS` poll intervals, and always within a
        third of what is left of its queue entry's life, so the entry is renewed in time.
        """
        if shared.listener is None or not shared.listener.connected:
            return seconds
        left = answer.expires_at - time.time()
        return max(seconds, min(NOTIFY_POLL_POLLS * seconds, left / 3))

    async def run(self) -> AsyncIterator[TriggerEvent]:
        # The store handle is given back before the event is yielded: the triggerer may close this
        # generator late, or never, once it has the event.
        payload = await self._wait()
        yield TriggerEvent(payload)  # type: ignore[no-untyped-call]  # unannotated in Airflow

    async def _wait(self) -> dict[str, Any]:
        """Wait until the request is granted or closed (or the store keeps failing); return the payload."""
        from deltaguard import config
        from deltaguard.hooks.lease import DeltaLeaseHook

        entered = time.monotonic()
        errors = 0
        woken = asyncio.Event()
        # No check, so no event, before the deferring task's exit has reached the scheduler (an event
        # ahead of it fails the task: first_event.py); at least one poll interval, as between checks.
        await hold_until(max(await not_before(self.first_event_after_s), entered + self.poll_interval))
        async with contextlib.AsyncExitStack() as stack:
            shared: SharedStore | None = None
            manager: LeaseManager | None = None
            # the table whose re-admission answers the next check (woken by a release there), else None
            crowd_uri: str | None = None
            while True:
                started = time.monotonic()
                try:
                    if shared is None:
                        # the reference carries no password; the triggerer's own configuration has it
                        url = await asyncio.to_thread(config.resolve_store_reference, self.store_url)
                        settings = await asyncio.to_thread(config.lease_settings, url, deferrable=False)
                        shared = await stack.enter_async_context(DeltaLeaseHook.pooled(url, settings))
                        manager = shared.manager()
                        if shared.listener is not None:
                            stack.callback(shared.listener.unwatch, woken)
                    assert manager is not None
                    found: Granted | Waiting | Closed | None = None
                    if crowd_uri is not None:
                        # one decision of the table's whole queue for every waiter this release woke
                        found = await shared.readmissions().answer(crowd_uri, self.request_id)
                        crowd_uri = None
                    # not `found or ...`: mypy would type the call from `found`, None included
                    answer = found if found is not None else await shared.call(manager.check, self.request_id)
                    errors = 0
                except Exception as exc:
                    errors += 1
                    self.log.warning("deltaguard: lease store check failed (%d): %s", errors, exc)
                    if errors >= MAX_CONSECUTIVE_ERRORS:
                        return {"status": "error", "request_id": self.request_id, "message": str(exc)}
                    await asyncio.sleep(self.poll_interval)
                    continue
                # A closed request also ends the wait here: the task then asks anew. The task's own deferral
                # timeout bounds the wait, so the trigger has none.
                step = next_step(
                    admitted=not isinstance(answer, Waiting),
                    waited_s=0.0,
                    timeout_s=None,
                    poll_s=self.poll_interval,
                    deferrable=False,
                )
                match step:
                    case Sleep(seconds=seconds):
                        assert isinstance(answer, Waiting)
                        expected = (
                            await self._expected_wait(shared, manager, answer) if self.early_wake else None
                        )
                        wake = wake_in_s(expected)
                        if expected is not None and wake == 0.0:
                            if await self._slot_free(shared, manager):
                                # back in the worker before the release: it waits there (imminent)
                                return self._imminent_event(expected)
                            wake = seconds  # every slot holds a lease: look again in a poll interval
                        woken.clear()
                        if shared.listener is not None:
                            # wake when one of the blockers leaves; a release elsewhere on the table
                            # cannot admit this request while they stay
                            shared.listener.watch(woken, {b.id for b in answer.blockers}, since=started)
                        timeout = self._next_wait(shared, answer, seconds)
                        if wake is not None:
                            timeout = min(timeout, wake)  # a timed check when the early wake is due
                        # not asyncio.wait_for: on Python 3.11 it can swallow the triggerer's cancellation
                        await wait_woken(woken, timeout)
                        tables = {b.table for b in answer.blockers}
                        # a slot wait is decided by its own check: the released table's queue is not its own
                        slot = any(b.kind == "slot" for b in answer.blockers)
                        if woken.is_set() and len(tables) == 1 and not slot:
                            # Woken by a release: the waiters it woke on that table share one decision.
                            # A poll that timed out checks alone (and so renews the queue entry).
                            crowd_uri = tables.pop()
                    case _:
                        assert not isinstance(answer, Waiting)
                        return self._event(answer)
