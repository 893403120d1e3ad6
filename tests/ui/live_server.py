"""The real api-server app (with Airflow's React UI and the plugin) served by uvicorn on a free port, for the
browser tests of the Delta leases app."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from benchmarks.harness.ports import free_port


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 in a thread; yields its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/api/v2/version", timeout=2)
            break
        except httpx.HTTPError:
            time.sleep(0.2)
    try:
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=10)
