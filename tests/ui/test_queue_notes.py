"""Expected ends of waits and the explanation of a queue jump, over a real SQLite store and lease manager."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltaguard.core.admission import Granted, LeaseRequest, Waiting
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.store import RequestRow
from deltaguard.plugins import service
from deltaguard.plugins.queue_notes import overtaken
from deltaguard.plugins.reads import UiReader
from tests.ui.scenario import CUSTOMERS, CUSTOMERS_CONFIG, MERGE, Clock, claim, owner


def _ask(manager: LeaseManager, task: str, *, priority: int = 0, seconds: float | None = None) -> object:
    return manager.acquire(
        LeaseRequest(
            (claim(CUSTOMERS, MERGE, CUSTOMERS_CONFIG, task),),
            owner(task),
            request_id=f"r-{task}",
            priority=priority,
            expected_duration_s=seconds,
        )
    )


@pytest.fixture
def jumped(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A MERGE holds the table (100 s expected); two MERGEs queue (30 s each); two later MERGEs of
    priority 50 rank ahead of the second, which moves from position 2 to 4."""
    clock = Clock(1_000_000.0)
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}", clock=clock)
    assert isinstance(_ask(manager, "holder", seconds=100), Granted)
    clock.now += 1
    assert isinstance(_ask(manager, "first", seconds=30), Waiting)
    clock.now += 1
    second = _ask(manager, "second", seconds=30)
    assert isinstance(second, Waiting) and second.position == 2
    for task in ("urgent_a", "urgent_b"):
        clock.now += 1
        assert isinstance(_ask(manager, task, priority=50, seconds=10), Waiting)
    clock.now += 1
    again = _ask(manager, "second", seconds=30)
    assert isinstance(again, Waiting) and again.position == 4
    yield UiReader(manager.store, clock=clock), clock
    manager.store.close()


def _customers(reader: UiReader) -> dict:
    return next(t for t in service.tables(reader)["tables"] if t["uri"] == CUSTOMERS)


def test_each_wait_has_the_admission_rules_expected_end(jumped) -> None:  # type: ignore[no-untyped-def]
    reader, clock = jumped
    table = _customers(reader)
    granted_at = 1_000_000.0
    hold = table["leases"][0]["expected_end"]
    assert hold["state"] == "known" and hold["source"] == "stated"
    assert hold["in_s"] == pytest.approx(granted_at + 100 - clock.now)
    waits = {w["owner"]["task_id"]: w["expected_start"] for w in table["waiting"]}
    # the urgent ones rank ahead of both: after the holder, each urgent MERGE (10 s) one after the other,
    # then "first" (30 s), then "second"
    assert waits["first"]["in_s"] == pytest.approx(granted_at + 100 + 10 + 10 - clock.now)
    assert waits["second"]["state"] == "known"
    assert waits["second"]["in_s"] == pytest.approx(granted_at + 100 + 10 + 10 + 30 - clock.now)
    assert "in about" in waits["second"]["text"]


def test_an_unknown_duration_makes_the_end_unknown_and_a_late_holder_overdue(tmp_path: Path) -> None:
    clock = Clock(1_000_000.0)
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}", clock=clock)
    try:
        assert isinstance(_ask(manager, "holder", seconds=20), Granted)
        assert isinstance(_ask(manager, "first", seconds=5), Waiting)
        reader = UiReader(manager.store, clock=clock)
        assert _customers(reader)["waiting"][0]["expected_start"]["state"] == "known"
        clock.now += 50  # the holder runs past its 20 s (its lease, 300 s, is live)
        late = _customers(reader)["waiting"][0]["expected_start"]
        assert late["state"] == "overdue" and "past its estimate" in late["text"]
    finally:
        manager.store.close()


def test_a_queue_jump_by_priority_is_explained(jumped) -> None:  # type: ignore[no-untyped-def]
    reader, _ = jumped
    table = _customers(reader)
    second = next(w for w in table["waiting"] if w["owner"]["task_id"] == "second")
    jump = second["overtaken"]
    assert jump is not None and jump["position_was"] == 2 and second["position"] == 4
    assert jump["text"].startswith("moved from position 2 to 4: ")
    assert {b["owner"] for b in jump["by"]} == {"daily_sales.urgent_a", "daily_sales.urgent_b"}
    assert all(b["how"] == "priority" and "priority 50 against 0" in b["text"] for b in jump["by"])
    assert next(w for w in table["waiting"] if w["owner"]["task_id"] == "urgent_a")["overtaken"] is None


def test_a_later_write_granted_first_is_explained_as_backfilling() -> None:
    def row(rid: str, at: float) -> RequestRow:
        return RequestRow(rid, f"o-{rid}", "granted", at, at, at + 60, '{"priority": 0}', at)

    requests = {"me": row("me", 10.0), "later": row("later", 25.0), "earlier": row("earlier", 5.0)}
    waiter = {
        "request_id": "me",
        "position": 1,
        "blockers": [
            {"id": "later", "owner": "d.later", "kind": "lease"},
            {"id": "earlier", "owner": "d.earlier", "kind": "lease"},
        ],
    }
    jump = overtaken(waiter, requests, {"me": 1})
    assert jump is not None and [b["owner"] for b in jump["by"]] == ["d.later"]
    assert jump["by"][0]["how"] == "backfill" and "15 s later" in jump["text"]
    assert overtaken({**waiter, "blockers": waiter["blockers"][1:]}, requests, {}) is None
