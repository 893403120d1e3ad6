"""The lease part of a task that writes Delta tables through someone else's engine: :class:`DeltaLeaseMixin`.

:class:`~deltaguard.operators.leased.DeltaLeasedOperator` (built with
:func:`~deltaguard.operators.leased.with_delta_lease`) wraps a classic operator such as
``DatabricksSqlOperator`` or ``SparkSubmitOperator``; :func:`deltaguard.decorators.delta_write.delta_write_task`
(``@task.delta_write``) wraps a TaskFlow function. Both are this mixin, the second implementation of the work
under a lease of :class:`~deltaguard.operators.lifecycle.LeaseLifecycleMixin` (the first is deltaguard's own
write, :class:`~deltaguard.operators.base.DeltaWriteOperator`): resolve the declared tables into lease claims
(bad input fails before any lease), wait for one lease over all of them, run the wrapped work while the hook
renews the lease (in the triggerer, through :class:`~deltaguard.triggers.leased.LeaseKeepingTrigger`, while
the wrapped operator is deferred), and release it when the work ends.

The wrapped work commits through its own engine, so deltaguard cannot fence its commit; instead (ADR 0021)
the lease of unfenced work lives ``unfenced_grace`` times the TTL without renewals, and when the work ends
the lease is confirmed once more: if it was lost, the task fails with
:class:`~deltaguard.exceptions.WrappedLeaseLostError` and the table is flagged (``unfenced_overrun``).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import TaskDeferred

from deltaguard.leases.targets import LeaseTarget, OperationLike, lease_targets
from deltaguard.operators.failures import InvalidTaskInputError, WrappedLeaseLostFailure
from deltaguard.operators.leased_lineage import LeasedLineageMixin
from deltaguard.operators.lifecycle import LeaseLifecycleMixin, task_owner_of

if TYPE_CHECKING:
    from airflow.sdk import Context

    from deltaguard.core.admission import Granted, Owner, TableClaim, Waiting
    from deltaguard.hooks.lease import DeltaLeaseHook
    from deltaguard.leases.waiting import WaitState

__all__ = ["DEFAULT_UNFENCED_GRACE", "RESUME_WRAPPED", "DeltaLeaseMixin"]

#: how many lease TTLs the lease of unfenced (wrapped) work survives without a renewal
DEFAULT_UNFENCED_GRACE = 5.0

#: the method a task resumes in after the wrapped operator's own deferral
RESUME_WRAPPED = "resume_leased"


class DeltaLeaseMixin(LeasedLineageMixin, LeaseLifecycleMixin, abc.ABC):
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
    # each leased table's version when the lease was granted (lineage; None: carried through no deferral)
    _versions_before: dict[str, int | None] | None

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
        from deltaguard.core.admission import check_priority

        if not float(unfenced_grace) >= 1:
            raise ValueError(
                f"unfenced_grace must be at least 1 (a multiple of the TTL), got {unfenced_grace}"
            )
        self.unfenced_grace = float(unfenced_grace)
        check_priority(int(priority))
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
        if not _templated(tables, predicate, sql):
            self.delta_lease_targets()  # bad declarations fail at DAG parse time, as a ValueError
        self._declare_leased_outlets()  # lineage: the tables' assets (deltaguard.operators.leased_lineage)

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

    # ------------------------------------------------------------------------- the work under the lease
    def prepare_try(self, context: Context) -> list[TableClaim]:
        return self._claims(context)

    def lease_subject(self, prepared: list[TableClaim]) -> str:
        return ", ".join(self.leased_uris)

    def ask_lease(
        self, leases: DeltaLeaseHook, prepared: list[TableClaim], owner: Owner, request_id: str | None
    ) -> Granted | Waiting:
        return leases.ask_claims(
            claims=prepared,
            owner=owner,
            priority=self.priority,
            request_id=request_id,
            ttl_s=leases.settings.ttl_s * self.unfenced_grace,
        )

    def work_under_lease(
        self,
        context: Context,
        leases: DeltaLeaseHook,
        prepared: list[TableClaim],
        grant: Granted,
        owner: Owner,
        wait: WaitState,
        decision: str,
    ) -> Any:
        self.log.info(
            "deltaguard: lease %s held on %s; the wrapped work starts", grant.lease_id, self.leased_uris
        )
        self._versions_before = self._leased_versions()  # lineage: what the work's commits follow
        return self._hold_and_run(
            leases, grant, owner, self._reporting(context, lambda: self._leased_work(context))
        )

    def fail_deferral(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        return self._resume_wrapped(context, next_method, next_kwargs or {})

    def _hold_and_run(
        self,
        leases: DeltaLeaseHook,
        grant: Granted,
        owner: Owner,
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
                raise self._keeping_lease(deferred, leases, grant, owner) from None
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
        self, deferred: TaskDeferred, leases: DeltaLeaseHook, grant: Granted, owner: Owner
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
                store_url=leases.settings.store_url,
                lease_id=grant.lease_id,
                owner=dataclasses.asdict(owner),
                heartbeat_s=leases.settings.heartbeat_s,
                first_event_after_s=leases.settings.first_event_s,
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
        owner = task_owner_of(context)
        with self.try_lease_hook() as leases:
            grant = leases.resume_held(lease_id, owner) if lease_id else None
            if grant is None:
                # nothing left to hold: the wrapped work still finishes (deltaguard cannot stop it), and
                # may have committed outside the lease
                self._resume_wrapped(context, wrapped_method, kwargs)
                lost = payload.get("lease_lost") or "it was not held when the task resumed"
                raise self._overran(leases, str(lease_id or "?"), owner, str(lost))
            self._versions_before = versions_before
            work = self._reporting(context, lambda: self._resume_wrapped(context, wrapped_method, kwargs))
            return self._hold_and_run(leases, grant, owner, work)

    # ----------------------------------------------------------------------------------------- resolving
    def _claims(self, context: Context) -> list[TableClaim]:
        """The lease claims of the declared tables. Raises :class:`InvalidTaskInputError` on bad input."""
        from deltaguard.core.admission import TableClaim
        from deltaguard.engines.sources import read_judged_config
        from deltaguard.hooks.delta import DeltaTableHook
        from deltaguard.leases.targets import unreadable_config
        from deltaguard.operators.wrapped_engine import judged_profile, wrapped_coordination
        from deltaguard.writes.table_uri import table_key

        label = _app_id(self, context)
        try:
            targets = self.delta_lease_targets()
            hook = DeltaTableHook(self.delta_conn_id)
            profile, kind = judged_profile(self, hook)
            evolution = self._schema_evolution_source()
            claims: list[TableClaim] = []
            for target in targets:
                uri = hook.table_uri(target.table)
                try:
                    table_config = read_judged_config(uri, hook.storage_options or None)
                except Exception as exc:  # no credentials for it here: every writer on it is serialized
                    self.log.warning(
                        "deltaguard: cannot read %s (%s); treating its configuration as unknown", uri, exc
                    )
                    table_config = unreadable_config(uri, str(exc))
                operation = dataclasses.replace(target.operation, label=label)
                if evolution and operation.misjudged_under_auto_merge:
                    self.log.warning(
                        "deltaguard: %s, so this %s may add columns to %s as it commits; judged as a schema "
                        "change (every concurrent write on the table waits)",
                        evolution,
                        operation.kind.value,
                        uri,
                    )
                    operation = dataclasses.replace(operation, evolves_schema=True)
                table_profile = dataclasses.replace(
                    profile, commit_coordination=wrapped_coordination(kind, hook, uri, profile, label)
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

    def _schema_evolution_source(self) -> str | None:
        """Where the work's own settings let its writes evolve the table schema unjudged, or ``None``. A
        TaskFlow function's settings are its code, which cannot be read here: such a task declares
        ``evolves_schema=True`` (ADR 0035)."""
        return None

    def _engine_kind(self) -> tuple[str, str]:
        """What commits the work (:mod:`deltaguard.operators.wrapped_engine`); a TaskFlow function runs in
        the worker, so the declared or connection engine is taken as given."""
        from deltaguard.operators.wrapped_engine import DECLARED

        return DECLARED, "the task runs in the worker with the connection's engine"


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
    from deltaguard.writes.prepared import task_app_id

    return task_app_id(task.dag_id, task.task_id, context)
