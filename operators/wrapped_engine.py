"""Which engine commits a wrapped operator's writes, judged from what the operator is (ADR 0021, 0026).

:func:`deltaguard.operators.leased.with_delta_lease` wraps work whose commit deltaguard does not make. The
lease claim must name the engine and the commit coordinator of *that* work, not of the ``delta``
connection's default engine: a ``SparkSubmitOperator`` judged as delta-rs was admitted beside another
spark-submit job on the same table, although each job is a delta-spark driver of its own whose log store
(``S3SingleDriverLogStore`` on S3, ``HDFSLogStore``'s rename on local files) excludes only its own commits.

The kinds, first match wins:

* ``databricks_runtime=`` or ``engine=`` given: what the task declares (:data:`DECLARED`);
* an operator of ``airflow.providers.databricks``: Databricks (:data:`DATABRICKS`);
* an operator of ``airflow.providers.apache.spark`` (``SparkSubmitOperator``, ``SparkSqlOperator``,
  ``SparkJDBCOperator``, ...): a delta-spark driver of its own (:data:`SPARK_DRIVER`);
* a ``SQLExecuteQueryOperator`` (or any operator with a ``conn_id``) whose connection's type is a Spark
  one (``spark``, ``spark_sql``, ``spark_connect``, ``spark_jdbc``, ``livy``) or a Databricks one:
  accordingly;
* anything else: :data:`UNKNOWN`, judged as the strictest engine with a coordinator of its own, so it
  never runs beside another writer of the table (the model cannot prove it safe).

Detection reads class paths (the MRO's modules and names), so no provider package is imported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deltaguard.core.profiles import EngineProfile

#: the task names its engine (``engine=``) or Databricks runtime (``databricks_runtime=``)
DECLARED = "declared"
#: Databricks compute (a job, a cluster, a SQL warehouse)
DATABRICKS = "databricks"
#: a Spark driver of the task's own (spark-submit, spark-sql, a Spark JDBC job, a Spark Connect server)
SPARK_DRIVER = "spark-driver"
#: nothing tells which engine commits
UNKNOWN = "unknown"

_DATABRICKS_MODULES = ("airflow.providers.databricks.",)
_SPARK_MODULES = ("airflow.providers.apache.spark.", "airflow.providers.apache.livy.")
#: connection types of Spark drivers (Airflow's Spark and Livy providers)
_SPARK_CONN_TYPES = frozenset({"spark", "spark_sql", "spark_connect", "spark_jdbc", "livy"})
_DATABRICKS_CONN_TYPES = frozenset({"databricks", "databricks_sql"})


def _class_paths(operator: Any) -> list[str]:
    return [f"{cls.__module__}.{cls.__qualname__}" for cls in type(operator).__mro__]


def connection_type(conn_id: str) -> str | None:
    """The Airflow connection's type, ``None`` when it cannot be read here."""
    try:
        from airflow.sdk import BaseHook

        return str(BaseHook.get_connection(conn_id).conn_type or "") or None
    except Exception:  # no such connection, or no access from here: the engine stays unknown
        return None


def wrapped_engine_kind(
    operator: Any, *, declared: bool, conn_type: Any = connection_type
) -> tuple[str, str]:
    """What commits the wrapped operator's writes, and why deltaguard thinks so.

    :param operator: the wrapped operator.
    :param declared: the task named its engine or Databricks runtime.
    :param conn_type: reads a connection's type (injected by tests).
    :returns: ``(kind, reason)``, ``kind`` one of :data:`DECLARED`, :data:`DATABRICKS`,
        :data:`SPARK_DRIVER`, :data:`UNKNOWN`.
    """
    if declared:
        return DECLARED, "the task declares its engine"
    name = type(operator).__name__
    paths = _class_paths(operator)
    if any(p.startswith(_DATABRICKS_MODULES) for p in paths):
        return DATABRICKS, f"{name} runs on Databricks"
    if any(p.startswith(_SPARK_MODULES) for p in paths):
        return SPARK_DRIVER, f"{name} runs a Spark driver of its own"
    conn_id = getattr(operator, "conn_id", None) or getattr(operator, "databricks_conn_id", None)
    if isinstance(conn_id, str) and conn_id and "{{" not in conn_id:
        kind = conn_type(conn_id)
        if kind in _DATABRICKS_CONN_TYPES:
            return DATABRICKS, f"{name} runs on the Databricks connection {conn_id!r}"
        if kind in _SPARK_CONN_TYPES:
            return SPARK_DRIVER, f"{name} runs on the Spark connection {conn_id!r} ({kind})"
    return UNKNOWN, (
        f"deltaguard cannot tell which engine {name} commits with (declare engine= or databricks_runtime=)"
    )


#: the Databricks Runtime a Databricks operator is judged as when the task does not name one: below 13.3
#: the model grants no row-level concurrency, the strictest rules it has
STRICTEST_DATABRICKS_RUNTIME = "12.2"
#: the delta-spark version a Spark job is judged as when delta-spark is not installed in the worker (the
#: delta-spark rules do not depend on the version)
FALLBACK_DELTA_SPARK_VERSION = "4.0"


def _delta_spark_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("delta-spark")
    except metadata.PackageNotFoundError:
        return FALLBACK_DELTA_SPARK_VERSION


def judged_profile(task: Any, hook: Any) -> tuple[EngineProfile, str]:
    """The engine that commits a leased task's work, judged from its declaration, else from what the
    work is; and the kind (of this module) it was judged as, for :func:`wrapped_coordination`.

    :param task: a :class:`~deltaguard.operators.leased_work.DeltaLeaseMixin` task.
    :param hook: the task's :class:`~deltaguard.hooks.delta.DeltaTableHook`.
    """
    from deltaguard.core.profiles import EngineName, EngineProfile
    from deltaguard.leases.targets import databricks_profile

    kind, why = task._engine_kind()
    if task.databricks_runtime:
        return databricks_profile(str(task.databricks_runtime), task.databricks_photon), kind
    if kind == DECLARED:
        profile: EngineProfile = hook.get_engine(task.delta_engine).profile()
        return profile, kind
    if kind == DATABRICKS:
        # The runtime is unknown: the oldest rules, without row-level concurrency, are the strictest.
        task.log.warning(
            "deltaguard: %s; judged as %s without row-level concurrency (declare databricks_runtime=)",
            why,
            STRICTEST_DATABRICKS_RUNTIME,
        )
        return EngineProfile(EngineName.DATABRICKS, STRICTEST_DATABRICKS_RUNTIME, row_level_off=True), kind
    if kind == UNKNOWN:
        task.log.warning(
            "deltaguard: %s; judged as delta-spark with a commit coordinator of its own, so no other "
            "writer of its tables runs beside it",
            why,
        )
    else:
        task.log.info("deltaguard: %s; judged as delta-spark", why)
    return EngineProfile(EngineName.DELTA_SPARK, _delta_spark_version()), kind


def wrapped_coordination(kind: str, hook: Any, uri: str, profile: EngineProfile, label: str) -> str:
    """What excludes the wrapped work's commits to ``uri`` from other writers' (ADR 0026).

    delta-rs in the worker commits as deltaguard's own delta-rs engine would, with the connection's
    storage options. Spark work runs in its own driver with log store settings deltaguard cannot read:
    on Databricks the location decides; elsewhere only stores every driver shares are trusted, and a
    single-driver store gets a coordinator of this task alone, so every other writer conflicts with it.
    Work of an unknown engine always gets a coordinator of its own.
    """
    from deltaguard.core.profiles import EngineName
    from deltaguard.engines.fencing import (
        deltars_coordination,
        single_driver,
        spark_coordination,
    )

    if kind == UNKNOWN:
        return single_driver(f"unknown-engine:{label}")
    if profile.name is EngineName.DELTA_RS:
        return deltars_coordination(uri, hook.storage_options or None)
    return spark_coordination(
        uri,
        databricks=profile.name is EngineName.DATABRICKS,
        conf=lambda _key: "",
        driver=f"wrapped:{label}",
    )
