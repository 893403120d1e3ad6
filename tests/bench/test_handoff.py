"""Hand-off latency read from a decision log and from attempt logs."""

from __future__ import annotations

import json

from benchmarks.harness.handoff import first_bytes, lease_handoffs, pool_handoffs, quantiles, summarize
from deltaguard.leases.store import DecisionRow


def owner(task_id: str) -> str:
    return json.dumps({"dag_id": "d", "task_id": task_id})


def row(at: float, kind: str, request: str, uri: str = "t") -> DecisionRow:
    return DecisionRow(at, kind, request, uri, owner(request), "{}")


def test_a_waiter_is_handed_the_table_by_the_release_before_its_grant() -> None:
    log = [
        row(0.0, "grant", "a"),
        row(1.0, "wait", "b"),
        row(5.0, "release", "a"),
        row(5.5, "grant", "b"),
        row(2.0, "grant", "c", uri="other"),  # never waited: no hand-off
    ]
    found = lease_handoffs(log, {"a": 0.2, "b": 7.0, "c": 2.1})
    assert [(h.task_id, h.released_at, h.granted_at, h.first_byte_at) for h in found] == [
        ("b", 5.0, 5.5, 7.0)
    ]
    assert found[0].total_s == 2.0 and found[0].store_s == 0.5 and found[0].airflow_s == 1.5


def test_a_release_before_the_wait_began_did_not_free_the_waiter() -> None:
    # b was granted by a backfill decision, not by a release after it started waiting
    log = [row(0.0, "release", "x"), row(1.0, "wait", "b"), row(3.0, "grant", "b")]
    assert lease_handoffs(log, {"b": 4.0}) == []


def test_only_the_named_tables_count() -> None:
    log = [row(1.0, "wait", "b", "u"), row(2.0, "release", "a", "u"), row(2.5, "grant", "b", "u")]
    assert len(lease_handoffs(log, {"b": 3.0}, uris=["u"])) == 1
    assert lease_handoffs(log, {"b": 3.0}, uris=["v"]) == []


def test_pool_gaps_are_per_table_in_start_order() -> None:
    attempts = [
        {"table": "t", "write": "w2", "start": 10.0, "end": 20.0},
        {"table": "t", "write": "w1", "start": 0.0, "end": 8.0},
        {"table": "u", "write": "w3", "start": 0.0, "end": 30.0},
    ]
    assert pool_handoffs(attempts) == [2.0]
    assert first_bytes([*attempts, {"table": "t", "write": "w1", "start": -1.0, "end": 0}])["w1"] == -1.0


def test_quantiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]
    assert quantiles(values) == {"count": 20, "p50_s": 10.0, "p95_s": 19.0, "max_s": 20.0}
    assert quantiles([])["p95_s"] is None
    assert summarize([])["grant_to_first_byte"]["count"] == 0


def slot_row(at: float, request: str, uri: str = "t") -> DecisionRow:
    detail = json.dumps({"blockers": [{"table": "u", "id": "x", "kind": "slot"}]})
    return DecisionRow(at, "wait", request, uri, owner(request), detail)


def test_a_slot_gated_waiter_is_handed_off_by_the_release_that_freed_its_slot() -> None:
    log = [
        row(0.0, "grant", "a"),
        row(0.5, "grant", "x", uri="u"),
        row(1.0, "wait", "b"),  # behind a, a conflict
        row(5.0, "release", "a"),
        slot_row(5.1, "b"),  # its table is free, every worker slot is not
        row(30.0, "release", "x", uri="u"),
        row(30.2, "grant", "b"),
        slot_row(31.0, "c", uri="v"),  # its table was free when it asked: only the gate held it
        row(40.0, "release", "y", uri="w"),
        row(40.1, "grant", "c", uri="v"),
    ]
    found = {h.task_id: h for h in lease_handoffs(log, {"b": 31.5, "c": 41.0})}
    assert (found["b"].released_at, found["b"].table_released_at, found["b"].slot_wait) == (30.0, 5.0, True)
    assert (found["c"].released_at, found["c"].table_released_at) == (40.0, None)
    summary = summarize(list(found.values()))
    assert summary["slot_waits"] == 2
    assert summary["table_release_to_first_byte"]["count"] == 1
    assert summary["table_release_to_first_byte"]["max_s"] == 26.5
