"""Execute one write spec on a SparkSession with delta-spark's Python API (reviewed against delta-spark 4.4.1).

DataFrame writes (append, ``replaceWhere``, overwrite) carry Delta's writer options ``txnAppId``,
``txnVersion`` and ``userMetadata``. Everything else (MERGE, UPDATE, DELETE, OPTIMIZE, ``ALTER TABLE``,
create) runs with the session confs ``spark.databricks.delta.write.txnAppId``/``txnVersion`` (Delta's
"idempotent DML") and ``spark.databricks.delta.commitInfo.userMetadata``, set for one statement and restored
after. Callers serialise statements per session (SQL confs are per session).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from deltaguard.core.sql_literals import merge_condition_with_partitions, partition_predicate
from deltaguard.engines.spark_sources import to_spark_dataframe
from deltaguard.engines.spark_specs import columns_sql, merge_clauses, properties_sql, spark_type_sql
from deltaguard.engines.spark_target import SparkTarget
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
    WriteContext,
    WriteSpec,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
OPTIMIZE_MAX_FILE_SIZE_CONF = "spark.databricks.delta.optimize.maxFileSize"


def delta_table_class(spark: SparkSession) -> Any:
    """delta-spark's ``DeltaTable`` for this session: the Spark Connect one for Connect sessions.

    ``delta.tables.DeltaTable`` forwards only ``forPath``/``forName``/``convertToDelta`` to Spark Connect;
    ``isDeltaTable`` and the ``create`` builders must come from ``delta.connect.tables`` there.
    """
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        from delta.connect.tables import DeltaTable as ConnectDeltaTable

        return ConnectDeltaTable
    from delta.tables import DeltaTable

    return DeltaTable


def delta_table(spark: SparkSession, target: SparkTarget) -> Any:
    table_cls = delta_table_class(spark)
    if target.path is not None:
        return table_cls.forPath(spark, target.path)
    return table_cls.forName(spark, target.name)


@contextlib.contextmanager
def session_conf(spark: SparkSession, settings: Mapping[str, str | None]) -> Iterator[None]:
    """Set SQL confs for one statement and restore the previous values (unset when there were none)."""
    previous = {key: conf_get(spark, key) or None for key in settings}
    try:
        for key, value in settings.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def conf_get(spark: SparkSession, key: str) -> str:
    try:
        return str(spark.conf.get(key, "") or "")
    except Exception:  # unknown keys may raise on Spark Connect
        return ""


def _txn_confs(context: WriteContext, user_metadata: str | None) -> dict[str, str | None]:
    idempotent = context.app_id is not None and context.app_version is not None
    return {
        TXN_APP_ID_CONF: context.app_id if idempotent else None,
        TXN_VERSION_CONF: str(context.app_version) if idempotent else None,
        USER_METADATA_CONF: user_metadata,
    }


def _writer(df: DataFrame, mode: str, context: WriteContext, user_metadata: str | None) -> Any:
    writer = df.write.format("delta").mode(mode)
    if context.app_id is not None and context.app_version is not None:
        writer = writer.option("txnAppId", context.app_id).option("txnVersion", str(context.app_version))
    if user_metadata is not None:
        writer = writer.option("userMetadata", user_metadata)
    return writer


def _save(writer: Any, target: SparkTarget) -> None:
    if target.path is not None:
        writer.save(target.path)
    else:
        writer.saveAsTable(target.name)


def execute(
    spark: SparkSession,
    target: SparkTarget,
    spec: WriteSpec,
    context: WriteContext,
    user_metadata: str | None,
) -> None:
    """Run one spec. DataFrame writes carry writer options; the rest run under the session confs."""
    if isinstance(spec, AppendSpec | OverwriteSpec | ReplaceWhereSpec):
        df = to_spark_dataframe(spark, spec.source)
        mode = "append" if isinstance(spec, AppendSpec) else "overwrite"
        writer = _writer(df, mode, context, user_metadata)
        if isinstance(spec, ReplaceWhereSpec):
            writer = writer.option("replaceWhere", spec.predicate)
        elif spec.partition_by:
            writer = writer.partitionBy(*spec.partition_by)
        # A confs-free session for these writes: stale confs from a failed DML must not leak in.
        with session_conf(spark, {TXN_APP_ID_CONF: None, TXN_VERSION_CONF: None, USER_METADATA_CONF: None}):
            _save(writer, target)
        return
    confs = _txn_confs(context, user_metadata)
    if isinstance(spec, OptimizeSpec) and spec.target_size is not None:
        confs[OPTIMIZE_MAX_FILE_SIZE_CONF] = str(spec.target_size)
    with session_conf(spark, confs):
        _EXECUTORS[type(spec)](spark, target, spec)


def _merge(spark: SparkSession, target: SparkTarget, spec: MergeSpec) -> None:
    source = to_spark_dataframe(spark, spec.source).alias(spec.source_alias)
    condition = merge_condition_with_partitions(
        spec.condition, spec.target_partition_values, spec.target_alias
    )
    builder = delta_table(spark, target).alias(spec.target_alias).merge(source, condition)
    for clause in merge_clauses(spec):
        kind, clause_condition = clause[0], clause[1]
        if kind == "delete":
            builder = builder.whenMatchedDelete(condition=clause_condition)
        elif kind == "update_all":
            builder = builder.whenMatchedUpdateAll(condition=clause_condition)
        elif kind == "update":
            builder = builder.whenMatchedUpdate(condition=clause_condition, set=dict(clause[2]))
        elif kind == "insert_all":
            builder = builder.whenNotMatchedInsertAll()
        elif kind == "insert":
            builder = builder.whenNotMatchedInsert(values=dict(clause[2]))
        elif kind == "by_source_delete":
            builder = builder.whenNotMatchedBySourceDelete()
    builder.execute()


def _update(spark: SparkSession, target: SparkTarget, spec: UpdateSpec) -> None:
    delta_table(spark, target).update(condition=spec.predicate, set=dict(spec.updates))


def _delete(spark: SparkSession, target: SparkTarget, spec: DeleteSpec) -> None:
    delta_table(spark, target).delete(spec.predicate)


def _optimize(spark: SparkSession, target: SparkTarget, spec: OptimizeSpec) -> None:
    builder = delta_table(spark, target).optimize()
    if spec.partition_filters:
        builder = builder.where(partition_predicate(spec.partition_filters))
    if spec.zorder_by:
        builder.executeZOrderBy(*spec.zorder_by)
    else:
        builder.executeCompaction()


def _set_properties(spark: SparkSession, target: SparkTarget, spec: SetPropertiesSpec) -> None:
    spark.sql(f"ALTER TABLE {target.sql_reference()} SET TBLPROPERTIES ({properties_sql(spec.properties)})")


def _add_columns(spark: SparkSession, target: SparkTarget, spec: AddColumnsSpec) -> None:
    spark.sql(f"ALTER TABLE {target.sql_reference()} ADD COLUMNS ({columns_sql(spec.columns)})")


def _create(spark: SparkSession, target: SparkTarget, spec: CreateSpec) -> None:
    if spec.source is not None:
        from pyspark.sql.functions import col

        df = to_spark_dataframe(spark, spec.source)
        ident = target.sql_reference()
        writer = df.writeTo(ident).using("delta")
        for key, value in spec.properties.items():
            writer = writer.tableProperty(key, value)
        if spec.partition_by:
            writer = writer.partitionedBy(*[col(c) for c in spec.partition_by])
        if spec.replace:
            writer.createOrReplace()
        else:
            writer.create()
        return
    table_cls = delta_table_class(spark)
    builder = table_cls.createOrReplace(spark) if spec.replace else table_cls.create(spark)
    builder = builder.location(target.path) if target.path is not None else builder.tableName(target.name)
    for name, type_name in (spec.schema or {}).items():
        builder = builder.addColumn(name, spark_type_sql(type_name))
    if spec.partition_by:
        builder = builder.partitionedBy(*spec.partition_by)
    for key, value in spec.properties.items():
        builder = builder.property(key, value)
    builder.execute()


def _sql(spark: SparkSession, target: SparkTarget, spec: SqlSpec) -> None:
    # The statement names its own target (checked when it was classified); run it as written.
    spark.sql(spec.sql).collect()


_EXECUTORS: Mapping[type, Callable[[Any, SparkTarget, Any], None]] = {
    SqlSpec: _sql,
    MergeSpec: _merge,
    UpdateSpec: _update,
    DeleteSpec: _delete,
    OptimizeSpec: _optimize,
    SetPropertiesSpec: _set_properties,
    AddColumnsSpec: _add_columns,
    CreateSpec: _create,
}
