"""A MERGE source on the Spark engine: its key values before the lease, and a guard on it in the write's job.

The reading half mirrors :func:`deltaguard.engines.sources.read_source_keys` (ADR 0019): what Spark
builds (a ``def f(spark)`` source, a Spark DataFrame, a URI the engine reads through Spark) is summarised in
Spark by :func:`deltaguard.engines.sources._spark_summaries`; data in the worker (Arrow, pandas, streams,
a zero-argument callable producing them) is summarised with Arrow and kept for the write.

The checking half replaces delta-rs' materialise-and-check (``check_source_in_scope``): a Spark source is a
plan, read again by the MERGE, and may hold other rows then (a query over a table someone appends to).
So the MERGE does not read the source as it is but a projection of it in which every guarded column is
``CASE WHEN <allowed> THEN col ELSE raise_error(...) END``. A value the MERGE matches on, inserts or copies
is computed by that expression in the MERGE's own job, so a value outside the claim cannot be written: the
job fails before Delta commits anything. Nothing is dropped silently: the projection keeps every row.
An append with declared ``partition_values`` is written through the same guard (:func:`partition_guards`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from deltaguard.core.merge_scope import ScopeLimits, SourceKeys
from deltaguard.core.sql.literals import SPARK, partition_value_text, sql_literal
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.sources import (
    _call_source,
    _is_data,
    _is_spark_dataframe,
    _spark_summaries,
    read_source_keys,
)
from deltaguard.engines.spark.errors import SOURCE_CHECK_MARKER
from deltaguard.engines.spark.sources import is_spark_source, to_spark_dataframe

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from deltaguard.engines.specs import MergeSpec


def read_spark_source_keys(
    spark: SparkSession, source: Any, columns: Collection[str], limits: ScopeLimits
) -> SourceKeys:
    """What a Spark engine MERGE source holds in ``columns``, and the source to write.

    :param spark: the session the source is read on.
    :param source: anything :func:`deltaguard.engines.spark.sources.to_spark_dataframe` takes.
    :param columns: the source columns to summarise.
    :param limits: the enumeration bounds.
    :raises InvalidWriteError: for a source the engine cannot read.
    """
    if callable(source) and not (is_spark_source(source) or _is_data(source) or _is_spark_dataframe(source)):
        # a zero-argument callable runs once: what it produced is written if the lease is granted at once
        source = _call_source(source)
        if callable(source) and not (_is_data(source) or _is_spark_dataframe(source)):
            raise InvalidWriteError("a source callable must return data, not another callable")
    if is_spark_source(source) or isinstance(source, str) or _is_spark_dataframe(source):
        # a plan: it is built again for the write, which the guard of guarded_source checks
        return SourceKeys(_spark_summaries(to_spark_dataframe(spark, source), columns, limits), source)
    return read_source_keys(source, columns, limits)


def source_guards(spec: MergeSpec) -> tuple[dict[str, tuple[str, ...]], str]:
    """What every row of ``spec``'s source must satisfy to be written: source column (lower-cased) -> Spark
    SQL conditions on it, each true exactly for the values the lease claim covers; and what they enforce.

    * with a source scope (ADR 0019): each column scope's values (``s.date IN (...)``, NULL when the source
      held NULL), matched and inserted alike, as delta-rs' ``check_source_in_scope`` does;
    * without one, ``INSERT *`` / ``UPDATE SET *`` with declared target partitions
      (:attr:`MergeSpec.copies_checked_rows`): the copied partition column equals the declared value as
      Delta stores it (``CAST(col AS STRING) = 'value'``; NULL only for a declared NULL), as delta-rs'
      ``check_rows_in_partition`` does.
    """
    guards: dict[str, list[str]] = {}
    why = ""
    if spec.source_scope is not None:
        why = "outside the scope read from it for its lease (it changed since it was read)"
        for scope in spec.source_scope.columns():
            test = scope.source_condition().sql(dialect=SPARK)
            guards.setdefault(scope.source_column.lower(), []).append(test)
    elif spec.copies_checked_rows:
        why = "outside the partitions target_partition_values declares"
        for column, column_tests in partition_guards(spec.target_partition_values).items():
            guards.setdefault(column, []).extend(column_tests)
    return {column: tuple(dict.fromkeys(tests)) for column, tests in guards.items()}, why


def partition_guards(values: Mapping[str, object]) -> dict[str, tuple[str, ...]]:
    """Source column (lower-cased) -> the Spark SQL test that it carries the declared partition value, as
    Delta stores it (``CAST(col AS STRING) = 'value'``; ``col IS NULL`` for a declared NULL), the comparison
    delta-rs' ``check_rows_in_partition`` makes.

    :param values: partition column -> declared value.
    """
    guards: dict[str, tuple[str, ...]] = {}
    for column, value in values.items():
        col = exp.column(column, quoted=True)
        if value is None:
            check: exp.Expr = exp.Is(this=col, expression=exp.Null())
        else:
            text = exp.Literal.string(partition_value_text(value))
            check = exp.EQ(this=exp.Cast(this=col, to=exp.DataType.build("string")), expression=text)
        guards[column.lower()] = (check.sql(dialect=SPARK),)
    return guards


def guard_expression(column: str, tests: Collection[str], why: str) -> str:
    """``CASE WHEN <tests> THEN `column` ELSE raise_error(<names the value>) END AS `column```.

    :param column: the source column, as the source spells it.
    :param tests: Spark SQL conditions on it, all of which a written value must satisfy.
    :param why: what a value failing them is outside of, for the error.
    """
    quoted = "`" + column.replace("`", "``") + "`"
    allowed = " AND ".join(f"({t})" for t in tests)
    head = f"{SOURCE_CHECK_MARKER}: the source holds {column} = "
    message = (
        f"concat({sql_literal(head)}, coalesce(cast({quoted} AS STRING), 'NULL'), {sql_literal(', ' + why)})"
    )
    return f"CASE WHEN {allowed} THEN {quoted} ELSE raise_error({message}) END AS {quoted}"


def guarded_source(df: DataFrame, spec: MergeSpec) -> DataFrame:
    """``df`` with every column of :func:`source_guards` replaced by its :func:`guard_expression`.

    :raises InvalidWriteError: when the source lacks a guarded column.
    """
    return guarded(df, *source_guards(spec))


def guarded(df: DataFrame, guards: Mapping[str, Collection[str]], why: str) -> DataFrame:
    """``df`` with every column named in ``guards`` (lower-cased) replaced by its :func:`guard_expression`,
    other columns and every row kept.

    :raises InvalidWriteError: when the source lacks a guarded column.
    """
    if not guards:
        return df
    names = {c.lower(): c for c in df.columns}
    missing = sorted(set(guards) - set(names))
    if missing:
        raise InvalidWriteError(
            f"the MERGE source has no column {missing[0]!r} any more; nothing was written"
        )
    return df.selectExpr(
        *(
            guard_expression(name, guards[name.lower()], why)
            if name.lower() in guards
            else "`" + name.replace("`", "``") + "`"
            for name in df.columns
        )
    )
