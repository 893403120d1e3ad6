"""Triggers behind the deferrable deltaguard sensors; each polls the same function as the sensor's poke."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent

from deltaguard.triggers.first_event import hold_until, not_before

if TYPE_CHECKING:
    from deltaguard.leases.store import LeaseStore


class DeltaTableVersionTrigger(BaseTrigger):
    """Fire when the table has a commit after ``baseline_version`` matching the filters.

    Calls :func:`deltaguard.leases.sensor_checks.find_new_commit` (as ``DeltaTableVersionSensor.poke`` does) in a thread.

    :param table_uri: the table.
    :param baseline_version: the version to look beyond.
    :param operations: Delta operation names to accept (empty: all).
    :param app_id: accept only commits of this writer.
    :param storage_options: deltalake storage options.
    :param poll_interval: seconds between checks.
    :param first_event_after_s: seconds from the trigger's start before it may fire
        (:func:`deltaguard.leases.waiting.first_event_after_s`; ``None``: from the triggerer's configuration).
    """

    def __init__(
        self,
        table_uri: str,
        baseline_version: int,
        operations: list[str] | None = None,
        app_id: str | None = None,
        storage_options: dict[str, str] | None = None,
        poll_interval: float = 30.0,
        first_event_after_s: float | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's BaseTrigger.__init__ is unannotated
        self.table_uri = table_uri
        self.baseline_version = int(baseline_version)
        self.operations = list(operations or [])
        self.app_id = app_id
        self.storage_options = dict(storage_options or {})
        self.poll_interval = float(poll_interval)
        self.first_event_after_s = None if first_event_after_s is None else float(first_event_after_s)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table_uri": self.table_uri,
                "baseline_version": self.baseline_version,
                "operations": self.operations,
                "app_id": self.app_id,
                "storage_options": self.storage_options,
                "poll_interval": self.poll_interval,
                "first_event_after_s": self.first_event_after_s,
            },
        )

    def _probe(self) -> dict[str, Any] | None:
        from deltaguard.leases.sensor_checks import find_new_commit

        return find_new_commit(
            self.table_uri,
            self.baseline_version,
            operations=self.operations,
            app_id=self.app_id,
            storage_options=self.storage_options,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        fire_from = await not_before(self.first_event_after_s)
        while True:
            commit = await asyncio.to_thread(self._probe)
            if commit is not None:
                await hold_until(fire_from)
                yield TriggerEvent(  # type: ignore[no-untyped-call]  # unannotated in Airflow
                    {"status": "success", "commit": commit}
                )
                return
            await asyncio.sleep(self.poll_interval)


class DeltaTableCommitTrigger(BaseEventTrigger):
    """Fire once for every new commit on a table, by any writer: an event trigger for asset watchers.

    ``AssetWatcher(name="sales_commits", trigger=DeltaTableCommitTrigger(table_uri="s3://lake/sales"))``
    on an asset lets DAGs scheduled on it start when the table gets a commit, whoever made it (a deltaguard
    task, a Spark job, a notebook). Unlike :class:`DeltaTableVersionTrigger`, which fires once and ends (a
    sensor's deferral), this trigger runs as long as the triggerer keeps it and yields one event a commit,
    oldest first; its payload is ``{"table_uri", "version", "operation", "timestamp", "app_id"}``.

    It starts after the version the table has when the trigger starts (``start_version`` overrides it), so
    commits made while no triggerer ran it are not reported when it starts again (ADR 0022).

    :param table_uri: the table.
    :param operations: Delta operation names to report (empty: all), e.g. ``["WRITE", "MERGE"]``.
    :param app_id: report only commits of this writer (``dag_id/task_id[/map_index]@run_id``).
    :param storage_options: deltalake storage options.
    :param poll_interval: seconds between reads of the table's log.
    :param start_version: report commits after this version instead of after the version found at start.
    """

    def __init__(
        self,
        table_uri: str,
        operations: list[str] | None = None,
        app_id: str | None = None,
        storage_options: dict[str, str] | None = None,
        poll_interval: float = 30.0,
        start_version: int | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's BaseTrigger.__init__ is unannotated
        self.table_uri = table_uri
        self.operations = list(operations or [])
        self.app_id = app_id
        self.storage_options = dict(storage_options or {})
        self.poll_interval = float(poll_interval)
        self.start_version = None if start_version is None else int(start_version)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table_uri": self.table_uri,
                "operations": self.operations,
                "app_id": self.app_id,
                "storage_options": self.storage_options,
                "poll_interval": self.poll_interval,
                "start_version": self.start_version,
            },
        )

    def _current_version(self) -> int:
        from deltaguard.leases.sensor_checks import table_version

        return table_version(self.table_uri, self.storage_options)

    def _read(self, after: int) -> tuple[int, list[dict[str, Any]]]:
        from deltaguard.leases.sensor_checks import commits_after

        return commits_after(
            self.table_uri,
            after,
            operations=self.operations,
            app_id=self.app_id,
            storage_options=self.storage_options,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        seen = self.start_version
        if seen is None:
            seen = await asyncio.to_thread(self._current_version)
        while True:
            current, commits = await asyncio.to_thread(self._read, seen)
            for commit in commits:
                yield TriggerEvent(  # type: ignore[no-untyped-call]  # unannotated in Airflow
                    {"table_uri": self.table_uri, **commit}
                )
            seen = max(seen, current)
            await asyncio.sleep(self.poll_interval)


class DeltaAdmissionTrigger(BaseTrigger):
    """Fire when an operation would be admitted on a table (calls :func:`deltaguard.leases.sensor_checks.admission_probe`).

    :param store_url: the lease store.
    :param table_key: the table's lease key.
    :param operation: the operation as JSON (:mod:`deltaguard.leases.codec`).
    :param table_config: the table configuration as JSON.
    :param profile: the engine profile as JSON.
    :param include_waiting: also respect queued requests.
    :param poll_interval: seconds between checks.
    :param first_event_after_s: seconds from the trigger's start before it may fire
        (:func:`deltaguard.leases.waiting.first_event_after_s`; ``None``: from the triggerer's configuration).
    """

    def __init__(
        self,
        store_url: str,
        table_key: str,
        operation: dict[str, Any],
        table_config: dict[str, Any],
        profile: dict[str, Any],
        include_waiting: bool = True,
        poll_interval: float = 5.0,
        first_event_after_s: float | None = None,
    ) -> None:
        from deltaguard.leases.store_location import store_reference

        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's BaseTrigger.__init__ is unannotated
        self.store_url = store_reference(store_url)  # never the password (see LeaseAvailableTrigger)
        self.table_key = table_key
        self.operation = operation
        self.table_config = table_config
        self.profile = profile
        self.include_waiting = include_waiting
        self.poll_interval = float(poll_interval)
        self.first_event_after_s = None if first_event_after_s is None else float(first_event_after_s)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "store_url": self.store_url,
                "table_key": self.table_key,
                "operation": self.operation,
                "table_config": self.table_config,
                "profile": self.profile,
                "include_waiting": self.include_waiting,
                "poll_interval": self.poll_interval,
                "first_event_after_s": self.first_event_after_s,
            },
        )

    def _probe(self, store: LeaseStore | None = None) -> tuple[bool, str]:
        """The sensor's answer, over ``store`` (the shared handle) or a store opened for this one call."""
        from deltaguard.config import resolve_store_reference
        from deltaguard.engines.sources import attach_oracle
        from deltaguard.leases import codec
        from deltaguard.leases.sensor_checks import admission_probe

        return admission_probe(
            store if store is not None else resolve_store_reference(self.store_url),
            self.table_key,
            codec.operation_from_json(self.operation),
            # the JSON carries no evaluator: the sensor's own check had delta-rs', so has this one (ADR 0037)
            attach_oracle(codec.config_from_json(self.table_config)),
            codec.profile_from_json(self.profile),
            include_waiting=self.include_waiting,
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from deltaguard import config
        from deltaguard.hooks.lease import DeltaLeaseHook
        from deltaguard.leases.waiting import Sleep, next_step

        # The triggerer's shared store handle (ADR 0025). A sensor's wait is no queue entry, so no
        # notification names it: this trigger polls, on either store.
        fire_from = await not_before(self.first_event_after_s)
        url = await asyncio.to_thread(config.resolve_store_reference, self.store_url)
        settings = await asyncio.to_thread(config.lease_settings, url, deferrable=False)
        async with DeltaLeaseHook.pooled(url, settings) as shared:
            while True:
                assert shared.store is not None
                admitted, reason = await shared.call(self._probe, shared.store)
                # the sensor's deferral timeout bounds this wait, so the trigger has none of its own
                step = next_step(
                    admitted=admitted,
                    waited_s=0.0,
                    timeout_s=None,
                    poll_s=self.poll_interval,
                    deferrable=False,
                )
                match step:
                    case Sleep(seconds=seconds):
                        await asyncio.sleep(seconds)
                    case _:
                        await hold_until(fire_from)
                        yield TriggerEvent(  # type: ignore[no-untyped-call]  # unannotated in Airflow
                            {"status": "success", "reason": reason}
                        )
                        return
