"""What a write reads and holds: its source, the keys the source holds, and the table snapshot it is judged on.

* :func:`resolve_source` turns a write's ``source`` into Arrow data. Accepted: ``pyarrow.Table`` and
  ``pyarrow.RecordBatchReader``; ``pandas.DataFrame`` (without its index); any object exporting the Arrow C
  stream interface (``__arrow_c_stream__``: polars, arro3, ...); an object with ``toArrow()`` (a Spark
  DataFrame); a URI string (``delta+<uri>`` or a directory holding ``_delta_log`` is read as a Delta table
  with the engine's storage options, ``.csv``/``.csv.gz`` as CSV, anything else as Parquet, through
  ``pyarrow.dataset``); a zero-argument callable returning any of these, resolved once when the write runs.
* :func:`read_source_keys` reads what a MERGE source holds in its key columns (ADR 0019; the deciding half
  is the pure :mod:`deltaguard.core.merge_scope`): an Arrow projection of in-memory data, a column
  projection of Parquet/CSV/Delta sources, ``select(col).distinct().limit(N + 1)`` on a Spark DataFrame.
  A callable's data is kept for the write, so it runs once when the lease is granted at once.
* :func:`wrap_source` / :func:`unwrap_source`: sources as an operator holds them until the write runs
  (callables kept out of template rendering).
* :func:`with_target_reads`: whether a write's source reads the table it writes (ADR 0012: such a write
  reads the whole table). A MERGE or an append whose source is its own target reads the target as it runs;
  two MERGEs copying partition ``b`` into ``a`` and ``a`` into ``b`` both commit on delta-rs 1.6.6, and the
  INSERT mirror of it commits on delta-spark 4.4.0 ("Isolation levels and write conflicts": an INSERT that
  reads its table has MERGE's concurrency). Closed world: a source is known not to read the target only when
  it is data in memory or a location neither the target, inside it nor around it, compared by
  :func:`deltaguard.writes.table_uri.table_key`.
* The one door to a table configuration writes are judged on (ADR 0037): :func:`read_judged_config`,
  :func:`read_judged_table`, :func:`judged_config_from_table` (the Delta log, as
  :mod:`~deltaguard.engines.discovery` reads it), :func:`engine_table_config` (an engine's own read) and
  :func:`attach_oracle` (a configuration read back from elsewhere) attach the engine's predicate evaluator,
  or delta-rs' (:class:`~deltaguard.engines.deltars.meaning.DataFusionOracle`) when it supplies none.
  ``tests/engines/test_judged_door.py`` fails when a caller reads a configuration another way.
* The snapshot a delta-rs write reads when its lease request carried file statistics (ADR 0020): the
  admission decision is sound only for a write that reads the version its lease records, so the lease is
  moved to the newest version when still compatible (:meth:`~deltaguard.leases.manager.LeaseManager.restate`),
  else the write reads the version recorded.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from deltaguard.core.admission import LeaseRequest, Owner, TableClaim
from deltaguard.core.merge_scope import KeySummary, MergeScope, ScopeLimits, SourceKeys
from deltaguard.core.operations import Operation
from deltaguard.core.profiles import EngineName
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.deltars.meaning import DataFusionOracle
from deltaguard.engines.discovery import config_from_table, read_table
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.specs import SqlSpec, WriteSpec
from deltaguard.writes.table_uri import table_key, uri_scheme

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from deltaguard.core.profiles import EngineProfile
    from deltaguard.engines.base import DeltaEngine


ArrowData: TypeAlias = pa.Table | pa.RecordBatchReader

#: Prefix that marks a URI string as a Delta table to read.
DELTA_PREFIX = "delta+"


def resolve_source(source: Any, storage_options: dict[str, str] | None = None) -> ArrowData:
    """Turn a write source into a ``pyarrow.Table`` or ``pyarrow.RecordBatchReader``.

    :param source: see the module documentation.
    :param storage_options: storage options for reading Delta sources.
    :raises InvalidWriteError: for ``None``, unsupported types, missing paths or unreadable files.
    """
    if callable(source) and not _is_data(source):
        produced = _call_source(source)
        if callable(produced) and not _is_data(produced):
            raise InvalidWriteError("a source callable must return data, not another callable")
        return _resolve_value(produced, storage_options)
    return _resolve_value(source, storage_options)


def materialize(data: ArrowData) -> pa.Table:
    """Read a reader fully into a table (tables are returned unchanged)."""
    return data.read_all() if isinstance(data, pa.RecordBatchReader) else data


def _is_data(obj: Any) -> bool:
    # pandas/pyarrow objects are not callables, but some dataframe types are; data wins over "callable".
    return isinstance(obj, pa.Table | pa.RecordBatchReader) or hasattr(obj, "__arrow_c_stream__")


def _call_source(source: Callable[[], Any]) -> Any:
    # Check the signature rather than catching TypeError, which the callable's own body may raise.
    try:
        inspect.signature(source).bind()
    except TypeError as exc:
        raise InvalidWriteError(f"a source callable must take no arguments: {exc}") from exc
    except ValueError:  # builtins without a signature: just call them
        pass
    return source()


def _resolve_value(source: Any, storage_options: dict[str, str] | None) -> ArrowData:
    if source is None:
        raise InvalidWriteError("the write needs a source, got None")
    if isinstance(source, pa.Table | pa.RecordBatchReader):
        return source
    if _is_pandas(source):
        return pa.Table.from_pandas(source, preserve_index=False)
    if isinstance(source, str | os.PathLike):
        return _read_uri(os.fspath(source), storage_options)
    to_arrow = getattr(source, "toArrow", None)
    if callable(to_arrow):
        result = to_arrow()
        if isinstance(result, pa.Table | pa.RecordBatchReader):
            return result
        raise InvalidWriteError(f"toArrow() returned {type(result).__name__}, not a pyarrow.Table")
    if hasattr(source, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(source)
    raise InvalidWriteError(
        f"unsupported source type {type(source).__name__}: use a pyarrow.Table/RecordBatchReader, a pandas "
        "DataFrame, a Parquet/CSV/Delta URI, an object with toArrow() or a zero-argument callable"
    )


def _is_pandas(source: Any) -> bool:
    module = type(source).__module__
    return module.startswith("pandas") and type(source).__name__ == "DataFrame"


def _read_uri(uri: str, storage_options: dict[str, str] | None) -> ArrowData:
    if not uri.strip():
        raise InvalidWriteError("the source URI is empty")
    if uri.startswith(DELTA_PREFIX):
        return _read_delta(uri[len(DELTA_PREFIX) :], storage_options)
    if "://" not in uri or uri.startswith("file://"):
        local = uri.removeprefix("file://")
        if not os.path.exists(local):
            raise InvalidWriteError(f"source path {uri!r} does not exist")
        if os.path.isdir(os.path.join(local, "_delta_log")):
            return _read_delta(uri, storage_options)
    file_format = (
        "csv" if uri.rstrip("/").lower().endswith((".csv", ".csv.gz")) or _dir_of_csv(uri) else "parquet"
    )
    try:
        return pads.dataset(uri, format=file_format).to_table()
    except (OSError, pa.ArrowInvalid) as exc:
        raise InvalidWriteError(f"cannot read {file_format} source {uri!r}: {exc}") from exc


def _dir_of_csv(uri: str) -> bool:
    """A local directory whose data files are all CSV."""
    local = uri.removeprefix("file://")
    if "://" in local or not os.path.isdir(local):
        return False
    names = [n for n in os.listdir(local) if not n.startswith((".", "_"))]
    return bool(names) and all(n.lower().endswith((".csv", ".csv.gz")) for n in names)


def _read_delta(uri: str, storage_options: dict[str, str] | None) -> pa.Table:
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    try:
        return DeltaTable(uri, storage_options=storage_options).to_pyarrow_table()
    except TableNotFoundError as exc:
        raise InvalidWriteError(f"source Delta table {uri!r} does not exist") from exc
    except DeltaError as exc:
        raise InvalidWriteError(f"cannot read source Delta table {uri!r}: {exc}") from exc


# ------------------------------------------------------------------------------------ the keys a source holds


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


# ---------------------------------------------------------------------------------- sources an operator holds


class CallableSource:
    """A zero-argument source callable kept out of Airflow's template rendering.

    Airflow calls any callable found in a template field at render time (with ``context=``); a source
    callable must instead run only when the write runs, under the lease. Operators wrap callables in this
    non-callable holder and unwrap them for the engine.
    """

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __repr__(self) -> str:
        return f"CallableSource({getattr(self.fn, '__qualname__', self.fn)!r})"


def wrap_source(source: Any) -> Any:
    """Wrap a callable source (see :class:`CallableSource`); other sources are returned unchanged."""
    return CallableSource(source) if callable(source) else source


def unwrap_source(source: Any) -> Any:
    return source.fn if isinstance(source, CallableSource) else source


def source_for_engine(source: Any, engine_name: str, spark_connections: tuple[str | None, str | None]) -> Any:
    """``source`` as the engine called ``engine_name`` takes it.

    Unwraps a :class:`CallableSource`; a Spark source (``def f(spark) -> DataFrame`` or a ``SparkSource``)
    goes through :func:`deltaguard.engines.spark.sources.prepare_source`: the Spark engine builds it on its
    own session, any other engine gets a zero-argument callable whose DataFrame it converts with
    ``toArrow()``. A bare function's session is built from the task's Spark connections (a ``SparkSource``
    keeps its own settings); without any, a local PySpark-only session. Nothing here starts Spark: the
    session is created when the engine reads the source, during the write.

    :param source: the operator's source (possibly wrapped).
    :param engine_name: the resolved engine's ``name``.
    :param spark_connections: the task's ``(spark, spark_connect)`` connection ids.
    """
    raw = unwrap_source(source)
    if not callable(raw) or engine_name == "spark":  # the Spark engine builds Spark sources itself
        return raw
    from deltaguard.engines.spark.sources import SparkSource, is_spark_source, prepare_source, session_factory

    if not is_spark_source(raw):
        return raw
    factory = None if isinstance(raw, SparkSource) else session_factory(*spark_connections)
    return prepare_source(raw, engine_name, session_factory=factory)


# -------------------------------------------------------------------------------------------- the judged door


def attach_oracle(config: TableConfig, engine: DeltaEngine | None = None) -> TableConfig:
    """``config`` with an engine's evaluator of partition predicates as its ``meaning`` (ADR 0037).

    A configuration that already carries one keeps it. Otherwise the engine's
    (:meth:`~deltaguard.engines.base.DeltaEngine.predicate_oracle`), else delta-rs'; unchanged when
    neither can judge the table (unpartitioned, partition types not read, no table).

    :param config: the configuration as read.
    :param engine: the engine that read it or will write, if one is at hand.
    """
    if config.meaning is not None:
        return config
    oracle = engine.predicate_oracle(config) if engine is not None else None
    if oracle is None:
        oracle = DataFusionOracle.for_table(config)
    return config if oracle is None else dataclasses.replace(config, meaning=oracle)


def attach_delta_rs_oracle(config: TableConfig, judged_by: Iterable[EngineName]) -> TableConfig:
    """A configuration no engine read (a ``check`` document, a declared or recorded table) with delta-rs'
    evaluator attached when the delta-rs rules alone judge its writes (ADR 0037).

    delta-rs is installed with the provider, and its witness file needs only the partition types. Writes
    judged by Spark's rules keep the hand reading: DataFusion reads some comparisons otherwise than Spark
    (a STRING column against a number, as text), which would make those verdicts stricter, not surer.

    :param config: the configuration as declared or recorded.
    :param judged_by: the engines whose rules judge the writes on it.
    """
    if set(judged_by) != {EngineName.DELTA_RS}:
        return config
    return attach_oracle(config)


def engine_table_config(engine: DeltaEngine, table_uri: str) -> TableConfig:
    """The engine's read of ``table_uri`` (:meth:`~deltaguard.engines.base.DeltaEngine.table_config`), with
    an evaluator attached (an engine given as ``module:Class`` need not attach one itself).

    :raises TableAccessError: as the engine's read.
    """
    return attach_oracle(engine.table_config(table_uri), engine)


def read_judged_config(
    table_uri: str,
    storage_options: dict[str, str] | None = None,
    *,
    engine: DeltaEngine | None = None,
    file_stats: bool = False,
) -> TableConfig:
    """:func:`deltaguard.engines.discovery.read_table_config`, with an evaluator attached.

    :param engine: the engine at hand, if any (its evaluator is preferred).
    :raises TableAccessError: when the log exists but cannot be read.
    """
    return read_judged_table(table_uri, storage_options, engine=engine, file_stats=file_stats)[0]


def read_judged_table(
    table_uri: str,
    storage_options: dict[str, str] | None = None,
    *,
    engine: DeltaEngine | None = None,
    file_stats: bool = False,
) -> tuple[TableConfig, DeltaTable | None]:
    """:func:`deltaguard.engines.discovery.read_table` (the configuration and the handle it was read from),
    with an evaluator attached.

    :raises TableAccessError: when the log exists but cannot be read.
    """
    config, table = read_table(table_uri, storage_options, file_stats)
    return attach_oracle(config, engine), table


def judged_config_from_table(
    table: Any,
    table_uri: str | None = None,
    storage_options: dict[str, str] | None = None,
    *,
    engine: DeltaEngine | None = None,
    file_stats: bool = False,
) -> TableConfig:
    """:func:`deltaguard.engines.discovery.config_from_table` of an open deltalake table, with an evaluator
    attached.

    :raises TableAccessError: when the snapshot cannot be read.
    """
    config = config_from_table(table, table_uri, storage_options, file_stats=file_stats)
    return attach_oracle(config, engine)


# ---------------------------------------------------------------------------------------- the pinned snapshot


class Restates(Protocol):
    """What this module needs of the lease manager (:class:`~deltaguard.leases.manager.LeaseManager`)."""

    def restate(self, request: LeaseRequest) -> Mapping[str, int | None]: ...


def pinned_snapshot(
    manager: Restates,
    engine: Any,
    *,
    uri: str,
    table_key: str,
    operation: Operation,
    profile: EngineProfile,
    owner: Owner,
    lease_id: str,
    prepared: Any = None,
    prepared_config: TableConfig | None = None,
) -> Any:
    """Open the snapshot the write must commit from (a deltalake handle), or ``None`` when its lease
    records no read version (the write then reads the newest version, as without statistics).

    :param manager: the lease manager holding the lease.
    :param engine: the delta-rs engine (``open_table``, ``storage_options``).
    :param uri: the table URI.
    :param table_key: the table's lease key.
    :param operation: the write's operation, as in its lease request.
    :param profile: its engine profile.
    :param owner: the lease's owner.
    :param lease_id: the granted lease.
    :param prepared: the handle the write's lease request was read from, if still open: it is brought to
        the newest version (reading only the commits after it) instead of opening the log again.
    :param prepared_config: the configuration, with statistics, read from ``prepared`` at its version: used
        again when no commit landed since, instead of reading the statistics again.
    :raises LeaseLostError: the lease is gone or expired.
    """

    if prepared is None:
        latest = engine.open_table(uri)
    else:
        latest = prepared
        latest.update_incremental()
    if prepared_config is not None and prepared_config.version == latest.version():
        config = prepared_config
    else:
        # Judged like the prepared configuration: delta-rs' evaluator confirms what the model keeps apart.
        config = judged_config_from_table(latest, uri, engine.storage_options, engine=engine, file_stats=True)
    claim = TableClaim(
        uri=table_key, operation=operation, profile=profile, config=config, read_version=latest.version()
    )
    # ttl and priority are not read: the stored request keeps its own, only its claims move.
    request = LeaseRequest(claims=(claim,), owner=owner, request_id=lease_id)
    version = manager.restate(request).get(table_key)
    if version is None:
        return None
    if version == latest.version():
        return latest
    return engine.open_table(uri, version=version)


def judged_by_file_stats(operation: Operation) -> bool:
    """Whether the model judges ``operation`` by file statistics (only rewrites are): others neither send
    statistics nor pin their snapshot."""
    from deltaguard.core.rules.deltars_stats import STATS_KINDS

    return operation.kind in STATS_KINDS


def writes_from_snapshot(engine: Any) -> bool:
    """Whether the engine's ``write`` takes the snapshot to commit from (a subclass may not pass it on)."""
    import inspect

    try:
        return "snapshot" in inspect.signature(engine.write).parameters
    except (TypeError, ValueError):
        return False


def checks_on_snapshot(engine: Any) -> bool:
    """Whether the engine's ``validate`` takes the open handle the write's configuration was read from (so
    that checking the write does not open the Delta log again)."""
    import inspect

    try:
        return "snapshot" in inspect.signature(engine.validate).parameters
    except (TypeError, ValueError):
        return False


# ------------------------------------------------------------------------------- sources that read the target


def _overlaps(first: str, second: str) -> bool:
    """One location is the other, or holds it (a parent directory read recursively, a partition inside)."""
    a, b = first.rstrip("/"), second.rstrip("/")
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def location_reads_target(location: str, table_uri: str) -> bool:
    """Whether reading ``location`` reads files of the table at ``table_uri``.

    A relative path may be the target: the engine reads it from the working directory of the process that
    runs the write (deltalake and pyarrow open ``lake/t`` there; measured on deltalake 1.6.6 with the
    meaning fuzzer's sources), which is not known where the write is judged, so it cannot be placed.

    :param location: a source path or URI (``delta+`` prefix allowed).
    :param table_uri: the target table.
    """
    if _is_relative(location):
        return True
    return _overlaps(table_key(location.removeprefix(DELTA_PREFIX)), table_key(table_uri))


def _is_relative(location: str) -> bool:
    """A local path without a leading ``/`` (nor a scheme): it names a place only with a working directory."""
    text = location.removeprefix(DELTA_PREFIX).strip()
    return uri_scheme(text) is None and not text.startswith("/")


def source_reads_target(source: Any, table_uri: str, *, declared_apart: bool = False) -> str | None:
    """Why ``source`` may read the table at ``table_uri`` while the write runs, or ``None`` when it
    provably does not.

    :param source: a spec's source (possibly held in a :class:`~deltaguard.engines.sources.CallableSource`).
    :param table_uri: the target table.
    :param declared_apart: the task's author states that the source does not read the target
        (``source_reads_target=False``): a source computed as the write runs is taken at its author's word,
        while a location is still compared with the target, since that needs no one's word.
    """
    raw = unwrap_source(source)
    if raw is None or isinstance(raw, pa.Table) or _is_pandas(raw):
        return None
    if isinstance(raw, str | os.PathLike):
        raw = os.fspath(raw)
        if _is_relative(raw):
            return f"its source {raw!r} is a relative path, read from the working directory: it may be the target"
        if location_reads_target(raw, table_uri):
            return f"its source {raw!r} is the target table (or inside it)"
        return None
    if declared_apart:
        return None
    kind = type(raw).__name__
    return (
        f"its source (a {kind}) is computed as the write runs and may read the target table "
        "(source_reads_target=False says it does not)"
    )


def sql_reads_target(
    sql: str, table_uri: str, locate: Callable[[str], str | None] | None = None
) -> str | None:
    """Why a Spark SQL statement may read the table at ``table_uri`` through a relation other than its
    target reference, or ``None``.

    A path relation (``delta.`/lake/link```, ``parquet.`/lake/t/p=a```) is resolved with the filesystem. A
    catalog name is resolved with ``locate`` (the engine's catalog: its location, ``None`` for a view or a
    name it cannot resolve, which may read anything); without ``locate`` catalog names are left to the
    classifier (:mod:`deltaguard.core.sql.classify`), which counts any name that could be the target.

    :param sql: the statement.
    :param table_uri: the table the statement writes.
    :param locate: the engine's catalog lookup, when it has one.
    """
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except (SqlglotError, RecursionError):
        return "a statement that does not parse may read the target"  # the classifier refuses it first
    target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        if table is target:
            continue
        path = _relation_path(table)
        if path is not None:
            if location_reads_target(path, table_uri):
                return f"it reads {path!r}, which is the target table (or inside it)"
            continue
        if locate is None or not isinstance(table.this, exp.Identifier):
            continue
        name = ".".join(part.name for part in table.parts)
        if len(table.parts) == 1 and name.lower() in ctes:
            continue
        location = locate(".".join(_quoted(part.name) for part in table.parts))
        if location is None:
            return (
                f"it reads {name}, whose location is not known (a view or a name the catalog cannot resolve)"
            )
        if location_reads_target(location, table_uri):
            return f"it reads {name}, which is stored at the target's location"
    return None


def _quoted(part: str) -> str:
    return "`" + part.replace("`", "``") + "`"


def _relation_path(table: exp.Table) -> str | None:
    """The path of ``format.`path``` (any format), or ``None`` for a catalog name."""
    parts = table.parts
    if len(parts) == 2 and ("/" in parts[1].name or ":" in parts[1].name):
        return parts[1].name
    return None


def with_target_reads(
    operation: Operation,
    spec: WriteSpec,
    table_uri: str,
    locate: Callable[[str], str | None] | None = None,
    declared: bool | None = None,
) -> tuple[Operation, str | None]:
    """``operation`` marked as reading its own table when the spec's source (or SQL) may read it, and why.

    :param operation: what the model was going to be told.
    :param spec: the write.
    :param table_uri: the table it writes.
    :param locate: the engine's catalog lookup (:meth:`~deltaguard.engines.base.DeltaEngine.relation_location`).
    :param declared: the task's ``source_reads_target``: ``True`` marks the write whatever its source,
        ``False`` takes a computed source at its author's word (:func:`source_reads_target`), ``None``
        assumes a computed source may read the target.
    :returns: the operation to judge, and the reason it was marked (``None``: unchanged).
    """
    if operation.reads_target:
        return operation, None
    if declared is True:
        return dataclasses.replace(operation, reads_target=True), "the task says its source reads the target"
    if isinstance(spec, SqlSpec):
        why = sql_reads_target(spec.sql, table_uri, locate)
    else:
        source = getattr(spec, "source", None)
        why = (
            None
            if source is None
            else source_reads_target(source, table_uri, declared_apart=declared is False)
        )
    if why is None:
        return operation, None
    return dataclasses.replace(operation, reads_target=True), why
