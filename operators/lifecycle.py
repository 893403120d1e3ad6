"""One lease lifecycle for every deltaguard task that holds a lease while it works.

Two kinds of work run under a lease: deltaguard's own write (:class:`~deltaguard.operators.base.DeltaWriteOperator`
and its subclasses) and work deltaguard does not run (:class:`~deltaguard.operators.leased_work.DeltaLeaseMixin`:
a wrapped operator or a ``@task.delta_write`` function). Both go through the same try, written once here:

1. read the ``[deltaguard]`` options of the try (:meth:`LeaseLifecycleMixin.lease_settings`); a bad option
   fails the task for good;
2. prepare the work (:meth:`WorkUnderLease.prepare_try`): resolve and validate; bad input fails here,
   before any lease is asked for, with :class:`~deltaguard.operators.failures.InvalidTaskInputError`;
3. ask for the lease until the waiting rule says to go (the hook's
   :meth:`~deltaguard.hooks.lease.DeltaLeaseHook.wait_for_grant`), deferring to
   :class:`~deltaguard.triggers.lease.LeaseAvailableTrigger` when it says so; on resume
   (:meth:`LeaseLifecycleMixin.execute_complete`) ask again, since a trigger event is a hint and not a grant;
4. do the work under the granted lease (:meth:`WorkUnderLease.work_under_lease`); the lease is released when
   the work ends, on failure, and on kill (:meth:`LeaseLifecycleMixin.on_kill`);
5. a deferral that failed (trigger time-out or error) releases what the try holds before the task fails.

The mixin states what it needs of its operator as :class:`LeaseTask` and what the work supplies as
:class:`WorkUnderLease`, as Airflow's databricks provider does in its ``utils/mixins.py``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from airflow.sdk.exceptions import TaskDeferred

from deltaguard.leases.waiting import WaitState
from deltaguard.operators.failures import InvalidTaskInputError
from deltaguard.writes.prepared import decision_line

if TYPE_CHECKING:
    from airflow.sdk import Context

    from deltaguard.config import LeaseSettings
    from deltaguard.core.admission import Granted, Owner, Waiting
    from deltaguard.hooks.lease import DeltaLeaseHook

__all__ = ["TRIGGER_FAIL", "LeaseLifecycleMixin", "LeaseTask", "WorkUnderLease", "task_owner_of"]

#: Airflow's ``next_method`` for a task resumed only to fail (trigger timeout or trigger error)
TRIGGER_FAIL = "__fail__"

PreparedT = TypeVar("PreparedT")


class LeaseTask(Protocol):
    """What :class:`LeaseLifecycleMixin` reads from its operator (``BaseOperator`` gives the first three)."""

    log: Any
    dag_id: str
    task_id: str
    #: queue priority, -100..100
    priority: int
    #: seconds to wait for the lease at most; ``None``: until Airflow's own task timeout
    lease_wait_timeout: float | None
    #: overrides ``[deltaguard] lease_store_url``
    lease_store_url: str | None
    #: the task's ``deferrable`` argument (``None``: the option's default)
    lease_deferrable: bool | None


class WorkUnderLease(Protocol[PreparedT]):
    """The work one try does under its lease; ``PreparedT`` is what :meth:`prepare_try` resolved."""

    def prepare_try(self, context: Context) -> PreparedT:
        """Resolve and validate the work; raise :class:`InvalidTaskInputError` on bad input."""

    def ask_lease(
        self, leases: DeltaLeaseHook, prepared: PreparedT, owner: Owner, request_id: str | None
    ) -> Granted | Waiting:
        """Ask the lease manager once for the lease the work needs."""

    def lease_subject(self, prepared: PreparedT) -> str:
        """The table(s) waited for, for messages."""

    def work_under_lease(
        self,
        context: Context,
        leases: DeltaLeaseHook,
        prepared: PreparedT,
        grant: Granted,
        owner: Owner,
        wait: WaitState,
        decision: str,
    ) -> Any:
        """Do the work while holding ``grant``, and release it when the work ends."""

    def fail_deferral(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """Raise the error of a deferral that failed (after the try's lease and requests were released)."""


class LeaseLifecycleMixin:
    """The lease lifecycle of a task: settings, waiting and deferral, resume, failed deferral and kill.

    The operator mixing it in implements :class:`WorkUnderLease` and has the attributes of
    :class:`LeaseTask`.
    """

    #: tasks of the same DAG run a fresh try lets ask for its tables first (the conflicting writes of
    #: earlier phases; set by the priority ``dag_policy``, ADR 0040)
    asks_after: tuple[str, ...] = ()

    # ------------------------------------------------------------------------------------------- entering
    def start_lease_try(self, context: Context) -> Any:
        """A fresh try (the operator's ``execute`` calls it: Airflow guards ``execute`` defined on an operator)."""
        with self.try_scope():
            return self._lease_try(context, None)

    def execute_complete(
        self,
        context: Context,
        event: dict[str, Any] | None = None,
        wait_started: float | None = None,
        behind: list[str] | None = None,
        explanation: str | None = None,
        request_id: str | None = None,
        prepared_write: Mapping[str, Any] | None = None,
    ) -> Any:
        """Resume after the lease trigger fired: a hint that the lease may be free, so ask again.

        ``wait_started`` is ``None`` when Airflow resumed without the deferral kwargs (``dag.test()`` drops
        them); the decision log then tells when this try queued. ``prepared_write`` is what
        :meth:`carry_prepared` put into the deferral, handed to :meth:`resume_prepared`.
        """
        log: Any = getattr(self, "log")  # noqa: B009 - BaseOperator's, declared by LeaseTask
        if event and event.get("status") == "error":
            log.warning("deltaguard: lease trigger reported: %s", event.get("message"))
        wait = WaitState(wait_started or 0.0, list(behind or []), explanation, request_id)
        with self.try_scope():
            return self._lease_try(
                context, wait, resumed_without_kwargs=wait_started is None, carried=prepared_write
            )

    def lease_tables(self, prepared: Any) -> tuple[str, ...]:
        """The table keys the try asks for, for :attr:`asks_after` (default: none, so no wait)."""
        return ()

    def try_scope(self) -> contextlib.AbstractContextManager[None]:
        """What one try's run is wrapped in (the write operators release their engine at its end)."""
        return contextlib.nullcontext()

    # ------------------------------------------------------------------------------------------- the try
    def _lease_try(
        self: Any,
        context: Context,
        wait: WaitState | None,
        resumed_without_kwargs: bool = False,
        carried: Mapping[str, Any] | None = None,
    ) -> Any:
        """Prepare, take the lease (waiting as the rule says), work under it.

        ``wait`` is ``None`` on a fresh try: its clock starts at the first lease request, so preparing the
        work (a Spark session can take seconds) never reads as waiting for other writers. ``carried`` is the
        prepared work a deferral carried, if any: the resumed try takes it instead of preparing again.
        """
        # the hook reads the try's options first (a bad one fails for good); its store opens at the first call
        with self.try_lease_hook() as leases:
            # validated before any lease is asked (a resumed try: before it deferred)
            prepared = (
                self.prepare_try(context) if carried is None else self.resume_prepared(context, carried)
            )
            owner = task_owner_of(context)
            if wait is None:
                leases.let_earlier_ask(owner, self.lease_tables(prepared), self.asks_after, log=self.log)
                wait = WaitState(started=time.time())
            if resumed_without_kwargs:
                leases.restore_wait(owner, wait)
            grant = leases.wait_for_grant(
                lambda request_id: self.ask_lease(leases, prepared, owner, request_id),
                owner=owner,
                wait=wait,
                timeout_s=self.lease_wait_timeout,
                defer=lambda left: self.defer_for_lease(
                    leases.settings, wait, left, self.carry_prepared(prepared)
                ),
                what=self.lease_subject(prepared),
                log=self.log,
            )
            decision = decision_line(wait.waited_s(), wait.behind, wait.explanation)
            self.log.info("%s", decision)
            return self.work_under_lease(context, leases, prepared, grant, owner, wait, decision)

    def defer_for_lease(
        self,
        settings: LeaseSettings,
        wait: WaitState,
        timeout_s: float | None,
        carried: Mapping[str, Any] | None = None,
    ) -> None:
        """Move the wait to the triggerer: the worker slot is freed until the lease may be free.

        :param carried: the prepared work, as :meth:`carry_prepared` serialised it (``None``: nothing).
        """
        from deltaguard.triggers.lease import LeaseAvailableTrigger

        assert wait.request_id is not None  # set by the answer that led here
        kwargs = wait.to_kwargs()
        if carried is not None:
            kwargs["prepared_write"] = dict(carried)
        raise TaskDeferred(
            trigger=LeaseAvailableTrigger(
                store_url=settings.store_url,
                request_id=wait.request_id,
                poll_interval=settings.poll_s,
                first_event_after_s=settings.first_event_s,
            ),
            method_name="execute_complete",
            kwargs=kwargs,
            timeout=None if timeout_s is None else dt.timedelta(seconds=timeout_s),
        )

    def carry_prepared(self, prepared: Any) -> Mapping[str, Any] | None:
        """What a deferral carries of the prepared work to the resumed try (JSON-serialisable); ``None``
        (the default): nothing, the resumed try prepares anew."""
        return None

    def resume_prepared(self: Any, context: Context, carried: Mapping[str, Any]) -> Any:
        """The prepared work of a resumed try from what :meth:`carry_prepared` gave the deferral (default:
        prepared anew)."""
        return self.prepare_try(context)

    # ------------------------------------------------------------------------------------------ resolving
    def lease_settings(self: Any) -> LeaseSettings:
        """The ``[deltaguard]`` options for this try, read now; a bad option fails the task for good."""
        from deltaguard import config
        from deltaguard.executor_guard import (
            DistributedSqliteStoreError,
            refuse_sqlite_under_distributed_executor,
        )

        try:
            settings = config.lease_settings(self.lease_store_url, self.lease_deferrable)
        except ValueError as exc:
            raise InvalidTaskInputError(f"deltaguard configuration: {exc}") from exc
        # Before the store is opened or any lease requested: each worker would guard its own SQLite file.
        try:
            refuse_sqlite_under_distributed_executor(settings.store_url)
        except DistributedSqliteStoreError as exc:
            raise InvalidTaskInputError(str(exc)) from exc
        return settings

    @functools.cached_property
    def lease_hook(self) -> DeltaLeaseHook:
        """The running try's lease hook, built with the try's options (cached as common.sql's ``_hook``)."""
        from deltaguard.hooks.lease import DeltaLeaseHook

        return DeltaLeaseHook(self.lease_settings())

    @contextlib.contextmanager
    def try_lease_hook(self) -> Iterator[DeltaLeaseHook]:
        """:attr:`lease_hook` for one try: its store is closed and the cache dropped when the try ends (or
        defers), so the next try reads its options again."""
        try:
            with self.lease_hook as leases:
                yield leases
        finally:
            self.__dict__.pop("lease_hook", None)

    # ------------------------------------------------------------------------------------------- failing
    def resume_execution(
        self: Any, next_method: str, next_kwargs: dict[str, Any] | None, context: Context
    ) -> Any:
        """A failed deferral (timeout, trigger error) releases what this try holds before failing.

        Otherwise an abandoned queue entry would hold back conflicting writers until it expires.
        """
        if next_method == TRIGGER_FAIL:
            self.release_after_failed_deferral(context, next_kwargs)
            return self.fail_deferral(next_method, next_kwargs, context)
        # a mixin: BaseOperator, after it in the operator's MRO, defines it
        return super().resume_execution(next_method, next_kwargs, context)  # type: ignore[misc]

    def release_after_failed_deferral(self, context: Context, next_kwargs: Mapping[str, Any] | None) -> None:
        """Release the lease or withdraw the queued request of a deferral that timed out or failed.

        Airflow replaces the resume kwargs with the error, so the try's derived request id (which is also
        its lease id) names what to release; a lease granted under another id expires after its TTL.
        """
        ids = {(next_kwargs or {}).get("request_id"), (next_kwargs or {}).get("lease_id")}
        with self.try_lease_hook() as leases:
            owner = task_owner_of(context)
            for rid in ids - {None}:
                leases.release(str(rid), owner)
            leases.withdraw(owner, None)

    def on_kill(self) -> None:
        leases = self.__dict__.get("lease_hook")  # the running try's, if any; never built here
        if leases is not None:
            leases.release_held()  # a no-op unless work holds a lease


def task_owner_of(context: Context) -> Owner:
    """The lease owner of the running task instance try."""
    from deltaguard.hooks.lease import task_owner

    ti = context.get("ti")
    dag_run = context.get("dag_run")
    return task_owner(
        str(getattr(ti, "dag_id", "") or ""),
        str(getattr(dag_run, "run_id", None) or getattr(ti, "run_id", "") or ""),
        str(getattr(ti, "task_id", "") or ""),
        getattr(ti, "map_index", -1),
        getattr(ti, "try_number", 0),
    )
