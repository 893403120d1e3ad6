"""Reach Spark through the apache-airflow-providers-apache-spark connections (no new connection type).

Two ways, one per connection type of that provider:

* ``spark`` connection -> a SparkSession created in the worker (:func:`worker_session`), with the
  connection's master (``local[2]``, ``spark://host:7077``, ``yarn``, ``k8s://...``);
* ``spark_connect`` connection -> a Spark Connect session (:func:`connect_session`), URL built by the
  provider's ``SparkConnectHook``.

Airflow is imported lazily so the module also works where a Spark session runs without Airflow.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from deltaguard.engines.errors import SparkSetupError
from deltaguard.engines.spark.setup import (
    delta_session_conf,
    with_delta_jars,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: Seconds a new Spark Connect session waits for its server's first answer before failing: pyspark's own
#: retry policy tolerates at least 10 minutes (``DefaultPolicy``), and a listener that is not a Connect
#: server is waited on without end, both without a log line.
DEFAULT_CONNECT_TIMEOUT_S = 600.0
#: Seconds between the warnings logged while that first answer is awaited.
CONNECT_WAIT_WARNING_S = 30.0

#: The Spark setting that decides how literals without zone are read (ADR 0001).
SESSION_TIME_ZONE_CONF = "spark.sql.session.timeZone"
#: Spark's ANSI mode: off, text compared with a numeric column is cast leniently (``'1.5'`` -> ``1``)
ANSI_CONF = "spark.sql.ansi.enabled"
#: Spark's parser settings that change what a string literal is (:mod:`deltaguard.core.sql.parser_settings`).
PARSER_CONFS: tuple[str, ...] = (
    "spark.sql.ansi.doubleQuotedIdentifiers",
    "spark.sql.parser.escapedStringLiterals",
)


def parse_ansi(value: str) -> bool | None:
    """``spark.sql.ansi.enabled`` as read from a conf: ``True``/``False``, ``None`` for anything else."""
    text = value.strip().lower()
    return True if text == "true" else False if text == "false" else None


#: The zone deltaguard pins in the sessions and jobs it starts, unless the connection or caller sets one:
#: Spark's default is the JVM's zone, which differs between machines.
DEFAULT_SESSION_TIME_ZONE = "UTC"

#: Defaults that keep a worker-side session small; callers override through ``conf``.
SMALL_SESSION_CONF: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
}


@dataclass(frozen=True)
class SparkConnectionInfo:
    """What deltaguard reads from a ``spark`` connection.

    :param master: the Spark master URL, resolved the way ``SparkSubmitHook`` resolves it.
    :param deploy_mode: ``client``/``cluster`` (extra ``deploy-mode``).
    :param conf: extra Spark conf from the connection's extra ``spark-conf`` (a JSON object).
    :param databricks_runtime: extra ``databricks-runtime`` (``"14.3"``): the target is Databricks.
    :param photon: extra ``photon``: the Databricks cluster runs Photon.
    :param row_level_preview: extra ``row-level-preview``: Databricks 14.0/14.1 preview flag.
    """

    master: str
    deploy_mode: str | None = None
    conf: Mapping[str, str] = field(default_factory=dict)
    databricks_runtime: str | None = None
    photon: bool = False
    row_level_preview: bool = False


def _flag(value: Any) -> bool:
    return str(value).strip().lower() in {"1", "true", "yes", "on"}


def connection_info(conn: Any) -> SparkConnectionInfo:
    """Read a ``spark`` (or ``spark_connect``) Airflow connection.

    The master follows ``SparkSubmitHook._resolve_connection``: a ``spark`` connection whose host holds a
    full URL (or has no port) uses the host as is, otherwise ``<conn_type>://<host>``; the port is appended.

    :param conn: an ``airflow`` ``Connection`` (anything with ``conn_type``, ``host``, ``port``,
        ``extra_dejson``).
    :raises SparkSetupError: if the connection has no host or a malformed ``spark-conf`` extra.
    """
    host = (conn.host or "").strip()
    if not host:
        raise SparkSetupError(f"Spark connection {getattr(conn, 'conn_id', '?')!r} has no host (master URL)")
    if conn.conn_type == "spark" and ("://" in host or not conn.port):
        master = host
    else:
        master = f"{conn.conn_type}://{host}"
    if conn.port:
        master = f"{master}:{conn.port}"
    extra = dict(conn.extra_dejson or {})
    raw_conf = extra.get("spark-conf", {})
    if isinstance(raw_conf, str):
        try:
            raw_conf = json.loads(raw_conf) if raw_conf.strip() else {}
        except json.JSONDecodeError as exc:
            raise SparkSetupError(
                f"extra 'spark-conf' of connection {conn.conn_id!r} is not JSON: {exc}"
            ) from exc
    if not isinstance(raw_conf, dict):
        raise SparkSetupError(f"extra 'spark-conf' of connection {conn.conn_id!r} must be a JSON object")
    runtime = extra.get("databricks-runtime")
    return SparkConnectionInfo(
        master=master,
        deploy_mode=extra.get("deploy-mode"),
        conf={str(k): str(v) for k, v in raw_conf.items()},
        databricks_runtime=str(runtime) if runtime else None,
        photon=_flag(extra.get("photon", False)),
        row_level_preview=_flag(extra.get("row-level-preview", False)),
    )


def get_connection_info(conn_id: str) -> SparkConnectionInfo:
    """:func:`connection_info` of an Airflow connection id (imports Airflow)."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    return connection_info(SparkSubmitHook.get_connection(conn_id))


def worker_session(
    conn_id: str | None = None,
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    app_name: str = "deltaguard",
    with_delta: bool = True,
    default_master: str | None = "local[2]",
) -> SparkSession:
    """A SparkSession in this process (the Airflow worker).

    :param conn_id: a ``spark`` connection giving the master and extra conf; ignored if ``master`` is given.
    :param master: a master URL; default: the connection's, else ``local[2]``.
    :param conf: Spark conf, applied last.
    :param app_name: the Spark application name.
    :param default_master: the master when neither ``master`` nor the connection gives one; ``None`` leaves
        it to the environment (inside spark-submit, which has already chosen it).
    :param with_delta: add Delta's extension and catalog to the conf. Sources that only need PySpark
        (DataFrames for the delta-rs engine) pass ``False``. Delta's jars (:func:`delta_jars_from_env`) go on
        ``spark.jars`` either way when this call starts the JVM's first context, so a later Delta session of
        the same process still finds Delta's classes.
    """
    from pyspark.sql import SparkSession

    settings: dict[str, str] = dict(SMALL_SESSION_CONF)
    if master is None and conn_id:
        info = get_connection_info(conn_id)
        master = info.master
        settings.update(info.conf)
    settings.update(conf or {})
    if not context_running():
        # A new session reads zone-less literals in UTC; a running one is not changed (its zone is read).
        settings.setdefault(SESSION_TIME_ZONE_CONF, DEFAULT_SESSION_TIME_ZONE)
    if with_delta:
        delta = delta_session_conf(settings)
        if context_running():
            # getOrCreate() would set these on the running session: its extensions are fixed at start, and
            # switching spark_catalog at run time to a class that is not there breaks every later query of
            # that session (a PySpark-only one built for sources). Keep the session as it is, unless the
            # caller asked; check_delta_available then says what is missing.
            delta = {k: v for k, v in delta.items() if k in settings or k not in _DELTA_SESSION_KEYS}
        settings = delta
    elif not context_running():
        settings = with_delta_jars(settings)
    builder = SparkSession.builder.appName(app_name)
    if master or default_master:
        builder = builder.master(master or default_master or "")
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


#: Delta settings :func:`delta_session_conf` adds that only take effect when a session starts
_DELTA_SESSION_KEYS = frozenset({"spark.sql.extensions", "spark.sql.catalog.spark_catalog"})


def context_running() -> bool:
    """A classic SparkContext runs in this process (``getOrCreate()`` would then return its session)."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def connect_url(conn_id: str = "spark_connect_default") -> str:
    """The ``sc://`` URL of a ``spark_connect`` connection, as the provider's ``SparkConnectHook`` builds it."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    return str(SparkConnectHook(conn_id=conn_id).get_connection_url())


def connect_session(
    conn_id: str = "spark_connect_default",
    *,
    conf: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
) -> SparkSession:
    """A Spark Connect session for a ``spark_connect`` connection (URL from ``SparkConnectHook``), once its
    server has answered.

    :param conn_id: the ``spark_connect`` connection.
    :param conf: runtime SQL conf to set on the session.
    :param timeout_s: seconds to wait for the server's first answer (see :func:`await_server`).
    :raises SparkSetupError: the server did not answer in time, or answered with an error.
    """
    url = connect_url(conn_id)
    if context_running():
        # pyspark.sql.SparkSession.builder.remote() refuses to run beside a classic session
        # (SESSION_ALREADY_EXIST); the Connect client's own builder does not. Without a classic session the
        # ordinary builder is used: it also switches pyspark.sql.functions to Connect for the task's code.
        from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

        # typed as the classic session, as the ordinary builder below types the Connect one it returns
        session = cast("SparkSession", RemoteSparkSession.builder.remote(url).getOrCreate())
    else:
        from pyspark.sql import SparkSession

        session = SparkSession.builder.remote(url).getOrCreate()
    await_server(session, url, conn_id, timeout_s)
    for key, value in (conf or {}).items():
        session.conf.set(key, value)
    return session


def shown_url(url: str) -> str:
    """``url`` without its parameters (``;token=...``, ``;user_id=...``), for logs and errors."""
    return url.split(";", 1)[0].rstrip("/")


def await_server(session: Any, url: str, conn_id: str, timeout_s: float) -> None:
    """Wait for the Connect server's first answer (its Spark version), warning every
    :data:`CONNECT_WAIT_WARNING_S` seconds while none has come.

    Building a Connect session contacts no server; its first call does, and pyspark retries a refused or
    unanswered connection for 10 minutes or more without a word. The call runs in a daemon thread so that
    the wait can end: on time out the session is closed and the task fails before any lease.

    :param session: the Connect session just built.
    :param url: its ``sc://`` URL.
    :param conn_id: the connection it came from, named in the error.
    :param timeout_s: seconds to wait.
    :raises SparkSetupError: no answer within ``timeout_s`` seconds, or an error answered.
    """
    answered = threading.Event()
    failure: list[BaseException] = []

    def ask() -> None:
        try:
            session.version  # noqa: B018 - the property is the first call to the server
        except BaseException as exc:  # handed to the waiting thread
            failure.append(exc)
        finally:
            answered.set()

    where = f"the Spark Connect server at {shown_url(url)} (connection {conn_id!r})"
    threading.Thread(target=ask, name="deltaguard-connect-first-call", daemon=True).start()
    started = time.monotonic()
    while not answered.wait(min(CONNECT_WAIT_WARNING_S, max(0.0, started + timeout_s - time.monotonic()))):
        waited = time.monotonic() - started
        if waited >= timeout_s:
            _drop(session)
            raise SparkSetupError(
                f"{where} did not answer within {timeout_s:g} s ([deltaguard] spark_connect_timeout): "
                "check the connection's host and port, that a Spark Connect server listens there, and that "
                "the network lets the worker reach it"
            )
        log.warning(
            "deltaguard: no answer yet from %s after %.0f s; waiting up to %g s", where, waited, timeout_s
        )
    if failure:
        _drop(session)
        raise SparkSetupError(f"{where} answered with an error: {failure[0]}") from failure[0]


def _drop(session: Any) -> None:
    """Close a session whose server did not answer, so that no later ``getOrCreate()`` of the process returns
    it: its channel only (releasing it would call that server again)."""
    with contextlib.suppress(Exception):
        session.release_session_on_close = False
        session.stop()
