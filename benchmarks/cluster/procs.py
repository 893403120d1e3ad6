"""Long-running servers of the cluster, each in its own process group, found again by a marker variable.

Every process the cluster starts carries ``DELTAGUARD_CLUSTER_HOME=<home>`` in its environment, so
:func:`marked_processes` finds whatever survives (a task process in its own group, an executor JVM) and
``down`` can prove that nothing is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.harness.connect_server import group_members

#: environment variable every cluster process carries (value: the cluster's home directory)
MARKER_ENV = "DELTAGUARD_CLUSTER_HOME"


def port_open(port: int) -> bool:
    """Whether something accepts TCP connections on ``127.0.0.1:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def marked_processes(home: Path) -> list[int]:
    """PIDs of live processes whose environment says they belong to the cluster at ``home``."""
    marker = f"{MARKER_ENV}={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return sorted(found)


@dataclass
class Service:
    """One server process (and whatever it forks), started as the leader of its own process group.

    :param name: a short name (also the log file's name).
    :param argv: the command.
    :param env: its whole environment.
    :param log: where its stdout and stderr go.
    :param ready: answers whether the server is ready (polled by :meth:`wait_ready`).
    :param stop_signal: the signal asking it to stop cleanly.
    :param grace: seconds :meth:`stop` waits after :attr:`stop_signal` before SIGKILL (short for a server
        that holds nothing worth a clean stop: moto's in-memory S3, Redis without persistence).
    """

    name: str
    argv: Sequence[str]
    env: Mapping[str, str]
    log: Path
    ready: Callable[[], bool] | None = None
    stop_signal: int = signal.SIGTERM
    grace: float = 30.0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    starts: int = 0

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start the process as the leader of its own process group, appending to its log."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                list(self.argv),
                env=dict(self.env),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.starts += 1

    def wait_ready(self, timeout: float = 300.0) -> None:
        """Wait until :attr:`ready` says so; raise with the log's tail if the process exits or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"{self.name} exited ({self._returncode()}){self.tail()}")
            if self.ready is None or self.ready():
                return
            time.sleep(0.5)
        raise RuntimeError(f"{self.name} not ready within {timeout:.0f} s{self.tail()}")

    def _returncode(self) -> int | None:
        return self.process.poll() if self.process else None

    def tail(self, chars: int = 3000) -> str:
        if not self.log.exists():
            return ""
        return ":\n" + self.log.read_text(errors="replace")[-chars:]

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the whole process group."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)

    def stop(self, grace: float | None = None) -> None:
        """Ask the group to stop (:attr:`stop_signal`), then SIGKILL whatever is left after ``grace``
        (default :attr:`grace`)."""
        if self.process is None:
            return
        grace = self.grace if grace is None else grace
        group = self.process.pid
        self.signal(signal.SIGCONT)  # a stopped process cannot act on the stop signal
        self.signal(self.stop_signal)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (self.process.poll() is None or group_members(group)):
            time.sleep(0.3)
        if self.process.poll() is None or group_members(group):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(15)

    def kill(self) -> None:
        """SIGKILL the whole group and reap the leader (a crash, not a shutdown)."""
        if self.process is not None:
            self.signal(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(15)


def cpu_seconds(root: int | None) -> float:
    """CPU seconds (user + system) used so far by ``root`` and its live descendants, with their reaped
    children: what a part cost to start, where wall time on a shared machine says little."""
    from benchmarks.harness.airflow_runner import descendants

    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in descendants([root]) if root else ():
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
            # utime, stime, cutime, cstime (fields 14-17 of proc(5); 0 here is field 3)
            total += sum(int(f) for f in fields[11:15])
    return round(total / ticks, 1)


def kill_leftovers(home: Path, grace: float = 10.0) -> list[int]:
    """SIGTERM, then SIGKILL, every process still marked with ``home``; return those that needed SIGKILL."""
    for pid in marked_processes(home):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and marked_processes(home):
        time.sleep(0.3)
    killed = []
    for pid in marked_processes(home):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed
