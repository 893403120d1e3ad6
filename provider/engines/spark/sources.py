"""Spark DataFrames as write sources: callables that receive a SparkSession and return a DataFrame.

A *Spark source* is either a :class:`SparkSource` wrapper or a one-argument callable whose parameter is
annotated ``SparkSession`` or named ``spark``/``session``/``spark_session``::

    def daily_orders(spark: SparkSession) -> DataFrame:
        return spark.read.parquet("/landing/orders").where("amount > 0")

* ``engine="spark"``: :func:`to_spark_dataframe` calls it with the engine's session and delta-spark writes
  the DataFrame.
* ``engine="delta-rs"``: :func:`prepare_source` binds it to a PySpark-only session (no Delta jars needed)
  and returns a zero-argument callable; :mod:`deltaguard.engines.sources` then calls it and converts the
  DataFrame with ``DataFrame.toArrow()`` for delta-rs to commit. A :class:`SparkSource` is such a
  zero-argument callable itself, so it works with either engine even where nothing calls
  :func:`prepare_source` (``@SparkSource`` decorates a builder function).

Other sources (Arrow, pandas, URIs) pass through :func:`prepare_source` unchanged.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from deltaguard.engines.errors import InvalidWriteError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_SESSION_PARAMETER_NAMES = frozenset({"spark", "session", "spark_session"})
#: Same prefix as :mod:`deltaguard.engines.sources`: ``delta+<uri>`` reads a Delta table.
DELTA_PREFIX = "delta+"


@dataclass(frozen=True)
class SparkSource:
    """A source built by PySpark.

    :param build: receives a SparkSession, returns a Spark DataFrame.
    :param conn_id: ``spark`` connection for the session when the delta-rs engine writes (default: local).
    :param conf: extra Spark conf for that session.
    """

    build: Callable[[SparkSession], DataFrame]
    conn_id: str | None = None
    conf: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not callable(self.build):
            raise InvalidWriteError(f"SparkSource needs a callable, got {type(self.build).__name__}")

    def __call__(self) -> DataFrame:
        """Build the DataFrame on a PySpark-only worker session (from ``conn_id``/``conf``).

        This makes a ``SparkSource`` a zero-argument source callable, so any engine that accepts those
        (delta-rs, through ``toArrow()``) takes it without :func:`prepare_source`; the Spark engine instead
        calls :attr:`build` with its own session.
        """
        from deltaguard.engines.spark.session import worker_session

        spark = worker_session(
            self.conn_id, conf=dict(self.conf), app_name="deltaguard-source", with_delta=False
        )
        return _check_dataframe(self.build(spark))


def is_spark_source(source: Any) -> bool:
    """``True`` for a :class:`SparkSource` or a callable taking exactly one SparkSession parameter."""
    if isinstance(source, SparkSource):
        return True
    if not callable(source) or isinstance(source, type) or hasattr(source, "toArrow"):
        return False
    try:
        params = list(inspect.signature(source).parameters.values())
    except (TypeError, ValueError):
        return False
    required = [p for p in params if p.default is inspect.Parameter.empty and p.kind in _POSITIONAL]
    if len(required) != 1:
        return False
    param = required[0]
    annotation = param.annotation
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    return "SparkSession" in str(text) or param.name in _SESSION_PARAMETER_NAMES


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _builder(source: Any) -> Callable[[Any], Any]:
    return source.build if isinstance(source, SparkSource) else source


def _check_dataframe(result: Any) -> DataFrame:
    if not (hasattr(result, "toArrow") and hasattr(result, "write") and hasattr(result, "sparkSession")):
        raise InvalidWriteError(
            f"a Spark source must return a pyspark DataFrame, got {type(result).__name__}"
        )
    return cast("DataFrame", result)


def prepare_source(
    source: Any, engine: str, session_factory: Callable[[], SparkSession] | None = None
) -> Any:
    """Adapt a source for the engine that will write it.

    For ``delta-rs`` a Spark source becomes a zero-argument callable that builds a PySpark-only session
    (from the source's ``conn_id``/``conf``, or ``session_factory``) and returns the DataFrame, which
    :mod:`deltaguard.engines.sources` converts with ``toArrow()``. For ``spark`` (and non-Spark sources)
    the source is returned unchanged.

    :param source: any write source.
    :param engine: ``delta-rs`` or ``spark`` (canonical engine name).
    :param session_factory: overrides how the session is made (tests, shared sessions).
    """
    if engine == "spark" or not is_spark_source(source):
        return source
    build = _builder(source)
    conn_id = source.conn_id if isinstance(source, SparkSource) else None
    conf = dict(source.conf) if isinstance(source, SparkSource) else {}

    def produce() -> DataFrame:
        if session_factory is not None:
            spark = session_factory()
        else:
            from deltaguard.engines.spark.session import worker_session

            spark = worker_session(conn_id, conf=conf, app_name="deltaguard-source", with_delta=False)
        return _check_dataframe(build(spark))

    return produce


def session_factory(
    conn_id: str | None = None, connect_conn_id: str | None = None
) -> Callable[[], SparkSession] | None:
    """A factory of PySpark-only sessions from a task's Spark connections, for :func:`prepare_source`.

    Spark Connect wins when both are given (as in the Spark engine). ``None`` when neither is: the source
    then gets the default local session.

    :param conn_id: a ``spark`` connection (master, extra ``spark-conf``).
    :param connect_conn_id: a ``spark_connect`` connection.
    """
    if connect_conn_id:

        def connect() -> SparkSession:
            from deltaguard.engines.spark.session import connect_session

            return connect_session(connect_conn_id)

        return connect
    if conn_id:

        def worker() -> SparkSession:
            from deltaguard.engines.spark.session import worker_session

            return worker_session(conn_id, app_name="deltaguard-source", with_delta=False)

        return worker
    return None


def to_spark_dataframe(spark: SparkSession, source: Any) -> DataFrame:
    """Turn any write source into a Spark DataFrame on ``spark`` (for the Spark engine).

    Accepts a Spark source, a Spark DataFrame, a ``pyarrow.Table``/``RecordBatchReader``, a pandas
    DataFrame, a zero-argument callable returning one of these, or a URI string read the way
    :mod:`deltaguard.engines.sources` reads it (``delta+<uri>`` or a ``_delta_log`` folder: Delta;
    ``.csv``/``.csv.gz``: CSV with a header; otherwise Parquet).

    :param spark: the session that will write.
    :param source: the write source.
    :raises InvalidWriteError: for anything else.
    """
    if source is None:
        raise InvalidWriteError("this write needs a source")
    if is_spark_source(source):
        return _check_dataframe(_builder(source)(spark))
    if isinstance(source, str):
        return _read_uri(spark, source)
    if hasattr(source, "toArrow") and hasattr(source, "sparkSession"):
        return cast("DataFrame", source)
    import pyarrow as pa

    if isinstance(source, pa.RecordBatchReader):
        source = source.read_all()
    if isinstance(source, pa.Table) or type(source).__module__.startswith("pandas"):
        return spark.createDataFrame(source)
    if callable(source):
        try:
            produced = source()
        except TypeError as exc:
            raise InvalidWriteError(
                f"a source callable must take no arguments or one SparkSession: {exc}"
            ) from exc
        if callable(produced) and not hasattr(produced, "toArrow"):
            raise InvalidWriteError("a source callable must return data, not another callable")
        return to_spark_dataframe(spark, produced)
    raise InvalidWriteError(
        f"unsupported source type {type(source).__name__} for the Spark engine: expected a Spark DataFrame, "
        "a callable taking a SparkSession, pyarrow/pandas data or a Parquet/CSV/Delta URI"
    )


def _read_uri(spark: SparkSession, uri: str) -> DataFrame:
    if not uri.strip():
        raise InvalidWriteError("empty source URI")
    if uri.startswith(DELTA_PREFIX):
        return spark.read.format("delta").load(uri[len(DELTA_PREFIX) :])
    local = uri[len("file://") :] if uri.startswith("file://") else uri
    if "://" not in local and os.path.isdir(os.path.join(local, "_delta_log")):
        return spark.read.format("delta").load(uri)
    lowered = uri.rstrip("/").lower()
    if lowered.endswith((".csv", ".csv.gz")) or _dir_of_csv(local):
        return spark.read.option("header", "true").option("inferSchema", "true").csv(uri)
    return spark.read.parquet(uri)


def _dir_of_csv(path: str) -> bool:
    if "://" in path or not os.path.isdir(path):
        return False
    names = [n for n in os.listdir(path) if not n.startswith((".", "_"))]
    return bool(names) and all(n.lower().endswith((".csv", ".csv.gz")) for n in names)
