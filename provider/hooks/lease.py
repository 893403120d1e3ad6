"""``DeltaLeaseHook``: one task try's connection to the lease store, and the lease calls made through it.

The operator gathers arguments and calls this hook, as Airflow's own providers do with theirs: the hook
owns the :class:`~deltaguard.leases.manager.LeaseManager` (opened once per try with bounded store calls,
closed when the try leaves the ``with`` block or defers) and a try's plumbing: the acquire, keep (heartbeat
and commit fence, :class:`~deltaguard.leases.keeper.LeaseKeeper`) and release calls, the wait restored from
the decision log, the write context a commit carries and the pinned snapshot a write reads. What to do
after each answer is not decided here but by :func:`deltaguard.leases.waiting.next_step`.

The triggerer shares one store per URL between its triggers instead (:meth:`DeltaLeaseHook.pooled`, the
shared mode, :class:`SharedStore`): a hook per waiting trigger would hold a connection each. This module is
the only one outside :mod:`deltaguard.leases` that opens the store or builds a lease manager (ADR 0023).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.sdk import BaseHook

from deltaguard.core.admission import LeaseRequest, Owner, TableClaim
from deltaguard.core.durations import write_duration
from deltaguard.exceptions import (
    LeaseLostError,
    LeaseWaitTimeout,
    RequestClosedError,
    StoreError,
    StoreUnavailableError,
)
from deltaguard.leases import codec
from deltaguard.leases.imminent import process_age_s
from deltaguard.leases.waiting import Defer, Proceed, Sleep, TimeOut, WaitState, next_step, wait_reason

if TYPE_CHECKING:
    from deltaguard.config import LeaseSettings
    from deltaguard.core.admission import Closed, Granted, Waiting
    from deltaguard.core.operations import Operation
    from deltaguard.core.profiles import EngineProfile
    from deltaguard.core.table_config import TableConfig
    from deltaguard.engines.specs import WriteContext
    from deltaguard.hooks.lease_readmissions import Readmissions
    from deltaguard.leases.keeper import LeaseKeeper
    from deltaguard.leases.manager import LeaseManager
    from deltaguard.leases.remote_work import FenceMemory
    from deltaguard.leases.sql.watch import FreedWatcher
    from deltaguard.leases.store import LeaseStore


# ------------------------------------------------------------------------- a task try's lease requests
#: a queued request survives this many poll intervals without being asked about (and at least 2 minutes)
WAIT_TTL_POLLS = 10
MIN_WAIT_TTL_S = 120.0
#: seconds between reads of the decision log while a try lets the earlier phases of its table ask first
PHASE_POLL_S = 0.25
#: how far back the decision log is read for the questions of a try's own DAG run
PHASE_LOOKBACK_S = 86400.0


def task_owner(
    dag_id: str, run_id: str, task_id: str, map_index: int | None = None, try_number: int | None = None
) -> Owner:
    """The lease owner for one try of one task instance (a retry is a different owner)."""
    return Owner(
        dag_id=dag_id,
        run_id=run_id,
        task_id=task_id,
        map_index=map_index if isinstance(map_index, int) else -1,
        try_number=int(try_number or 0),
    )


def task_request_id(owner: Owner) -> str:
    """A request id derived from the task-instance try, so a resumed task finds its request again.

    Airflow passes the id along when it resumes a deferred task, but the id must not depend on that:
    ``dag.test()`` drops the resume kwargs, and a lost id would leave a lease granted by the trigger held
    until its TTL. A retry (new try number) gets a new id.
    """
    return uuid.uuid5(uuid.NAMESPACE_URL, "deltaguard:" + owner.key).hex


def claims_request(
    *,
    claims: Sequence[TableClaim],
    owner: Owner,
    ttl_s: float,
    poll_interval_s: float,
    priority: int = 0,
    request_id: str | None = None,
    expected_duration_s: float | None = None,
) -> LeaseRequest:
    """A lease request for one or more tables, granted all together or not at all.

    :param claims: the tables with their operations (keys as :func:`deltaguard.writes.table_uri.table_key`).
    :param owner: the task instance try.
    :param ttl_s: lease time-to-live (renewed by heartbeats).
    :param poll_interval_s: how often the waiter asks again; the queue entry outlives several polls.
    :param priority: queue priority.
    :param request_id: the id of an earlier request of this task, or ``None`` for the try's own id.
    :param expected_duration_s: how long the write is expected to hold the lease (``None``: unknown).
    """
    return LeaseRequest(
        claims=tuple(claims),
        owner=owner,
        ttl_s=ttl_s,
        priority=priority,
        request_id=request_id or task_request_id(owner),
        wait_ttl_s=max(MIN_WAIT_TTL_S, WAIT_TTL_POLLS * poll_interval_s),
        expected_duration_s=expected_duration_s,
    )


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
            from deltaguard.leases.open import open_bounded_store

            # every store call (the opening too) returns or fails within store_timeout, so a frozen store
            # cannot hang the try (ADR 0018)
            store = open_bounded_store(self.settings.store_url, self.settings.timing.store_timeout_s)
            # the slot gate (ADR 0028) only for a task that gives its slot up while it waits
            slots = config.worker_slots() if self.settings.deferrable else None
            self._manager = _lease_manager(store, self.settings, slots)
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
        run in worker threads over a bounded pool (:func:`shared_store`)."""
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
        claim = TableClaim(
            uri=table_key,
            operation=operation,
            profile=profile,
            config=table_config,
            read_version=read_version,
        )
        return self.ask_claims(
            claims=(claim,),
            owner=owner,
            priority=priority,
            request_id=request_id,
            expected_duration_s=expected_duration_s,
        )

    def ask_claims(
        self,
        *,
        claims: Sequence[TableClaim],
        owner: Owner,
        priority: int,
        request_id: str | None,
        ttl_s: float | None = None,
        expected_duration_s: float | None = None,
    ) -> Granted | Waiting:
        """Ask for one lease over several tables (granted for all of them or for none), as :meth:`ask`.

        :param ttl_s: the lease's time-to-live (default ``lease_ttl``); an unfenced holder asks for a longer
            one (ADR 0021).
        :param expected_duration_s: how long the write is expected to hold the lease (``None``: unknown).
        """
        request = claims_request(
            claims=claims,
            owner=owner,
            ttl_s=ttl_s or self.settings.ttl_s,
            poll_interval_s=self.settings.poll_s,
            priority=priority,
            request_id=request_id,
            expected_duration_s=expected_duration_s,
        )
        try:
            return self.manager.acquire(request)
        except (LeaseLostError, RequestClosedError) as exc:
            self.log.info("deltaguard: request %s is over (%s); asking again", request.request_id, exc)
            return self.manager.acquire(dataclasses.replace(request, request_id=uuid.uuid4().hex))

    def let_earlier_ask(
        self, owner: Owner, table_keys: Sequence[str], task_ids: Sequence[str], log: Any = None
    ) -> None:
        """Before a try's first question, wait until the given tasks of its DAG run have asked for its
        tables, for at most ``[deltaguard] phase_wait`` seconds (ADR 0040).

        The tasks are the conflicting writes the priority policy puts in earlier phases of the table
        (:func:`deltaguard.core.priority.table_priorities`). Tasks Airflow starts together ask in no useful
        order, and a free table is granted to the first question; letting the earlier phases ask first
        makes the queue ranks decide. Only the order of questions changes: every grant is still the lease
        manager's, and a task that never asks (skipped, failed, no free worker) holds this one back no longer
        than the limit.

        :param owner: the asking try (its DAG and run name the tasks).
        :param table_keys: the tables it will ask for.
        :param task_ids: the tasks to let ask first.
        :param log: the logger for the wait (the task's own; default: this hook's).
        """
        limit = self.settings.phase_wait_s
        if limit <= 0 or not table_keys or not task_ids:
            return
        started = time.monotonic()
        missing = set(task_ids)
        while True:
            try:
                missing -= self._asked_in_run(owner, table_keys)
            except StoreError as exc:
                # the order of questions is an optimisation: the question itself meets the store's error
                (log or self.log).info("deltaguard: no phase wait, the decision log cannot be read (%s)", exc)
                return
            left = limit - (time.monotonic() - started)
            if not missing or left <= 0:
                break
            time.sleep(min(PHASE_POLL_S, left))
        (log or self.log).info(
            "deltaguard: waited %.1f s for the earlier phases of %s to ask first%s",
            time.monotonic() - started,
            ", ".join(table_keys),
            f" ({', '.join(sorted(missing))} did not within {limit:g} s)" if missing else "",
        )

    def _asked_in_run(self, owner: Owner, table_keys: Sequence[str]) -> set[str]:
        """The tasks of ``owner``'s DAG run the decision log shows asking for any of the tables."""
        since = time.time() - PHASE_LOOKBACK_S
        asked = set()
        for key in table_keys:
            for row in self.manager.store.decisions(uri=key, since=since, kinds=("grant", "wait"), limit=500):
                try:
                    other = codec.owner_from_text(row.owner_key)
                except (ValueError, TypeError, AttributeError):
                    continue  # not an owner this version writes: not one of the run's tasks
                if (other.dag_id, other.run_id) == (owner.dag_id, owner.run_id):
                    asked.add(other.task_id)
        return asked

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
        from deltaguard.leases.manager import learned_duration

        if table_key not in self._learned:
            try:
                self._learned[table_key] = learned_duration(self.manager.store, owner, table_key)
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
            timing=self.settings.timing,
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


def _lease_manager(
    store: LeaseStore, settings: LeaseSettings, worker_slots: int | None, fences: FenceMemory | None = None
) -> LeaseManager:
    """The one place task code and the triggerer get a lease manager: over an opened store, with the engines'
    fence of expired Spark Connect work (ADR 0033) and the engine's evaluator for requests decided again
    from the store (ADR 0037).

    :param worker_slots: the slot gate's size (ADR 0028); ``None``: no gate.
    :param fences: fence outcomes shared with other managers over the same store (the triggerer's).
    """
    from deltaguard.engines.fencing import default_remote_fence
    from deltaguard.engines.sources import attach_oracle
    from deltaguard.leases.manager import LeaseManager

    return LeaseManager(
        store,
        retention_s=settings.retention_s,
        remote_fence=default_remote_fence(),
        fence_memory=fences,
        oracle_loader=attach_oracle,
        worker_slots=worker_slots,
    )


# ------------------------------------------------------------------------------------- the shared mode
# One store handle per store URL and event loop, shared by every deltaguard trigger in a triggerer: a
# handle per waiting trigger held a connection each, so a triggerer with 1,000 waiting writes held about
# 1,000 PostgreSQL connections (ADR 0025 has the measurement). The first trigger for a store opens it, the
# others share it, and the last one to leave closes it. Store calls run in worker threads
# (:func:`asyncio.to_thread`, the event loop never blocks) at most :data:`MAX_CALLS` at a time, over a pool
# of at most ``2 x`` :data:`POOL_SIZE` connections; a PostgreSQL store adds one LISTEN connection
# (:class:`~deltaguard.leases.sql.listen.FreedListener`), an SQLite store one decision-log reader
# (:class:`~deltaguard.leases.sql.sqlite_watch.SqliteFreedWatcher`).

T = TypeVar("T")

#: connections a shared PostgreSQL store keeps; it may open as many again under a burst (SQLAlchemy's
#: ``max_overflow``), so a triggerer uses at most 2 x 4 + 1 (listener) = 9 connections per store
POOL_SIZE = 4
#: store calls in flight at once per shared store (each holds one connection while it runs)
MAX_CALLS = POOL_SIZE


@dataclasses.dataclass(eq=False)
class SharedStore:
    """The store handle shared by the triggers of one event loop.

    :param url: the store URL (with its password: never logged nor serialized).
    :param settings: the lease options the store was opened with.
    """

    url: str
    settings: LeaseSettings
    key: tuple[int, str] = (0, "")
    users: int = 0
    store: LeaseStore | None = None
    listener: FreedWatcher | None = None
    ready: asyncio.Future[None] | None = None
    limit: asyncio.Semaphore = dataclasses.field(default_factory=lambda: asyncio.Semaphore(MAX_CALLS))
    closed: bool = False
    #: store calls still running in worker threads (a cancelled caller does not stop its thread)
    inflight: set[asyncio.Future[Any]] = dataclasses.field(default_factory=set)
    #: one re-admission of a table's queue for all the waiters one release wakes (ADR 0031)
    crowd: Readmissions | None = None
    #: fence outcomes of server-side work shared by the triggers' lease managers (ADR 0033), so one
    #: expired lease's server is asked at most once per retry interval, not once per waiting trigger
    fences: FenceMemory = dataclasses.field(default_factory=lambda: _fence_memory())

    def readmissions(self) -> Readmissions:
        """The handle's batcher of re-admissions (made on first use)."""
        if self.crowd is None:
            from deltaguard.hooks.lease_readmissions import Readmissions

            self.crowd = Readmissions(self)
        return self.crowd

    async def call(
        self, fn: Callable[..., T], *args: object, on_start: Callable[[], None] | None = None
    ) -> T:
        """Run a blocking store call in a worker thread, at most :data:`MAX_CALLS` at once.

        A caller cancelled meanwhile returns at once, but its call keeps its slot until the thread ends,
        and the store is closed only after it: a thread never finishes on a closed store.

        :param on_start: called in the event loop once the call has its slot, just before its thread starts.
        """
        await self.limit.acquire()
        if on_start is not None:
            on_start()
        future: asyncio.Future[T] = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        self.inflight.add(future)
        future.add_done_callback(self._done)
        return await asyncio.shield(future)

    def _done(self, future: asyncio.Future[Any]) -> None:
        self.inflight.discard(future)
        self.limit.release()
        if not future.cancelled():
            future.exception()  # retrieved: the caller may have been cancelled and never will

    def manager(self) -> LeaseManager:
        """A lease manager over the shared store (its caches are the caller's own)."""
        from deltaguard import config

        assert self.store is not None
        # the triggerer decides for deferred writes, which hold no worker slot: the slot gate (ADR 0028)
        return _lease_manager(self.store, self.settings, config.worker_slots(), fences=self.fences)


def _fence_memory() -> FenceMemory:
    from deltaguard.leases.remote_work import FenceMemory

    return FenceMemory()


#: (id of the event loop, store URL) -> the handle; entries leave when their last user does
_SHARED: dict[tuple[int, str], SharedStore] = {}
#: closings in flight (kept referenced so they finish; :func:`closed` awaits them)
_CLOSING: set[asyncio.Task[None]] = set()


def _open_blocking(entry: SharedStore) -> None:
    from deltaguard.leases.open import open_bounded_store

    # every store call (the opening too) returns or fails within store_timeout (ADR 0018): a frozen store
    # fails the trigger's check instead of holding one of the MAX_CALLS slots for the whole freeze
    options: dict[str, object] = {}
    if entry.url.split(":", 1)[0].lower().startswith("postgres"):
        options["pool_size"] = POOL_SIZE
    entry.store = open_bounded_store(entry.url, entry.settings.timing.store_timeout_s, **options)


def _listen_configured() -> bool:
    from deltaguard import config

    return config.lease_store_listen()


def sqlite_path(url: str) -> str | None:
    from deltaguard.leases.sql.sqlite_watch import sqlite_path as path_of

    return path_of(url)


async def _open(entry: SharedStore) -> None:
    assert entry.ready is not None
    try:
        await asyncio.to_thread(_open_blocking, entry)
        listen = await asyncio.to_thread(_listen_configured)
        if listen and entry.url.split(":", 1)[0].lower().startswith("postgres"):
            from deltaguard.leases.sql.listen import FreedListener, conninfo

            timeout = entry.settings.timing.store_timeout_s
            entry.listener = FreedListener(
                conninfo(entry.url, connect_timeout_s=timeout, keepalive_s=timeout)
            )
            entry.listener.start()
        elif listen and (path := sqlite_path(entry.url)) is not None:
            # SQLite sends nothing: one short read of the decision log per process stands in for NOTIFY
            from deltaguard.leases.sql.sqlite_watch import SqliteFreedWatcher

            entry.listener = SqliteFreedWatcher(path)
            entry.listener.start()
    except BaseException as exc:
        if entry.store is not None:
            await asyncio.to_thread(entry.store.close)
        if _SHARED.get(entry.key) is entry:
            del _SHARED[entry.key]  # the next trigger tries to open it again
        entry.ready.set_exception(exc)
        raise
    entry.ready.set_result(None)
    if entry.users == 0:  # every trigger that waited for it is gone already
        if _SHARED.get(entry.key) is entry:
            del _SHARED[entry.key]
        _schedule_close(entry)


async def _close(entry: SharedStore) -> None:
    await asyncio.gather(*list(entry.inflight), return_exceptions=True)
    if entry.listener is not None:
        await entry.listener.close()
    if entry.store is not None:
        await asyncio.to_thread(entry.store.close)
    entry.closed = True


def _schedule_close(entry: SharedStore) -> None:
    task = asyncio.get_running_loop().create_task(_close(entry), name="deltaguard-close-store")
    _CLOSING.add(task)
    task.add_done_callback(_CLOSING.discard)


@contextlib.asynccontextmanager
async def shared_store(url: str, settings: LeaseSettings) -> AsyncIterator[SharedStore]:
    """Use the event loop's handle for ``url`` (opened by the first user, closed after the last).

    Leaving the block (also by cancellation, when the triggerer cancels the trigger) gives the handle back
    without awaiting anything; the last user's leaving schedules the close.

    :raises StoreUnavailableError: the store could not be opened (the next user tries again).
    """
    loop = asyncio.get_running_loop()
    key = (id(loop), url)
    entry = _SHARED.get(key)
    if entry is not None and entry.ready is not None and entry.ready.get_loop() is not loop:
        entry = None  # left by a loop that was closed while triggers still held it (its id is reused)
    if entry is None:
        entry = SharedStore(url, settings, key=key, ready=loop.create_future())
        _SHARED[key] = entry
        # a task of its own: a trigger cancelled while the store opens must not orphan the open store
        opening = loop.create_task(_open(entry), name="deltaguard-open-store")
        opening.add_done_callback(lambda t: t.cancelled() or t.exception())
    entry.users += 1
    try:
        assert entry.ready is not None
        await asyncio.shield(entry.ready)
        yield entry
    finally:
        entry.users -= 1
        # Not yet open: the opening task closes it when it finds no user. Failed to open: nothing to close.
        opened = entry.ready is not None and entry.ready.done() and entry.ready.exception() is None
        if entry.users == 0 and opened and _SHARED.get(key) is entry:
            del _SHARED[key]
            _schedule_close(entry)
