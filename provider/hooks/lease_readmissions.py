"""One re-admission per table for all the waiting triggers a release wakes (ADR 0031).

The woken triggers of one event loop that wait on the same table join **one**
:meth:`LeaseManager.readmit <deltaguard.leases.manager.LeaseManager.readmit>` call, which decides the whole
queue of that table in one transaction, and each takes its own answer from the result.

A trigger joins the batch that has not started yet; once a batch has its store slot (and will read the
table), later wake-ups form the next batch, so no trigger takes an answer read before it was woken. A
trigger the batch has no answer for (its request waits on several tables, or was decided elsewhere since)
asks for itself. A batch stops deciding after a third of the store's call timeout in CPU time of the deciding
thread (or twice that in wall-clock time); the waiters it did not reach join the next batch at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from deltaguard.core.admission import Granted, Waiting

if TYPE_CHECKING:
    from deltaguard.config import LeaseSettings
    from deltaguard.leases.manager import LeaseManager
    from deltaguard.leases.readmit import Readmission


T = TypeVar("T")


class PooledCalls(Protocol):
    """What a batch needs of the shared handle (:class:`deltaguard.hooks.lease.SharedStore`, which owns
    the batches, so this module names it by its shape rather than importing it)."""

    settings: LeaseSettings

    def manager(self) -> LeaseManager: ...

    async def call(
        self, fn: Callable[..., T], *args: object, on_start: Callable[[], None] | None = None
    ) -> T: ...


#: how long a batch waits for the rest of a woken crowd to join it before it asks for its store slot; the
#: triggers one notification wakes resume within a few turns of the event loop
GATHER_S = 0.02


class Readmissions:
    """The re-admission batches of one shared store handle.

    :param shared: the handle whose store calls (and slots) the batches use.
    """

    def __init__(self, shared: PooledCalls) -> None:
        self._shared = shared
        self._pending: dict[str, asyncio.Future[Readmission]] = {}
        self._manager: LeaseManager | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        #: batches run (for measurements and tests)
        self.batches = 0

    async def answer(self, uri: str, request_id: str) -> Granted | Waiting | None:
        """The answer for ``request_id`` from the next re-admission of ``uri`` (``None``: it has none).

        :raises StoreError: the batch's store call failed (the caller counts it as a failed check).
        """
        while True:
            future = self._pending.get(uri)
            if future is None:
                loop = asyncio.get_running_loop()
                future = loop.create_future()
                self._pending[uri] = future
                task = loop.create_task(self._run(uri, future), name="deltaguard-readmit")
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            result = await asyncio.shield(future)
            found = result.answers.get(request_id)
            if found is not None or result.complete:
                return found
            # the batch ran out of time before reaching this waiter: the next one goes on from there

    def _lease_manager(self) -> LeaseManager:
        if self._manager is None:
            self._manager = self._shared.manager()
        return self._manager

    async def _run(self, uri: str, future: asyncio.Future[Readmission]) -> None:
        def started() -> None:
            # From here the batch reads the table: a trigger woken later must wait for the next one.
            if self._pending.get(uri) is future:
                del self._pending[uri]

        try:
            await asyncio.sleep(GATHER_S)
            self.batches += 1
            # a third of the store's call timeout, in CPU time (twice that in wall-clock time at most): the
            # batch's transaction ends well within it
            budget = self._shared.settings.timing.store_timeout_s / 3
            answers = await self._shared.call(self._lease_manager().readmit, uri, budget, on_start=started)
        except BaseException as exc:
            started()
            if not future.done():
                future.set_exception(exc)
                future.exception()  # retrieved: every joiner may have been cancelled
            if not isinstance(exc, Exception):
                raise
            return
        future.set_result(answers)
