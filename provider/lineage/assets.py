"""Airflow assets for Delta tables: one asset per table, an asset event per write that changed it.

The asset URI is the table's canonical URI (:func:`deltaguard.lineage.naming.canonical_uri`). When the
operator knows the table at parse time (an absolute path or URI, no template) the asset is a static outlet
(visible in the DAG graph, schedulable with ``schedule=[delta_table_asset(uri)]``); when the table is
templated or relative to a connection's base URI, the outlet is an :class:`AssetAlias` that the write
resolves to the table's asset, since the connection may not be read while a DAG file is parsed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, AssetAlias

from deltaguard.lineage.naming import canonical_uri
from deltaguard.writes.table_uri import uri_scheme

if TYPE_CHECKING:
    from deltaguard.lineage.record import WriteRecord

#: prefix of the alias a write with a templated or connection-relative table emits through
ALIAS_PREFIX = "deltaguard:"


def delta_table_asset(
    table_uri: str, storage_options: Mapping[str, str] | None = None, **asset_kwargs: Any
) -> Asset:
    """The asset of a Delta table, e.g. for ``schedule=[delta_table_asset("s3://lake/sales")]``.

    :param table_uri: the table's path or URI, in any spelling (``/data/t/``, ``file:/data/t``, ``s3a://...``).
    :param storage_options: see :func:`~deltaguard.lineage.naming.canonical_uri` (the Azure account).
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
