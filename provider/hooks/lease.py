"""``DeltaLeaseHook``: one task try's connection to the lease store, and the lease calls made through it.

The operator gathers arguments and calls this hook, as Airflow's own providers do with theirs: the hook
owns the :class:`~deltaguard.leases.manager.LeaseManager` (opened once per try with bounded store calls,
closed when the try leaves the ``with`` block or defers) and the acquire, keep (heartbeat and commit
fence, :class:`~deltaguard.leases.keeper.LeaseKeeper`) and release calls. What to do after each
answer is not decided here but by :func:`deltaguard.writes.waiting.next_step`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING

from airflow.sdk import BaseHook

from deltaguard.exceptions import LeaseLostError, RequestClosedError, StoreError
from deltaguard.writes.lease_request import lease_request, new_request_id, task_request_id
from deltaguard.writes.waiting import wait_reason

if TYPE_CHECKING:
    from deltaguard.config import LeaseSettings
    from deltaguard.core.admission import Closed, Granted, Owner, Waiting
    from deltaguard.core.operations import Operation
    from deltaguard.core.profiles import EngineProfile
    from deltaguard.core.table_config import TableConfig
    from deltaguard.leases.keeper import LeaseKeeper
    from deltaguard.leases.manager import LeaseManager


class DeltaLeaseHook(BaseHook):
    """Lease calls for one task try (or one trigger), over one store connection.

    Use as a context manager; the store is opened at the first call and closed on exit.

    :param settings: the lease options read for this try (:func:`deltaguard.config.lease_settings`).
    """

    def __init__(self, settings: LeaseSettings) -> None:
        super().__init__()
        self.settings = settings
        self._manager: LeaseManager | None = None
        #: the lease this hook holds while a write runs, so ``on_kill`` can release it
        self.held: tuple[str, Owner] | None = None
        #: duration estimates learned from the decision log, per table (one log read per try and table)
        self._learned: dict[str, float | None] = {}

    @property
    def manager(self) -> LeaseManager:
        if self._manager is None:
            from deltaguard.leases.manager import LeaseManager
            from deltaguard.leases.open import open_store
            from deltaguard.leases.timing import store_options

            url = self.settings.store_url
            # every store call is bounded, so a frozen store cannot hang the try (ADR 0018)
            store = open_store(url, **store_options(url, self.settings.lease_timing))
            self._manager = LeaseManager(store, retention_s=self.settings.retention_s)
        return self._manager

    def close(self) -> None:
        if self._manager is not None:
            self._manager.store.close()
            self._manager = None

    def __enter__(self) -> DeltaLeaseHook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------------------------------- asking
    def ask(
        self,
        *,
        table_key: str,
        operation: Operation,
        profile: EngineProfile,
        table_config: TableConfig,
        owner: Owner,
        priority: int,
        request_id: str | None,
        expected_duration_s: float | None = None,
    ) -> Granted | Waiting:
        """Ask for the table's lease; asking again with the same ``request_id`` keeps the queue place.

        When the earlier request is over (a lease the trigger granted expired before the task resumed, or
        the request ended), ask once more under a fresh id: the try's derived id names the ended request.

        :param expected_duration_s: how long the write is expected to hold the lease; ``None``: the
            median of the task's recent holds on the table from the decision log, if any (ADR 0024).
        """
        if expected_duration_s is None:
            expected_duration_s = self.learned_duration(owner, table_key)
        request = lease_request(
            table_key=table_key,
            operation=operation,
            profile=profile,
            table_config=table_config,
            owner=owner,
            ttl_s=self.settings.ttl_s,
            poll_interval_s=self.settings.poll_s,
            priority=priority,
            request_id=request_id,
            expected_duration_s=expected_duration_s,
        )
        try:
            return self.manager.acquire(request)
        except (LeaseLostError, RequestClosedError) as exc:
            self.log.info("deltaguard: request %s is over (%s); asking again", request.request_id, exc)
            return self.manager.acquire(dataclasses.replace(request, request_id=new_request_id()))

    def learned_duration(self, owner: Owner, table_key: str) -> float | None:
        """The task's expected hold of the table's lease from the decision log, read once per try.

        A failed read gives ``None`` (a request without an estimate, queued FIFO): an estimate is an
        optimisation, never a reason to fail the task.
        """
        if table_key not in self._learned:
            try:
                self._learned[table_key] = self.manager.learned_duration(owner, table_key)
            except StoreError as exc:
                self.log.info("deltaguard: no duration estimate from the decision log (%s)", exc)
                self._learned[table_key] = None
        return self._learned[table_key]

    def check(self, request_id: str) -> Granted | Waiting | Closed:
        """Re-evaluate a queued request (keeps its queue place alive); for the trigger."""
        return self.manager.check(request_id)

    def first_wait(self, owner: Owner) -> tuple[float | None, list[str], str | None]:
        """When this try first queued, behind whom, and why, from the store's decision log.

        For a task resumed without its deferral kwargs (``dag.test()`` drops them).
        """
        request_id = task_request_id(owner)
        waits = [
            d
            for d in self.manager.decisions(owner=owner, limit=50)
            if d.kind == "wait" and d.request_id == request_id
        ]
        if not waits:
            return None, [], None
        waits.sort(key=lambda d: d.at)
        behind = [b.get("owner", "") for d in waits for b in d.detail.get("blockers", [])]
        detail = waits[0].detail
        reason = wait_reason(
            detail.get("reasons", []), detail.get("exceptions", []), detail.get("advice", [])
        )
        return waits[0].at, [b for b in behind if b], reason or None

    # --------------------------------------------------------------------------------------- holding
    @contextlib.contextmanager
    def holding(self, grant: Granted, owner: Owner) -> Iterator[LeaseKeeper]:
        """Keep the lease while the body runs, then release it (also on failure).

        Yields the :class:`~deltaguard.leases.keeper.LeaseKeeper`: it renews the lease in a background
        thread and is the engine's commit fence (pass it as ``WriteContext.fence``). The engine checks it
        right before committing and fails with ``CommitFencedError`` instead of committing once the lease is
        lost; engine work registered with its ``on_lost`` is cancelled as soon as the loss is known
        (ADR 0018).
        """
        from deltaguard.leases.keeper import LeaseKeeper

        keeper = LeaseKeeper(
            self.manager,
            grant.lease_id,
            owner,
            expires_at=grant.expires_at,
            fencing=grant.fencing,
            timing=self.settings.lease_timing,
        )
        self.held = (grant.lease_id, owner)
        try:
            with keeper:
                yield keeper
        finally:
            if keeper.lost:
                self.log.warning("deltaguard: lease %s was lost: %s", grant.lease_id, keeper.lost_reason)
            elif keeper.failed_renewals:
                self.log.warning(
                    "deltaguard: the lease was not renewed %d time(s) in a row at the end of the write",
                    keeper.failed_renewals,
                )
            self.held = None
            self.release(grant.lease_id, owner)

    def release(self, lease_id: str, owner: Owner) -> None:
        """Release a lease or withdraw a queued request; a failure is logged, not raised.

        A failing release must not hide the write's own outcome; the lease then expires after its TTL.
        """
        try:
            self.manager.release(lease_id, owner)
        except Exception as exc:
            self.log.warning(
                "deltaguard: could not release %s (%s); it expires after %.0f s",
                lease_id,
                exc,
                self.settings.ttl_s,
            )

    def withdraw(self, owner: Owner, request_id: str | None) -> None:
        """Withdraw this try's queued request(s): the one named and the try's derived one."""
        for rid in dict.fromkeys([request_id, task_request_id(owner)]):
            if rid:
                self.release(rid, owner)

    def release_held(self) -> None:
        """Release the lease held during a write (for ``on_kill``)."""
        held = self.held
        if held is not None:
            self.release(*held)
            self.log.info("deltaguard: released lease %s on kill", held[0])
