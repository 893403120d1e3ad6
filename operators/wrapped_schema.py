"""Whether a wrapped operator's own Spark conf lets its writes evolve the table schema (ADR 0035).

Under ``spark.databricks.delta.schema.autoMerge.enabled`` a plain MERGE or INSERT adds the source's new
columns to the table as it commits, a metadata change that fails every concurrent write (measured on
delta-spark 4.4.0). deltaguard's Spark engine turns the switch off for its own writes and refuses user SQL
under it; a wrapped operator runs a job deltaguard does not control, so the switch is looked for where
Airflow's Spark and Databricks operators carry it: ``SparkSubmitOperator(conf=...)``,
``SparkSqlOperator(conf="k=v,...")``, a Databricks cluster's ``spark_conf`` (``new_cluster``, ``json``,
``tasks``), ``DatabricksSqlOperator(session_configuration=...)``, ``--conf`` pairs among job parameters, and
``SET`` statements in the operator's SQL. Found, the write is judged as evolving the schema. What a job sets
in its own code, its cluster's defaults or a DataFrame's ``mergeSchema`` option cannot be seen from here:
such tasks declare ``evolves_schema=True`` (docs/operators.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: Delta's switch (the same name as :data:`deltaguard.engines.spark.ops.SCHEMA_AUTO_MERGE_CONF`, repeated
#: here so judging a wrapped operator imports no Spark module)
AUTO_MERGE_KEY = "spark.databricks.delta.schema.autoMerge.enabled"
#: ``key=true``, ``key = true``, ``key true`` (SQL ``SET``), ``"key": "true"`` in any text
_IN_TEXT = re.compile(re.escape(AUTO_MERGE_KEY) + r"""["']?\s*(?:=|:|\s)\s*["']?true\b""", re.IGNORECASE)
#: the operator attributes that carry a job's Spark settings in Airflow's Spark and Databricks providers
_ATTRIBUTES = (
    "conf",
    "_conf",
    "spark_conf",
    "session_configuration",
    "json",
    "new_cluster",
    "tasks",
    "job_clusters",
    "spark_submit_params",
    "spark_submit_task",
    "application_args",
    "sql",
)
#: a bound on nesting: a job description is a few levels deep
_MAX_DEPTH = 8


def _enables(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _found(value: Any, depth: int = 0) -> bool:
    if depth > _MAX_DEPTH:
        return False
    if isinstance(value, str):
        return bool(_IN_TEXT.search(value))
    if isinstance(value, Mapping):
        for key, item in value.items():
            if str(key).strip() == AUTO_MERGE_KEY and _enables(item):
                return True
            if _found(item, depth + 1):
                return True
        return False
    if isinstance(value, (list, tuple)):
        return any(_found(item, depth + 1) for item in value)
    return False


def auto_merge_source(operator: Any) -> str | None:
    """Where the wrapped operator turns schema auto-merge on, or ``None`` when it does not (as far as can
    be seen). Read after the operator's templates are rendered.

    :param operator: the wrapped operator.
    :returns: a phrase naming the attribute, for the task log and the decision's reason.
    """
    for name in _ATTRIBUTES:
        value = getattr(operator, name, None)
        if value is not None and _found(value):
            return f"{type(operator).__name__}.{name} sets {AUTO_MERGE_KEY}=true"
    return None
