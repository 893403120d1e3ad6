"""Can this Spark run Delta writes?  Delta's jars, session extensions, and the guidance when they are missing.

Neither the pyspark nor the delta-spark wheel contains Delta's JVM classes: they come from Maven
(``spark.jars.packages``) or from local jar files (``spark.jars``). Without them the delta-spark Python
API fails deep inside Py4J (``'JavaPackage' object is not callable``). deltaguard checks first, before any
lease is taken, and raises :class:`SparkSetupError` with what to change.

The install step (``make delta-jars``: :mod:`deltaguard.engines.spark.jars`) copies the jars matching the
installed wheels into the environment's ``delta-jars`` folder; sessions deltaguard creates put them on
``spark.jars``. ``DELTAGUARD_DELTA_JARS`` names another folder, or ``none`` for no jars.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from deltaguard.engines.errors import SparkSetupError
from deltaguard.engines.spark.jars import DELTA_JARS_ENV, delta_artifacts, delta_jars, installed_version

__all__ = [
    "DELTA_JARS_ENV",
    "check_delta_available",
    "delta_jars_from_env",
    "delta_maven_coordinate",
    "delta_session_conf",
    "installed_version",
    "with_delta_jars",
]
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
#: The one class every delta-spark Python call goes through.
DELTA_TABLE_CLASS = "io.delta.tables.DeltaTable"


def delta_maven_coordinate(delta_version: str | None = None, spark_version: str | None = None) -> str:
    """The Maven coordinate of the delta-spark jar matching the installed wheels (``io.delta:...:4.4.0``).

    :param delta_version: delta-spark version; default: the installed ``delta-spark`` wheel.
    :param spark_version: Spark version; default: the installed ``pyspark`` wheel.
    """
    try:
        return delta_artifacts(delta_version, spark_version)[0]
    except SparkSetupError:
        return f"io.delta:delta-spark_2.13:{delta_version or '<delta-version>'}"


def missing_jars_message(detail: str = "") -> str:
    """The guidance shown when Delta's classes cannot be loaded."""
    coordinate = delta_maven_coordinate()
    lines = [
        "Delta Lake's Spark jars are not on this Spark session's classpath, so delta-spark cannot run"
        + (f" ({detail})." if detail else "."),
        "Add them in one of these ways (before the session starts; an existing JVM keeps its classpath):",
        f"  * Spark conf: spark.jars.packages={coordinate}",
        f"  * spark-submit / pyspark: --packages {coordinate}",
        "  * this project's install step: `make delta-jars` (Maven copies them into the environment)",
        f"  * a folder of the jars: export {DELTA_JARS_ENV}=/path/to/delta-jars "
        "(deltaguard adds every *.jar in it to spark.jars)",
        f"and enable Delta SQL: spark.sql.extensions={DELTA_EXTENSION}, "
        f"spark.sql.catalog.spark_catalog={DELTA_CATALOG}.",
    ]
    return "\n".join(lines)


def delta_jars_from_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """The Delta jar files sessions add to ``spark.jars``: ``DELTAGUARD_DELTA_JARS``'s, else the environment's
    own ``delta-jars`` folder (see :func:`deltaguard.engines.spark.jars.delta_jars`).

    :param environ: the environment to read (default ``os.environ``).
    :raises SparkSetupError: if the folder is missing, empty, or holds jars for another Spark line.
    """
    return delta_jars(environ)


def delta_session_conf(
    conf: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Spark conf for a session that can run Delta: extensions, catalog, and the jars of ``DELTAGUARD_DELTA_JARS``.

    User settings win, except that the env jars are appended to any ``spark.jars`` already given.

    :param conf: the caller's Spark conf.
    :param environ: the environment to read (default ``os.environ``).
    """
    merged = {
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
    }
    merged.update(conf or {})
    return with_delta_jars(merged, environ)


def with_delta_jars(conf: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``conf`` with Delta's jars (:func:`delta_jars_from_env`) appended to ``spark.jars``.

    Also for sessions that do not enable Delta SQL: a JVM keeps the classpath it started with, so the first
    session of a process decides whether any later one can run Delta.
    """
    merged = dict(conf)
    jars = delta_jars_from_env(environ)
    if jars:
        existing = [j for j in merged.get("spark.jars", "").split(",") if j]
        merged["spark.jars"] = ",".join(existing + [j for j in jars if j not in existing])
    return merged


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (classic sessions live in ``pyspark.sql``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


#: Set on every Databricks cluster; Databricks ships Delta built in, with its own extension and catalog.
DATABRICKS_TAG_CONF = "spark.databricks.clusterUsageTags.sparkVersion"


def on_databricks(spark: Any, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``spark`` runs on Databricks (driver environment or the session's cluster tags)."""
    env = os.environ if environ is None else environ
    return bool(env.get("DATABRICKS_RUNTIME_VERSION")) or bool(_conf_get(spark, DATABRICKS_TAG_CONF))


def check_delta_available(spark: Any) -> None:
    """Raise :class:`SparkSetupError` unless ``spark`` can run delta-spark writes.

    Databricks (classic or Connect) ships Delta built in: accepted as is. Classic sessions: a cheap class
    lookup through Py4J (no job, no table access), then Delta's SQL extension and catalog (``ALTER TABLE``,
    ``DESCRIBE DETAIL`` and ``writeTo`` on Delta tables need them). Spark Connect sessions: the server's
    ``spark.sql.extensions`` must name Delta's extension (the classpath lives on the server).

    :param spark: a ``pyspark.sql.SparkSession`` (classic or Spark Connect).
    :raises SparkSetupError: with the guidance of :func:`missing_jars_message`.
    """
    if on_databricks(spark):
        return
    if is_connect(spark):
        extensions = _conf_get(spark, "spark.sql.extensions")
        if DELTA_EXTENSION not in extensions:
            raise SparkSetupError(
                missing_jars_message(
                    f"the Spark Connect server's spark.sql.extensions is {extensions!r}; "
                    "start the server with the Delta jars and extension"
                )
            )
        return
    from py4j.java_gateway import JavaClass

    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        raise SparkSetupError(
            "this SparkSession has no JVM gateway (stopped?); cannot check for Delta's jars"
        )
    looked_up: Any = jvm
    for part in DELTA_TABLE_CLASS.split("."):
        looked_up = getattr(looked_up, part)
    if not isinstance(looked_up, JavaClass):
        jars = _conf_get(spark, "spark.jars") or "<unset>"
        packages = _conf_get(spark, "spark.jars.packages") or "<unset>"
        raise SparkSetupError(
            missing_jars_message(
                f"class {DELTA_TABLE_CLASS} not found; spark.jars={jars}, spark.jars.packages={packages}"
            )
        )
    extensions = _conf_get(spark, "spark.sql.extensions")
    catalog = _conf_get(spark, "spark.sql.catalog.spark_catalog")
    if DELTA_EXTENSION not in extensions or catalog != DELTA_CATALOG:
        raise SparkSetupError(
            "Delta's jars are loaded but the session is not set up for Delta SQL "
            f"(spark.sql.extensions={extensions or '<unset>'}, spark.sql.catalog.spark_catalog="
            f"{catalog or '<unset>'}): build the session with spark.sql.extensions={DELTA_EXTENSION} and "
            f"spark.sql.catalog.spark_catalog={DELTA_CATALOG} (they cannot be added to a running one)."
        )


def _conf_get(spark: Any, key: str) -> str:
    try:
        value = spark.conf.get(key, "")
    except Exception:  # Connect raises for unknown keys on some servers; treat as unset
        return ""
    return str(value or "")
