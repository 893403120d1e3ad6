"""Lineage of work done under a lease (``with_delta_lease``, ``@task.delta_write``): read from the tables.

The wrapped work commits through its own engine, so deltaguard gets no result from it. What it can see is
the tables' logs: the version each leased table had when the lease was granted and the version it has when
the work ended, while the lease still keeps conflicting writers away. The commits between are the work's
(a compatible writer admitted beside it may add its own; the record then names the table's latest commit,
which is what a downstream reader will see). From them each table gets what a deltaguard write reports
(:mod:`deltaguard.lineage.assets`): an asset event with the version and operation, and OpenLineage
version, lifecycle, schema and output statistics facets.

:class:`LeasedLineageMixin` is inherited by :class:`~deltaguard.operators.leased.DeltaLeaseMixin`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import Asset, AssetAlias

    from deltaguard.leases.targets import LeaseTarget
    from deltaguard.lineage.openlineage import Lineage
    from deltaguard.lineage.record import CommitFacts, WriteRecord


@dataclass(frozen=True)
class _Commit:
    """What the wrapped work left in one table, as a ``WriteResult``-like object for ``WriteRecord.build``."""

    version: int | None
    operation: str
    committed: bool
    duplicate: bool = False
    metrics: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class _LeasedWrite:
    """One leased table's write: its record, and its schema and statistics (read in the task's process)."""

    record: WriteRecord
    facts: CommitFacts | None


class LeasedLineageMixin:
    """Outlets, asset events and OpenLineage facets of the tables a leased task declared.

    Expects ``delta_tables``, ``delta_conn_id``, ``delta_lease_targets()``, ``task_id``, ``outlets`` and
    ``log`` of the task.
    """

    delta_tables: Any
    delta_conn_id: str | None
    outlets: list[Any]
    log: Any
    task_id: str
    operator: Any

    if TYPE_CHECKING:  # declared only: the leased task's own (DeltaLeaseMixin) is the one that runs

        def delta_lease_targets(self) -> tuple[LeaseTarget, ...]: ...

    def _declare_leased_outlets(self) -> None:
        """One outlet per declared table: its asset when the name is static, else an alias (as a write)."""
        from deltaguard.lineage.assets import ALIAS_PREFIX, write_outlet

        tables = self.delta_tables
        names = [tables] if isinstance(tables, str) else list(tables or ())
        outlets: list[Asset | AssetAlias] = [write_outlet(str(name), self.delta_conn_id) for name in names]
        if not names:  # the tables are in the SQL: one alias for whatever it names
            from airflow.sdk import AssetAlias

            outlets = [AssetAlias(name=f"{ALIAS_PREFIX}{self.delta_conn_id or ''}:{self.task_id}")]
        self._leased_outlets = outlets
        self.outlets = [*self.outlets, *(o for o in outlets if o not in self.outlets)]

    def _leased_tables(self) -> list[tuple[str, dict[str, str]]]:
        """Each declared table's location and storage options, as the engines open it."""
        from deltaguard.hooks.delta import DeltaTableHook

        hook = DeltaTableHook(self.delta_conn_id)
        try:
            options = dict(hook.storage_options or {})
        except ValueError:
            options = {}
        return [(hook.table_uri(t.table), options) for t in self.delta_lease_targets()]

    def _leased_versions(self) -> dict[str, int | None]:
        """The version of each leased table now (``None``: no table yet), taken when the lease is granted."""
        from deltaguard.lineage.record import latest_commit

        try:
            tables = self._leased_tables()
        except Exception as exc:  # lineage never fails the work
            self.log.warning("deltaguard: no lineage for the leased tables: %s", exc)
            return {}
        return {uri: (c[0] if (c := latest_commit(uri, opts)) else None) for uri, opts in tables}

    def _reporting(self, context: Any, work: Callable[[], Any]) -> Callable[[], Any]:
        """``work``, then the report of its commits, both while the lease is held (a conflicting writer
        cannot commit between the work's end and the read)."""

        def run() -> Any:
            result = work()
            self._report_leased_writes(context, getattr(self, "_versions_before", None))
            return result

        return run

    def _report_leased_writes(self, context: Any, before: Mapping[str, int | None] | None) -> None:
        """After the work ended under its lease: record each table's commit(s) and emit its asset event."""
        from deltaguard.lineage.assets import changed_data, emit_table_event, withhold_table_event
        from deltaguard.lineage.record import WriteRecord, facts_for_openlineage, latest_commit

        writes: list[_LeasedWrite] = []
        try:
            tables = self._leased_tables()
        except Exception as exc:
            self.log.warning("deltaguard: no lineage for the leased tables: %s", exc)
            tables = []
        for uri, options in tables:
            now = latest_commit(uri, options)
            if now is None:
                self.log.warning("deltaguard: no lineage for %s: no Delta table there after the work", uri)
                continue
            since = (before or {}).get(uri)
            committed = since is None or now[0] > since
            try:
                record = WriteRecord.build(
                    uri, _Commit(now[0], now[1], committed), storage_options=options, mode=None
                )
            except ValueError as exc:
                self.log.warning("deltaguard: no lineage for %s: %s", uri, exc)
                continue
            # a table the work created: all its commits are the work's
            first = -1 if since is None else since
            writes.append(_LeasedWrite(record, facts_for_openlineage(uri, record, options, since=first)))
            outlet = self._outlet_for(record.table_uri)
            if outlet is not None and changed_data(record):
                emit_table_event(context, outlet, record)
            elif outlet is not None:
                withhold_table_event(self, outlet)
                self.log.info("deltaguard: the work committed nothing to %s: no asset event", uri)
        self._leased_writes = writes

    def _outlet_for(self, table_uri: str) -> Asset | AssetAlias | None:
        """The declared outlet naming ``table_uri``, else the first alias (it resolves at run time)."""
        from airflow.sdk import Asset, AssetAlias

        outlets = getattr(self, "_leased_outlets", [])
        for outlet in outlets:
            if isinstance(outlet, Asset) and outlet.uri == table_uri:
                return outlet
        return next((o for o in outlets if isinstance(o, AssetAlias)), None)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Lineage:
        """OpenLineage: what the wrapped operator reports itself, plus every leased table as an output.

        Called by the OpenLineage provider in the worker after the task ran (only when it is installed).
        """
        from deltaguard.lineage.openlineage import leased_tables_lineage

        wrapped = None
        report = getattr(getattr(self, "operator", None), "get_openlineage_facets_on_complete", None)
        if report is not None:
            try:
                wrapped = report(task_instance)
            except Exception:  # the wrapped operator's lineage is its own; ours still names the tables
                self.log.warning("the wrapped operator's lineage failed; reporting the leased tables only")
        writes = getattr(self, "_leased_writes", [])
        facts = [(w.record, w.facts) for w in writes]
        named = {w.record.table_uri for w in writes}
        unread = [u for u in getattr(self, "leased_uris", ()) if not _names_one_of(u, named)]
        return leased_tables_lineage(wrapped, facts, unread)


def _names_one_of(location: str, table_uris: set[str]) -> bool:
    from deltaguard.lineage.record import canonical_uri

    try:
        return canonical_uri(location) in table_uris
    except ValueError:
        return False
