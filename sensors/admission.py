"""``DeltaAdmissionSensor``: wait until an operation would be admitted on a table (e.g. a maintenance window)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowSensorTimeout

from deltaguard import config
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.engines.fencing import close_engine
from deltaguard.leases.sensor_checks import admission_probe
from deltaguard.leases.waiting import Defer, Proceed, next_step
from deltaguard.operators.base import InvalidTaskInputError
from deltaguard.writes.table_uri import table_key

if TYPE_CHECKING:
    from airflow.sdk import Context

    from deltaguard.core.profiles import EngineProfile
    from deltaguard.core.table_config import TableConfig


class DeltaAdmissionSensor(BaseSensorOperator):
    """Succeed once ``operation`` would be admitted beside the writes now holding or queued for the table.

    It takes no lease: it only asks the conflict model about the current leases, so a write started after
    it succeeds still goes through the lease manager.

    :param table: table URI or name relative to the connection's base URI. Templated.
    :param operation: the operation kind (``OPTIMIZE``, ``MERGE``, ``SET_TBLPROPERTIES``, ...).
    :param predicate: the rows it would touch (templated), as for the operators.
    :param merge_condition: for MERGE, the ON condition (templated).
    :param delta_conn_id: optional ``delta`` connection.
    :param engine: the engine whose conflict rules apply (default as for the operators).
    :param include_waiting: also wait for conflicting queued requests (what the lease manager's FIFO does).
    :param lease_store_url: override ``[deltaguard] lease_store_url``.
    :param deferrable: wait in the triggerer.
    """

    template_fields: Sequence[str] = ("table", "predicate", "merge_condition")

    def __init__(
        self,
        *,
        table: str,
        operation: str | OperationKind,
        predicate: str | None = None,
        merge_condition: str | None = None,
        delta_conn_id: str | None = None,
        engine: str | None = None,
        include_waiting: bool = True,
        lease_store_url: str | None = None,
        deferrable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        try:
            self.operation_kind = OperationKind(str(operation).upper())
        except ValueError:
            raise ValueError(
                f"unknown operation {operation!r}; one of {', '.join(k.value for k in OperationKind)}"
            ) from None
        self.table = table
        self.predicate = predicate
        self.merge_condition = merge_condition
        self.delta_conn_id = delta_conn_id
        self.engine = engine
        self.include_waiting = include_waiting
        self.lease_store_url = lease_store_url
        self.deferrable = deferrable

    def _inputs(self) -> tuple[str, str, Operation, TableConfig, EngineProfile]:
        """Store URL, table key, operation, table configuration and engine profile, read once per check.

        :raises InvalidTaskInputError: the table, predicate or configuration cannot work on any try.
        """
        from deltaguard.engines.sources import engine_table_config
        from deltaguard.hooks.delta import DeltaTableHook

        try:
            hook = DeltaTableHook(self.delta_conn_id)
            uri = hook.table_uri(self.table)
            engine = hook.get_engine(self.engine)
            operation = Operation(
                self.operation_kind,
                predicate=self.predicate or None,
                merge_condition=self.merge_condition or None,
                label=f"{self.dag_id}.{self.task_id}",
            )
            store = self.lease_store_url or config.lease_store_url()
        except ValueError as exc:
            raise InvalidTaskInputError(str(exc)) from exc
        try:
            return (
                store,
                table_key(uri),
                operation,
                engine_table_config(engine, uri),
                engine.table_profile(uri),
            )
        finally:
            close_engine(engine)  # a Spark session opened to read the configuration is not kept

    def _check(self, inputs: tuple[str, str, Operation, TableConfig, EngineProfile]) -> PokeReturnValue:
        store, key, operation, table_config, profile = inputs
        admitted, reason = admission_probe(
            store,
            key,
            operation,
            table_config,
            profile,
            include_waiting=self.include_waiting,
            timing=config.lease_timing(),
        )
        self.log.info(
            "deltaguard: %s %s: %s", operation.describe(), "admitted" if admitted else "would wait", reason
        )
        return PokeReturnValue(is_done=admitted, xcom_value={"admitted": admitted, "reason": reason})

    def poke(self, context: Context) -> PokeReturnValue:
        return self._check(self._inputs())

    def execute(self, context: Context) -> Any:
        deferrable = config.default_deferrable() if self.deferrable is None else self.deferrable
        if not deferrable:
            return super().execute(context)  # BaseSensorOperator's poke loop (poke or reschedule mode)
        inputs = self._inputs()
        result = self._check(inputs)
        step = next_step(
            admitted=bool(result.is_done),
            waited_s=0.0,
            timeout_s=float(self.timeout),
            poll_s=float(self.poke_interval),
            deferrable=True,
        )
        match step:
            case Proceed():
                return result.xcom_value
            case Defer(timeout_s=timeout_s):
                self._defer(inputs, timeout_s)
            case _:
                raise AirflowSensorTimeout(f"deltaguard: {self.task_id} has no time left to wait ({step})")

    def _defer(
        self, inputs: tuple[str, str, Operation, TableConfig, EngineProfile], timeout_s: float | None
    ) -> None:
        from deltaguard.leases import codec
        from deltaguard.triggers.table_version import DeltaAdmissionTrigger

        store, key, operation, table_config, profile = inputs
        self.defer(
            trigger=DeltaAdmissionTrigger(
                store_url=store,
                table_key=key,
                operation=codec.operation_to_json(operation),
                table_config=codec.config_to_json(table_config),
                profile=codec.profile_to_json(profile),
                include_waiting=self.include_waiting,
                poll_interval=float(self.poke_interval),
                first_event_after_s=config.first_event_after_s(),
            ),
            method_name="execute_complete",
            timeout=None if timeout_s is None else dt.timedelta(seconds=timeout_s),
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        if not event or event.get("status") != "success":
            raise RuntimeError(f"deltaguard: admission trigger failed: {event}")
        return {"admitted": True, "reason": event.get("reason", "")}
