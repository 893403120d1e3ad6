"""Free loopback ports for the servers the harness starts.

A port taken with ``bind(("127.0.0.1", 0))`` comes from the kernel's ephemeral range, the same range every
outgoing connection and every Spark JVM's own listeners (driver, block manager) draw from. Between picking it
and the server binding it, any of those may take it: a Spark Connect server was once handed the port its own
block manager had just bound, and its readiness check (the port answers) passed against the wrong listener.
A port below the ephemeral range is only ever taken by a process that asks for it by number.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

_LOWEST = 20000
_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_low() -> int:
    """The lowest port of the kernel's ephemeral range (32768, Linux' default, when it cannot be read)."""
    try:
        return int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A loopback TCP port below the ephemeral range that was free a moment ago.

    :raises RuntimeError: if 200 random picks were all taken.
    """
    high = ephemeral_low()
    low = _LOWEST if high > _LOWEST + 1000 else 1024
    picks = random.Random()
    for _ in range(200):
        port = picks.randrange(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in {low}..{high - 1}")
