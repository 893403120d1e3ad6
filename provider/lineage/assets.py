"""What the write operators tell Airflow about a write: the table's asset, the asset event, the lineage mixin.

One asset per table, an asset event per write that changed it. The asset URI is the table's canonical URI
(:func:`deltaguard.lineage.record.canonical_uri`). When the operator knows the table at parse time (an
absolute path or URI, no template) the asset is a static outlet (visible in the DAG graph, schedulable with
``schedule=[delta_table_asset(uri)]``); when the table is templated or relative to a connection's base URI,
the outlet is an :class:`AssetAlias` that the write resolves to the table's asset, since the connection may
not be read while a DAG file is parsed.

:class:`DeltaLineageMixin`: the base write operator inherits it and calls
:meth:`DeltaLineageMixin._declare_table_outlet` from ``__init__`` and :meth:`DeltaLineageMixin._report_write`
after a write succeeded. OpenLineage's provider calls :meth:`DeltaLineageMixin.get_openlineage_facets_on_complete`
in the same worker process after ``execute`` returned, so the record of the write is kept on the operator
instance meanwhile.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, AssetAlias

from deltaguard.lineage.record import canonical_uri, source_location
from deltaguard.writes.table_uri import uri_scheme

if TYPE_CHECKING:
    from airflow.sdk import Asset, AssetAlias

    from deltaguard.lineage.openlineage import Lineage
    from deltaguard.lineage.record import CommitFacts, WriteRecord


#: prefix of the alias a write with a templated or connection-relative table emits through
ALIAS_PREFIX = "deltaguard:"


def delta_table_asset(
    table_uri: str, storage_options: Mapping[str, str] | None = None, **asset_kwargs: Any
) -> Asset:
    """The asset of a Delta table, e.g. for ``schedule=[delta_table_asset("s3://lake/sales")]``.

    :param table_uri: the table's path or URI, in any spelling (``/data/t/``, ``file:/data/t``, ``s3a://...``).
    :param storage_options: see :func:`~deltaguard.lineage.record.canonical_uri` (the Azure account).
    :param asset_kwargs: passed to :class:`~airflow.sdk.Asset` (``name``, ``group``, ``watchers``, ...).
    """
    return Asset(uri=canonical_uri(table_uri, storage_options), **asset_kwargs)


def static_table_location(table: str) -> str | None:
    """``table`` when it names the table without a template or connection (an absolute path or URI)."""
    text = table.strip()
    if "{{" in text or "{%" in text:
        return None
    if uri_scheme(text) is None and not text.startswith("/"):
        return None
    try:
        canonical_uri(text)
    except ValueError:
        return None
    return text


def write_outlet(table: str, delta_conn_id: str | None) -> Asset | AssetAlias:
    """The outlet a write operator declares for ``table``: the table's asset or an alias (module doc)."""
    location = static_table_location(table)
    if location is not None:
        return delta_table_asset(location)
    return AssetAlias(name=f"{ALIAS_PREFIX}{delta_conn_id or ''}:{table.strip()}")


def changed_data(record: WriteRecord) -> bool:
    """Whether the write made a commit (this try's, or an earlier try's it found): only such writes get an
    asset event. A DELETE or UPDATE matching no row and an OPTIMIZE with nothing to compact commit nothing."""
    return record.committed


def withhold_table_event(operator: Any, outlet: Asset | AssetAlias) -> None:
    """No asset event for ``outlet`` in this run: the write committed nothing.

    Airflow 3.3 registers an event for every static :class:`Asset` in the succeeding task's ``outlets``
    (``TaskInstance.register_asset_changes_in_db``, fed from ``ti.task.outlets`` when the task succeeds),
    so the outlet leaves this run's operator instance; an alias emits only what a write adds to it, so
    adding nothing is enough. The parsed DAG, and so its graph and the next run, keep the outlet.
    """
    if isinstance(outlet, Asset):
        operator.outlets = [o for o in operator.outlets if o != outlet]


def emit_table_event(context: Any, outlet: Asset | AssetAlias, record: WriteRecord) -> None:
    """Attach the write's version and operation to its asset event (``context["outlet_events"]``).

    For a static asset Airflow registers the event when the task succeeds; the alias gets the table's asset
    added here, with the same ``extra``.
    """
    events = context.get("outlet_events") if hasattr(context, "get") else None
    if events is None:  # outside a task run (e.g. a unit test calling execute without a context)
        return
    extra = record.asset_extra()
    if isinstance(outlet, AssetAlias):
        events[outlet].add(Asset(uri=record.table_uri), extra=extra)
    else:
        events[outlet].extra = extra


# ------------------------------------------------------------------------------- the operators' lineage mixin


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
        from deltaguard.lineage.record import facts_for_openlineage

        # read here, in the task's process: the OpenLineage listener calls back from a forked child, where
        # delta-rs's tokio runtime panics ("Forked process detected"), measured under the real scheduler
        self.commit_facts = facts_for_openlineage(table_uri, record, storage_options)
        if self.table_outlet is not None:
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
