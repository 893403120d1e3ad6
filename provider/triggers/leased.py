"""A trigger that runs a wrapped operator's own trigger and keeps its deltaguard lease alive meanwhile.

A leased wrapper (:class:`~deltaguard.operators.leased.DeltaLeasedOperator`) around an operator that
defers - ``DatabricksSubmitRunOperator(deferrable=True)`` waits for a job run in the triggerer for hours - must
not lose its lease while no worker runs the task, and must not keep it once the task is over:

* the wrapped trigger runs as it would alone; its first event is passed on to the task (under ``event``),
  which takes the lease back, resumes the wrapped operator and releases the lease when it ends;
* beside it, the lease is renewed every ``heartbeat_s`` through
  :meth:`DeltaLeaseHook.resume_held <deltaguard.hooks.lease.DeltaLeaseHook>`'s store (blocking store calls
  run in a worker thread, so the triggerer's event loop never stalls); a lease found lost is reported in
  the event (``lease_lost``), since the wrapped work cannot be stopped from here;
* a user ending the deferred task (mark failed/success, clear) reaches :meth:`on_kill`: the wrapped
  trigger's ``on_kill`` runs, then the lease is released. An event that ends the task directly
  (``TaskSuccessEvent`` and its kin) releases the lease before it is passed on. A triggerer restart or
  move only cancels the trigger (Airflow runs it again elsewhere), so nothing is released then; a task that
  never comes back (its triggerer gone for good) leaves the lease to expire after its TTL.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTaskEndEvent, BaseTrigger, TriggerEvent

from deltaguard.triggers.first_event import hold_until, not_before

if TYPE_CHECKING:
    from deltaguard.core.admission import Owner
    from deltaguard.hooks.lease import DeltaLeaseHook


class LeaseKeepingTrigger(BaseTrigger):
    """Run ``inner`` and renew lease ``lease_id`` until ``inner`` fires.

    :param inner_classpath: the wrapped trigger's class path (from its ``serialize()``).
    :param inner_kwargs: the wrapped trigger's keyword arguments (from its ``serialize()``).
    :param store_url: the lease store URL; only its password-free reference is kept
        (:func:`~deltaguard.config.resolve_store_reference` restores it in the triggerer).
    :param lease_id: the lease to keep.
    :param owner: the lease owner's fields (:class:`~deltaguard.core.admission.Owner` as a dict).
    :param heartbeat_s: seconds between renewals.
    :param first_event_after_s: seconds from the trigger's start before it may resume the task
        (:func:`deltaguard.leases.waiting.first_event_after_s`; ``None``: from the triggerer's configuration).
    """

    def __init__(
        self,
        inner_classpath: str,
        inner_kwargs: dict[str, Any],
        store_url: str,
        lease_id: str,
        owner: dict[str, Any],
        heartbeat_s: float,
        first_event_after_s: float | None = None,
    ) -> None:
        from deltaguard.leases.store_location import store_reference

        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's BaseTrigger.__init__ is unannotated
        self.inner_classpath = inner_classpath
        self.inner_kwargs = dict(inner_kwargs)
        self.store_url = store_reference(store_url)
        self.lease_id = lease_id
        self.owner = dict(owner)
        self.heartbeat_s = float(heartbeat_s)
        self.first_event_after_s = None if first_event_after_s is None else float(first_event_after_s)
        self._inner: BaseTrigger | None = None
        self._leases: DeltaLeaseHook | None = None
        self.lost: str | None = None

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "inner_classpath": self.inner_classpath,
                "inner_kwargs": self.inner_kwargs,
                "store_url": self.store_url,
                "lease_id": self.lease_id,
                "owner": self.owner,
                "heartbeat_s": self.heartbeat_s,
                "first_event_after_s": self.first_event_after_s,
            },
        )

    @property
    def inner(self) -> BaseTrigger:
        """The wrapped trigger, built from its serialized form (as the triggerer would build it)."""
        if self._inner is None:
            # the public path; the module re-exports it from airflow.sdk._shared without an __all__
            from airflow.sdk.module_loading import import_string  # type: ignore[attr-defined]

            inner = import_string(self.inner_classpath)(**self.inner_kwargs)
            # the wrapped trigger may read its task instance (``self.task_instance``), as when alone
            with contextlib.suppress(Exception):
                inner.task_instance = self.task_instance
            self._inner = inner
        return self._inner

    def _owner(self) -> Owner:
        from deltaguard.core.admission import Owner

        return Owner(**self.owner)

    async def _hook(self) -> DeltaLeaseHook:
        if self._leases is None:
            from deltaguard import config
            from deltaguard.hooks.lease import DeltaLeaseHook

            url = await asyncio.to_thread(config.resolve_store_reference, self.store_url)
            self._leases = DeltaLeaseHook(config.lease_settings(url, deferrable=False))
        return self._leases

    async def _renew_forever(self) -> None:
        """Renew the lease every ``heartbeat_s`` until cancelled or the lease is lost."""
        from deltaguard.exceptions import LeaseError

        owner = self._owner()
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                leases = await self._hook()
                await asyncio.to_thread(leases.manager.heartbeat, self.lease_id, owner)
            except LeaseError as exc:
                self.lost = str(exc)
                self.log.error("deltaguard: lease %s is lost while deferred: %s", self.lease_id, exc)
                return
            except Exception as exc:  # a store failure: the lease lives until its TTL, try again
                self.log.warning("deltaguard: renewing lease %s failed: %s", self.lease_id, exc)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        fire_from = await not_before(self.first_event_after_s)
        renewer = asyncio.create_task(self._renew_forever())
        try:
            async for event in self.inner.run():
                if isinstance(event, BaseTaskEndEvent):
                    # the wrapped trigger ends the task itself (TaskSuccessEvent, ...): no task resumes
                    # to release the lease, so release it here first
                    await self._release()
                    yield event
                    return
                # the task resumes: not before its deferring exit has reached the scheduler (first_event.py)
                await hold_until(fire_from)
                yield TriggerEvent(  # type: ignore[no-untyped-call]  # unannotated in Airflow
                    {"event": event.payload, "lease_lost": self.lost, "lease_id": self.lease_id}
                )
                return
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await renewer

    async def _release(self) -> None:
        try:
            leases = await self._hook()
            await asyncio.to_thread(leases.release, self.lease_id, self._owner())
        except Exception as exc:  # the lease then expires after its TTL
            self.log.warning("deltaguard: could not release lease %s: %s", self.lease_id, exc)

    async def on_kill(self) -> None:
        """The user ended the deferred task: stop the wrapped work (its own ``on_kill``), release the lease."""
        try:
            await self.inner.on_kill()
        finally:
            await self._release()
            self.log.info("deltaguard: released lease %s: the task was ended while deferred", self.lease_id)

    async def cleanup(self) -> None:
        try:
            await self.inner.cleanup()
        finally:
            if self._leases is not None:
                leases, self._leases = self._leases, None
                await asyncio.to_thread(leases.close)
