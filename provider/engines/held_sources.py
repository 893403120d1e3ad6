"""Write sources as an operator holds them until the write runs (callables kept out of template rendering)."""

from __future__ import annotations

from typing import Any


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
    if not callable(raw):
        return raw
    from deltaguard.engines.spark.sources import SparkSource, is_spark_source, prepare_source, session_factory

    factory = None
    if engine_name != "spark" and is_spark_source(raw) and not isinstance(raw, SparkSource):
        factory = session_factory(*spark_connections)
    return prepare_source(raw, engine_name, session_factory=factory)
