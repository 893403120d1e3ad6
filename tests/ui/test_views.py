"""The Airflow-free JSON layer over a real SQLite lease store (filled by the real lease manager)."""

from __future__ import annotations

import json

import pytest

from deltaguard.core.model import pair_verdict
from deltaguard.core.remedies import explain_pair
from deltaguard.plugins import service
from deltaguard.plugins.reads import MAX_LIMIT, LeaseNotFoundError, NotStaleError, UiReader
from tests.ui.scenario import CUSTOMERS, CUSTOMERS_CONFIG, EVENTS, MERGE, PROFILE, RUN, STALE, Scenario


def _table(data: dict, uri: str) -> dict:
    return next(t for t in data["tables"] if t["uri"] == uri)


def test_tables_page_shows_config_leases_and_queue_with_blockers(reader: UiReader) -> None:
    data = service.tables(reader)
    assert [t["uri"] for t in data["tables"]] == sorted([CUSTOMERS, EVENTS, STALE])
    customers = _table(data, CUSTOMERS)
    cfg = customers["config"]
    assert cfg["isolation_level"] == "WriteSerializable" and cfg["partitions"] == ["country"]
    assert cfg["deletion_vectors"] is False
    assert cfg["row_level_concurrency"]["enabled"] is False
    assert "partitioned" in cfg["row_level_concurrency"]["why"]
    assert [lease["owner"]["task_id"] for lease in customers["leases"]] == ["merge_a"]
    assert customers["leases"][0]["stale"] is False
    waiting = {w["owner"]["task_id"]: w for w in customers["waiting"]}
    assert set(waiting) == {"merge_b", "optimize"}
    merge_b = waiting["merge_b"]
    assert [b["owner"] for b in merge_b["blockers"]] == ["daily_sales.merge_a"]
    assert merge_b["reasons"] and merge_b["waiting_s"] == pytest.approx(41.0)
    # the OPTIMIZE waits behind the holder and the queued MERGE ahead of it (FIFO)
    assert {b["owner"] for b in waiting["optimize"]["blockers"]} >= {"daily_sales.merge_a"}
    events = _table(data, EVENTS)
    assert (
        events["config"]["deletion_vectors"] is True and events["config"]["row_level_concurrency"]["enabled"]
    )
    assert events["leases"] == [] and events["waiting"] == []
    assert _table(data, STALE)["leases"][0]["stale"] is True


def test_tables_are_paged_by_uri_cursor(reader: UiReader) -> None:
    first = service.tables(reader, limit=2)
    assert len(first["tables"]) == 2 and first["next_after"] == first["tables"][-1]["uri"]
    rest = service.tables(reader, after=first["next_after"], limit=2)
    assert [t["uri"] for t in rest["tables"]] == [STALE] and rest["next_after"] is None


def test_table_detail_matrix_is_the_models(reader: UiReader) -> None:
    data = service.table_detail(reader, CUSTOMERS)
    matrix = data["matrix"]
    assert matrix["engine"] == PROFILE.describe()
    cell = next(
        c for row in matrix["rows"] if row["label"] == "MERGE" for c in row["cells"] if c["b"] == "INSERT"
    )
    from deltaguard.core.matrix import representative_operations

    ops = {op.label: op for op in representative_operations()}
    expected = pair_verdict(ops["MERGE"], ops["INSERT"], CUSTOMERS_CONFIG, PROFILE)
    assert (cell["conflict"], cell["reason"], cell["rule"]) == (
        expected.conflict,
        expected.reason,
        expected.rule,
    )
    assert len(matrix["rows"]) == len(matrix["labels"]) == len(matrix["rows"][0]["cells"])
    kinds = [d["kind"] for d in data["decisions"]]
    assert kinds.count("wait") == 2 and kinds.count("grant") == 1
    rows = {r["owner"]["task_id"]: r for r in data["timeline"]["rows"]}
    assert [b["kind"] for b in rows["merge_a"]["bars"]] == ["writing"] and rows["merge_a"]["bars"][0]["open"]
    assert [b["kind"] for b in rows["merge_b"]["bars"]] == ["waiting"]


def test_table_detail_engine_override_and_errors(reader: UiReader) -> None:
    data = service.table_detail(reader, CUSTOMERS, engine="delta-spark", version="3.2")
    assert data["matrix"]["engine"] == "delta-spark 3.2"
    with pytest.raises(ValueError, match="unknown engine"):
        service.table_detail(reader, CUSTOMERS, engine="oracle")
    with pytest.raises(service.NotFoundError):
        service.table_detail(reader, "file:///nowhere")


def test_decision_of_a_waiting_task_names_blocker_rule_and_advice(reader: UiReader) -> None:
    data = service.task_instance_decision(reader, dag_id="daily_sales", run_id=RUN, task_id="merge_b")
    # the blocker by its dag, task and run (a link target inside Airflow), not only a description
    assert data["headline"] == f"waiting behind daily_sales.merge_a ({RUN})"
    attempt = data["attempts"][-1]
    assert attempt["status"] == "waiting" and attempt["try_number"] == 1
    blocker = attempt["waits"][0]["blockers"][0]
    expected = pair_verdict(MERGE, MERGE, CUSTOMERS_CONFIG, PROFILE)
    assert blocker["rule"] == expected.rule and blocker["rule_reason"] == expected.reason
    assert blocker["rule_advice"] == list(expected.advice)
    assert {k: blocker["who"][k] for k in ("dag_id", "run_id", "task_id", "map_index")} == {
        "dag_id": "daily_sales",
        "run_id": RUN,
        "task_id": "merge_a",
        "map_index": -1,
    }
    explained = explain_pair(MERGE, MERGE, CUSTOMERS_CONFIG, PROFILE)
    assert blocker["why"] == explained.why and "country" in blocker["why"]
    assert blocker["changes"] == [c.to_json() for c in explained.changes] and blocker["changes"]


def test_queue_on_the_tables_page_names_blockers_with_cause_and_changes(reader: UiReader) -> None:
    customers = _table(service.tables(reader), CUSTOMERS)
    merge_b = next(w for w in customers["waiting"] if w["owner"]["task_id"] == "merge_b")
    (blocker,) = merge_b["blockers"]
    assert blocker["who"]["task_id"] == "merge_a" and blocker["who"]["run_id"] == RUN
    assert blocker["why"] == explain_pair(MERGE, MERGE, CUSTOMERS_CONFIG, PROFILE).why
    assert {c["kind"] for c in blocker["changes"]} == {"merge_condition", "predicate"}


def test_waiting_now_filters_by_run(reader: UiReader) -> None:
    everyone = service.waiting(reader)
    assert {w["owner"]["task_id"] for w in everyone["waiting"]} == {"merge_b", "optimize"}
    assert all(w["blockers"] and w["table"] == "customers" for w in everyone["waiting"])
    assert service.waiting(reader, dag_id="daily_sales", run_id="another_run")["waiting"] == []
    assert len(service.waiting(reader, dag_id="daily_sales", run_id=RUN, limit=1)["waiting"]) == 1


def test_decision_after_the_holder_releases(scenario: Scenario, reader: UiReader) -> None:
    scenario.clock.now += 3
    scenario.manager.release("r-merge-a", scenario.manager.leases(CUSTOMERS)[0].owner)
    granted = scenario.manager.check("r-merge-b")
    assert granted.__class__.__name__ == "Granted"
    data = service.task_instance_decision(
        reader, dag_id="daily_sales", run_id=RUN, task_id="merge_b", try_number=1
    )
    attempt = data["attempts"][-1]
    assert attempt["status"] == "granted" and attempt["waited_s"] == pytest.approx(44.0)
    assert data["headline"].startswith(f"granted after waiting 44.0 s behind daily_sales.merge_a ({RUN})")
    at_once = service.task_instance_decision(reader, dag_id="daily_sales", run_id=RUN, task_id="merge_a")
    assert at_once["headline"].startswith("granted at once")
    nothing = service.task_instance_decision(reader, dag_id="daily_sales", run_id=RUN, task_id="nope")
    assert nothing["attempts"] == [] and "no deltaguard decision" in nothing["headline"]
    with pytest.raises(ValueError):
        service.task_instance_decision(reader, dag_id="", run_id=RUN, task_id="x")


def test_release_stale_only_for_expired_leases_and_logged(scenario: Scenario, reader: UiReader) -> None:
    with pytest.raises(NotStaleError):
        reader.release_stale("r-merge-a", "alice")
    with pytest.raises(LeaseNotFoundError):
        reader.release_stale("no-such-lease", "alice")
    with pytest.raises(ValueError):
        reader.release_stale(scenario.stale_lease, "")
    released = reader.release_stale(scenario.stale_lease, "alice")
    assert [r.uri for r in released] == [STALE]
    assert reader.leases(STALE) == [] and reader.request(scenario.stale_lease).status == "expired"
    logged = reader.decisions(uri=STALE, limit=1)[0]
    assert logged.kind == "release" and json.loads(logged.detail)["by"] == "alice"
    # the live lease is untouched
    assert [r.lease_id for r in reader.leases(CUSTOMERS)] == ["r-merge-a"]


def test_decision_pages_are_bounded_and_continue(reader: UiReader) -> None:
    first = service.decisions(reader, limit=2)
    assert len(first["decisions"]) == 2 and first["next_before"] is not None
    older = service.decisions(reader, limit=2, before=first["next_before"])
    assert all(d["at"] < first["next_before"] for d in older["decisions"])
    assert service.decisions(reader, limit=10**6)["limit"] == MAX_LIMIT


def test_empty_store(tmp_path) -> None:
    from deltaguard.leases.open import open_store

    store = open_store(f"sqlite:///{tmp_path / 'empty.db'}")
    try:
        reader = UiReader(store)
        assert service.tables(reader) == {"tables": [], "next_after": None, "limit": 50}
        assert service.decisions(reader)["decisions"] == []
    finally:
        store.close()


@pytest.mark.postgres
def test_the_same_answers_on_postgresql(pg_server: str, tmp_path) -> None:
    import uuid

    import sqlalchemy as sa

    from tests.ui.scenario import build

    name = f"dg_ui_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(pg_server, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    scenario = build(tmp_path, pg_server.rsplit("/", 1)[0] + f"/{name}")
    try:
        reader = UiReader(scenario.manager.store, clock=scenario.clock)
        tables = service.tables(reader)
        assert [t["uri"] for t in tables["tables"]] == sorted([CUSTOMERS, EVENTS, STALE])
        customers = _table(tables, CUSTOMERS)
        assert {w["owner"]["task_id"] for w in customers["waiting"]} == {"merge_b", "optimize"}
        decision = service.task_instance_decision(reader, dag_id="daily_sales", run_id=RUN, task_id="merge_b")
        assert decision["headline"] == f"waiting behind daily_sales.merge_a ({RUN})"
        assert decision["attempts"][0]["waits"][0]["blockers"][0]["rule"]
        assert len(service.decisions(reader, limit=2)["decisions"]) == 2
        assert [r.uri for r in reader.release_stale(scenario.stale_lease, "bob")] == [STALE]
    finally:
        scenario.manager.store.close()


def test_a_possible_write_outside_a_lease_is_flagged_on_the_table(scenario, reader: UiReader) -> None:
    """An ``unfenced_overrun`` entry (a wrapped write that outlived its lease, a commit that landed after its
    lease was lost) is the table's ``overruns`` (which the table view shows first), and in the decision list."""
    from tests.ui.scenario import owner

    assert service.table_detail(reader, CUSTOMERS)["overruns"] == []
    scenario.manager.record_overrun(
        "r-merge-a",
        owner("merge_a"),
        [CUSTOMERS],
        {"reason": "the wrapped work ended after its lease was lost"},
    )
    data = service.table_detail(reader, CUSTOMERS)
    (flag,) = data["overruns"]
    assert flag["owner"]["task_id"] == "merge_a"
    assert flag["summary"] == (
        "possibly written outside its lease: the wrapped work ended after its lease was lost"
    )
    assert data["decisions"][0]["kind"] == "unfenced_overrun"
    assert service.table_detail(reader, EVENTS)["overruns"] == []  # only the table written


def test_operation_column_names_the_kind_and_keeps_the_app_id_aside(reader: UiReader) -> None:
    """Operators label a write with the task's app id; the Operation column shows MERGE / OPTIMIZE."""
    customers = _table(service.tables(reader), CUSTOMERS)
    lease = customers["leases"][0]
    assert lease["operation"] == "MERGE (t.id = s.id)" and lease["operation_kind"] == "MERGE"
    assert lease["operation_label"] and "merge_a" in lease["operation_label"]
    waiting = {w["owner"]["task_id"]: w for w in customers["waiting"]}
    assert waiting["optimize"]["operation"] == "OPTIMIZE"
    assert waiting["optimize"]["operation_label"] and "optimize" in waiting["optimize"]["operation_label"]
    blocker = waiting["merge_b"]["blockers"][0]
    assert blocker["operation"] == "MERGE (t.id = s.id)" and "merge_a" in blocker["operation_label"]
    assert "merge_a" not in blocker["why"]
    decision = service.task_instance_decision(reader, dag_id="daily_sales", run_id=RUN, task_id="merge_b")
    assert decision["attempts"][-1]["operations"] == {CUSTOMERS: "MERGE (t.id = s.id)"}


def test_the_queue_says_each_cause_once_for_all_the_writes_it_holds_back(reader: UiReader) -> None:
    customers = _table(service.tables(reader), CUSTOMERS)
    whys = [b["why"] for w in customers["waiting"] for b in w["blockers"]]
    causes = customers["causes"]
    assert sorted(c["why"] for c in causes) == sorted(set(whys))
    # every (waiter, blocker) pair is in the group of its cause, and in no other
    for waiter in customers["waiting"]:
        for blocker in waiter["blockers"]:
            (group,) = [c for c in causes if c["why"] == blocker["why"]]
            assert waiter["request_id"] in [w["request_id"] for w in group["waiters"]]
            assert blocker["id"] in [b["id"] for b in group["blockers"]]
    merge = next(c for c in causes if c["why"].startswith("MERGE and MERGE"))
    assert merge["changes"] and merge["rule"] == "db.dml_dml.file"
    run = service.waiting(reader, dag_id="daily_sales", run_id=RUN)
    assert sorted(c["why"] for c in run["causes"]) == sorted(set(whys))
