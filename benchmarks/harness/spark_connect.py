"""The Spark Connect server the example Spark DAG (``pyspark_daily_sales``) writes through.

A :class:`~benchmarks.harness.connect_server.LocalConnectServer` (Delta's jars, extension and catalog)
stands in for a cluster's Connect endpoint. Its JVM start-up takes tens of seconds on a busy machine, so
:class:`BackgroundConnectServer` starts it in a thread while Airflow starts; its port is chosen up front, so
the ``spark_connect`` connection can go into the Airflow components' environment before it answers.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from types import TracebackType

from benchmarks.harness.connect_server import LocalConnectServer

#: The ``spark_connect`` connection of ``dags_examples/pyspark_daily_sales.py`` (``SPARK_CONNECT_CONN_ID``
#: there), defined through Airflow's ``AIRFLOW_CONN_<ID>`` environment variable.
CONNECTION_ENV = "AIRFLOW_CONN_DELTAGUARD_EXAMPLE_SPARK_CONNECT"


def connection_env(port: int, conn_id: str | None = None) -> dict[str, str]:
    """The environment variable defining a ``spark_connect`` connection to ``port``: the example DAG's, or
    ``conn_id``."""
    name = f"AIRFLOW_CONN_{conn_id.upper()}" if conn_id else CONNECTION_ENV
    return {name: json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1", "port": port})}


#: A frugal server for a few small writes on a shared machine: one shuffle partition, one partition for
#: Delta's snapshot state, and a JVM that spends little CPU on its own upkeep (the quick C1 JIT only and a
#: single-threaded GC; this server lives minutes, not days).
FRUGAL_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "1",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


class BackgroundConnectServer:
    """A local Spark Connect server started in a background thread and stopped (whole process group) on exit.

    :param log_file: the server's output.
    :param port: the server's port (default: a free one).
    :param master: the server's Spark master.
    :param startup_timeout: seconds :meth:`wait_ready` waits for the server to answer.
    """

    def __init__(
        self,
        log_file: Path,
        *,
        port: int | None = None,
        master: str = "local[2]",
        startup_timeout: float = 300.0,
    ) -> None:
        self.server = LocalConnectServer(port, master=master, conf=FRUGAL_CONF, log_file=log_file)
        self.startup_timeout = startup_timeout
        self._error: BaseException | None = None
        #: CPU seconds (user + system) the server's processes had used when it was stopped: a figure of its
        #: own work that, unlike wall time, does not grow with the other load of a shared machine
        self.cpu_seconds: float | None = None
        self._thread = threading.Thread(target=self._start, name="connect-server-start", daemon=True)

    @property
    def port(self) -> int:
        return self.server.port

    def env(self) -> dict[str, str]:
        """The Airflow components' environment variable naming this server (see :func:`connection_env`)."""
        return connection_env(self.port)

    def _start(self) -> None:
        try:
            self.server.start(timeout=self.startup_timeout)
        except BaseException as exc:  # re-raised in the caller's thread by wait_ready
            self._error = exc

    def wait_ready(self) -> str:
        """Block until the server answers; returns its ``sc://`` URL.

        :raises SparkSetupError: if it exited or did not answer in time (with the end of its log).
        """
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self.server.url

    def __enter__(self) -> BackgroundConnectServer:
        self._thread.start()
        return self

    def group_cpu_seconds(self) -> float | None:
        """CPU seconds used so far by the live processes of the server's process group (``None``: not running)."""
        process = self.server.process
        if process is None or process.poll() is not None:
            return None
        ticks = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = stat.read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == process.pid:  # process group id
                    ticks += int(fields[11]) + int(fields[12])  # utime + stime
        return ticks / os.sysconf("SC_CLK_TCK")

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._thread.join()
        self.cpu_seconds = self.group_cpu_seconds()
        self.server.stop()
