"""The shared base of every deltaguard write operator.

``execute`` is always the same five steps; subclasses only say which write they do (:meth:`build_spec`):

1. resolve the table (connection base URI + name), its configuration and the engine;
2. validate: bad input fails here, before any lease is taken (unknown URI scheme, unparsable predicate,
   MERGE without ON, partition values for a column the table is not partitioned by, engine checks);
3. acquire the table's lease from the lease store, or wait: deferrably (a trigger polls the store in the
   triggerer and frees the worker slot; on resume the task asks again, since a trigger event is a hint and
   not a grant) or in the worker;
4. write through the engine while a background thread renews the lease;
5. release the lease (also on failure and on kill) and return the result (pushed to XCom).
"""

from __future__ import annotations

import abc
import dataclasses
import datetime as dt
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from deltaguard import config
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.operators.links import DeltaDecisionLink, DeltaTableHistoryLink
from deltaguard.table_uri import TableUriError, table_key
from deltaguard.task_identity import app_id as make_app_id
from deltaguard.task_identity import app_version as make_app_version
from deltaguard.task_identity import commit_metadata
from deltaguard.write_plan import check_spec, decision_line, task_result, wait_reason

if TYPE_CHECKING:
    from airflow.sdk import Context

    from deltaguard.core.operations import Operation
    from deltaguard.core.profiles import EngineProfile
    from deltaguard.core.table_config import TableConfig
    from deltaguard.engines.base import DeltaEngine, WriteResult
    from deltaguard.engines.specs import WriteSpec
    from deltaguard.leases.manager import LeaseManager


class LeaseWaitTimeout(TimeoutError):
    """The task waited longer than ``lease_wait_timeout`` for its lease."""


class CallableSource:
    """A zero-argument source callable kept out of Airflow's template rendering.

    Airflow calls any callable found in a template field at render time (with ``context=``); a source
    callable must instead run only when the write runs, under the lease. Operators wrap callables in this
    non-callable holder and unwrap them for the engine.
    """

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __repr__(self) -> str:
        return f"CallableSource({getattr(self.fn, '__qualname__', self.fn)!r})"


def wrap_source(source: Any) -> Any:
    """Wrap a callable source (see :class:`CallableSource`); other sources are returned unchanged."""
    return CallableSource(source) if callable(source) else source


def unwrap_source(source: Any) -> Any:
    return source.fn if isinstance(source, CallableSource) else source


def source_for_engine(source: Any, engine_name: str, spark_connections: tuple[str | None, str | None]) -> Any:
    """``source`` as the engine called ``engine_name`` takes it.

    Unwraps a :class:`CallableSource`; a Spark source (``def f(spark) -> DataFrame`` or a ``SparkSource``)
    goes through :func:`deltaguard.engines.spark_sources.prepare_source`: the Spark engine builds it on its
    own session, any other engine gets a zero-argument callable whose DataFrame it converts with
    ``toArrow()``. A bare function's session is built from the task's Spark connections (a ``SparkSource``
    keeps its own settings); without any, a local PySpark-only session. Nothing here starts Spark: the
    session is created when the engine reads the source, during the write.

    :param source: the operator's source (possibly wrapped).
    :param engine_name: the resolved engine's ``name``.
    :param spark_connections: the task's ``(spark, spark_connect)`` connection ids.
    """
    raw = unwrap_source(source)
    if not callable(raw):
        return raw
    from deltaguard.engines.spark_sources import SparkSource, is_spark_source, prepare_source, session_factory

    factory = None
    if engine_name != "spark" and is_spark_source(raw) and not isinstance(raw, SparkSource):
        factory = session_factory(*spark_connections)
    return prepare_source(raw, engine_name, session_factory=factory)


class _Prepared:
    """Everything resolved for one attempt: table, configuration, engine, spec, operation."""

    def __init__(
        self,
        uri: str,
        engine: DeltaEngine,
        table_config: TableConfig,
        profile: EngineProfile,
        spec: WriteSpec,
        operation: Operation,
    ) -> None:
        self.uri = uri
        self.key = table_key(uri)
        self.engine = engine
        self.table_config = table_config
        self.profile = profile
        self.spec = spec
        self.operation = operation


class DeltaWriteOperator(BaseOperator):
    """Base class: one conflict-aware write to one Delta table.

    :param table: table URI (``s3://b/wh/sales``, ``/data/sales``) or a name relative to the connection's
        base URI. Templated.
    :param delta_conn_id: a ``delta`` connection (base URI, storage options, engine); optional.
    :param engine: ``delta-rs`` or ``spark``; default: the connection's, else ``[deltaguard] default_engine``.
    :param spark_conn_id: ``spark`` connection (apache-spark provider) for ``engine="spark"``: master and
        extra ``spark-conf`` of the worker session, Databricks extras for the profile. Also the session that
        builds ``def f(spark)`` sources for other engines. Templated.
    :param spark_connect_conn_id: ``spark_connect`` connection: ``engine="spark"`` over Spark Connect (and
        such sources built there). Templated. Without either, the ``delta`` connection's extras
        ``spark_conn_id``/``spark_connect_conn_id`` are used, else ``[deltaguard] spark_conn_id`` /
        ``spark_connect_conn_id``; the pair comes whole from the first of these that names either.
    :param deferrable: wait for the lease in the triggerer (default: ``True`` unless Airflow's
        ``[operators] default_deferrable`` was set explicitly, which is then obeyed).
    :param lease_wait_timeout: give up after waiting this long for the lease (seconds or timedelta;
        ``None`` waits until Airflow's own task timeout).
    :param priority: queue priority (-100..100); a higher one may overtake briefly, never starve others.
    :param idempotent: write with the app transaction ``(dag_id.task_id[.map_index], run start in epoch
        microseconds)`` so a retry after a committed write is a no-op. See :mod:`deltaguard.task_identity`.
    :param app_version: override the app-transaction version (an int, templated), e.g. a batch id.
    :param lease_store_url: override ``[deltaguard] lease_store_url`` (tests, multi-store setups).
    """

    template_fields: Sequence[str] = ("table", "delta_conn_id", "spark_conn_id", "spark_connect_conn_id")
    operator_extra_links = (DeltaTableHistoryLink(), DeltaDecisionLink())
    ui_color = "#cfe8ff"

    def __init__(
        self,
        *,
        table: str,
        delta_conn_id: str | None = None,
        engine: str | None = None,
        spark_conn_id: str | None = None,
        spark_connect_conn_id: str | None = None,
        deferrable: bool | None = None,
        lease_wait_timeout: dt.timedelta | float | None = None,
        priority: int = 0,
        idempotent: bool = True,
        app_version: int | str | None = None,
        lease_store_url: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(table, str) or not table.strip():
            raise ValueError(f"{type(self).__name__}: 'table' must be a non-empty string")
        if not -100 <= int(priority) <= 100:
            raise ValueError(f"priority must be between -100 and 100, got {priority}")
        self.table = table
        self.delta_conn_id = delta_conn_id
        self.engine = engine
        self.spark_conn_id = spark_conn_id
        self.spark_connect_conn_id = spark_connect_conn_id
        self.deferrable = deferrable
        if isinstance(lease_wait_timeout, dt.timedelta):
            lease_wait_timeout = lease_wait_timeout.total_seconds()
        self.lease_wait_timeout = None if lease_wait_timeout is None else float(lease_wait_timeout)
        self.priority = int(priority)
        self.idempotent = idempotent
        self.app_version = app_version
        self.lease_store_url = lease_store_url
        self.resolved_engine: DeltaEngine | None = None
        self.resolved_spark_connections: tuple[str | None, str | None] = (None, None)
        # set while a lease is held, so on_kill can release it
        self._held: tuple[LeaseManager, str, Any] | None = None

    # ----------------------------------------------------------------------------------------- subclasses
    @abc.abstractmethod
    def build_spec(self, table_config: TableConfig) -> WriteSpec:
        """The write this task does; every operator defines it (BaseOperator's metaclass is an ABCMeta, so
        a subclass without it cannot be instantiated). ``self.resolved_engine`` is set when this is called;
        sources go into the spec through :meth:`write_source`."""

    def write_source(self, source: Any) -> Any:
        """``source`` adapted to the resolved engine (see :func:`source_for_engine`)."""
        engine_name = str(getattr(self.resolved_engine, "name", "") or "")
        return source_for_engine(source, engine_name, self.resolved_spark_connections)

    def conflict_operation(self, spec: WriteSpec) -> Operation:
        """What the conflict model is told this task writes (default: the spec's own operation)."""
        return spec.operation()

    # ------------------------------------------------------------------------------------------ resolving
    def _hook(self) -> Any:
        from deltaguard.hooks.delta import DeltaTableHook

        return DeltaTableHook(self.delta_conn_id)

    def _prepare(self, context: Context) -> _Prepared:
        """Steps 1 and 2: resolve and validate. Raises before any lease exists."""
        hook = self._hook()
        try:
            uri = hook.table_uri(self.table)
        except TableUriError as exc:
            raise InvalidWriteError(str(exc)) from None
        spark_connections = hook.spark_connections(self.spark_conn_id, self.spark_connect_conn_id)
        engine = hook.get_engine(
            self.engine, spark_conn_id=spark_connections[0], spark_connect_conn_id=spark_connections[1]
        )
        self.resolved_engine = engine
        self.resolved_spark_connections = spark_connections
        table_config = engine.table_config(uri)
        spec = self.build_spec(table_config)
        check_spec(spec, table_config)
        engine.validate(uri, spec, table_config)
        operation = dataclasses.replace(self.conflict_operation(spec), label=self._app_id(context))
        return _Prepared(uri, engine, table_config, engine.profile(), spec, operation)

    def _app_id(self, context: Context) -> str:
        # a mapped task instance writes under its own app id, so its siblings are not "duplicates"
        map_index = getattr(context.get("ti"), "map_index", None)
        return make_app_id(self.dag_id, self.task_id, map_index if isinstance(map_index, int) else None)

    def _manager(self) -> LeaseManager:
        from deltaguard.leases.executor_guard import refuse_sqlite_under_distributed_executor
        from deltaguard.leases.manager import LeaseManager

        url = self.lease_store_url or config.lease_store_url()
        refuse_sqlite_under_distributed_executor(url)  # before the store is opened or any lease requested
        return LeaseManager(url)

    def _use_deferral(self) -> bool:
        return config.default_deferrable() if self.deferrable is None else bool(self.deferrable)

    # ------------------------------------------------------------------------------------------ execution
    def execute(self, context: Context) -> dict[str, Any]:
        prepared = self._prepare(context)
        return self._admit_and_write(context, prepared, wait_started=time.time(), behind=[], explanation=None)

    def execute_complete(
        self,
        context: Context,
        event: dict[str, Any] | None = None,
        wait_started: float | None = None,
        behind: list[str] | None = None,
        explanation: str | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Resume after the lease trigger fired: a hint that the lease may be free, so ask again."""
        if event and event.get("status") == "error":
            self.log.warning("deltaguard: lease trigger reported: %s", event.get("message"))
        prepared = self._prepare(context)  # the table may have changed while we waited: validate again
        if wait_started is None:
            # resumed without our kwargs (dag.test() drops them): the decision log knows when we queued
            wait_started, logged_behind, logged_explanation = self._logged_wait(_owner(context))
            behind = [*logged_behind, *(behind or [])]
            explanation = explanation or logged_explanation
        return self._admit_and_write(
            context,
            prepared,
            wait_started=wait_started or time.time(),
            behind=list(behind or []),
            explanation=explanation,
            request_id=request_id,
        )

    def resume_execution(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """On a trigger timeout, withdraw the queued request before failing.

        Otherwise the abandoned queue entry would hold back conflicting writers until it expires.
        """
        from airflow.sdk.exceptions import TaskDeferralError, TaskDeferralTimeout

        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except (TaskDeferralTimeout, TaskDeferralError) as exc:
            self._withdraw(context, (next_kwargs or {}).get("request_id"))
            if isinstance(exc, TaskDeferralTimeout):
                raise LeaseWaitTimeout(
                    f"waited longer than lease_wait_timeout={self.lease_wait_timeout} s for the lease on {self.table}"
                ) from exc
            raise

    def _withdraw(self, context: Context, request_id: str | None) -> None:
        from deltaguard.lease_requests import task_request_id

        owner = _owner(context)
        manager = self._manager()
        try:
            for rid in dict.fromkeys([request_id, task_request_id(owner)]):
                if rid:
                    self._release(manager, rid, owner)
        finally:
            manager.store.close()

    def _logged_wait(self, owner: Any) -> tuple[float | None, list[str], str | None]:
        """When this try first queued, behind whom, and why, from the lease store's decision log."""
        from deltaguard.lease_requests import task_request_id

        request_id = task_request_id(owner)
        manager = self._manager()
        try:
            waits = [
                d
                for d in manager.decisions(owner=owner, limit=50)
                if d.kind == "wait" and d.request_id == request_id
            ]
        finally:
            manager.store.close()
        if not waits:
            return None, [], None
        first = min(waits, key=lambda d: d.at)
        behind = [
            b.get("owner", "")
            for d in sorted(waits, key=lambda d: d.at)
            for b in d.detail.get("blockers", [])
        ]
        detail = first.detail
        reason = wait_reason(
            detail.get("reasons", []), detail.get("exceptions", []), detail.get("advice", [])
        )
        return first.at, [b for b in behind if b], reason or None

    def _admit_and_write(
        self,
        context: Context,
        prepared: _Prepared,
        *,
        wait_started: float,
        behind: list[str],
        explanation: str | None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        from deltaguard.core.admission import Granted, explain
        from deltaguard.lease_requests import lease_request, new_request_id
        from deltaguard.leases.manager import LeaseLostError, RequestClosedError

        manager = self._manager()
        owner = _owner(context)
        poll = config.poll_interval()
        try:
            while True:
                request = lease_request(
                    table_key=prepared.key,
                    operation=prepared.operation,
                    profile=prepared.profile,
                    table_config=prepared.table_config,
                    owner=owner,
                    ttl_s=config.lease_ttl(),
                    poll_interval_s=poll,
                    priority=self.priority,
                    request_id=request_id,
                )
                try:
                    result = manager.acquire(request)
                except (LeaseLostError, RequestClosedError) as exc:
                    # the trigger's grant expired before the task resumed, or the request ended: ask anew
                    self.log.info(
                        "deltaguard: request %s is over (%s); asking again", request.request_id, exc
                    )
                    # a fresh random id: the try's derived id names the request that just ended
                    request_id = new_request_id()
                    continue
                request_id = result.request_id
                if isinstance(result, Granted):
                    break
                behind.extend(b.owner.describe() for b in result.blockers)
                if explanation is None:
                    self.log.info("deltaguard: %s", explain(result))
                    explanation = wait_reason(
                        result.reasons, [e.value for e in result.exceptions], result.advice
                    )
                waited = time.time() - wait_started
                remaining = None if self.lease_wait_timeout is None else self.lease_wait_timeout - waited
                if remaining is not None and remaining <= 0:
                    manager.release(request_id, owner)  # withdraw from the queue
                    raise LeaseWaitTimeout(
                        f"waited {waited:.0f} s for the lease on {prepared.uri} (lease_wait_timeout="
                        f"{self.lease_wait_timeout:.0f} s): {explanation}"
                    )
                if self._use_deferral():
                    self._defer_for_lease(request_id, remaining, wait_started, behind, explanation)
                time.sleep(min(poll, remaining if remaining is not None else poll))
            lease_id = result.lease_id
            waited_s = time.time() - wait_started
            decision = decision_line(waited_s, behind, explanation)
            self.log.info("%s", decision)
            self._held = (manager, lease_id, owner)
            try:
                write_result = self._write_with_heartbeat(context, prepared, manager, lease_id, owner)
            finally:
                self._held = None
                self._release(manager, lease_id, owner)
            self.log.info(
                "deltaguard: committed %s to %s at version %s%s",
                write_result.operation,
                prepared.uri,
                write_result.version,
                " (duplicate: already committed by an earlier try, nothing written)"
                if write_result.duplicate
                else "",
            )
            return task_result(
                write_result,
                waited_s=waited_s,
                behind=behind,
                lease_id=lease_id,
                app_id=prepared.operation.label,
                app_version=self._resolved_app_version(context),
                decision=decision,
            )
        finally:
            manager.store.close()

    def _defer_for_lease(
        self,
        request_id: str,
        remaining: float | None,
        wait_started: float,
        behind: list[str],
        explanation: str | None,
    ) -> None:
        from deltaguard.triggers.lease import LeaseAvailableTrigger

        trigger = LeaseAvailableTrigger(
            store_url=self.lease_store_url or config.lease_store_url(),
            request_id=request_id,
            poll_interval=config.poll_interval(),
        )
        self.defer(
            trigger=trigger,
            method_name="execute_complete",
            kwargs={
                "wait_started": wait_started,
                "behind": list(dict.fromkeys(behind)),
                "explanation": explanation,
                "request_id": request_id,
            },
            timeout=None if remaining is None else dt.timedelta(seconds=remaining),
        )

    def _resolved_app_version(self, context: Context) -> int | None:
        if not self.idempotent:
            return None
        if self.app_version is not None and str(self.app_version).strip() != "":
            return int(self.app_version)
        dag_run = context.get("dag_run")
        return make_app_version(
            getattr(dag_run, "start_date", None),
            getattr(dag_run, "run_after", None),
            getattr(dag_run, "logical_date", None) or context.get("logical_date"),
        )

    def _write_with_heartbeat(
        self, context: Context, prepared: _Prepared, manager: LeaseManager, lease_id: str, owner: Any
    ) -> WriteResult:
        from deltaguard.engines.specs import WriteContext

        ti = context.get("ti")
        dag_run = context.get("dag_run")
        write_context = WriteContext(
            app_id=prepared.operation.label if self.idempotent else None,
            app_version=self._resolved_app_version(context),
            commit_metadata=commit_metadata(
                dag_id=self.dag_id,
                run_id=str(getattr(dag_run, "run_id", None) or context.get("run_id") or ""),
                task_id=self.task_id,
                try_number=getattr(ti, "try_number", None),
                map_index=getattr(ti, "map_index", None),
                lease_id=lease_id,
            ),
        )
        stop = threading.Event()
        lost: list[BaseException] = []
        interval = config.heartbeat_interval()

        def beat() -> None:
            # renew until the write finishes; a failed renewal is reported, the write is not interrupted
            while not stop.wait(interval):
                try:
                    manager.heartbeat(lease_id, owner)
                except Exception as exc:
                    lost.append(exc)
                    self.log.error("deltaguard: lease %s heartbeat failed: %s", lease_id, exc)

        thread = threading.Thread(target=beat, name=f"deltaguard-heartbeat-{lease_id}", daemon=True)
        thread.start()
        try:
            return prepared.engine.write(prepared.uri, prepared.spec, write_context)
        finally:
            stop.set()
            thread.join(timeout=interval + 5)
            if lost:
                self.log.warning(
                    "deltaguard: the lease was not renewed %d time(s) during the write", len(lost)
                )

    def _release(self, manager: LeaseManager, lease_id: str, owner: Any) -> None:
        # a failing release must not hide the write's own outcome; the lease then expires after its TTL
        try:
            manager.release(lease_id, owner)
        except Exception as exc:
            self.log.warning(
                "deltaguard: could not release lease %s (%s); it expires after %.0f s",
                lease_id,
                exc,
                config.lease_ttl(),
            )

    def on_kill(self) -> None:
        held = self._held
        if held is not None:
            manager, lease_id, owner = held
            try:
                manager.release(lease_id, owner)
                self.log.info("deltaguard: released lease %s on kill", lease_id)
            except Exception as exc:
                self.log.warning("deltaguard: could not release lease %s on kill: %s", lease_id, exc)


def _owner(context: Context) -> Any:
    from deltaguard.lease_requests import task_owner

    ti = context.get("ti")
    dag_run = context.get("dag_run")
    return task_owner(
        str(getattr(ti, "dag_id", "") or ""),
        str(getattr(dag_run, "run_id", None) or getattr(ti, "run_id", "") or ""),
        str(getattr(ti, "task_id", "") or ""),
        getattr(ti, "map_index", -1),
        getattr(ti, "try_number", 0),
    )
