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

from typing import Any

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
