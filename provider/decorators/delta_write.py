"""``@task.delta_write``: a TaskFlow function that writes Delta tables, run under a deltaguard lease.

Registered as a provider task decorator (``task-decorators`` in
:func:`~deltaguard.get_provider_info.get_provider_info`), so DAGs write ``@task.delta_write(...)`` as they
write ``@task.bash``; ``from deltaguard.decorators.delta_write import delta_write_task`` works as well.
The function does the write itself (delta-rs, Polars, pandas, a client library); the lease is taken before
it starts and released when it ends, as :class:`~deltaguard.operators.leased.DeltaLeaseMixin` describes.

.. code-block:: python

    @task.delta_write(tables="/data/sales", operation="INSERT", predicate="date = '{{ ds }}'")
    def load(ds=None):
        write_deltalake("/data/sales", rows_for(ds), mode="append")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk.bases.decorator import DecoratedOperator, task_decorator_factory

from deltaguard.operators.leased_work import DEFAULT_UNFENCED_GRACE, DeltaLeaseMixin
from deltaguard.operators.links import DeltaDecisionLink

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.sdk.bases.decorator import TaskDecorator

    from deltaguard.leases.targets import OperationLike


class _DeltaWriteDecoratedOperator(DeltaLeaseMixin, DecoratedOperator, PythonOperator):
    """A ``@task`` function run under a deltaguard lease on the tables it declares."""

    template_fields: Sequence[str] = (
        "templates_dict",
        "op_args",
        "op_kwargs",
        *DeltaLeaseMixin.lease_template_fields,
    )
    template_fields_renderers = {"templates_dict": "json", "op_args": "py", "op_kwargs": "py"}
    custom_operator_name: str = "@task.delta_write"
    operator_extra_links = (DeltaDecisionLink(),)
    ui_color = "#cfe8ff"

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        op_args: Any,
        op_kwargs: Any,
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
        super().__init__(
            kwargs_to_upstream={
                "python_callable": python_callable,
                "op_args": op_args,
                "op_kwargs": op_kwargs,
            },
            python_callable=python_callable,
            op_args=op_args,
            op_kwargs=op_kwargs,
            **kwargs,
        )
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

    def execute(self, context: Context) -> Any:
        return self.start_lease_try(context)

    def _leased_work(self, context: Context) -> Any:
        return DecoratedOperator.execute(self, context)

    def _resume_wrapped(self, context: Context, method: str, kwargs: dict[str, Any]) -> Any:
        return PythonOperator.resume_execution(self, method, kwargs, context)


def delta_write_task(
    python_callable: Callable[..., Any] | None = None,
    multiple_outputs: bool | None = None,
    **kwargs: Any,
) -> TaskDecorator:
    """Wrap a function writing Delta tables into a task that holds a deltaguard lease while it runs.

    :param python_callable: the function (when used without parentheses).
    :param multiple_outputs: unroll a returned dict into several XCom values.
    :param kwargs: the lease declaration (``tables``, ``operation``/``predicate`` or ``sql``, ...: see
        :class:`~deltaguard.operators.leased.DeltaLeaseMixin`) and any ``@task`` argument.
    """
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=_DeltaWriteDecoratedOperator,
        **kwargs,
    )
