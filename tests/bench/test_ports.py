"""The harness' server ports and the Spark Connect server's readiness check."""

from __future__ import annotations

import socket
from pathlib import Path

from benchmarks.harness.connect_server import STARTED_LINE, LocalConnectServer
from benchmarks.harness.ports import ephemeral_low, free_port


def test_a_picked_port_is_free_and_below_the_ephemeral_range() -> None:
    for _ in range(50):
        port = free_port()
        assert 1024 <= port < ephemeral_low()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_answered_by_another_listener_is_not_the_server_until_it_logs_its_start(
    tmp_path: Path,
) -> None:
    log = tmp_path / "server.log"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        # another listener of the same JVM (its block manager, say) holding the port the server was given
        other.bind(("127.0.0.1", 0))
        other.listen()
        server = LocalConnectServer(other.getsockname()[1], log_file=log)
        log.write_text("INFO Utils: Successfully started service 'NettyBlockTransferService'\n")
        assert not server._answers()
        with log.open("a") as out:
            out.write(f"INFO SparkConnectServer: {STARTED_LINE}127.0.0.1:{server.port}\n")
        assert server._answers()
