"""The shared base of every deltaguard write operator: the write is its work under the lease.

A try is the lease lifecycle of :class:`~deltaguard.operators.lifecycle.LeaseLifecycleMixin` (options, the
waiting rule, deferral, resume, kill); subclasses only say which write they do (:meth:`build_spec`). Here:

1. prepare: resolve the table (connection base URI + name), its configuration and the engine, build the
   write's scope and validate it, once; bad input fails before any lease is taken, with
   ``AirflowFailException`` so no retry is spent on it (unknown URI scheme, unparsable predicate, MERGE
   without ON, partition values for a column the table is not partitioned by, engine checks). The result is
   a :class:`~deltaguard.writes.prepared.PreparedWrite`, carried through a deferral so the resumed try
   neither reads the table nor validates again;
2. with the lease granted for that value, commit it through the engine while the hook renews the lease and
   fences the commit, then release it (also on failure and on kill) and return the result (pushed to XCom).
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import datetime as dt
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from deltaguard.core.admission import check_priority
from deltaguard.engines.base import build_engine
from deltaguard.engines.fencing import engine_released
from deltaguard.engines.sources import (
    CallableSource,
    attach_oracle,
    checks_on_snapshot,
    engine_table_config,
    judged_by_file_stats,
    pinned_snapshot,
    source_for_engine,
    unwrap_source,
    with_target_reads,
    wrap_source,
)
from deltaguard.exceptions import LateCommitError, LeaseWaitTimeout
from deltaguard.lineage.assets import DeltaLineageMixin
from deltaguard.operators.failures import InvalidTaskInputError, LateCommitFailure
from deltaguard.operators.lifecycle import LeaseLifecycleMixin
from deltaguard.operators.links import DeltaDecisionLink, DeltaTableLink
from deltaguard.writes.prepared import PreparedWrite, task_app_id, task_app_version, task_result

if TYPE_CHECKING:
    from airflow.sdk import Context

    from deltaguard.core.admission import Granted, Owner, Waiting
    from deltaguard.core.operations import Operation
    from deltaguard.core.table_config import TableConfig
    from deltaguard.engines.base import DeltaEngine
    from deltaguard.engines.specs import WriteSpec
    from deltaguard.hooks.lease import DeltaLeaseHook
    from deltaguard.leases.waiting import WaitState

# kept importable from here: DAG files and tests use these names through this module
__all__ = [
    "CallableSource",
    "DeltaWriteOperator",
    "InvalidTaskInputError",
    "LateCommitFailure",
    "LeaseWaitTimeout",
    "source_for_engine",
    "unwrap_source",
    "wrap_source",
]


@dataclasses.dataclass
class _Prepared:
    """One try's write: the :class:`PreparedWrite` value and what lives only in this process with it."""

    value: PreparedWrite
    engine: DeltaEngine
    spec: WriteSpec  # built from the task's arguments and ``value`` (its source cannot be serialised)
    hook: Any = None  # the table hook: storage options and hook-level lineage
    snapshot: Any = None  # the open handle at read_version (delta-rs), the write's snapshot if still current


class DeltaWriteOperator(DeltaLineageMixin, LeaseLifecycleMixin, BaseOperator):
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
    :param deferrable: wait for the lease in the triggerer, freeing the worker slot. ``None`` (the default)
        reads, in this order, ``AIRFLOW__DELTAGUARD__DEFERRABLE``, Airflow's
        ``AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE`` from the environment, then ``[deltaguard] deferrable``
        (default ``True``). Airflow's ``[operators] default_deferrable`` in ``airflow.cfg`` is not read:
        Airflow writes ``false`` there into every file it generates (:func:`deltaguard.config.default_deferrable`).
    :param lease_wait_timeout: give up after waiting this long for the lease (seconds or timedelta;
        ``None`` waits until Airflow's own task timeout).
    :param expected_duration: how long the write is expected to hold the table's lease (seconds or
        timedelta). Lets it start ahead of an earlier queued conflicting write when it is expected to end
        before that write could start (backfilling, ADR 0017). ``None`` (default): the median of this
        task's recent holds on the table from the decision log; a task with none queues FIFO. A wrong
        estimate only changes the order of conflicting writes, never lets them overlap.
    :param priority: queue priority (``MIN_PRIORITY``..``MAX_PRIORITY`` of :mod:`deltaguard.core.admission`, -100..100); a higher one may overtake briefly, never starve others.
    :param idempotent: write with the app transaction ``(dag_id/task_id[/map_index]@run_id, the try
        number at the task instance's last clear)`` so a retry after a committed write is a no-op while
        other runs and a cleared task instance write. See :mod:`deltaguard.writes.prepared`.
    :param app_version: override the app-transaction version (an int, templated).
    :param lease_store_url: override ``[deltaguard] lease_store_url`` (tests, multi-store setups).
    :param emit_asset: declare the table's Airflow asset as an outlet and attach the committed version and
        operation to its event (default ``True``; see :mod:`deltaguard.lineage.assets`, ADR 0022).
    :param file_stats: with the delta-rs engine, read the table's per-file statistics for the lease request
        and write from exactly that snapshot, so rewrites the statistics keep apart run side by side
        (ADR 0020). ``None`` (default): ``[deltaguard] file_stats``; ``False`` opts this task out.
    :param source_reads_target: whether the write's source reads the table it writes. ``None`` (default):
        a source computed as the write runs (a callable, a lazy DataFrame) may read it, so the write is
        judged as reading the whole table; a path or URI source is compared with the table. ``False``: the
        author states that a computed source does not read the table (a path or URI source is still
        compared). ``True``: judged as reading the whole table whatever the source.
    """

    template_fields: Sequence[str] = ("table", "delta_conn_id", "spark_conn_id", "spark_connect_conn_id")
    operator_extra_links = (DeltaTableLink(), DeltaDecisionLink())
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
        expected_duration: dt.timedelta | float | None = None,
        idempotent: bool = True,
        app_version: int | str | None = None,
        lease_store_url: str | None = None,
        emit_asset: bool = True,
        file_stats: bool | None = None,
        source_reads_target: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not isinstance(table, str) or not table.strip():
            raise ValueError(f"{type(self).__name__}: 'table' must be a non-empty string")
        check_priority(int(priority))
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
        if isinstance(expected_duration, dt.timedelta):
            expected_duration = expected_duration.total_seconds()
        if expected_duration is not None:
            expected_duration = float(expected_duration)
            if not 0 <= expected_duration < math.inf:
                raise ValueError(f"expected_duration must be a finite duration >= 0, got {expected_duration}")
        self.expected_duration_s = expected_duration
        self.idempotent = idempotent
        self.app_version = app_version
        self.lease_store_url = lease_store_url
        self.file_stats = file_stats
        if source_reads_target not in (None, True, False):
            raise ValueError(f"source_reads_target must be True, False or None, got {source_reads_target!r}")
        self.source_reads_target = source_reads_target
        self.resolved_engine: DeltaEngine | None = None
        self.resolved_spark_connections: tuple[str | None, str | None] = (None, None)
        #: the prepared write a resumed try took from its deferral (``None``: prepared by this try)
        self.resumed_write: PreparedWrite | None = None
        self._declare_table_outlet(emit_asset)

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

    # ---------------------------------------------------------------------------- the work under the lease
    def execute(self, context: Context) -> dict[str, Any]:
        self.resumed_write = None  # a new try prepares anew
        result: dict[str, Any] = self.start_lease_try(context)  # a write's work returns its XCom result
        return result

    @property
    def lease_deferrable(self) -> bool | None:
        return self.deferrable

    def try_scope(self) -> contextlib.AbstractContextManager[None]:
        return engine_released(self)

    def carry_prepared(self, prepared: _Prepared) -> dict[str, Any]:
        return prepared.value.to_kwargs()

    def resume_prepared(self, context: Context, carried: Mapping[str, Any]) -> _Prepared:
        """The write the deferred try prepared, taken back: only the engine and the spec (whose source
        cannot travel) are made again, from the task's arguments and the value's scope; the table is not
        read and nothing is validated again. A value this version cannot read is prepared anew."""
        try:
            value = PreparedWrite.from_kwargs(carried)
        except ValueError as exc:
            self.log.warning("deltaguard: preparing the write again (%s)", exc)
            return self.prepare_try(context)
        self.resumed_write = value
        try:
            hook = self._table_hook()
            engine = self._resolve_engine(hook)
            spec = self.build_spec(value.table_config)
            if not getattr(engine, "trusts_validated_version", False):
                # an engine that does not check a moved table itself: validate at the table as it is now
                engine.validate(value.uri, spec, engine_table_config(engine, value.uri))
        except ValueError as exc:
            raise InvalidTaskInputError(str(exc)) from exc
        # the evaluator does not travel (ADR 0037): attached again before the value is judged
        value = dataclasses.replace(value, table_config=attach_oracle(value.table_config, engine))
        return _Prepared(value, engine, spec, hook)

    def lease_subject(self, prepared: _Prepared) -> str:
        return prepared.value.uri

    def lease_tables(self, prepared: _Prepared) -> tuple[str, ...]:
        return (prepared.value.key,)

    def ask_lease(
        self, leases: DeltaLeaseHook, prepared: _Prepared, owner: Owner, request_id: str | None
    ) -> Granted | Waiting:
        value = prepared.value
        return leases.ask(
            table_key=value.key,
            operation=value.operation,
            profile=value.profile,
            table_config=value.table_config,
            owner=owner,
            priority=self.priority,
            request_id=request_id,
            expected_duration_s=self.expected_duration_s,
            read_version=value.read_version,
        )

    def work_under_lease(
        self,
        context: Context,
        leases: DeltaLeaseHook,
        prepared: _Prepared,
        grant: Granted,
        owner: Owner,
        wait: WaitState,
        decision: str,
    ) -> dict[str, Any]:
        """Write through the engine while the hook renews the lease; report the commit."""
        waited_s = wait.waited_s()  # read now: the write's own time is not waiting
        lease_id = grant.lease_id
        value = prepared.value
        # The keeper renews the lease while writing and is the engine's commit fence: once the lease is
        # lost the write fails instead of committing (ADR 0018). The lease is released on exit.
        ti = context.get("ti")
        dag_run = context.get("dag_run")
        app_version: int | None = None
        if self.idempotent:
            explicit = "" if self.app_version is None else str(self.app_version).strip()
            app_version = int(explicit) if explicit else task_app_version(context, self.retries)
        write_context = leases.write_context(
            grant,
            app_id=value.operation.label if self.idempotent else None,
            app_version=app_version,
            dag_id=self.dag_id,
            run_id=str(getattr(dag_run, "run_id", None) or context.get("run_id") or ""),
            task_id=self.task_id,
            try_number=getattr(ti, "try_number", None),
            map_index=getattr(ti, "map_index", None),
        )
        with leases.holding(grant, owner) as keeper:
            pinned: dict[str, Any] = {}
            if value.read_version is not None:
                # The lease was judged for one snapshot: write from exactly that one (ADR 0020).
                snapshot = pinned_snapshot(
                    leases.manager,
                    prepared.engine,
                    uri=value.uri,
                    table_key=value.key,
                    operation=value.operation,
                    profile=value.profile,
                    owner=owner,
                    lease_id=lease_id,
                    prepared=prepared.snapshot,
                    # statistics do not travel through a deferral: a resumed write reads those it pins
                    prepared_config=value.table_config if value.table_config.file_stats else None,
                )
                if snapshot is not None:
                    pinned["snapshot"] = snapshot
                    self.log.info("deltaguard: writing from table version %s", snapshot.version())
            try:
                result = prepared.engine.write(
                    value.uri,
                    prepared.spec,
                    # validated once, when prepared: the engine checks again only a table that moved on since
                    dataclasses.replace(
                        write_context, fence=keeper, validated_version=value.table_config.version
                    ),
                    **pinned,
                )
            except LateCommitError as exc:
                raise LateCommitFailure(str(exc)) from exc
        if result.committed:
            duplicate = (
                " (duplicate: already committed by an earlier try, nothing written)"
                if result.duplicate
                else ""
            )
            self.log.info(
                "deltaguard: committed %s to %s at version %s%s",
                result.operation,
                value.uri,
                result.version,
                duplicate,
            )
        else:
            self.log.info(
                "deltaguard: %s changed nothing in %s (version %s read): no commit",
                result.operation,
                value.uri,
                result.version,
            )
        try:
            storage_options = dict(getattr(prepared.hook, "storage_options", None) or {})
        except ValueError:  # malformed extras: the engine would have failed first; lineage does without them
            storage_options = {}
        self._report_write(
            context,
            value.uri,
            result,
            storage_options=storage_options,
            app_id=value.operation.label,
            hook=prepared.hook,
        )
        return task_result(
            result,
            waited_s=waited_s,
            behind=wait.behind,
            lease_id=lease_id,
            app_id=value.operation.label,
            app_version=app_version,
            decision=decision,
        )

    def fail_deferral(self, next_method: str, next_kwargs: dict[str, Any] | None, context: Context) -> Any:
        """A lease wait that timed out in the triggerer fails as :class:`LeaseWaitTimeout`."""
        from airflow.sdk.exceptions import TaskDeferralTimeout

        try:
            return BaseOperator.resume_execution(self, next_method, next_kwargs, context)
        except TaskDeferralTimeout as exc:
            raise LeaseWaitTimeout(
                f"waited longer than lease_wait_timeout={self.lease_wait_timeout} s for the lease on {self.table}"
            ) from exc

    # ------------------------------------------------------------------------------------------ resolving
    def _table_hook(self) -> Any:
        from deltaguard.hooks.delta import DeltaTableHook

        return DeltaTableHook(self.delta_conn_id)

    def _resolve_engine(self, hook: Any) -> DeltaEngine:
        # the settings resolve the Spark connections once, for the engine and for sources built on Spark
        settings = hook.engine_settings(self.spark_conn_id, self.spark_connect_conn_id)
        engine = build_engine(hook.engine_choice(self.engine), settings)
        self.resolved_engine = engine
        self.resolved_spark_connections = (settings.spark_conn_id, settings.spark_connect_conn_id)
        return engine

    def prepare_try(self, context: Context) -> _Prepared:
        """Resolve and validate. Raises :class:`InvalidTaskInputError` (no retry) before any lease exists."""
        try:
            hook = self._table_hook()
            uri = hook.table_uri(self.table)
            engine = self._resolve_engine(hook)
            table_config, read_version, snapshot = hook.write_table_config(
                engine, uri, file_stats=self.file_stats
            )
            spec = self.build_spec(table_config)
            # the one validation: the spec's checks and the engine's, on the handle just read when it takes one
            on_snapshot = (
                {"snapshot": snapshot} if snapshot is not None and checks_on_snapshot(engine) else {}
            )
            engine.validate(uri, spec, table_config, **on_snapshot)
        except ValueError as exc:  # InvalidWriteError, TableUriError, the model's PredicateError, ...
            raise InvalidTaskInputError(str(exc)) from exc
        operation = dataclasses.replace(
            self.conflict_operation(spec), label=task_app_id(self.dag_id, self.task_id, context)
        )
        operation, reads_target = with_target_reads(
            operation, spec, uri, engine.relation_location, self.source_reads_target
        )
        if reads_target is not None:
            self.log.info("judged as reading the whole table %s: %s", uri, reads_target)
        if read_version is not None and not judged_by_file_stats(operation):
            # Only rewrites are judged by statistics: others neither send them nor pin their snapshot.
            read_version, snapshot = None, None
            table_config = dataclasses.replace(table_config, file_stats=None)
        value = PreparedWrite(
            uri=uri,
            operation=operation,
            profile=engine.table_profile(uri),
            table_config=table_config,
            read_version=read_version,
            source_scope=getattr(spec, "source_scope", None),
        )
        return _Prepared(value, engine, spec, hook, snapshot)
