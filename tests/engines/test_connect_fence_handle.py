"""What a Spark Connect fence handle keeps of an endpoint, and which handles a fence accepts (ADR 0033)."""

from __future__ import annotations

import pytest

from deltaguard.engines.fencing import RemoteFenceByKind, connection_url
from deltaguard.engines.spark.connect_fence import endpoint_of
from deltaguard.leases.remote_work import handles_in, with_handle, without_handle


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("sc://connect.example:443/;use_ssl=true;token=SECRET;user_id=bob", "sc://connect.example:443"),
        ("sc://127.0.0.1:15002", "sc://127.0.0.1:15002"),
        ("sc://host", "sc://host:15002"),
        ("sc://[::1]:9000/;token=x", "sc://[::1]:9000"),
    ],
)
def test_the_endpoint_keeps_no_credentials(url: str, endpoint: str) -> None:
    assert endpoint_of(url) == endpoint
    assert "SECRET" not in endpoint_of(url)


def test_a_recorded_tls_endpoint_is_joined_with_tls() -> None:
    handle = {"kind": "spark_connect", "endpoint": "sc://h:443", "use_ssl": "true"}
    assert connection_url(handle) == "sc://h:443/;use_ssl=true"


def test_an_unknown_kind_is_not_confirmed() -> None:
    with pytest.raises(ValueError, match="no fence"):
        RemoteFenceByKind().fence({"kind": "flink", "endpoint": "x", "tag": "t"})


def test_handles_are_added_replaced_and_dropped_by_tag() -> None:
    payload = '{"uris":["t"]}'
    one = with_handle(payload, {"kind": "spark_connect", "tag": "a", "endpoint": "sc://h:1"})
    two = with_handle(one, {"kind": "spark_connect", "tag": "b", "endpoint": "sc://h:1"})
    again = with_handle(two, {"kind": "spark_connect", "tag": "a", "endpoint": "sc://h:2"})
    assert [(h["tag"], h["endpoint"]) for h in handles_in(again)] == [("b", "sc://h:1"), ("a", "sc://h:2")]
    assert handles_in(without_handle(without_handle(again, "a"), "b")) == []
    assert handles_in(payload) == []
    with pytest.raises(ValueError):
        handles_in('{"remote_work": "garbled"}')
