"""Measure how long a task process stays unreapable after its sockets close, as Airflow's supervisor sees it.

The Task SDK's supervisor (``airflow/sdk/execution_time/supervisor.py``, ``_monitor_subprocess``) forks the
task process, reads its stdout/stderr/log sockets, and once they are all at end of file checks once
(``wait(timeout=0)``) whether the process has ended; if it has not, ``select()`` has no socket left to wake
it and it sleeps ``[workers] min_heartbeat_interval`` (5 s by default) before it looks again. The kernel
closes a process's descriptors before the process can be reaped, so the check races the rest of the exit.

This forks children the same way (stdout and stderr on a socketpair, ``os._exit`` at the end, as
``_fork_main`` does) and, in the parent, checks at once with ``waitpid(WNOHANG)`` when the socket reaches
end of file. Per mode it prints what the child had left at its exit (Python threads, OS threads, open
descriptors by kind) and, over ``--trials`` children, how often the check found the child not yet
reapable and how long it then took (the window the supervisor's check can fall into). Modes:

* ``bare``: the child does nothing;
* ``connect``: the child opens a Spark Connect session, runs ``SELECT 1``, then releases the session and
  closes its channel, as the Spark engine does after a write (``_session_like_a_write``);
* ``connect-deltaguard``: the same, then a lease store opened and closed through deltaguard's bounded
  store (its store-call threads).

Run: ``nice .venv/bin/python -m benchmarks.task_exit_window --trials 40`` (starts a local Connect server;
about 3 minutes on the shared 2-core machine). A diagnostic: its figures depend on the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from typing import Any

MODES = ("bare", "connect", "connect-deltaguard")


def _child_body(url: str, mode: str, store_dir: str) -> dict[str, Any]:
    if mode.startswith("connect"):
        from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

        session = RemoteSparkSession.builder.remote(url).create()
        session.sql("SELECT 1").collect()
        session.client.release_session()
        session.client.close()
    if mode == "connect-deltaguard":
        from deltaguard.leases.keeper import LeaseTiming
        from deltaguard.leases.open import open_bounded_store

        store = open_bounded_store(f"sqlite:///{store_dir}/leases.db", LeaseTiming().store_timeout_s)
        store.close()
    kinds: dict[str, int] = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            kind = os.readlink(f"/proc/self/fd/{fd}").split(":")[0]
        except OSError:
            continue
        kinds[kind] = kinds.get(kind, 0) + 1
    return {
        "python_threads": [t.name for t in threading.enumerate()],
        "os_threads": len(os.listdir("/proc/self/task")),
        "descriptors": kinds,
    }


def _trial(url: str, mode: str, store_dir: str) -> tuple[dict[str, Any] | None, float | None]:
    """One child; (what it had left at exit, seconds it stayed unreapable after EOF or None)."""
    parent_end, child_end = socket.socketpair()
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            parent_end.close()
            os.close(report_r)
            os.dup2(child_end.fileno(), 1)
            os.dup2(child_end.fileno(), 2)
            child_end.close()
            os.write(report_w, json.dumps(_child_body(url, mode, store_dir)).encode())
            os.close(report_w)
        finally:
            os._exit(0)
    child_end.close()
    os.close(report_w)
    chunks = []
    while chunk := os.read(report_r, 65536):
        chunks.append(chunk)
    os.close(report_r)
    while parent_end.recv(4096):
        pass
    eof = time.monotonic()
    reaped, _ = os.waitpid(pid, os.WNOHANG)
    late = None
    if reaped == 0:
        os.waitpid(pid, 0)
        late = time.monotonic() - eof
    parent_end.close()
    report = json.loads(b"".join(chunks)) if chunks else None
    return report, late


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--out", help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    for mode in modes:
        if mode not in MODES:
            parser.error(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    from benchmarks.harness.connect_server import LocalConnectServer

    results: dict[str, Any] = {"trials": args.trials, "load_before": os.getloadavg(), "modes": {}}
    with LocalConnectServer() as server, tempfile.TemporaryDirectory() as store_dir:
        for mode in modes:
            left: dict[str, Any] | None = None
            windows: list[float] = []
            for _ in range(args.trials):
                report, late = _trial(server.url, mode, store_dir)
                left = left or report
                if late is not None:
                    windows.append(late)
            figures = {
                "left_at_exit": left,
                "not_reapable_at_eof": len(windows),
                "window_median_ms": round(statistics.median(windows) * 1000, 2) if windows else 0.0,
                "window_max_ms": round(max(windows) * 1000, 2) if windows else 0.0,
            }
            results["modes"][mode] = figures
            print(mode, json.dumps(figures), flush=True)
    results["load_after"] = os.getloadavg()
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
