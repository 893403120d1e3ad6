"""A local Spark Connect server with Delta Lake: the stand-in for a production cluster's Connect endpoint.

Started with the ``spark-submit`` of the installed ``pyspark`` (class ``SparkConnectServer``, which the
``spark-connect`` jar of the wheel provides), Delta's jars on ``spark.jars`` and Delta's SQL extension and
catalog, on a free loopback port. The JVM runs in its own process group, so :meth:`LocalConnectServer.stop`
ends it and everything it started: no orphan JVMs. Airflow tasks reach it through a ``spark_connect``
connection (``sc://127.0.0.1:<port>``), exactly as they would reach a cluster.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from benchmarks.harness.ports import free_port
from deltaguard.engines.errors import SparkSetupError
from deltaguard.engines.spark.setup import delta_session_conf

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
#: what the server logs once its gRPC service listens (followed by ``address:port``)
STARTED_LINE = "Spark Connect server started at: "
#: what it logs when that service could not start (the JVM then stops)
FAILED_LINE = "Error starting Spark Connect server"

#: A small server: two cores, half a GiB of heap, no UI.
SMALL_SERVER_CONF: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",
    # Delta rebuilds snapshots with 50 tasks by default; a local stand-in holds small tables
    "spark.databricks.delta.snapshotPartitions": "2",
}


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(stat.parent.name))
    return members


def spark_submit_path() -> Path:
    """The ``spark-submit`` script of the installed ``pyspark`` wheel."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-submit"


class LocalConnectServer:
    """A Spark Connect server process with Delta's jars and extensions.

    :param port: the gRPC port (default: a free one).
    :param master: the server's Spark master.
    :param conf: extra Spark conf (wins over the defaults).
    :param driver_memory: the server JVM's heap.
    :param log_file: where the server's output goes (default: a file beside nothing, discarded).
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        master: str = "local[2]",
        conf: Mapping[str, str] | None = None,
        driver_memory: str = "768m",
        log_file: Path | None = None,
    ) -> None:
        self.port = port or free_port()
        self.master = master
        self.conf = delta_session_conf({**SMALL_SERVER_CONF, **(conf or {})})
        self.driver_memory = driver_memory
        self.log_file = log_file
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds: float | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The ``spark-submit`` command line that starts the server."""
        command = [
            str(spark_submit_path()),
            "--class",
            SERVER_CLASS,
            "--name",
            "deltaguard-connect-server",
            "--master",
            self.master,
            "--driver-memory",
            self.driver_memory,
            "--conf",
            f"spark.connect.grpc.binding.port={self.port}",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
        ]
        for key, value in self.conf.items():
            command += ["--conf", f"{key}={value}"]
        return [*command, "spark-internal"]

    def start(self, timeout: float = 300.0) -> str:
        """Start the server and wait until it says it started and its port answers; returns its ``sc://`` URL.

        :raises SparkSetupError: if the process exits or does not answer within ``timeout`` seconds (with
            the end of its log).
        """
        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
        out = open(self.log_file, "wb") if self.log_file else subprocess.DEVNULL  # noqa: SIM115
        started = time.monotonic()
        self.process = subprocess.Popen(
            self.command(), stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        if not isinstance(out, int):  # the log file (else subprocess.DEVNULL)
            out.close()
        deadline = started + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None or FAILED_LINE in self._log():
                tail = self._tail()
                self.stop()
                raise SparkSetupError(f"the Spark Connect server failed to start{tail}")
            if self._answers():
                self.startup_seconds = time.monotonic() - started
                return self.url
            time.sleep(0.5)
        self.stop()
        raise SparkSetupError(f"the Spark Connect server did not answer within {timeout:.0f} s{self._tail()}")

    def _answers(self) -> bool:
        # An open port alone is not the server: another listener of the same JVM may hold it. With a log, the
        # server's own line naming its port is required too.
        if self.log_file is not None and f"{STARTED_LINE}127.0.0.1:{self.port}" not in self._log():
            return False
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(1.0)
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def _log(self) -> str:
        if self.log_file is None or not self.log_file.exists():
            return ""
        return self.log_file.read_text(errors="replace")

    def _tail(self) -> str:
        log = self._log()
        return ":\n" + log[-3000:] if log else ""

    def rss_bytes(self) -> int | None:
        """Resident memory of the server process group's JVM (``None`` when not running)."""
        if self.process is None or self.process.poll() is not None:
            return None
        total = 0
        for status in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = status.read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == self.process.pid:  # process group id
                    total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        return total or None

    def stop(self, grace: float = 20.0) -> None:
        """End the server's whole process group (the JVM and the Python workers it forked): SIGTERM, then
        SIGKILL for whatever is left after ``grace`` seconds."""
        process, self.process = self.process, None
        if process is None:
            return
        group = process.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (process.poll() is None or group_members(group)):
            time.sleep(0.2)
        if process.poll() is None or group_members(group):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        process.wait(grace)
        deadline = time.monotonic() + grace
        while group_members(group) and time.monotonic() < deadline:
            time.sleep(0.2)

    def __enter__(self) -> LocalConnectServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
