"""One function per write spec, executed with deltalake (delta-rs).

Each function gets the open table handle (``None`` when the table does not exist yet), the URI, the
resolved commit properties and the engine's storage options, and returns the metrics deltalake reports
(``None`` when the call reports none; the engine then reads them from the commit). Validation has already
happened; these functions only translate a spec into deltalake calls.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
from deltalake import DeltaTable, Field, write_deltalake
from deltalake.transaction import CommitProperties

from deltaguard.core.sql.literals import (
    DATAFUSION,
    RenderError,
    merge_condition_with_partitions,
    partition_predicate,
    partition_value_text,
    render_sql,
)
from deltaguard.engines.base import Runners, Unsupported
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.fencing import CommitFence
from deltaguard.engines.sources import check_source_in_scope, materialize, resolve_source
from deltaguard.engines.spark.schema_types import schema_from_spark_types, spark_type_to_delta
from deltaguard.engines.specs import (
    AddColumnsSpec,
    AppendSpec,
    CreateSpec,
    DeleteSpec,
    MergeSpec,
    OptimizeSpec,
    OverwriteSpec,
    ReplaceWhereSpec,
    SetPropertiesSpec,
    SqlSpec,
    UpdateSpec,
    WriteSpec,
)

Metrics = dict[str, Any] | None


@dataclass(frozen=True)
class DeltaRsRunner:
    """How delta-rs runs one spec type.

    :param run: executes the spec (validation has happened) and returns deltalake's metrics, if any.
    :param operation: the operation name delta-rs records in commitInfo (reported when nothing committed).
    :param check: delta-rs's own checks of the spec, beyond the spec's (:meth:`WriteSpec.validate`).
    :param records_app_transaction: whether delta-rs keeps the app transaction in the commit (1.6.6 drops
        it from OPTIMIZE: a retry is then recognised from the commit metadata in the history).
    """

    run: Callable[[Any, OpContext], Metrics]
    operation: str
    records_app_transaction: bool = True
    #: what delta-rs needs beyond the spec's own checks (run after them, before a lease is taken)
    check: Callable[[Any], None] | None = None


def _engine_sql(text: str | None) -> str | None:
    """A Spark SQL condition or expression, as the conflict model read it, rendered for DataFusion."""
    if text is None:
        return None
    try:
        return render_sql(text, DATAFUSION)
    except RenderError as error:
        raise InvalidWriteError(str(error)) from None


def _engine_sql_map(items: Any, columns: Collection[str] = ()) -> dict[str, str]:
    """Assignments rendered for delta-rs: every value as DataFusion SQL; a key that is one of ``columns``
    (case-insensitive) as that column's quoted identifier.

    delta-rs parses a key as an identifier path: ``a.b`` is field ``b`` of ``a``, so an UPDATE of a column
    named ``a.b`` reported one updated row and changed nothing (measured on deltalake 1.6.6). The specs'
    keys are column names, so a key naming a column is quoted whole.
    """
    names = {column.lower(): column for column in columns}
    rendered: dict[str, str] = {}
    for key, expression in dict(items).items():
        column = names.get(str(key).lower())
        name = f"`{column.replace('`', '``')}`" if column is not None else str(key)
        rendered[name] = str(_engine_sql(expression))
    return rendered


def _table_columns(table: DeltaTable) -> tuple[str, ...]:
    return tuple(field.name for field in table.schema().fields)


def _check_column_types(spec: AddColumnsSpec) -> None:
    """delta-rs reads the Spark SQL type names with :func:`spark_type_to_delta`."""
    for type_name in spec.columns.values():
        spark_type_to_delta(type_name)


def _check_schema_types(spec: CreateSpec) -> None:
    if spec.schema is not None:
        schema_from_spark_types(dict(spec.schema))


def check_for_delta_rs(
    spec: WriteSpec, runner: DeltaRsRunner | None = None, table: DeltaTable | None = None
) -> None:
    """What delta-rs checks beyond the spec's own checks: it has a runner, the runner's checks, every SQL
    text renders for DataFusion now, as its runner will render it (what delta-rs cannot run fails before a
    lease is taken, as bad input, not as a ``DeltaError`` after it) and, given the table, DataFusion can
    plan the texts that name its columns (:func:`~deltaguard.engines.deltars.meaning.check_planned`).

    :param runner: the spec's runner when the caller has looked it up already.
    :param table: the open table the write changes; ``None`` skips the planning.
    :raises UnsupportedWriteError: when delta-rs has no runner for the spec.
    :raises InvalidWriteError: naming what delta-rs cannot run.
    """
    runner = runner if runner is not None else RUNNERS.runner(spec)
    if runner.check is not None:
        runner.check(spec)
    for text in spec.sql_texts():
        _engine_sql(text)
    if table is not None:
        from deltaguard.engines.deltars.meaning import check_planned

        check_planned(table, spec, _engine_sql)


class OpContext:
    """What every operation needs besides its spec.

    :param table: the open table (possibly a stale snapshot), ``None`` if the table does not exist yet.
    :param uri: the table URI.
    :param commit: commit properties (metadata, app transaction, retries).
    :param storage_options: storage options for URIs and Delta sources.
    :param fence_source: wraps the data handed to delta-rs so its end runs the commit fence (ADR 0018).
    """

    def __init__(
        self,
        table: DeltaTable | None,
        uri: str,
        commit: CommitProperties,
        storage_options: dict[str, str] | None,
        fence_source: Callable[[Any], Any] | None = None,
        fence: CommitFence | None = None,
    ) -> None:
        self.table = table
        self.uri = uri
        self.commit = commit
        self.storage_options = storage_options
        self.fence_source = fence_source
        self.fence = fence

    def staged(self, data: Any, partition_by: Sequence[str], mode: str) -> bool:
        """Write ``data`` in two steps (files, fence check, commit) when the table allows it; return whether
        it did (:mod:`deltaguard.engines.deltars.staged`)."""
        from deltaguard.engines.deltars.staged import same_columns, staged_commit, unstageable

        if self.fence is None or self.table is None or not same_columns(data, self.table):
            return False
        if unstageable(self.table, partition_by) is not None:
            return False
        staged_commit(
            self.table,
            self.uri,
            data,
            mode=mode,
            commit=self.commit,
            fence=self.fence,
            storage_options=self.storage_options,
        )
        return True

    def fenced(self, data: Any) -> Any:
        """``data`` as delta-rs gets it: through the commit fence when there is one."""
        return self.fence_source(data) if self.fence_source is not None else data

    def target(self) -> DeltaTable | str:
        """The handle when there is one (so a stale snapshot really commits from its version), else the URI."""
        return self.table if self.table is not None else self.uri

    def uri_options(self) -> dict[str, Any]:
        """``storage_options`` for deltalake calls that take a URI instead of a handle."""
        return {"storage_options": self.storage_options} if self.table is None else {}

    def require_table(self) -> DeltaTable:
        if self.table is None:
            raise InvalidWriteError(f"table {self.uri} does not exist")
        return self.table


def run_append(spec: AppendSpec, ctx: OpContext) -> Metrics:
    data = resolve_source(spec.source, ctx.storage_options)
    if spec.partition_values:
        data = materialize(data)
        check_rows_in_partition(data, spec.partition_values)
    if ctx.staged(data, spec.partition_by, "append"):
        return None
    write_deltalake(
        ctx.target(),
        ctx.fenced(data),
        mode="append",
        partition_by=list(spec.partition_by) or None,
        commit_properties=ctx.commit,
        **ctx.uri_options(),
    )
    return None


def run_overwrite(spec: OverwriteSpec, ctx: OpContext) -> Metrics:
    data = resolve_source(spec.source, ctx.storage_options)
    if ctx.staged(data, spec.partition_by, "overwrite"):
        return None
    write_deltalake(
        ctx.target(),
        ctx.fenced(data),
        mode="overwrite",
        partition_by=list(spec.partition_by) or None,
        commit_properties=ctx.commit,
        **ctx.uri_options(),
    )
    return None


def run_replace_where(spec: ReplaceWhereSpec, ctx: OpContext) -> Metrics:
    data = resolve_source(spec.source, ctx.storage_options)
    if spec.source_scope is not None:
        # the operation was judged with the source's ranges; a source that changed since must not write
        # outside them
        data = materialize(data)
        check_source_in_scope(data, spec.source_scope)
    write_deltalake(
        ctx.require_table(),
        ctx.fenced(data),
        mode="overwrite",
        predicate=_engine_sql(spec.predicate),
        commit_properties=ctx.commit,
    )
    return None


def run_merge(spec: MergeSpec, ctx: OpContext) -> Metrics:
    table = ctx.require_table()
    data = resolve_source(spec.source, ctx.storage_options)
    if spec.copies_checked_rows:
        # The lease covers the declared partitions only: INSERT * / UPDATE SET * would copy source rows of
        # other partitions there (measured: a concurrent DELETE of such a partition fails).
        data = materialize(data)
        check_rows_in_partition(data, spec.target_partition_values)
    if spec.source_scope is not None:
        # The lease was taken for the scope read from the source before it; a source that changed since
        # (a callable producing other rows) must not write outside it (ADR 0019).
        data = materialize(data)
        check_source_in_scope(data, spec.source_scope)
    # The explicit target predicate is rendered for DataFusion, delta-rs' SQL dialect; values stay literals.
    # The source-derived conjunct is the tree the claim was judged on, rendered for DataFusion.
    try:
        condition = merge_condition_with_partitions(
            spec.condition,
            spec.target_partition_values,
            spec.target_alias,
            dialect=DATAFUSION,
            extra=spec.scope_conjunct(DATAFUSION),
        )
    except RenderError as error:
        raise InvalidWriteError(str(error)) from None
    merger = table.merge(
        ctx.fenced(data),
        predicate=condition,
        source_alias=spec.source_alias,
        target_alias=spec.target_alias,
        commit_properties=ctx.commit,
    )
    # One matched condition in the spec: with both DELETE and UPDATE it guards the DELETE (listed first,
    # as in "WHEN MATCHED AND cond THEN DELETE WHEN MATCHED THEN UPDATE"); alone it guards its clause.
    matched_condition = _engine_sql(spec.matched_condition)
    if spec.matched_delete:
        merger = merger.when_matched_delete(predicate=matched_condition)
        if spec.matched_update is not None or spec.matched_update_all:
            matched_condition = None
    if spec.matched_update is not None:
        merger = merger.when_matched_update(
            updates=_engine_sql_map(spec.matched_update, _table_columns(table)), predicate=matched_condition
        )
    elif spec.matched_update_all:
        merger = merger.when_matched_update_all(predicate=matched_condition)
    if spec.not_matched_insert is not None:
        merger = merger.when_not_matched_insert(
            updates=_engine_sql_map(spec.not_matched_insert, _table_columns(table))
        )
    elif spec.not_matched_insert_all:
        merger = merger.when_not_matched_insert_all()
    if spec.not_matched_by_source_delete:
        # "Not matched by source" ranges over the whole target whatever the ON condition says; declared
        # target partitions limit it too, so the MERGE touches only the partitions it was leased for.
        scope = (
            partition_predicate(spec.target_partition_values, qualifier=spec.target_alias, dialect=DATAFUSION)
            if spec.target_partition_values
            else None
        )
        merger = merger.when_not_matched_by_source_delete(predicate=scope)
    return dict(merger.execute())


def run_update(spec: UpdateSpec, ctx: OpContext) -> Metrics:
    table = ctx.require_table()
    return dict(
        table.update(
            updates=_engine_sql_map(spec.updates, _table_columns(table)),
            predicate=_engine_sql(spec.predicate),
            commit_properties=ctx.commit,
        )
    )


def run_delete(spec: DeleteSpec, ctx: OpContext) -> Metrics:
    return dict(
        ctx.require_table().delete(predicate=_engine_sql(spec.predicate), commit_properties=ctx.commit)
    )


def run_optimize(spec: OptimizeSpec, ctx: OpContext) -> Metrics:
    table = ctx.require_table()
    filters = [(column, "=", partition_value_text(value)) for column, value in spec.partition_filters.items()]
    if spec.zorder_by:
        return dict(
            table.optimize.z_order(
                list(spec.zorder_by),
                partition_filters=filters or None,
                target_size=spec.target_size,
                commit_properties=ctx.commit,
            )
        )
    return dict(
        table.optimize.compact(
            partition_filters=filters or None, target_size=spec.target_size, commit_properties=ctx.commit
        )
    )


def run_set_properties(spec: SetPropertiesSpec, ctx: OpContext) -> Metrics:
    ctx.require_table().alter.set_table_properties(dict(spec.properties), commit_properties=ctx.commit)
    return None


def run_add_columns(spec: AddColumnsSpec, ctx: OpContext) -> Metrics:
    table = ctx.require_table()
    # the table as loaded for this write (under its lease, when leased): what it lacks is added
    columns = spec.missing(table.schema().to_arrow().names)
    if not columns:
        return None  # every column is there (``if_not_exists``): nothing to commit
    fields = [
        Field(name, spark_type_to_delta(type_name), nullable=True) for name, type_name in columns.items()
    ]
    table.alter.add_columns(fields, commit_properties=ctx.commit)
    return None


def run_create(spec: CreateSpec, ctx: OpContext) -> Metrics:
    mode: Literal["overwrite", "error"] = "overwrite" if spec.replace else "error"
    configuration = dict(spec.properties) or None
    if spec.source is None:
        DeltaTable.create(
            ctx.uri,
            schema_from_spark_types(dict(spec.schema or {})),
            mode=mode,
            partition_by=list(spec.partition_by),
            configuration=configuration,
            storage_options=ctx.storage_options,
            commit_properties=ctx.commit,
        )
        return None
    data: Any = resolve_source(spec.source, ctx.storage_options)
    if spec.schema is not None:
        # The declared schema wins over the source's inferred types.
        target = pa.schema(schema_from_spark_types(dict(spec.schema)).to_arrow())
        data = materialize(data).select(target.names).cast(target)
    if spec.replace:
        # delta-rs' overwrite keeps the old properties, so a replace with data is two commits: CREATE OR
        # REPLACE (schema, partitioning, properties), then the data. The app transaction goes on the
        # second, so a retry after a crash in between simply replaces again.
        DeltaTable.create(
            ctx.uri,
            data.schema,
            mode="overwrite",
            partition_by=list(spec.partition_by),
            configuration=configuration,
            storage_options=ctx.storage_options,
            commit_properties=CommitProperties(
                custom_metadata=ctx.commit.custom_metadata, max_commit_retries=ctx.commit.max_commit_retries
            ),
        )
        write_deltalake(
            ctx.uri,
            ctx.fenced(data),
            mode="append",
            storage_options=ctx.storage_options,
            commit_properties=ctx.commit,
        )
        return None
    write_deltalake(
        ctx.uri,
        ctx.fenced(data),
        mode="error",
        partition_by=list(spec.partition_by) or None,
        configuration=configuration,
        storage_options=ctx.storage_options,
        commit_properties=ctx.commit,
    )
    return None


def check_rows_in_partition(data: pa.Table, values: dict[str, Any] | Any) -> None:
    """Every appended row must carry the declared partition values (the lease was taken for them).

    :raises InvalidWriteError: naming the first column whose rows differ.
    """
    import pyarrow.compute as pc

    names = {n.lower(): n for n in data.column_names}
    for column, value in values.items():
        actual = names.get(column.lower())
        if actual is None:
            raise InvalidWriteError(f"the source has no column {column!r} for the declared partition value")
        array = data.column(actual)
        if value is None:
            ok = array.null_count == len(array)
        else:
            matches = pc.equal(array.cast(pa.string()), pa.scalar(partition_value_text(value)))
            ok = array.null_count == 0 and bool(pc.all(matches).as_py() if len(array) else True)
        if not ok:
            raise InvalidWriteError(
                f"source rows do not all have {column} = {value!r}, as partition_values declares"
            )


#: how delta-rs runs each spec type; the operation name is what delta-rs records in commitInfo
RUNNERS: Runners[DeltaRsRunner] = Runners(
    "delta-rs",
    {
        AppendSpec: DeltaRsRunner(run_append, "WRITE"),
        OverwriteSpec: DeltaRsRunner(run_overwrite, "WRITE"),
        ReplaceWhereSpec: DeltaRsRunner(run_replace_where, "WRITE"),
        MergeSpec: DeltaRsRunner(run_merge, "MERGE"),
        UpdateSpec: DeltaRsRunner(run_update, "UPDATE"),
        DeleteSpec: DeltaRsRunner(run_delete, "DELETE"),
        OptimizeSpec: DeltaRsRunner(run_optimize, "OPTIMIZE", records_app_transaction=False),
        SetPropertiesSpec: DeltaRsRunner(run_set_properties, "SET TBLPROPERTIES"),
        AddColumnsSpec: DeltaRsRunner(run_add_columns, "ADD COLUMN", check=_check_column_types),
        CreateSpec: DeltaRsRunner(run_create, "CREATE TABLE", check=_check_schema_types),
        SqlSpec: Unsupported("delta-rs runs no SQL statements; write it with engine='spark'"),
    },
)
