"""A trigger that waits, in the triggerer, until a queued lease request can be granted.

The lease store is polled with :meth:`LeaseManager.check <deltaguard.leases.manager.LeaseManager.check>`,
which re-evaluates the waiting request (and keeps its queue place alive). The blocking store call runs in a
worker thread so the triggerer's event loop never stalls. The event is only a hint: the resumed task asks
the lease manager again with the same request id and may defer again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

#: after this many consecutive store failures the trigger hands control back to the task, which then
#: fails loudly (fail closed) or re-defers
MAX_CONSECUTIVE_ERRORS = 5


class LeaseAvailableTrigger(BaseTrigger):
    """Fire when a queued lease request is granted (or its queue entry is gone).

    :param store_url: the lease store URL (as the task used it). Only its password-free reference is
        kept and serialized; the triggerer takes the password from its own configuration
        (:func:`~deltaguard.leases.store_location.resolve_store_reference`).
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

    def _check(self, manager: Any) -> dict[str, Any] | None:
        from deltaguard.core.admission import Granted, Waiting

        result = manager.check(self.request_id)
        if isinstance(result, Waiting):
            return None
        if isinstance(result, Granted):
            return {"status": "granted", "request_id": self.request_id, "lease_id": result.lease_id}
        return {"status": "closed", "request_id": self.request_id, "message": f"request is {result.status}"}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from deltaguard.leases.manager import LeaseManager
        from deltaguard.leases.store_location import resolve_store_reference

        manager: Any = None
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
                    if manager is None:
                        url = await asyncio.to_thread(resolve_store_reference, self.store_url)
                        manager = await asyncio.to_thread(LeaseManager, url)
                    event = await asyncio.to_thread(self._check, manager)
                    errors = 0
                except Exception as exc:
                    errors += 1
                    self.log.warning("deltaguard: lease store check failed (%d): %s", errors, exc)
                    if errors >= MAX_CONSECUTIVE_ERRORS:
                        yield TriggerEvent(
                            {"status": "error", "request_id": self.request_id, "message": str(exc)}
                        )
                        return
                    event = None
                if event is not None:
                    yield TriggerEvent(event)
                    return
                await asyncio.sleep(self.poll_interval)
        finally:
            if manager is not None:
                manager.store.close()
