"""``DeltaTableVersionSensor``: wait for a new commit on a Delta table."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue

from deltaguard import config
from deltaguard.leases.sensor_checks import find_new_commit, table_version

if TYPE_CHECKING:
    from airflow.sdk import Context


class DeltaTableVersionSensor(BaseSensorOperator):
    """Succeed once the table has a commit after a baseline version, optionally of given operations or writer.

    Returns (XCom) ``{"version", "operation", "timestamp", "app_id"}`` of the first matching commit.

    :param table: table URI or name relative to the connection's base URI. Templated.
    :param delta_conn_id: optional ``delta`` connection (base URI, storage options).
    :param baseline_version: look for commits after this version (templated). Default: the table's version
        when the sensor starts (``-1`` if it does not exist yet). In ``reschedule`` mode give it explicitly,
        since each reschedule would otherwise take a new baseline.
    :param operations: Delta operation names to wait for (``WRITE``, ``MERGE``, ``DELETE``, ``UPDATE``,
        ``OPTIMIZE``, ...); empty accepts any.
    :param app_id: only commits written by this deltaguard task (``dag_id/task_id[/map_index]@run_id``).
    :param deferrable: wait in the triggerer (default as for the deltaguard operators).
    """

    template_fields: Sequence[str] = ("table", "baseline_version", "app_id")

    def __init__(
        self,
        *,
        table: str,
        delta_conn_id: str | None = None,
        baseline_version: int | str | None = None,
        operations: Sequence[str] = (),
        app_id: str | None = None,
        deferrable: bool | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.delta_conn_id = delta_conn_id
        self.baseline_version = baseline_version
        self.operations = [operations] if isinstance(operations, str) else list(operations)
        self.app_id = app_id
        self.deferrable = deferrable
        self._baseline: int | None = None

    def _resolve(self) -> tuple[str, dict[str, str]]:
        from deltaguard.hooks.delta import DeltaTableHook

        hook = DeltaTableHook(self.delta_conn_id)
        return hook.table_uri(self.table), hook.storage_options

    def _probe(self) -> dict[str, Any] | None:
        uri, options = self._resolve()
        assert self._baseline is not None
        return find_new_commit(
            uri, self._baseline, operations=self.operations, app_id=self.app_id, storage_options=options
        )

    def execute(self, context: Context) -> Any:
        uri, options = self._resolve()
        if self.baseline_version is not None and str(self.baseline_version).strip() != "":
            self._baseline = int(self.baseline_version)
        else:
            self._baseline = table_version(uri, options)
        self.log.info("deltaguard: waiting for a commit on %s after version %s", uri, self._baseline)
        deferrable = config.default_deferrable() if self.deferrable is None else self.deferrable
        if not deferrable:
            return super().execute(context)
        commit = self._probe()
        if commit is not None:
            return commit
        from deltaguard.triggers.table_version import DeltaTableVersionTrigger

        self.defer(
            trigger=DeltaTableVersionTrigger(
                table_uri=uri,
                baseline_version=self._baseline,
                operations=self.operations,
                app_id=self.app_id,
                storage_options=options,
                poll_interval=float(self.poke_interval),
                first_event_after_s=config.first_event_after_s(),
            ),
            method_name="execute_complete",
            timeout=dt.timedelta(seconds=float(self.timeout)),
        )

    def poke(self, context: Context) -> PokeReturnValue:
        commit = self._probe()
        return PokeReturnValue(is_done=commit is not None, xcom_value=commit)

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> Any:
        if not event or event.get("status") != "success":
            raise RuntimeError(f"deltaguard: table version trigger failed: {event}")
        self.log.info("deltaguard: new commit %s", event["commit"])
        return event["commit"]
