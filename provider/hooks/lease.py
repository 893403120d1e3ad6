"""``DeltaLeaseHook``: one task try's connection to the lease store, and the lease calls made through it.

The operator gathers arguments and calls this hook, as Airflow's own providers do with theirs: the hook
owns the :class:`~deltaguard.leases.manager.LeaseManager` (opened once per try with bounded store calls,
closed when the try leaves the ``with`` block or defers) and a try's plumbing: the acquire, keep (heartbeat
and commit fence, :class:`~deltaguard.leases.keeper.LeaseKeeper`) and release calls, the wait restored from
the decision log, the write context a commit carries and the pinned snapshot a write reads. What to do
after each answer is not decided here but by :func:`deltaguard.leases.waiting.next_step`.

The triggerer shares one store per URL between its triggers instead (:meth:`DeltaLeaseHook.pooled`,
:mod:`deltaguard.hooks.lease_pool`): a hook per waiting trigger would hold a connection each.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from deltaguard.core.durations import write_duration
from deltaguard.exceptions import (
    LeaseLostError,
    LeaseWaitTimeout,
    RequestClosedError,
    StoreError,
    StoreUnavailableError,
)
from deltaguard.leases.imminent import process_age_s
from deltaguard.leases.requests import claims_request, lease_request, new_request_id, task_request_id
from deltaguard.leases.waiting import Defer, Proceed, Sleep, TimeOut, WaitState, next_step, wait_reason

if TYPE_CHECKING:
    from deltaguard.config import LeaseSettings
    from deltaguard.core.admission import Closed, Granted, Owner, TableClaim, Waiting
    from deltaguard.core.operations import Operation
    from deltaguard.core.profiles import EngineProfile
    from deltaguard.core.table_config import TableConfig
    from deltaguard.engines.specs import WriteContext
    from deltaguard.hooks.lease_pool import SharedStore
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
            from deltaguard import config
            from deltaguard.engines.fencing import default_remote_fence
            from deltaguard.engines.sources import attach_oracle
            from deltaguard.leases.bounded import open_bounded_store
            from deltaguard.leases.manager import LeaseManager

            # every store call (the opening too) returns or fails within store_timeout, so a frozen store
            # cannot hang the try (ADR 0018)
            store = open_bounded_store(self.settings.store_url, self.settings.lease_timing)
            # expired leases of Spark Connect work are fenced before they are reclaimed (ADR 0033)
            # a waiting request decided again from the store is judged with the engine's evaluator (ADR 0037)
            self._manager = LeaseManager(
                store,
                retention_s=self.settings.retention_s,
                remote_fence=default_remote_fence(),
                oracle_loader=attach_oracle,
                # the slot gate (ADR 0028) only for a task that gives its slot up while it waits
                worker_slots=config.worker_slots() if self.settings.deferrable else None,
            )
        return self._manager

    def close(self) -> None:
        if self._manager is not None:
            self._manager.store.close()
            self._manager = None

    def __enter__(self) -> DeltaLeaseHook:
        return self

    @staticmethod
    def pooled(url: str, settings: LeaseSettings) -> contextlib.AbstractAsyncContextManager[SharedStore]:
        """The triggerer's mode: the store for ``url`` shared by every trigger of the event loop, its calls
        run in worker threads over a bounded pool (:func:`deltaguard.hooks.lease_pool.shared_store`)."""
        from deltaguard.hooks.lease_pool import shared_store

        return shared_store(url, settings)

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
        read_version: int | None = None,
    ) -> Granted | Waiting:
        """Ask for the table's lease; asking again with the same ``request_id`` keeps the queue place.

        When the earlier request is over (a lease the trigger granted expired before the task resumed, or
        the request ended), ask once more under a fresh id: the try's derived id names the ended request.

        :param expected_duration_s: how long the write is expected to hold the lease; ``None``: the
            median of the task's recent holds on the table from the decision log, if any (ADR 0024).
        :param read_version: the version the write pins (``table_config`` then carries that snapshot's file
            statistics, ADR 0020); ``None``: not pinned.
        """
        expected_duration_s = write_duration(
            expected_duration_s, lambda: self.learned_duration(owner, table_key)
        ).seconds
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
            read_version=read_version,
        )
        try:
            return self.manager.acquire(request)
        except (LeaseLostError, RequestClosedError) as exc:
            self.log.info("deltaguard: request %s is over (%s); asking again", request.request_id, exc)
            return self.manager.acquire(dataclasses.replace(request, request_id=new_request_id()))

    def ask_claims(
        self,
        *,
        claims: Sequence[TableClaim],
        owner: Owner,
        priority: int,
        request_id: str | None,
        ttl_s: float | None = None,
    ) -> Granted | Waiting:
        """Ask for one lease over several tables (granted for all of them or for none), as :meth:`ask`.

        :param ttl_s: the lease's time-to-live (default ``lease_ttl``); an unfenced holder asks for a longer
            one (ADR 0021).
        """
        request = claims_request(
            claims=claims,
            owner=owner,
            ttl_s=ttl_s or self.settings.ttl_s,
            poll_interval_s=self.settings.poll_s,
            priority=priority,
            request_id=request_id,
        )
        try:
            return self.manager.acquire(request)
        except (LeaseLostError, RequestClosedError) as exc:
            self.log.info("deltaguard: request %s is over (%s); asking again", request.request_id, exc)
            return self.manager.acquire(dataclasses.replace(request, request_id=new_request_id()))

    def wait_for_grant(
        self,
        ask: Callable[[str | None], Granted | Waiting],
        *,
        owner: Owner,
        wait: WaitState,
        timeout_s: float | None,
        defer: Callable[[float | None], Any],
        what: str,
        log: Any = None,
    ) -> Granted:
        """Ask until :func:`~deltaguard.leases.waiting.next_step` says to write; return the grant.

        The one waiting loop of every task that takes a lease (the write operators and the leased
        wrappers): it logs the conflict model's first reason, sleeps or defers as the rule says, and on
        time-out withdraws the queued request before failing.

        :param ask: asks the lease manager once, given the request id to keep (``None`` at first).
        :param owner: the task instance try.
        :param wait: the try's wait so far (updated in place).
        :param timeout_s: the task's ``lease_wait_timeout`` (``None``: no limit of its own).
        :param defer: moves the wait to the triggerer, given the time left; it raises ``TaskDeferred``.
        :param what: the table(s) waited for, for the time-out message.
        :param log: the logger for the wait's reason (the task's own; default: this hook's).
        :raises LeaseWaitTimeout: when the wait outlasted ``timeout_s``.
        """
        from deltaguard.core.admission import Granted, explain

        logger = log or self.log
        # what this process's start cost before its first question: a deferral costs at least that again
        startup_s = process_age_s(time.time())
        while True:
            answer = ask(wait.request_id)
            wait.request_id = answer.request_id
            if not isinstance(answer, Granted) and wait.note(answer):
                logger.info("deltaguard: %s", explain(answer))
            step = next_step(
                admitted=isinstance(answer, Granted),
                waited_s=wait.waited_s(),
                timeout_s=timeout_s,
                poll_s=self.settings.poll_s,
                deferrable=self.settings.deferrable,
                imminent=not isinstance(answer, Granted) and self._imminent(answer, startup_s),
            )
            match step:
                case Proceed():
                    assert isinstance(answer, Granted)
                    return answer
                case TimeOut(waited_s=waited_s):
                    self.release(answer.request_id, owner)  # withdraw from the queue
                    assert timeout_s is not None
                    raise LeaseWaitTimeout(
                        f"waited {waited_s:.0f} s for the lease on {what} (lease_wait_timeout="
                        f"{timeout_s:.0f} s): {wait.explanation}"
                    )
                case Defer(timeout_s=left):
                    defer(left)
                case Sleep(seconds=seconds):
                    time.sleep(seconds)

    def _imminent(self, answer: Waiting, startup_s: float | None = None) -> bool:
        """Whether the answer's blockers are expected to leave sooner than a deferral would bring the task
        back (ADR 0024 estimates): the write then waits in the worker instead of deferring
        (:mod:`deltaguard.leases.imminent`).

        :param startup_s: what this task's own start cost before its first question (``None``: unknown).
        """
        from deltaguard.leases.imminent import (
            expected_wait_s,
            imminent_limit_s,
            is_imminent,
            lease_end_reader,
        )

        manager = self.manager
        wait = expected_wait_s(answer.blockers, lease_end_reader(manager), manager.clock())
        return is_imminent(wait, imminent_limit_s(startup_s))

    def learned_duration(self, owner: Owner, table_key: str) -> float | None:
        """The task's expected hold of the table's lease from the decision log, read once per try.

        A failed read gives ``None`` (a request without an estimate, queued FIFO): an estimate is an
        optimisation, never a reason to fail the task. A store that is unavailable (it did not answer
        within ``store_timeout``, or could not be opened) is the exception: the request would meet the
        same store and fail too, so the ask fails now, within one timeout. Opening a PostgreSQL store
        on a frozen server fails with libpq's ``connect_timeout``, which equals ``store_timeout`` and so
        may end a moment before the call's own bound: caught here, the request then opened the store
        a second time and the ask took two timeouts.
        """
        if table_key not in self._learned:
            try:
                self._learned[table_key] = self.manager.learned_duration(owner, table_key)
            except StoreUnavailableError:
                raise
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

    def restore_wait(self, owner: Owner, wait: WaitState) -> None:
        """Fill ``wait`` from the decision log, for a try resumed without its deferral kwargs."""
        started, behind, explanation = self.first_wait(owner)
        wait.started = started or time.time()
        wait.behind[:0] = behind
        wait.explanation = wait.explanation or explanation

    # ---------------------------------------------------------------------------------------- writing
    def write_context(
        self,
        grant: Granted,
        *,
        app_id: str | None,
        app_version: int | None,
        dag_id: str,
        run_id: str,
        task_id: str,
        try_number: int | None,
        map_index: int | None,
    ) -> WriteContext:
        """The context of a write under ``grant``: its app transaction, and commit metadata naming the task
        try, the lease and its fencing tokens (ADR 0018); the commit fence is :meth:`holding`'s keeper.

        :param app_id: the app transaction id (``None``: not idempotent).
        :param app_version: the app transaction version.
        """
        from deltaguard.engines.specs import WriteContext
        from deltaguard.writes.prepared import commit_metadata

        return WriteContext(
            app_id=app_id,
            app_version=app_version,
            commit_metadata=commit_metadata(
                dag_id=dag_id,
                run_id=run_id,
                task_id=task_id,
                try_number=try_number,
                map_index=map_index,
                lease_id=grant.lease_id,
                extra={"lease_fencing": json.dumps(dict(grant.fencing or {}), sort_keys=True)},
            ),
        )

    def pinned_snapshot(
        self,
        engine: Any,
        *,
        uri: str,
        table_key: str,
        operation: Operation,
        profile: EngineProfile,
        owner: Owner,
        lease_id: str,
        prepared: Any = None,
        prepared_config: TableConfig | None = None,
    ) -> Any:
        """The snapshot a write judged by file statistics must commit from (ADR 0020), or ``None``
        (:func:`deltaguard.engines.sources.pinned_snapshot`, with the handle and configuration the
        write was prepared from)."""
        from deltaguard.engines.sources import pinned_snapshot

        return pinned_snapshot(
            self.manager,
            engine,
            uri=uri,
            table_key=table_key,
            operation=operation,
            profile=profile,
            owner=owner,
            lease_id=lease_id,
            prepared=prepared,
            prepared_config=prepared_config,
        )

    # --------------------------------------------------------------------------------------- holding
    @contextlib.contextmanager
    def holding(
        self,
        grant: Granted,
        owner: Owner,
        hand_over_on: tuple[type[BaseException], ...] = (),
        fenced: bool = True,
    ) -> Iterator[LeaseKeeper]:
        """Keep the lease while the body runs, then release it (also on failure).

        Yields the :class:`~deltaguard.leases.keeper.LeaseKeeper`: it renews the lease in a background
        thread and is the engine's commit fence (pass it as ``WriteContext.fence``). The engine checks it
        right before committing and fails with ``CommitFencedError`` instead of committing once the lease is
        lost; engine work registered with its ``on_lost`` is cancelled as soon as the loss is known
        (ADR 0018).

        :param hand_over_on: exceptions that end the body without ending the lease: the heartbeats stop
            and the lease stays granted, for a trigger to renew (a wrapped operator that defers raises
            ``TaskDeferred``). Anything else, and a normal exit, releases it.
        :param fenced: the body's commit checks the keeper; ``False`` for wrapped work (only the log of a
            lost lease differs: it says the work may commit outside the lease).
        """
        from deltaguard.leases.keeper import LeaseKeeper

        keeper = LeaseKeeper(
            self.manager,
            grant.lease_id,
            owner,
            expires_at=grant.expires_at,
            fencing=grant.fencing,
            timing=self.settings.lease_timing,
            fenced=fenced,
        )
        self.held = (grant.lease_id, owner)
        handed_over = False
        try:
            with keeper:
                try:
                    yield keeper
                except hand_over_on:
                    handed_over = not keeper.lost
                    raise
        finally:
            if keeper.lost:
                self.log.warning("deltaguard: lease %s was lost: %s", grant.lease_id, keeper.lost_reason)
            elif keeper.failed_renewals:
                self.log.warning(
                    "deltaguard: the lease was not renewed %d time(s) in a row at the end of the write",
                    keeper.failed_renewals,
                )
            self.held = None
            if handed_over:
                self.log.info("deltaguard: lease %s stays held while the task is deferred", grant.lease_id)
            else:
                self.release(grant.lease_id, owner)

    def resume_held(self, lease_id: str, owner: Owner) -> Granted | None:
        """Take back a lease a trigger kept alive while the task was deferred; ``None`` when it is gone.

        Renews it once (which proves it is still this owner's) and reads its fencing tokens, so
        :meth:`holding` can keep it again.
        """
        from deltaguard.core.admission import Granted
        from deltaguard.exceptions import LeaseError

        try:
            expires_at = self.manager.heartbeat(lease_id, owner)
        except LeaseError as exc:
            self.log.warning("deltaguard: lease %s was lost while the task was deferred: %s", lease_id, exc)
            return None
        fencing = {
            r.uri: r.fencing for r in self.manager.store.read_lease(lease_id) if r.owner_key == owner.key
        }
        return Granted(request_id=lease_id, lease_id=lease_id, fencing=fencing, expires_at=expires_at)

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
