"""Read what a MERGE source holds in its key columns, and check a source against a computed scope.

The reading half of ADR 0019 (the deciding half is the pure :mod:`deltaguard.core.merge_scope`). Only the
key columns are read: an Arrow projection of in-memory data, a column projection of Parquet/CSV/Delta
sources, and ``select(col).distinct().limit(N + 1)`` on a Spark DataFrame (then a bounded count and
min/max only when there are more than ``N``). A zero-argument callable must be called to see its data at
all: the data it produced is kept for the write (:func:`read_source_keys`), so it runs once when the lease
is granted at once, and once more after a deferral (the worker process that held the data is gone).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from deltaguard.core.merge_scope import KeySummary, MergeScope, ScopeLimits, SourceKeys
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.sources import DELTA_PREFIX, _call_source, _dir_of_csv, _is_data, resolve_source


def read_source_keys(
    source: Any, columns: Collection[str], limits: ScopeLimits, storage_options: dict[str, str] | None = None
) -> SourceKeys:
    """:func:`source_key_summaries`, and the source to write: a callable's produced data is kept, so a write
    granted at once does not call it again."""
    if callable(source) and not _is_data(source):
        source = _call_source(source)
        if callable(source) and not _is_data(source) and not _is_spark_dataframe(source):
            raise InvalidWriteError("a source callable must return data, not another callable")
    if isinstance(source, pa.RecordBatchReader) or (
        hasattr(source, "__arrow_c_stream__") and not isinstance(source, pa.Table)
    ):
        # a stream can be read once: reading its keys would leave the write an exhausted stream
        source = pa.RecordBatchReader.from_stream(source).read_all()
    return SourceKeys(source_key_summaries(source, columns, limits, storage_options), source)


def source_key_summaries(
    source: Any, columns: Collection[str], limits: ScopeLimits, storage_options: dict[str, str] | None = None
) -> dict[str, KeySummary]:
    """What ``source`` holds in ``columns`` (lower-cased name -> summary); absent columns are left out.

    :param source: a write source as :func:`deltaguard.engines.sources.resolve_source` takes it.
    :param columns: the source columns to summarise.
    :param limits: the enumeration bounds.
    :param storage_options: for Delta sources.
    :raises InvalidWriteError: when the source cannot be read.
    """
    if callable(source) and not _is_data(source):
        source = _call_source(source)
    if _is_spark_dataframe(source):
        return _spark_summaries(source, columns, limits)
    table = _projected(source, columns, storage_options)
    return {name.lower(): arrow_summary(table.column(name), name, limits) for name in table.column_names}


def _is_spark_dataframe(source: Any) -> bool:
    return hasattr(source, "toArrow") and hasattr(source, "sparkSession")


def _present(available: Collection[str], wanted: Collection[str]) -> list[str]:
    names = {n.lower(): n for n in available}
    return list(dict.fromkeys(names[w.lower()] for w in wanted if w.lower() in names))


def _projected(source: Any, columns: Collection[str], storage_options: dict[str, str] | None) -> pa.Table:
    if isinstance(source, str | os.PathLike):
        uri = os.fspath(source)
        if uri.startswith(DELTA_PREFIX) or os.path.isdir(
            os.path.join(uri.removeprefix("file://"), "_delta_log")
        ):
            from deltalake import DeltaTable

            table = DeltaTable(uri.removeprefix(DELTA_PREFIX), storage_options=storage_options)
            names = [f.name for f in table.schema().fields]
            return table.to_pyarrow_table(columns=_present(names, columns))
        file_format = (
            "csv" if uri.rstrip("/").lower().endswith((".csv", ".csv.gz")) or _dir_of_csv(uri) else "parquet"
        )
        try:
            dataset = pads.dataset(uri, format=file_format)
            return dataset.to_table(columns=_present(dataset.schema.names, columns))
        except pa.ArrowInvalid as exc:  # an OSError (storage unreachable) propagates: a retry may succeed
            raise InvalidWriteError(f"cannot read {file_format} source {uri!r}: {exc}") from exc
    if type(source).__module__.startswith("pandas"):
        frame = source[_present([str(c) for c in source.columns], columns)]
        return pa.Table.from_pandas(frame, preserve_index=False)
    data = resolve_source(source, storage_options)
    if isinstance(data, pa.RecordBatchReader):
        data = data.read_all()
    return data.select(_present(data.column_names, columns))


def arrow_summary(array: pa.ChunkedArray | pa.Array, name: str, limits: ScopeLimits) -> KeySummary:
    """Distinct values (up to ``max_in_values``), else min/max (up to ``max_range_values``) of one column."""
    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    unique = pc.unique(array)
    has_null = unique.null_count > 0
    distinct = len(unique) - (1 if has_null else 0)
    if distinct > limits.max_range_values:
        return KeySummary(name, None, has_null=has_null, too_many=True)
    if distinct <= limits.max_in_values:
        values = [v for v in unique.to_pylist() if v is not None]
        return KeySummary(name, tuple(sorted(values)), has_null=has_null)
    bounds = pc.min_max(unique)
    return KeySummary(name, None, bounds["min"].as_py(), bounds["max"].as_py(), has_null)


def _spark_summaries(df: Any, columns: Collection[str], limits: ScopeLimits) -> dict[str, KeySummary]:
    """:func:`source_key_summaries` of a Spark DataFrame, in Spark: a bounded ``distinct``, then a bounded
    count and min/max only beyond ``max_in_values``.

    SQL expression strings rather than ``pyspark.sql.functions``: those build classic Columns unless the
    process runs in Spark Connect mode, which a Spark Connect DataFrame does not accept.
    """
    out: dict[str, KeySummary] = {}
    for name in _present(df.columns, columns):
        keys = df.selectExpr(f"`{name.replace('`', '``')}` AS k")
        rows = keys.distinct().limit(limits.max_in_values + 2).collect()
        values = [r["k"] for r in rows]
        has_null = any(v is None for v in values)
        non_null = [v for v in values if v is not None]
        if len(non_null) <= limits.max_in_values and len(values) <= limits.max_in_values + 1:
            if not has_null:  # the bounded read may have stopped before a NULL
                has_null = bool(keys.where("k IS NULL").limit(1).count())
            out[name.lower()] = KeySummary(name, tuple(sorted(non_null)), has_null=has_null)
            continue
        present = keys.where("k IS NOT NULL").distinct()
        count = present.limit(limits.max_range_values + 1).count()
        has_null = bool(keys.where("k IS NULL").limit(1).count())
        if count > limits.max_range_values:
            out[name.lower()] = KeySummary(name, None, has_null=has_null, too_many=True)
            continue
        row = present.selectExpr("min(k) AS lo", "max(k) AS hi").collect()[0]
        out[name.lower()] = KeySummary(name, None, row["lo"], row["hi"], has_null)
    return out


def check_source_in_scope(data: pa.Table, scope: MergeScope) -> None:
    """Refuse a source that left the scope its lease was taken for (it changed since it was read).

    :raises InvalidWriteError: naming the column and a value outside the scope; nothing is written.
    """
    names = {n.lower(): n for n in data.column_names}
    for column in scope.columns():
        actual = names.get(column.source_column.lower())
        if actual is None:
            raise InvalidWriteError(f"the source has no column {column.source_column!r} any more")
        array = data.column(actual)
        if array.null_count and not column.has_null:
            raise InvalidWriteError(
                f"the source holds NULL in {actual!r}, outside the scope leased for {column.column} (it changed "
                "since it was read)"
            )
        present = pc.drop_null(array)
        if column.values is not None:
            value_type = present.type.value_type if pa.types.is_dictionary(present.type) else present.type
            allowed = pa.array(list(column.values), type=value_type)
            outside = pc.filter(present, pc.invert(pc.is_in(present, value_set=allowed)))
        else:
            low, high = pa.scalar(column.low, present.type), pa.scalar(column.high, present.type)
            outside = pc.filter(present, pc.or_(pc.less(present, low), pc.greater(present, high)))
        if len(outside):
            raise InvalidWriteError(
                f"the source holds {actual} = {outside[0].as_py()!r}, outside the scope leased for "
                f"{column.column} (it changed since it was read); nothing was written"
            )
