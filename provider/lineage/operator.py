"""``DeltaLineageMixin``: what the write operators tell Airflow's assets and OpenLineage about a write.

The base write operator inherits it and calls two methods: :meth:`DeltaLineageMixin._declare_table_outlet`
from ``__init__`` and :meth:`DeltaLineageMixin._report_write` after a write succeeded. OpenLineage's
provider calls :meth:`DeltaLineageMixin.get_openlineage_facets_on_complete` in the same worker process
after ``execute`` returned, so the record of the write is kept on the operator instance meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from deltaguard.lineage.naming import source_location

if TYPE_CHECKING:
    from airflow.sdk import Asset, AssetAlias

    from deltaguard.lineage.commit_facts import CommitFacts
    from deltaguard.lineage.openlineage import Lineage
    from deltaguard.lineage.record import WriteRecord


class DeltaLineageMixin:
    """Asset outlet, asset event, hook-level lineage and OpenLineage facets of one Delta write.

    Expects the operator's ``table``, ``delta_conn_id``, ``outlets`` and ``log`` (``BaseOperator``'s).
    """

    table: str
    delta_conn_id: str | None
    outlets: list[Any]
    log: Any
    #: the outlet :meth:`_declare_table_outlet` added (``None`` with ``emit_asset=False``)
    table_outlet: Asset | AssetAlias | None = None
    #: the last successful write of this instance, for OpenLineage
    write_record: WriteRecord | None = None
    #: its schema and statistics, read in the task's process when OpenLineage is installed
    commit_facts: CommitFacts | None = None

    def _declare_table_outlet(self, emit_asset: bool) -> None:
        """Add the table's asset (or alias) to ``outlets`` (see :mod:`deltaguard.lineage.assets`)."""
        if not emit_asset:
            return
        from deltaguard.lineage.assets import write_outlet

        outlet = write_outlet(self.table, self.delta_conn_id)
        self.table_outlet = outlet
        if outlet not in self.outlets:
            self.outlets = [*self.outlets, outlet]

    def lineage_inputs(self) -> list[str]:
        """Source locations this write reads (default: the ``source`` attribute when it is a path or URI)."""
        from deltaguard.engines.sources import unwrap_source

        location = source_location(unwrap_source(getattr(self, "source", None)))
        return [location] if location else []

    def lineage_mode(self) -> str | None:
        """``overwrite`` when the write replaces the whole table."""
        mode = getattr(self, "mode", None)
        return str(mode) if mode == "overwrite" else None

    def _report_write(
        self,
        context: Any,
        table_uri: str,
        result: Any,
        *,
        storage_options: Mapping[str, str] | None = None,
        app_id: str | None = None,
        hook: Any = None,
    ) -> WriteRecord | None:
        """Record a successful write: the asset event's ``extra``, hook-level lineage, the OpenLineage record.

        Lineage never fails a write that committed: a location it cannot name is logged and skipped.
        """
        from deltaguard.lineage.record import WriteRecord

        try:
            record = WriteRecord.build(
                table_uri,
                result,
                storage_options=storage_options,
                inputs=self.lineage_inputs(),
                mode=self.lineage_mode(),
                app_id=app_id,
            )
        except ValueError as exc:
            self.log.warning("deltaguard: no lineage for %s: %s", table_uri, exc)
            return None
        self.write_record = record
        from deltaguard.lineage.commit_facts import facts_for_openlineage

        # read here, in the task's process: the OpenLineage listener calls back from a forked child, where
        # delta-rs's tokio runtime panics ("Forked process detected"), measured under the real scheduler
        self.commit_facts = facts_for_openlineage(table_uri, record, storage_options)
        if self.table_outlet is not None:
            from deltaguard.lineage.assets import changed_data, emit_table_event, withhold_table_event

            if changed_data(record):
                emit_table_event(context, self.table_outlet, record)
            else:
                withhold_table_event(self, self.table_outlet)
                self.log.info(
                    "deltaguard: %s committed nothing to %s: no asset event", record.operation, table_uri
                )
        if hook is not None:
            _collect_hook_lineage(hook, record)
        return record

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Lineage | None:
        """The write's datasets and facets (called by the OpenLineage provider once the task succeeded)."""
        record = self.write_record
        if record is None:
            return None
        from deltaguard.lineage.openlineage import operator_lineage

        return operator_lineage(record, self.commit_facts)


def _collect_hook_lineage(hook: Any, record: WriteRecord) -> None:
    """Report the table (and sources) to Airflow's hook lineage collector, as hooks of other providers do.

    Readers of hook-level lineage (the OpenLineage provider for operators without their own facets, other
    lineage backends) then see the write; the extra is the asset event's.
    """
    from airflow.sdk.lineage import get_hook_lineage_collector

    collector = get_hook_lineage_collector()
    collector.add_output_asset(context=hook, uri=record.table_uri, asset_extra=record.asset_extra())
    for uri in record.input_uris:
        collector.add_input_asset(context=hook, uri=uri)
