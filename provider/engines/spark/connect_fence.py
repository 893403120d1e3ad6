"""Stop a Spark Connect write whose holder is gone, and confirm it ended (ADR 0033).

A write through Spark Connect runs on the Connect server; the Airflow worker that started it only waits
for it. When that worker is frozen or killed, its own fence (``on_lost``, ADR 0018) cannot interrupt the
operation, and the server runs it to its commit. So the engine records a *fence handle* on its lease
(:func:`connect_handle`): the endpoint (``sc://host:port``, never a token), the Connect session id and
user id, the operation tag the write runs under, and the server's ``spark.app.id``. Before an expired lease
carrying one is reclaimed, the lease manager calls :meth:`SparkConnectFence.fence`, which

1. joins the holder's session (``sc://host:port/;session_id=<id>``, same user id), reads its operations
   (``GetStatus``: it never creates a session) and checks the server-side session id is the one the holder
   saw, then interrupts the tag (``Interrupt`` with ``INTERRUPT_TYPE_TAG``);
2. asks the server for the state of every operation of that session (``GetStatus``, Spark 4.1+) until
   none is ``RUNNING``/``TERMINATING`` (or in a state it does not know); any terminal state counts
   (``CANCELLED``, ``FAILED``, and ``SUCCEEDED``: a commit that landed before the interrupt landed before
   the table is handed over). The whole session is asked, not the ids the interrupt returned: a second
   ``interruptTag`` lists none (measured, ADR 0033).

When the session is not found (``INVALID_HANDLE.SESSION_NOT_FOUND`` / ``SESSION_CLOSED``): Spark's
``ExecuteHolder.close`` interrupts a closed session's operations but does not wait for them to finish, so a
missing session on the *same* server is not a confirmation: the fence raises :class:`SessionClosedByServer`
(the lease manager hands the lease over after its ``interrupted_grace_s``, logged ``remote_interrupted``). A
server whose ``spark.app.id`` differs from the one recorded is another server process: the old one, which ran
the operation, is gone; that counts as confirmed.
"""

from __future__ import annotations

import contextlib
import time
import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from typing import Any

#: the ``kind`` of a Spark Connect fence handle
KIND = "spark_connect"
#: operation states that mean the operation has ended
_ENDED = frozenset({"OPERATION_STATE_SUCCEEDED", "OPERATION_STATE_FAILED", "OPERATION_STATE_CANCELLED"})
#: error classes that mean the session does not exist on the server (any more)
_SESSION_GONE = ("SESSION_NOT_FOUND", "SESSION_CLOSED")


class RemoteWorkNotStopped(RuntimeError):
    """The fence could not confirm that the holder's Spark Connect work ended."""


class SessionClosedByServer(RemoteWorkNotStopped):
    """The holder's session no longer exists on the server that ran it: the server closed it (a
    ``ReleaseSession`` or its idle expiry), which interrupts every operation of the session
    (``ExecuteHolder.close``) but does not wait for them, so their end cannot be observed any more.

    Marked ``interrupted_by_server`` for the lease manager (``deltaguard.leases.remote_work``; the engines
    import nothing of the leases)."""

    interrupted_by_server = True


def endpoint_of(url: str) -> str:
    """``sc://host:port`` of a Spark Connect URL: its parameters (``token``, ``user_id``, ...) dropped."""
    parsed = urllib.parse.urlparse(url.replace("sc://", "http://", 1))
    host = parsed.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = parsed.port or 15002
    return f"sc://{host}:{port}"


def connect_handle(spark: Any, tag: str, url: str | None, conn_id: str | None = None) -> dict[str, str]:
    """The fence handle of the work ``spark`` (a Spark Connect session) runs under ``tag``.

    :param spark: the session the write runs on.
    :param tag: its operation tag.
    :param url: the URL the session was opened with (``None``: the client's own).
    :param conn_id: the ``spark_connect`` connection, so a fence can find credentials the handle leaves out.
    """
    client = spark.client
    builder = getattr(client, "_builder", None)
    known = url or getattr(getattr(builder, "url", None), "geturl", lambda: "")()
    handle = {
        "kind": KIND,
        "endpoint": endpoint_of(known or f"sc://{getattr(builder, 'host', '127.0.0.1')}"),
        "session_id": str(client._session_id),
        "tag": tag,
        "app_id": str(spark.conf.get("spark.app.id")),
    }
    # known once the server answered (the conf read above): tells the holder's session from a new one
    # created later under the same id
    if getattr(client, "_server_session_id", None):
        handle["server_session_id"] = str(client._server_session_id)
    if client._user_id:
        handle["user_id"] = str(client._user_id)
    if getattr(builder, "secure", False):
        handle["use_ssl"] = "true"
    if conn_id:
        handle["conn_id"] = conn_id
    return handle


def _join(base: str, **params: str) -> str:
    extra = ";".join(f"{k}={v}" for k, v in params.items())
    if "/;" in base:
        return f"{base};{extra}"
    return f"{base.rstrip('/')}/;{extra}"


def _client(url: str) -> Any:
    from pyspark.sql.connect.client import SparkConnectClient

    # few retries: an unreachable server must fail the fence within its timeout, not retry for minutes
    return SparkConnectClient(url, retry_policy={"max_retries": 2, "max_backoff": 2000})


def session_operations(client: Any) -> tuple[str, list[tuple[str, str]]]:
    """The server-side id of ``client``'s session and ``(operation id, state)`` of its operations that have
    not ended (``GetStatus``; the PySpark client's own call for it is private in 4.2)."""
    from pyspark.sql.connect.proto import base_pb2 as pb2

    names = pb2.GetStatusResponse.OperationStatus.OperationState.Name
    status = client._get_operation_statuses()
    running = [
        (s.operation_id, names(s.state)) for s in status.operation_statuses if names(s.state) not in _ENDED
    ]
    return str(status.server_side_session_id), running


def all_ended(spark: Any, timeout_s: float = 30.0, poll_s: float = 0.25) -> bool:
    """Whether every operation of ``spark``'s own Connect session has ended, waiting up to ``timeout_s``
    (an operation interrupted by ``on_lost`` reads ``RUNNING`` for about a second more); ``False`` when
    they did not end in time or their state is unknown."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if not session_operations(spark.client)[1]:
                return True
        except Exception:
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


class SparkConnectFence:
    """:class:`~deltaguard.leases.remote_work.RemoteWorkFence` for ``spark_connect`` handles.

    :param url_for: the URL to reach a handle's endpoint with (for example with a token from the handle's
        ``conn_id`` connection); default: the endpoint itself (with ``use_ssl`` when recorded).
    :param timeout_s: how long to wait for the interrupted operations to end.
    :param poll_s: how often to ask for their state.
    """

    def __init__(
        self,
        url_for: Callable[[Mapping[str, str]], str] | None = None,
        *,
        timeout_s: float = 45.0,
        poll_s: float = 0.25,
    ) -> None:
        self.url_for = url_for
        self.timeout_s = timeout_s
        self.poll_s = poll_s

    def base_url(self, handle: Mapping[str, str]) -> str:
        if self.url_for is not None:
            return self.url_for(handle)
        base = handle["endpoint"]
        return _join(base, use_ssl="true") if handle.get("use_ssl") == "true" else base

    def fence(self, handle: Mapping[str, str]) -> str:
        """Interrupt the handle's tag in its session and wait until every operation of the session ended.

        :returns: how the end was confirmed.
        :raises RemoteWorkNotStopped: the end could not be confirmed (with why).
        """
        base = self.base_url(handle)
        params = {"session_id": handle["session_id"]}
        if handle.get("user_id"):
            params["user_id"] = handle["user_id"]
        client = _client(_join(base, **params))
        where = f"session {handle['session_id']} on {handle['endpoint']}"
        recorded = handle.get("server_session_id")
        try:
            # First a read, which never creates a session (measured: INVALID_HANDLE.SESSION_NOT_FOUND for an
            # unknown one); an Interrupt on an unknown session id is answered without error.
            try:
                server_side, _ = session_operations(client)
            except Exception as exc:
                if any(name in str(exc) for name in _SESSION_GONE):
                    return self._server_replaced(handle, base, exc)
                raise RemoteWorkNotStopped(f"the operations of {where} could not be read: {exc}") from exc
            if recorded and server_side != recorded:
                # the same session id, but another session object: the holder's is gone
                return self._server_replaced(
                    handle, base, RuntimeError(f"server-side session {server_side}, not {recorded}")
                )
            try:
                interrupted = client.interrupt_tag(handle["tag"]) or []
            except Exception as exc:
                raise RemoteWorkNotStopped(
                    f"interrupting tag {handle['tag']} in {where} failed: {exc}"
                ) from exc
            deadline = time.monotonic() + self.timeout_s
            while True:
                try:
                    server_side, running = session_operations(client)
                except Exception as exc:
                    raise RemoteWorkNotStopped(
                        f"the state of the operations of {where} is unknown: {exc}"
                    ) from exc
                if recorded and server_side != recorded:
                    raise RemoteWorkNotStopped(f"{where} was replaced while its operations were awaited")
                if not running:
                    return (
                        f"interrupted {len(interrupted)} operation(s) tagged {handle['tag']} in {where}; "
                        "every operation of the session has ended"
                    )
                if time.monotonic() >= deadline:
                    raise RemoteWorkNotStopped(
                        f"operations of {where} still not ended {self.timeout_s:g} s after the interrupt: "
                        + ", ".join(f"{op} {state}" for op, state in running)
                    )
                time.sleep(self.poll_s)
        finally:
            with contextlib.suppress(Exception):
                client.close()

    def _server_replaced(self, handle: Mapping[str, str], base: str, cause: Exception) -> str:
        """Confirmed when the endpoint now runs another application than the one that ran the work."""
        recorded = handle.get("app_id") or ""
        probe = _client(_join(base, session_id=str(uuid.uuid4())))
        try:
            current = probe.get_configs("spark.app.id")[0] or ""
        except Exception as exc:
            raise RemoteWorkNotStopped(
                f"session {handle['session_id']} is gone and the server's application is unknown: {exc}"
            ) from exc
        finally:
            with contextlib.suppress(Exception):
                probe.release_session()
            with contextlib.suppress(Exception):
                probe.close()
        if recorded and current and current != recorded:
            return (
                f"the Spark Connect server at {handle['endpoint']} was restarted (application {recorded}, now "
                f"{current}): the process that ran the work is gone"
            )
        if recorded and current == recorded:
            raise SessionClosedByServer(
                f"session {handle['session_id']} was closed by the server that ran it (application {current}), "
                f"which interrupted its operations; Spark does not wait for them, so their end was not "
                f"observed ({cause})"
            )
        raise RemoteWorkNotStopped(
            f"session {handle['session_id']} no longer exists and the application that ran it is unknown "
            f"(recorded {recorded or 'none'}, now {current or 'unknown'}): {cause}"
        )
