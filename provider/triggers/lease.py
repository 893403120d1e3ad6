"""A trigger that waits, in the triggerer, until a queued lease request can be granted.

The lease store is polled through :meth:`DeltaLeaseHook.check <deltaguard.hooks.lease.DeltaLeaseHook.check>`,
which re-evaluates the waiting request (and keeps its queue place alive); what follows each answer is
:func:`deltaguard.writes.waiting.next_step`'s, as for the task. The blocking store call runs in a
worker thread so the triggerer's event loop never stalls. The event is only a hint: the resumed task asks
the lease manager again with the same request id and may defer again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from deltaguard.core.admission import Closed, Granted, Waiting
from deltaguard.writes.waiting import Sleep, next_step

if TYPE_CHECKING:
    from deltaguard.hooks.lease import DeltaLeaseHook

#: after this many consecutive store failures the trigger hands control back to the task, which then
#: fails loudly (fail closed) or re-defers
MAX_CONSECUTIVE_ERRORS = 5


class LeaseAvailableTrigger(BaseTrigger):
    """Fire when a queued lease request is granted (or its queue entry is gone).

    :param store_url: the lease store URL (as the task used it). Only its password-free reference is
        kept and serialized; the triggerer takes the password from its own configuration
        (:func:`~deltaguard.config.resolve_store_reference`).
    :param request_id: the queued request.
    :param poll_interval: seconds between checks.
    """

    def __init__(self, store_url: str, request_id: str, poll_interval: float = 5.0) -> None:
        from deltaguard.leases.store_location import store_reference

        super().__init__()
        self.store_url = store_reference(store_url)
        self.request_id = request_id
        self.poll_interval = float(poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"store_url": self.store_url, "request_id": self.request_id, "poll_interval": self.poll_interval},
        )

    def _event(self, answer: Granted | Closed) -> dict[str, Any]:
        if isinstance(answer, Granted):
            return {"status": "granted", "request_id": self.request_id, "lease_id": answer.lease_id}
        return {"status": "closed", "request_id": self.request_id, "message": f"request is {answer.status}"}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from deltaguard import config
        from deltaguard.hooks.lease import DeltaLeaseHook

        leases: DeltaLeaseHook | None = None
        errors = 0
        try:
            # Wait one interval before the first check. An event fired at once (the blocker finished
            # while the task was deferring) lets the scheduler re-queue the task before it has processed
            # the deferring worker's exit; Airflow 3.3's LocalExecutor then drops the new run from its
            # running set and the scheduler fails the task ("finished with state success, but the task
            # instance's state attribute is queued"). Seen under the real scheduler on a loaded machine.
            await asyncio.sleep(self.poll_interval)
            while True:
                try:
                    if leases is None:
                        # the reference carries no password; the triggerer's own configuration has it
                        url = await asyncio.to_thread(config.resolve_store_reference, self.store_url)
                        leases = DeltaLeaseHook(config.lease_settings(url, deferrable=False))
                    answer = await asyncio.to_thread(leases.check, self.request_id)
                    errors = 0
                except Exception as exc:
                    errors += 1
                    self.log.warning("deltaguard: lease store check failed (%d): %s", errors, exc)
                    if errors >= MAX_CONSECUTIVE_ERRORS:
                        yield TriggerEvent(
                            {"status": "error", "request_id": self.request_id, "message": str(exc)}
                        )
                        return
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
                        await asyncio.sleep(seconds)
                    case _:
                        assert not isinstance(answer, Waiting)
                        yield TriggerEvent(self._event(answer))
                        return
        finally:
            if leases is not None:
                leases.close()
