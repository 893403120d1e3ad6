"""The dropped-answer proxy of ``benchmarks.bench_dropped_response`` loses exactly what it is armed for.

A small upstream HTTP server in the test's process stands in for moto: it stores what is PUT and answers
GETs, so the test can see that the armed PUT reached it while its client got no answer.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from benchmarks.s3_drop_proxy import DropProxy


class _Store(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    objects: dict[str, bytes] = {}

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _answer(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("If-None-Match") == "*" and self.path in self.objects:
            self._answer(412)
            return
        self.objects[self.path] = body
        self._answer(200)

    def do_GET(self) -> None:
        found = self.objects.get(self.path)
        self._answer(404) if found is None else self._answer(200, found)

    do_HEAD = do_GET


@pytest.fixture
def proxy() -> Iterator[tuple[DropProxy, dict[str, bytes]]]:
    _Store.objects = {}
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Store)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    host, port = upstream.server_address[:2]
    with DropProxy(f"http://{host}:{port}") as proxy:
        yield proxy, _Store.objects
    upstream.shutdown()
    upstream.server_close()


def _request(
    proxy: DropProxy, method: str, path: str, body: bytes = b"", **headers: str
) -> tuple[int, bytes]:
    host, port = proxy.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


ENTRY = "/lake/t/_delta_log/00000000000000000001.json"


def test_the_armed_put_lands_but_its_answer_is_lost_once(proxy: tuple[DropProxy, dict[str, bytes]]) -> None:
    drop, stored = proxy
    drop.arm(ENTRY)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        _request(drop, "PUT", ENTRY, b"commit", **{"If-None-Match": "*"})
    assert stored[ENTRY] == b"commit"  # it landed upstream
    assert drop.dropped == [ENTRY] and drop.armed() == []
    # the client's retry of the same put-if-absent is relayed, and the store refuses it
    assert _request(drop, "PUT", ENTRY, b"commit", **{"If-None-Match": "*"})[0] == 412
    assert _request(drop, "GET", ENTRY) == (200, b"commit")
    assert [(seen.method, seen.status, seen.dropped) for seen in drop.requests] == [
        ("PUT", 200, True),
        ("PUT", 412, False),
        ("GET", 200, False),
    ]
    assert drop.requests[0].conditions == {"If-None-Match": "*"}


def test_other_paths_and_methods_are_relayed(proxy: tuple[DropProxy, dict[str, bytes]]) -> None:
    drop, stored = proxy
    drop.arm(ENTRY)
    staged = "/lake/t/deltaguard-staged-1/_delta_log/00000000000000000001.json"
    assert _request(drop, "PUT", staged, b"staged")[0] == 200
    assert _request(drop, "PUT", ENTRY + ".tmp", b"x")[0] == 200
    assert _request(drop, "GET", ENTRY)[0] == 404
    assert drop.dropped == [] and drop.armed() == [ENTRY]
    assert stored == {staged: b"staged", ENTRY + ".tmp": b"x"}


def test_a_pattern_arms_a_key_with_a_random_part(proxy: tuple[DropProxy, dict[str, bytes]]) -> None:
    drop, stored = proxy
    drop.arm("/lake/t/deltaguard-staged-[0-9a-f]{32}/_delta_log/00000000000000000000.json", pattern=True)
    other = "/lake/t/deltaguard-staged-xyz/_delta_log/00000000000000000000.json"
    assert _request(drop, "PUT", other, b"a")[0] == 200
    staged = f"/lake/t/deltaguard-staged-{'ab' * 16}/_delta_log/00000000000000000000.json"
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        _request(drop, "PUT", staged, b"b")
    assert drop.dropped == [staged] and stored[staged] == b"b"
