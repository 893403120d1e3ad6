"""The fence for holders' server-side work that the lease manager is given (ADR 0033).

Dispatches a fence handle (:mod:`deltaguard.leases.remote_work`) by its ``kind`` to the engine that
understands it; only Spark Connect records handles. The engines import nothing of the leases: the
protocol is structural.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping


def connection_url(handle: Mapping[str, str]) -> str:
    """The URL to reach a handle's endpoint: its ``conn_id`` connection's (which may carry a token), when
    that connection still points at the same endpoint; else the recorded endpoint."""
    from deltaguard.engines.spark.connect_fence import endpoint_of

    endpoint = handle["endpoint"]
    conn_id = handle.get("conn_id")
    if conn_id:
        with contextlib.suppress(Exception):  # no Airflow, or the connection is gone: the endpoint itself
            from deltaguard.engines.spark.session import connect_url

            url = connect_url(conn_id)
            if endpoint_of(url) == endpoint:
                return url
    return f"{endpoint}/;use_ssl=true" if handle.get("use_ssl") == "true" else endpoint


class RemoteFenceByKind:
    """Fences every handle kind an engine of deltaguard records (``spark_connect``).

    :param timeout_s: how long a Spark Connect fence waits for interrupted operations to end.
    """

    def __init__(self, timeout_s: float = 45.0) -> None:
        self.timeout_s = timeout_s

    def fence(self, handle: Mapping[str, str]) -> str:
        """Stop the work ``handle`` names and confirm it ended (see the kind's fence).

        :raises Exception: the end could not be confirmed, or the kind is unknown.
        """
        from deltaguard.engines.spark.connect_fence import KIND, SparkConnectFence

        if handle.get("kind") == KIND:
            return SparkConnectFence(connection_url, timeout_s=self.timeout_s).fence(handle)
        raise ValueError(f"no fence for server-side work of kind {handle.get('kind')!r}")


def default_remote_fence() -> RemoteFenceByKind:
    """The fence the lease hooks give their lease manager."""
    return RemoteFenceByKind()
