"""A deltaguard lease around work deltaguard does not run: any operator, or a TaskFlow function.

:class:`DeltaLeasedOperator` (built with :func:`with_delta_lease`) wraps a classic operator such as
``DatabricksSqlOperator`` or ``SparkSubmitOperator``; :func:`deltaguard.decorators.delta_write.delta_write_task`
(``@task.delta_write``) wraps a TaskFlow function. Both share :class:`DeltaLeaseMixin`:

1. resolve the declared tables (:mod:`deltaguard.writes.lease_targets`) into lease claims; bad input fails
   here, before any lease, without spending retries;
2. wait for one lease over all the tables (all-or-nothing) with the hook's waiting loop
   (:meth:`DeltaLeaseHook.wait_for_grant <deltaguard.hooks.lease.DeltaLeaseHook.wait_for_grant>`): the same
   rule, deferral to :class:`~deltaguard.triggers.lease.LeaseAvailableTrigger`, reasons and decision log as
   deltaguard's own write operators;
3. run the wrapped work while the hook renews the lease, and release it when the work ends (success,
   failure, ``on_kill``). When the wrapped operator defers, the lease is handed to a
   :class:`~deltaguard.triggers.leased.LeaseKeepingTrigger`, which runs the wrapped trigger and renews the
   lease in the triggerer; the resumed task takes the lease back and releases it when the work ends.

The wrapped work commits through its own engine, so deltaguard cannot fence its commit (ADR 0018 fences
only its own operators). What it does instead (ADR 0021):

* the lease of unfenced work lives ``unfenced_grace`` times the TTL without renewals (default
  :data:`DEFAULT_UNFENCED_GRACE`), so stalled renewals alone hand the table to a conflicting writer much
  later while the work may still run;
* when the work ends, the lease is confirmed once more; if it was lost, the task fails with
  :class:`~deltaguard.exceptions.WrappedLeaseLostError` and the table is flagged in the decision log
  (``unfenced_overrun``) and the UI: the work may have committed outside its lease.
"""

from __future__ import annotations

import abc
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import TaskDeferred

from deltaguard.lineage.leased import LeasedLineageMixin
from deltaguard.operators.base import InvalidTaskInputError, WrappedLeaseLostFailure, _owner
from deltaguard.operators.links import DeltaDecisionLink
from deltaguard.writes.lease_targets import LeaseTarget, OperationLike, lease_targets
from deltaguard.writes.outcome import decision_line
from deltaguard.writes.waiting import WaitState

if TYPE_CHECKING:
    from airflow.sdk import Context

    from deltaguard.config import LeaseSettings
    from deltaguard.core.admission import Granted, Owner, TableClaim
    from deltaguard.core.profiles import EngineProfile
    from deltaguard.hooks.lease import DeltaLeaseHook

__all__ = ["DeltaLeaseMixin", "DeltaLeasedOperator", "with_delta_lease"]

#: how many lease TTLs the lease of unfenced (wrapped) work survives without a renewal
DEFAULT_UNFENCED_GRACE = 5.0

#: the method a task resumes in after the wrapped operator's own deferral
RESUME_WRAPPED = "resume_leased"
#: Airflow's ``next_method`` for a task resumed only to fail (trigger timeout or trigger error)
TRIGGER_FAIL = "__fail__"


class DeltaLeaseMixin(LeasedLineageMixin, abc.ABC):
    """The lease part of a task that writes Delta tables through someone else's engine.

    :param tables: the table(s) written: a URI / absolute path / name relative to the ``delta``
        connection's base URI, a list of them, or a mapping of each to its operation. Templated.
    :param operation: the operation kind (``"INSERT"``, ``"MERGE"``, ... of
        :class:`~deltaguard.core.operations.OperationKind`) or a whole
        :class:`~deltaguard.core.operations.Operation`; for every listed table.
    :param predicate: the rows the operation touches (``WHERE`` of UPDATE/DELETE, ``replaceWhere``, the
        partition values an INSERT appends; for MERGE its ``ON`` condition with the target aliased ``t``).
        Templated.
    :param sql: instead of ``operation``: the SQL write statement(s), classified as
        :class:`~deltaguard.operators.sql.DeltaSqlOperator` classifies them. Templated.
    :param delta_conn_id: the ``delta`` connection (base URI, storage options to read table configurations).
    :param engine: the engine that commits (``delta-rs`` or ``spark``); default: the connection's, else
        ``[deltaguard] default_engine``. Ignored when ``databricks_runtime`` is given.
    :param databricks_runtime: the Databricks Runtime version that commits (``"15.4"``), for work running on
        Databricks; ``databricks_photon`` says whether it runs Photon.
    :param priority: queue priority (-100..100).
    :param lease_wait_timeout: give up after waiting this long for the lease (seconds or timedelta).
    :param deferrable: wait for the lease in the triggerer (default as for deltaguard's own operators).
    :param lease_store_url: override ``[deltaguard] lease_store_url``.
    :param unfenced_grace: the lease survives this many TTLs without a renewal (at least 1): deltaguard cannot
        stop the wrapped commit, so a stalled renewal should not hand the table to a conflicting writer
        while the work may still run. A holder that dies outright keeps the table that long.
    """

    lease_template_fields: tuple[str, ...] = ("delta_tables", "delta_predicate", "delta_sql")

    # set by BaseOperator
    log: Any
    dag_id: str
    task_id: str

    def _init_lease(
        self,
        *,
        tables: str | Sequence[str] | Mapping[str, OperationLike] | None,
        operation: OperationLike | None,
        predicate: str | None,
        sql: str | Sequence[str] | None,
        delta_conn_id: str | None,
        engine: str | None,
        databricks_runtime: str | None,
        databricks_photon: bool,
        priority: int,
        lease_wait_timeout: Any,
        deferrable: bool | None,
        lease_store_url: str | None,
        unfenced_grace: float = DEFAULT_UNFENCED_GRACE,
    ) -> None:
        from deltaguard.core.admission import MAX_PRIORITY, MIN_PRIORITY

        if not float(unfenced_grace) >= 1:
            raise ValueError(
                f"unfenced_grace must be at least 1 (a multiple of the TTL), got {unfenced_grace}"
            )
        self.unfenced_grace = float(unfenced_grace)
        if not MIN_PRIORITY <= int(priority) <= MAX_PRIORITY:
            raise ValueError(f"priority must be between {MIN_PRIORITY} and {MAX_PRIORITY}, got {priority}")
        self.delta_tables = dict(tables) if isinstance(tables, Mapping) else tables
        self.delta_operation = operation
        self.delta_predicate = predicate
        self.delta_sql = sql
        self.delta_conn_id = delta_conn_id
        self.delta_engine = engine
        self.databricks_runtime = databricks_runtime
        self.databricks_photon = bool(databricks_photon)
        self.priority = int(priority)
        if hasattr(lease_wait_timeout, "total_seconds"):
            lease_wait_timeout = lease_wait_timeout.total_seconds()
        self.lease_wait_timeout = None if lease_wait_timeout is None else float(lease_wait_timeout)
        self.lease_deferrable = deferrable
        self.lease_store_url = lease_store_url
        #: the table URIs the last lease covered (after the task ran), for lineage and links
        self.leased_uris: tuple[str, ...] = ()
        self._leases: DeltaLeaseHook | None = None
        if not _templated(tables, predicate, sql):
            self.delta_lease_targets()  # bad declarations fail at DAG parse time, as a ValueError
        self._declare_leased_outlets()  # lineage: the tables' assets (deltaguard.lineage.leased)

    # ----------------------------------------------------------------------------------------- declaring
    def default_sql(self) -> str | Sequence[str] | None:
        """The SQL to classify when neither ``operation`` nor ``sql`` is given (a wrapper: the wrapped one's)."""
        return None

    def delta_lease_targets(self) -> tuple[LeaseTarget, ...]:
        """The declared tables and operations (table names as written, before the connection resolves them).

        Public so lineage can be attached to the task: each target names a table and its operation.

        :raises deltaguard.exceptions.InvalidWriteError: for a declaration that cannot be leased.
        """
        sql = self.delta_sql
        if sql is None and self.delta_operation is None and not isinstance(self.delta_tables, Mapping):
            sql = self.default_sql()
            if sql is None:
                from deltaguard.exceptions import InvalidWriteError

                raise InvalidWriteError(
                    f"{self.task_id}: declare the operation (operation='MERGE', predicate=...) or the sql"
                )
        return lease_targets(
            self.delta_tables, operation=self.delta_operation, predicate=self.delta_predicate, sql=sql
        )

    # ----------------------------------------------------------------------------------------- running
    # Abstract: the operator's metaclass (an ``ABCMeta``) refuses to build a leased task without them.
    @abc.abstractmethod
    def _leased_work(self, context: Context) -> Any:
        """Run the wrapped work (may raise ``TaskDeferred``)."""

    @abc.abstractmethod
    def _resume_wrapped(self, context: Context, method: str, kwargs: dict[str, Any]) -> Any:
        """Resume the wrapped work after its own deferral."""

    def _run_leased(self, context: Context, wait: WaitState, resumed_without_kwargs: bool = False) -> Any:
        settings = self._lease_settings()
        claims = self._claims(context)  # validated (again, after a wait) before any lease is asked for
        owner = _owner(context)
        with self._lease_hook(settings) as leases:
            self._leases = leases  # for on_kill
            if resumed_without_kwargs:
                started, behind, explanation = leases.first_wait(owner)
                wait.started = started or time.time()
                wait.behind[:0] = behind
                wait.explanation = wait.explanation or explanation
            grant = leases.wait_for_grant(
                lambda request_id: leases.ask_claims(
                    claims=claims,
                    owner=owner,
                    priority=self.priority,
                    request_id=request_id,
                    ttl_s=settings.ttl_s * self.unfenced_grace,
                ),
                owner=owner,
                wait=wait,
                timeout_s=self.lease_wait_timeout,
                defer=lambda left: self._defer_for_lease(settings, wait, left),
                what=", ".join(self.leased_uris),
                log=self.log,
            )
            self.log.info("%s", decision_line(wait.waited_s(), wait.behind, wait.explanation))
            self.log.info(
                "deltaguard: lease %s held on %s; the wrapped work starts", grant.lease_id, self.leased_uris
            )
            self._versions_before = self._leased_versions()  # lineage: what the work's commits follow
            return self._hold_and_run(
                leases, grant, owner, settings, self._reporting(context, lambda: self._leased_work(context))
            )

    def _hold_and_run(
        self,
        leases: DeltaLeaseHook,
        grant: Granted,
        owner: Owner,
        settings: LeaseSettings,
        work: Callable[[], Any],
    ) -> Any:
        """Run ``work`` under the lease; if it defers, hand the lease to a trigger that renews it.

        When the work ends, the lease is confirmed once more: a lease lost before the end means the work
        may have committed outside it, and the task fails (:meth:`_overran`).
        """
        with leases.holding(grant, owner, hand_over_on=(TaskDeferred,), fenced=False) as keeper:
            try:
                result = work()
            except TaskDeferred as deferred:
                if keeper.lost:  # the lease is not handed over: the work goes on without it
                    raise self._overran(leases, grant.lease_id, owner, keeper.lost_reason) from None
                raise self._keeping_lease(deferred, settings, grant, owner) from None
            except Exception as exc:
                reason = keeper.still_held()
                if reason is not None:
                    raise self._overran(leases, grant.lease_id, owner, reason) from exc
                raise
            reason = keeper.still_held()
            if reason is not None:
                raise self._overran(leases, grant.lease_id, owner, reason)
            return result

    def _overran(self, leases: DeltaLeaseHook, lease_id: str, owner: Owner, reason: str | None) -> Exception:
        """The error of work that ran past its lease; the tables are flagged in the decision log first."""
        what = ", ".join(self.leased_uris)
        detail = {
            "reason": f"the wrapped work ended after its lease was lost ({reason})",
            "unfenced": True,
        }
        try:
            leases.manager.record_overrun(lease_id, owner, self.leased_uris, detail)
        except Exception as exc:  # the task still fails below
            self.log.error("deltaguard: could not flag %s in the decision log: %s", what, exc)
        self.log.error(
            "deltaguard: lease %s on %s was lost while the wrapped work ran (%s); deltaguard does not make "
            "its commit and could not stop it, so it may have committed outside its lease while another "
            "writer held the table",
            lease_id,
            what,
            reason,
        )
        return WrappedLeaseLostFailure(
            f"lease {lease_id} on {what} was lost before the wrapped work ended ({reason}): the work may have "
            "committed outside its lease; check the table(s) for lost or duplicated rows"
        )

    def _keeping_lease(
        self, deferred: TaskDeferred, settings: LeaseSettings, grant: Granted, owner: Owner
    ) -> TaskDeferred:
        """The wrapped work's deferral, with its trigger wrapped in one that keeps the lease alive."""
        from deltaguard.triggers.leased import LeaseKeepingTrigger

        inner_path, inner_kwargs = deferred.trigger.serialize()
        self.log.info(
            "deltaguard: the wrapped work defers to %s; the triggerer renews lease %s meanwhile",
            inner_path,
            grant.lease_id,
        )
        return TaskDeferred(
            trigger=LeaseKeepingTrigger(
                inner_classpath=inner_path,
                inner_kwargs=inner_kwargs,
                store_url=settings.store_url,
                lease_id=grant.lease_id,
                owner=dataclasses.asdict(owner),
                heartbeat_s=settings.heartbeat_s,
            ),
            method_name=RESUME_WRAPPED,
            kwargs={
                "wrapped_method": deferred.method_name,
                "wrapped_kwargs": deferred.kwargs or {},
                "lease_id": grant.lease_id,
                "versions_before": getattr(self, "_versions_before", None),
            },
            timeout=deferred.timeout,
        )

    def resume_leased(
        self,
        context: Context,
        event: Any = None,
        wrapped_method: str = "execute_complete",
        wrapped_kwargs: dict[str, Any] | None = None,
        lease_id: str | None = None,
        versions_before: dict[str, int | None] | None = None,
    ) -> Any:
        """Resume after the wrapped work's own deferral: take the lease back, resume the work, release."""
        payload = event if isinstance(event, Mapping) else {}
        inner_event = payload.get("event")
        if payload.get("lease_lost"):
            self.log.error(
                "deltaguard: the lease was lost while the wrapped work waited in the triggerer (%s); "
                "writers it held back may have started",
                payload["lease_lost"],
            )
        kwargs = {**(wrapped_kwargs or {}), "event": inner_event}
        owner = _owner(context)
        settings = self._lease_settings()
        with self._lease_hook(settings) as leases:
            self._leases = leases
            grant = leases.resume_held(lease_id, owner) if lease_id else None
            if grant is None:
                # nothing left to hold: the wrapped work still finishes (deltaguard cannot stop it), and
                # may have committed outside the lease
                self._resume_wrapped(context, wrapped_method, kwargs)
                lost = payload.get("lease_lost") or "it was not held when the task resumed"
                raise self._overran(leases, str(lease_id or "?"), owner, str(lost))
            self._versions_before = versions_before
            work = self._reporting(context, lambda: self._resume_wrapped(context, wrapped_method, kwargs))
            return self._hold_and_run(leases, grant, owner, settings, work)

    def execute_complete(
        self,
        context: Context,
        event: dict[str, Any] | None = None,
        wait_started: float | None = None,
        behind: list[str] | None = None,
        explanation: str | None = None,
        request_id: str | None = None,
    ) -> Any:
        """Resume after the lease trigger fired: a hint that the lease may be free, so ask again."""
        if event and event.get("status") == "error":
            self.log.warning("deltaguard: lease trigger reported: %s", event.get("message"))
        wait = WaitState(wait_started or 0.0, list(behind or []), explanation, request_id)
        return self._run_leased(context, wait, resumed_without_kwargs=wait_started is None)

    def _release_after_failed_deferral(self, context: Context, next_kwargs: Mapping[str, Any] | None) -> None:
        """A deferral timed out or its trigger failed: release the lease or withdraw the queued request.

        Airflow replaces the resume kwargs with the error, so the try's derived request id (which is also
        its lease id) names what to release; a lease granted under another id expires after its TTL.
        """
        ids = {(next_kwargs or {}).get("request_id"), (next_kwargs or {}).get("lease_id")}
        with self._lease_hook(self._lease_settings()) as leases:
            owner = _owner(context)
            for rid in ids - {None}:
                leases.release(str(rid), owner)
            leases.withdraw(owner, None)

    def on_kill(self) -> None:
        leases = self._leases
        if leases is not None:
            leases.release_held()  # a no-op unless the wrapped work is running

    # ----------------------------------------------------------------------------------------- resolving
    def _lease_settings(self) -> LeaseSettings:
        from deltaguard import config
        from deltaguard.executor_guard import (
            DistributedSqliteStoreError,
            refuse_sqlite_under_distributed_executor,
        )

        try:
            settings = config.lease_settings(self.lease_store_url, self.lease_deferrable)
            refuse_sqlite_under_distributed_executor(settings.store_url)
        except (ValueError, DistributedSqliteStoreError) as exc:
            raise InvalidTaskInputError(f"deltaguard configuration: {exc}") from exc
        return settings

    def _lease_hook(self, settings: LeaseSettings) -> DeltaLeaseHook:
        from deltaguard.hooks.lease import DeltaLeaseHook

        return DeltaLeaseHook(settings)

    def _claims(self, context: Context) -> list[TableClaim]:
        """The lease claims of the declared tables. Raises :class:`InvalidTaskInputError` on bad input."""
        from deltaguard.core.admission import TableClaim
        from deltaguard.engines.discovery import read_table_config
        from deltaguard.hooks.delta import DeltaTableHook
        from deltaguard.writes.lease_targets import unreadable_config
        from deltaguard.writes.table_uri import table_key

        label = _app_id(self, context)
        try:
            targets = self.delta_lease_targets()
            hook = DeltaTableHook(self.delta_conn_id)
            profile = self._profile(hook)
            claims: list[TableClaim] = []
            for target in targets:
                uri = hook.table_uri(target.table)
                try:
                    table_config = read_table_config(uri, hook.storage_options or None)
                except Exception as exc:  # no credentials for it here: every writer on it is serialized
                    self.log.warning(
                        "deltaguard: cannot read %s (%s); treating its configuration as unknown", uri, exc
                    )
                    table_config = unreadable_config(uri, str(exc))
                operation = dataclasses.replace(target.operation, label=label)
                table_profile = dataclasses.replace(
                    profile, commit_coordination=self._coordination(hook, uri, profile, label)
                )
                claims.append(
                    TableClaim(
                        uri=table_key(uri), operation=operation, profile=table_profile, config=table_config
                    )
                )
        except ValueError as exc:  # InvalidWriteError, TableUriError, a predicate that does not parse, ...
            raise InvalidTaskInputError(str(exc)) from exc
        self.leased_uris = tuple(c.uri for c in claims)
        return claims

    def _engine_kind(self) -> tuple[str, str]:
        """What commits the work (:mod:`deltaguard.operators.wrapped_engine`); a TaskFlow function runs in
        the worker, so the declared or connection engine is taken as given."""
        from deltaguard.operators.wrapped_engine import DECLARED

        return DECLARED, "the task runs in the worker with the connection's engine"

    def _profile(self, hook: Any) -> EngineProfile:
        """The engine that commits, judged from the declaration, else from what the work is.

        Sets ``self._judged_as`` (a kind of :mod:`deltaguard.operators.wrapped_engine`) for
        :meth:`_coordination`.
        """
        from deltaguard.core.profiles import EngineName, EngineProfile
        from deltaguard.operators import wrapped_engine as kinds
        from deltaguard.writes.lease_targets import databricks_profile

        kind, why = self._engine_kind()
        self._judged_as = kind
        if self.databricks_runtime:
            return databricks_profile(str(self.databricks_runtime), self.databricks_photon)
        if kind == kinds.DECLARED:
            profile: EngineProfile = hook.get_engine(self.delta_engine).profile()
            return profile
        if kind == kinds.DATABRICKS:
            # The runtime is unknown: the oldest rules, without row-level concurrency, are the strictest.
            self.log.warning(
                "deltaguard: %s; judged as %s without row-level concurrency (declare databricks_runtime=)",
                why,
                STRICTEST_DATABRICKS_RUNTIME,
            )
            return EngineProfile(EngineName.DATABRICKS, STRICTEST_DATABRICKS_RUNTIME, row_level_off=True)
        if kind == kinds.UNKNOWN:
            self.log.warning(
                "deltaguard: %s; judged as delta-spark with a commit coordinator of its own, so no other "
                "writer of its tables runs beside it",
                why,
            )
        else:
            self.log.info("deltaguard: %s; judged as delta-spark", why)
        return EngineProfile(EngineName.DELTA_SPARK, _delta_spark_version())

    def _coordination(self, hook: Any, uri: str, profile: EngineProfile, label: str) -> str:
        """What excludes the wrapped work's commits to ``uri`` from other writers' (ADR 0026).

        delta-rs in the worker commits as deltaguard's own delta-rs engine would, with the connection's
        storage options. Spark work runs in its own driver with log store settings deltaguard cannot read:
        on Databricks the location decides; elsewhere only stores every driver shares are trusted, and a
        single-driver store gets a coordinator of this task alone, so every other writer conflicts with it.
        Work of an unknown engine always gets a coordinator of its own.
        """
        from deltaguard.core.profiles import EngineName
        from deltaguard.engines.commit_coordination import (
            deltars_coordination,
            single_driver,
            spark_coordination,
        )
        from deltaguard.operators.wrapped_engine import UNKNOWN

        if getattr(self, "_judged_as", None) == UNKNOWN:
            return single_driver(f"unknown-engine:{label}")
        if profile.name is EngineName.DELTA_RS:
            return deltars_coordination(uri, hook.storage_options or None)
        return spark_coordination(
            uri,
            databricks=profile.name is EngineName.DATABRICKS,
            conf=lambda _key: "",
            driver=f"wrapped:{label}",
        )

    def _defer_for_lease(self, settings: LeaseSettings, wait: WaitState, timeout_s: float | None) -> None:
        import datetime as dt

        from deltaguard.triggers.lease import LeaseAvailableTrigger

        assert wait.request_id is not None  # set by the answer that led here
        raise TaskDeferred(
            trigger=LeaseAvailableTrigger(
                store_url=settings.store_url, request_id=wait.request_id, poll_interval=settings.poll_s
            ),
            method_name="execute_complete",
            kwargs=wait.to_kwargs(),
            timeout=None if timeout_s is None else dt.timedelta(seconds=timeout_s),
        )


#: the Databricks Runtime a Databricks operator is judged as when the task does not name one: below 13.3
#: the model grants no row-level concurrency, the strictest rules it has
STRICTEST_DATABRICKS_RUNTIME = "12.2"
#: the delta-spark version a Spark job is judged as when delta-spark is not installed in the worker (the
#: delta-spark rules do not depend on the version)
FALLBACK_DELTA_SPARK_VERSION = "4.0"


def _delta_spark_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("delta-spark")
    except metadata.PackageNotFoundError:
        return FALLBACK_DELTA_SPARK_VERSION


def _templated(*values: Any) -> bool:
    """Whether any declaration holds a Jinja template (then it is checked when the task runs)."""

    def has(value: Any) -> bool:
        if isinstance(value, str):
            return "{{" in value or "{%" in value or value.rstrip().endswith((".sql", ".hql"))
        if isinstance(value, Mapping):
            return any(has(k) or has(v) for k, v in value.items())
        if isinstance(value, (list, tuple)):
            return any(has(v) for v in value)
        return False

    return any(has(v) for v in values)


def _app_id(task: Any, context: Context) -> str:
    """The task instance's name in lease messages: ``dag_id.task_id[.map_index]@run_id``."""
    from deltaguard.writes.task_identity import task_app_id

    return task_app_id(task.dag_id, task.task_id, context)


#: the scheduling settings a wrapper takes over from the operator it wraps
_COPIED_ATTRIBUTES = (
    "owner",
    "email",
    "retries",
    "retry_delay",
    "retry_exponential_backoff",
    "max_retry_delay",
    "execution_timeout",
    "pool",
    "pool_slots",
    "queue",
    "priority_weight",
    "weight_rule",
    "trigger_rule",
    "depends_on_past",
    "wait_for_downstream",
    "max_active_tis_per_dag",
    "max_active_tis_per_dagrun",
    "doc_md",
    "task_display_name",
)


class DeltaLeasedOperator(DeltaLeaseMixin, BaseOperator):
    """Run another operator under a deltaguard lease on the Delta table(s) it writes.

    The wrapped operator takes no place of its own in the DAG: this task replaces it, under its task id,
    with its retries, pool, timeouts and trigger rule. Its templates are rendered with this task's. Build
    it with :func:`with_delta_lease` (reads best in a DAG).

    :param operator: the operator doing the write (``DatabricksSqlOperator``, ``SparkSubmitOperator``,
        ``SQLExecuteQueryOperator``, ...). Without ``operation`` and ``sql``, its ``sql`` attribute (if a
        string) is classified.
    :param kwargs: the lease declaration of :class:`DeltaLeaseMixin`, and BaseOperator arguments.
    """

    template_fields: Sequence[str] = DeltaLeaseMixin.lease_template_fields
    operator_extra_links = (DeltaDecisionLink(),)
    ui_color = "#cfe8ff"

    def __init__(
        self,
        *,
        operator: BaseOperator,
        tables: str | Sequence[str] | Mapping[str, OperationLike] | None = None,
        operation: OperationLike | None = None,
        predicate: str | None = None,
        sql: str | Sequence[str] | None = None,
        delta_conn_id: str | None = None,
        engine: str | None = None,
        databricks_runtime: str | None = None,
        databricks_photon: bool = False,
        priority: int = 0,
        lease_wait_timeout: Any = None,
        deferrable: bool | None = None,
        lease_store_url: str | None = None,
        unfenced_grace: float | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(operator, BaseOperator) or isinstance(operator, DeltaLeasedOperator):
            raise TypeError(f"with_delta_lease wraps one operator, got {type(operator).__name__}")
        if operator.upstream_task_ids or operator.downstream_task_ids:
            raise ValueError(f"wrap {operator.task_id} before setting its dependencies")
        _detach(operator)
        kwargs.setdefault("task_id", _label(operator))
        if operator.has_dag():
            kwargs.setdefault("dag", operator.dag)
        if operator.task_group is not None and operator.task_group.node_id:
            kwargs.setdefault("task_group", operator.task_group)
        for name in _COPIED_ATTRIBUTES:
            if name not in kwargs and hasattr(operator, name):
                kwargs[name] = getattr(operator, name)
        super().__init__(**kwargs)
        self.operator = operator
        self._init_lease(
            tables=tables,
            operation=operation,
            predicate=predicate,
            sql=sql,
            delta_conn_id=delta_conn_id,
            engine=engine,
            databricks_runtime=databricks_runtime,
            databricks_photon=databricks_photon,
            priority=priority,
            lease_wait_timeout=lease_wait_timeout,
            deferrable=deferrable,
            lease_store_url=lease_store_url,
            unfenced_grace=DEFAULT_UNFENCED_GRACE if unfenced_grace is None else unfenced_grace,
        )

    def _engine_kind(self) -> tuple[str, str]:
        """What commits the wrapped operator's writes (:mod:`deltaguard.operators.wrapped_engine`)."""
        from deltaguard.operators.wrapped_engine import wrapped_engine_kind

        declared = bool(self.delta_engine or self.databricks_runtime)
        return wrapped_engine_kind(self.operator, declared=declared)

    def default_sql(self) -> str | Sequence[str] | None:
        sql = getattr(self.operator, "sql", None)
        if isinstance(sql, str) or (isinstance(sql, (list, tuple)) and all(isinstance(s, str) for s in sql)):
            return sql
        return None

    def render_template_fields(self, context: Context, jinja_env: Any = None) -> None:
        super().render_template_fields(context, jinja_env)
        self.operator.render_template_fields(context, jinja_env)

    def execute(self, context: Context) -> Any:
        return self._run_leased(context, WaitState(started=time.time()))

    def _leased_work(self, context: Context) -> Any:
        return self.operator.execute(context)

    def _resume_wrapped(self, context: Context, method: str, kwargs: dict[str, Any]) -> Any:
        return self.operator.resume_execution(method, kwargs, context)

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """A failed deferral (timeout, trigger error) releases what this try holds before failing."""
        if next_method == TRIGGER_FAIL:
            self._release_after_failed_deferral(context, next_kwargs)
            return self.operator.resume_execution(next_method, next_kwargs, context)
        return super().resume_execution(next_method, next_kwargs, context)

    def on_kill(self) -> None:
        try:
            self.operator.on_kill()
        finally:
            super().on_kill()


def with_delta_lease(
    operator: BaseOperator,
    *,
    tables: str | Sequence[str] | Mapping[str, OperationLike] | None = None,
    operation: OperationLike | None = None,
    predicate: str | None = None,
    sql: str | Sequence[str] | None = None,
    **kwargs: Any,
) -> DeltaLeasedOperator:
    """Put ``operator`` under a deltaguard lease; use the result in the DAG in its place.

    ``load = with_delta_lease(DatabricksSqlOperator(task_id="load", sql=...), tables="s3://b/sales",
    databricks_runtime="15.4")``

    :param operator: the operator that writes (not yet wired to other tasks).
    :param tables: the table(s) it writes (see :class:`DeltaLeaseMixin`).
    :param operation: its operation kind or :class:`~deltaguard.core.operations.Operation`.
    :param predicate: the rows the operation touches.
    :param sql: the statement(s) to classify instead (default: the operator's own ``sql``).
    :param kwargs: further :class:`DeltaLeasedOperator` arguments.
    """
    return DeltaLeasedOperator(
        operator=operator, tables=tables, operation=operation, predicate=predicate, sql=sql, **kwargs
    )


def _label(operator: BaseOperator) -> str:
    """The task id as written, without the task group's prefix (the wrapper's group adds it again)."""
    group = operator.task_group
    if group is not None and group.node_id and group.prefix_group_id:
        return operator.task_id[len(group.node_id) + 1 :]
    return operator.task_id


def _detach(operator: BaseOperator) -> None:
    """Take the wrapped operator out of its DAG: the wrapper takes its place under the same id."""
    dag = operator.get_dag()
    if dag is not None and dag.task_dict.get(operator.task_id) is operator:
        dag._remove_task(operator.task_id)
