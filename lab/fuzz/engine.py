"""The engine side of the differential fuzzer: one small interface, implemented for delta-rs.

An engine creates the fuzz table at a layout, opens handles on a version, executes one statement from a
given (possibly stale) handle and commits it, and reads the table back. A delta-spark implementation only
has to provide these five methods; the check in :mod:`lab.fuzz.check` is engine-neutral.

The delta-rs implementation runs every statement the way deltaguard's operators do: SQL statements are
translated by :func:`deltaguard.engines.sql_translate.translate` (what ``DeltaSqlOperator`` does on delta-rs) and
typed writes become the same :mod:`deltaguard.engines.specs` specs, all executed by
:class:`~deltaguard.engines.deltars.DeltaRsEngine`.
"""

from __future__ import annotations

import abc
import shutil
from typing import Any

import pyarrow as pa

from deltaguard.core.operations import Operation
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.specs import (
    AppendSpec,
    CreateSpec,
    MergeSpec,
    OverwriteSpec,
    ReplaceWhereSpec,
    WriteSpec,
)
from lab.conformance.state import TableState
from lab.fuzz.cases import SCHEMA, TABLE, FuzzLayout, FuzzStatement, to_arrow


class NotExecutable(Exception):
    """The engine has no way to run this statement (the case is then judged by the model only)."""


class DifferentialEngine(abc.ABC):
    """What the differential check needs from an engine."""

    #: the engine's name in summaries and saved cases
    name: str

    @abc.abstractmethod
    def profile(self) -> EngineProfile:
        """The engine profile the conflict model judges with."""

    @abc.abstractmethod
    def create(self, uri: str, layout: FuzzLayout) -> None:
        """Create the fuzz table at ``uri`` with ``layout`` and its initial rows."""

    @abc.abstractmethod
    def table_config(self, uri: str) -> TableConfig:
        """The table's configuration as deltaguard reads it before admitting writes."""

    @abc.abstractmethod
    def open_snapshot(self, uri: str) -> Any:
        """A handle on the table's current version; writes through it commit from that version."""

    @abc.abstractmethod
    def execute(self, uri: str, statement: FuzzStatement, layout: FuzzLayout, snapshot: Any | None) -> None:
        """Run one statement and commit it, from ``snapshot`` (``None``: the latest version).

        :raises NotExecutable: when this engine cannot run the statement at all.
        :raises deltaguard.engines.errors.DeltaConflictError: when the commit conflicts.
        """

    @abc.abstractmethod
    def read_state(self, uri: str) -> TableState:
        """The table's rows, columns and properties, read fresh."""

    def copy(self, source: str, target: str) -> None:
        """Copy a table (local directories by default)."""
        shutil.copytree(source, target)

    def spec_operation(self, statement: FuzzStatement, layout: FuzzLayout) -> Operation | None:
        """What a typed operator would hand the model for ``statement`` (``None`` for SQL statements)."""
        if statement.path != "spec" or ("select" in statement.spec and statement.spec["type"] == "append"):
            # a typed append cannot say that its source reads the target; only the classified SQL judges it
            return None
        return build_spec(statement, layout, None).operation()


def build_spec(statement: FuzzStatement, layout: FuzzLayout, source: pa.Table | None) -> WriteSpec:
    """The typed operator's spec for a ``spec`` statement.

    :param statement: the statement (``path == "spec"``).
    :param layout: the table layout (an overwrite keeps the table's partitioning).
    :param source: the source rows when the statement selects them from the target; ``None`` to use the
        statement's literal rows (or an empty placeholder, for building the operation only).
    """
    args = statement.spec
    data = source if source is not None else to_arrow(list(args.get("rows", [])))
    kind = args["type"]
    if kind == "append":
        return AppendSpec(source=data, partition_values=dict(args.get("partition_values", {})))
    if kind == "replace_where":
        return ReplaceWhereSpec(source=data, predicate=args["predicate"])
    if kind == "overwrite":
        return OverwriteSpec(source=data, partition_by=layout.partition_by)
    if kind == "merge":
        return MergeSpec(
            source=data,
            condition=args["condition"],
            target_partition_values=dict(args.get("target_partition_values", {})),
            matched_update=args.get("matched_update"),
            matched_delete=bool(args.get("matched_delete", False)),
            matched_condition=args.get("matched_condition"),
            not_matched_insert_all=bool(args.get("not_matched_insert_all", False)),
            not_matched_by_source_delete=bool(args.get("not_matched_by_source_delete", False)),
        )
    raise ValueError(f"unknown spec type {kind!r}")


class DeltaRsDifferentialEngine(DifferentialEngine):
    """delta-rs through :class:`~deltaguard.engines.deltars.DeltaRsEngine`, exactly as the operators run it."""

    name = "delta-rs"

    def __init__(self, file_stats: bool = False) -> None:
        """:param file_stats: hand the model the snapshot's per-file statistics too (ADR 0020)."""
        from deltaguard.engines.deltars.engine import DeltaRsEngine

        self.engine = DeltaRsEngine(file_stats=file_stats)

    def profile(self) -> EngineProfile:
        return self.engine.profile()

    def create(self, uri: str, layout: FuzzLayout) -> None:
        first, *rest = layout.initial_commits()
        self.engine.write(
            uri,
            CreateSpec(
                source=to_arrow(first), partition_by=layout.partition_by, properties=layout.properties()
            ),
        )
        for rows in rest:
            self.engine.write(uri, AppendSpec(source=to_arrow(rows)))

    def table_config(self, uri: str) -> TableConfig:
        return self.engine.table_config(uri)

    def open_snapshot(self, uri: str) -> Any:
        return self.engine.open_table(uri)

    def execute(self, uri: str, statement: FuzzStatement, layout: FuzzLayout, snapshot: Any | None) -> None:
        if statement.path == "sql":
            from deltaguard.engines.sql_translate import translate

            spec = translate(statement.sql)
            if spec is None:
                raise NotExecutable(f"delta-rs cannot run {statement.kind} (no translation)")
        else:
            source = None
            if "select" in statement.spec:
                source = self._select(uri, statement.spec["select"], snapshot)
            spec = build_spec(statement, layout, source)
        self.engine.write(uri, spec, snapshot=snapshot)

    def _select(self, uri: str, query: str, snapshot: Any | None) -> pa.Table:
        """Evaluate a query over the target on the write's own snapshot, as a self-reading write reads."""
        from deltalake import DeltaTable
        from deltalake.query import QueryBuilder

        table = snapshot if snapshot is not None else DeltaTable(uri)
        result = pa.table(QueryBuilder().register(TABLE, table).execute(query).read_all())
        return result.select(SCHEMA.names).cast(SCHEMA)

    def read_state(self, uri: str) -> TableState:
        # Read through DataFusion: deltalake's pyarrow reader refuses tables with the deletionVectors
        # reader feature, the query engine reads them.
        from deltalake import DeltaTable
        from deltalake.query import QueryBuilder

        table = DeltaTable(uri)
        data = pa.table(QueryBuilder().register(TABLE, table).execute(f"SELECT * FROM {TABLE}").read_all())
        return TableState.of(data.to_pylist(), data.column_names, dict(table.metadata().configuration))
