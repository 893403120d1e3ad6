"""Run another operator under a deltaguard lease: :class:`DeltaLeasedOperator` and :func:`with_delta_lease`.

The lease part (declaration, lease lifecycle, the wrapped work under the lease, ADR 0021) is
:class:`~deltaguard.operators.leased_work.DeltaLeaseMixin`, shared with ``@task.delta_write``
(:mod:`deltaguard.decorators.delta_write`). This module adds what wrapping a classic operator takes: the
wrapper replaces the operator in its DAG under its task id, renders its templates, judges which engine
commits its writes (:mod:`deltaguard.operators.wrapped_engine`) and passes ``on_kill`` on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from deltaguard.operators.leased_work import DEFAULT_UNFENCED_GRACE, RESUME_WRAPPED, DeltaLeaseMixin
from deltaguard.operators.links import DeltaDecisionLink

if TYPE_CHECKING:
    from airflow.sdk import Context

    from deltaguard.leases.targets import OperationLike

__all__ = [
    "DEFAULT_UNFENCED_GRACE",
    "RESUME_WRAPPED",
    "DeltaLeaseMixin",
    "DeltaLeasedOperator",
    "with_delta_lease",
]

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
        if operator.has_dag():  # type: ignore[no-untyped-call]  # unannotated in Airflow's BaseOperator
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

    def _schema_evolution_source(self) -> str | None:
        """Where the wrapped operator's Spark conf turns schema auto-merge on
        (:mod:`deltaguard.operators.wrapped_schema`)."""
        from deltaguard.operators.wrapped_schema import auto_merge_source

        return auto_merge_source(self.operator)

    def default_sql(self) -> str | Sequence[str] | None:
        sql = getattr(self.operator, "sql", None)
        if isinstance(sql, str) or (isinstance(sql, (list, tuple)) and all(isinstance(s, str) for s in sql)):
            return sql
        return None

    def render_template_fields(self, context: Context, jinja_env: Any = None) -> None:
        super().render_template_fields(context, jinja_env)
        self.operator.render_template_fields(context, jinja_env)

    def execute(self, context: Context) -> Any:
        return self.start_lease_try(context)

    def _leased_work(self, context: Context) -> Any:
        return self.operator.execute(context)

    def _resume_wrapped(self, context: Context, method: str, kwargs: dict[str, Any]) -> Any:
        return self.operator.resume_execution(method, kwargs, context)

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
