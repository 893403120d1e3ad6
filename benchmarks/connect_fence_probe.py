"""Measure what a Spark Connect server says about an interrupted operation (ADR 0033).

Starts the project's own Connect server (:class:`~benchmarks.harness.connect_server.LocalConnectServer`),
runs a Delta append held in a sleeping UDF under an operation tag on one client, joins that client's
session from a second client (``sc://…/;session_id=<id>``), and prints with timestamps: the session's
operations (``GetStatus``), what ``interruptTag`` returns (twice), the operation's state until it ends,
the Delta log's versions, and the answers for an unknown operation id and an unknown session id.
``--restart`` instead stops the server, starts a new one on the same port, and prints what the old session
id and ``spark.app.id`` read there.

Run: ``nice -n 15 .venv/bin/python benchmarks/connect_fence_probe.py [--restart] [--hold 40]``
(about 2 minutes on the shared 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

T0 = time.monotonic()


def say(*parts: Any) -> None:
    print(f"[{time.monotonic() - T0:7.2f}]", *parts, flush=True)


def states(response: Any) -> list[tuple[str, str]]:
    from pyspark.sql.connect.proto import base_pb2 as pb2

    name = pb2.GetStatusResponse.OperationStatus.OperationState.Name
    return [(s.operation_id, name(s.state)) for s in response.operation_statuses]


def join_url(url: str, client: Any, session_id: str | None = None) -> str:
    user = f";user_id={client._user_id}" if client._user_id else ""
    return f"{url}/;session_id={session_id or client._session_id}{user}"


def interrupted_write(url: str, hold_s: float, tmp: Path) -> None:
    from deltalake import DeltaTable
    from pyspark.sql.connect.functions import udf
    from pyspark.sql.connect.session import SparkSession as Remote
    from pyspark.sql.types import LongType

    holder = Remote.builder.remote(url).create()
    holder.range(1).collect()
    client = holder.client
    say("holder session", client._session_id, "server-side", client._server_session_id)
    table = str(tmp / "t")
    holder.range(4).write.format("delta").save(table)
    tag = f"deltaguard-{uuid.uuid4().hex}"
    outcome: dict[str, Any] = {}

    def write() -> None:
        @udf(LongType())
        def slow(x: int) -> int:
            import time as clock

            clock.sleep(hold_s)
            return x

        holder.addTag(tag)
        try:
            holder.range(0, 4, 1, 2).select(slow("id").alias("id")).write.format("delta").mode("append").save(
                table
            )
            outcome["ok"] = True
        except Exception as exc:
            outcome["error"] = repr(exc)[:300]
        say("holder's write returned", outcome)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    time.sleep(6)
    # keep the session objects: a collected one closes its client
    fencing = Remote.builder.remote(join_url(url, client)).create()
    fencer = fencing.client
    status = fencer._get_operation_statuses()
    say("before: server-side session", status.server_side_session_id, states(status))
    ids = fencer.interrupt_tag(tag)
    say("interruptTag ->", ids)
    say("interruptTag again ->", fencer.interrupt_tag(tag))
    while True:
        now = states(fencer._get_operation_statuses(list(ids)))
        say("state", now)
        if all(s not in ("OPERATION_STATE_RUNNING", "OPERATION_STATE_TERMINATING") for _, s in now):
            break
        time.sleep(0.25)
    say("delta versions", [h["version"] for h in DeltaTable(table).history()])
    thread.join(hold_s + 30)
    say("unknown operation id", states(fencer._get_operation_statuses([str(uuid.uuid4())])))
    unknown = Remote.builder.remote(join_url(url, client, str(uuid.uuid4()))).create()
    ghost = unknown.client
    try:
        ghost._get_operation_statuses()
        say("unknown session: answered")
    except Exception as exc:
        say("unknown session:", type(exc).__name__, str(exc)[:200])


def restarted(port: int, tmp: Path) -> None:
    from pyspark.sql.connect.session import SparkSession as Remote

    from benchmarks.harness.connect_server import LocalConnectServer

    first = LocalConnectServer(port, log_file=tmp / "first.log")
    first.start()
    session = Remote.builder.remote(first.url).create()
    session.range(1).collect()
    old = session.client._session_id
    say("first server: spark.app.id", session.conf.get("spark.app.id"), "session", old)
    first.stop()
    second = LocalConnectServer(port, log_file=tmp / "second.log")
    second.start()
    try:
        rejoined = Remote.builder.remote(f"{second.url}/;session_id={old}").create()
        joined = rejoined.client
        try:
            joined._get_operation_statuses()
            say("old session, GetStatus: answered")
        except Exception as exc:
            say("old session, GetStatus:", type(exc).__name__, str(exc)[:200])
        try:
            joined.interrupt_tag("deltaguard-x")
            say("old session, Interrupt: answered")
        except Exception as exc:
            say("old session, Interrupt:", type(exc).__name__, str(exc)[:200])
        fresh = Remote.builder.remote(second.url).create()
        say("second server: spark.app.id", fresh.conf.get("spark.app.id"))
        fresh.client.release_session()
    finally:
        second.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--restart", action="store_true", help="measure a restarted server instead")
    parser.add_argument("--hold", type=float, default=40.0, help="seconds the write sleeps in its UDF")
    args = parser.parse_args()
    from benchmarks.harness.connect_server import LocalConnectServer, free_port

    tmp = Path(tempfile.mkdtemp(prefix="connect-fence-probe-"))
    if args.restart:
        restarted(free_port(), tmp)
        return
    server = LocalConnectServer(log_file=tmp / "server.log")
    server.start()
    say("server up", server.url)
    try:
        interrupted_write(server.url, args.hold, tmp)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
