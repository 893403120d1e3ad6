"""Pure view models: timeline geometry, decision lines, configuration words."""

from __future__ import annotations

import json

import pytest

from deltaguard.core.admission import Owner
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.store import DecisionRow
from deltaguard.plugins.views import config_words, decision_summary, short_name, timeline

A = Owner(dag_id="d", task_id="a").key
B = Owner(dag_id="d", task_id="b").key


def row(at: float, kind: str, rid: str, owner: str, **detail: object) -> DecisionRow:
    return DecisionRow(at, kind, rid, "file:///t", owner, json.dumps(detail))


def test_timeline_bars_wait_then_write_scaled_to_the_window() -> None:
    rows = [
        row(100, "grant", "ra", A, waited_s=0),
        row(101, "wait", "rb", B),
        row(110, "release", "ra", A),
        row(111, "grant", "rb", B, waited_s=10.0),
        row(120, "expiry", "rb", B),
    ]
    tl = timeline(reversed(rows), now=130)
    assert tl["window"]["seconds"] == 20.0
    a, b = tl["rows"]
    assert a["owner"]["task_id"] == "a" and [x["kind"] for x in a["bars"]] == ["writing"]
    assert a["bars"][0] == {"kind": "writing", "seconds": 10.0, "left": 0.0, "width": 50.0, "open": False}
    wait, write = b["bars"]
    assert (wait["kind"], wait["left"], wait["width"], wait["seconds"]) == ("waiting", 5.0, 50.0, 10.0)
    assert (write["left"], write["width"], b["end_kind"]) == (55.0, 45.0, "expiry")


def test_timeline_open_lease_runs_to_now_and_empty_log() -> None:
    tl = timeline([row(100, "grant", "ra", A)], now=104)
    assert tl["rows"][0]["bars"][0]["open"] is True and tl["rows"][0]["bars"][0]["width"] == 100.0
    assert timeline([], now=1) == {"rows": [], "window": None}


def test_decision_lines() -> None:
    assert decision_summary("release", {"stale": True, "by": "alice", "via": "deltaguard UI"}) == (
        "stale lease released by alice via deltaguard UI"
    )
    assert (
        decision_summary("grant", {"operation": "MERGE", "waited_s": 2.5})
        == "granted MERGE after waiting 2.5 s"
    )
    assert decision_summary("grant", {"operation": "MERGE", "waited_s": 0}) == "granted MERGE"
    assert "expired" in decision_summary("expiry", {})


def test_config_words() -> None:
    profile = EngineProfile(EngineName.DATABRICKS, "14.3")
    assert config_words(None, profile)["known"] is False
    words = config_words(TableConfig(properties={"delta.isolationLevel": "Serializable"}), profile)
    assert words["isolation_level"] == "Serializable"
    assert words["isolation_source"] == "table property delta.isolationLevel"
    assert "not partitioned" in words["summary"]
    odd = config_words(TableConfig(unknown=("delta.someNewFeature",)), profile)
    assert odd["conservative"], "an unknown feature must make the model conservative, and the page say so"


@pytest.mark.parametrize(("uri", "name"), [("s3://b/x/sales/", "sales"), ("/data/t", "t"), ("t", "t")])
def test_short_name(uri: str, name: str) -> None:
    assert short_name(uri) == name
