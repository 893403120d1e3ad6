"""An HTTP proxy in front of an S3 endpoint that loses the answer to chosen PUTs after they landed.

A lost answer is what an object store timeout looks like to a writer whose request did reach the store:
the object exists, the writer does not know it. The proxy forwards every request to the upstream endpoint
(moto's S3 server here) and relays its answer, except for a PUT of an armed key: that one is forwarded,
its answer read in full (the object is stored), and the client's connection closed without a byte of it.

    proxy = DropProxy("http://127.0.0.1:5000")
    proxy.start()
    proxy.arm("/bucket/table/_delta_log/00000000000000000001.json")  # the next PUT of that path
    ...                                                              # the writer talks to proxy.url
    proxy.dropped  # the paths whose answers were lost
    proxy.stop()

Every request is recorded (:attr:`DropProxy.requests`: method, path, status, the conditional headers), so
a caller can say what the client sent and tried again.

deltalake holds the GIL in some calls (``DeltaTable.history`` waited 180 s for an in-process S3 server), so
a writer in Python must not share its process with the proxy: ``python -m benchmarks.s3_drop_proxy
--upstream URL`` serves it alone, prints ``listening <url>``, and answers ``POST /__drop_proxy/arm``
(the body: the path; ``/arm_pattern`` for a regular expression) and ``GET /__drop_proxy/state`` (the dropped paths and the requests, as JSON);
:class:`ProxyControl` talks to it.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import re
import socket
import threading
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

#: the proxy's own paths (never forwarded)
CONTROL = "/__drop_proxy"
#: headers that belong to one connection, not to the request
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"}
)


@dataclass
class Seen:
    """One request the proxy saw."""

    method: str
    path: str
    status: int | None
    #: ``If-None-Match`` / ``If-Match`` as sent (a put-if-absent sends ``If-None-Match: *``)
    conditions: dict[str, str] = field(default_factory=dict)
    dropped: bool = False


class DropProxy:
    """Forward to ``upstream``; lose the answer to the next PUT of each armed path.

    :param upstream: the S3 endpoint, ``http://host:port``.
    :param host: where the proxy listens.
    :param port: its port (0: any free one).
    """

    def __init__(self, upstream: str, host: str = "127.0.0.1", port: int = 0) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"upstream must be http://host:port, got {upstream!r}")
        self.upstream = (parts.hostname, parts.port or 80)
        self._armed: list[tuple[str, bool]] = []
        self._lock = threading.Lock()
        self.requests: list[Seen] = []
        self.dropped: list[str] = []
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> DropProxy:
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-drop-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> DropProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def arm(self, path: str, *, pattern: bool = False) -> None:
        """Lose the answer to the next PUT of ``path`` (``/bucket/key``, no query string).

        :param pattern: ``path`` is a regular expression the whole path must match (a key with a random
            part, such as a staging directory's uuid).
        """
        with self._lock:
            self._armed.append((path, pattern))

    def armed(self) -> list[str]:
        with self._lock:
            return [path for path, _ in self._armed]

    def _take(self, method: str, path: str) -> bool:
        with self._lock:
            for armed in self._armed:
                wanted, pattern = armed
                if method == "PUT" and (
                    re.fullmatch(wanted, path) is not None if pattern else path == wanted
                ):
                    self._armed.remove(armed)
                    return True
            return False

    def _record(self, seen: Seen) -> None:
        with self._lock:
            self.requests.append(seen)
            if seen.dropped:
                self.dropped.append(seen.path)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass  # trailers
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _control(self, path: str, body: bytes) -> None:
                if path in (f"{CONTROL}/arm", f"{CONTROL}/arm_pattern"):
                    proxy.arm(body.decode(), pattern=path.endswith("_pattern"))
                    payload = b"{}"
                else:
                    with proxy._lock:
                        state = {"dropped": proxy.dropped, "requests": [asdict(r) for r in proxy.requests]}
                    payload = json.dumps(state).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _forward(self) -> None:
                body = self._body()
                path = self.path.split("?", 1)[0]
                if path.startswith(CONTROL):
                    self._control(path, body)
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                if body or self.command in ("PUT", "POST"):
                    headers["Content-Length"] = str(len(body))
                conditions = {k: v for k, v in headers.items() if k.lower() in ("if-none-match", "if-match")}
                upstream = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                try:
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    payload = answer.read()  # the request has been served upstream in full
                finally:
                    upstream.close()
                if proxy._take(self.command, path):
                    proxy._record(Seen(self.command, path, answer.status, conditions, dropped=True))
                    self.close_connection = True
                    # the answer is lost: the connection ends without a byte of it
                    with contextlib.suppress(OSError):
                        self.connection.shutdown(socket.SHUT_RDWR)
                    return
                proxy._record(Seen(self.command, path, answer.status, conditions))
                self.send_response_only(answer.status, answer.reason)
                head = self.command == "HEAD"  # its Content-Length is the object's, with no body
                for key, value in answer.getheaders():
                    if key.lower() not in _HOP_BY_HOP and (head or key.lower() != "content-length"):
                        self.send_header(key, value)
                if not head:
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if not head:
                    self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        return Handler


class ProxyControl:
    """Arms and reads a proxy served by ``python -m benchmarks.s3_drop_proxy``.

    :param url: the proxy's URL, as it printed it.
    """

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.url = url
        self._address = (parts.hostname or "127.0.0.1", parts.port or 80)

    def _call(self, method: str, path: str, body: bytes = b"") -> Any:
        connection = http.client.HTTPConnection(*self._address, timeout=30)
        try:
            connection.request(method, f"{CONTROL}/{path}", body=body)
            return json.loads(connection.getresponse().read())
        finally:
            connection.close()

    def arm(self, path: str, *, pattern: bool = False) -> None:
        """Lose the answer to the next PUT of ``path`` (a regular expression with ``pattern``)."""
        self._call("POST", "arm_pattern" if pattern else "arm", path.encode())

    def state(self) -> dict[str, Any]:
        """``{"dropped": [path, ...], "requests": [{method, path, status, conditions, dropped}, ...]}``."""
        result: dict[str, Any] = self._call("GET", "state")
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the S3 endpoint, http://host:port")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    proxy = DropProxy(args.upstream, port=args.port)
    print(f"listening {proxy.url}", flush=True)
    try:
        proxy._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        proxy._server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
