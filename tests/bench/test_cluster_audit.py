"""The cluster run's audit (benchmarks/cluster/audit.py) on made-up evidence: it must be able to fail."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace

from benchmarks.cluster.audit import (
    Lease,
    compare_rows,
    example_pipeline,
    expected_tables,
    expired_leases,
    fence_checks,
    held_overlaps,
    lease_checks,
    leases_from,
)
from benchmarks.harness.run_analysis import Commit

URI = "s3://lake/examples/deltaguard/customers"


def _commit(version: int, at: float, task: str, lease: str, read: int | None = None) -> Commit:
    info = {"airflow.task_id": task, "airflow.run_id": "r1", "deltaguard.lease_id": lease}
    return Commit(version, "UPDATE", datetime.fromtimestamp(at, tz=UTC), read, info)


def _row(at: float, kind: str, request: str) -> SimpleNamespace:
    return SimpleNamespace(at=at, kind=kind, request_id=request, uri=URI, owner_key=request, detail="{}")


def test_leases_are_read_from_grant_to_release_or_expiry() -> None:
    rows = [_row(1, "wait", "a"), _row(2, "grant", "a"), _row(9, "expiry", "a"), _row(3, "grant", "b")]
    leases = leases_from(rows)
    assert leases[("a", URI)] == Lease("a", URI, "a", 2, 9, "expiry")
    assert leases[("b", URI)].ended_at is None


def test_serialized_conflicting_writes_pass() -> None:
    leases = leases_from(
        [_row(10, "grant", "a"), _row(20, "release", "a"), _row(20, "grant", "b"), _row(30, "release", "b")]
    )
    commits = [_commit(1, 19, "update", "a", 0), _commit(2, 29, "delete", "b", 1)]
    assert lease_checks("customers", URI, commits, leases, lambda *_: True) == ([], [], [])


def test_overlapping_leases_a_late_commit_and_an_unlogged_lease_fail() -> None:
    leases = leases_from(
        [_row(10, "grant", "a"), _row(20, "expiry", "a"), _row(15, "grant", "b"), _row(30, "release", "b")]
    )
    commits = [
        _commit(1, 25, "update", "a", 0),
        _commit(2, 29, "delete", "b", 0),
        _commit(3, 31, "alter", "c"),
    ]
    overlaps, late, unlogged = lease_checks("customers", URI, commits, leases, lambda *_: True)
    assert len(overlaps) == 1 and "held leases at once" in overlaps[0]
    assert len(late) == 1 and "update" in late[0]  # committed at 25, its lease ended at 20
    assert len(unlogged) == 1 and "lease c" in unlogged[0]
    # the same evidence is fine for writes the model calls compatible, except the late commit
    overlaps, late, _ = lease_checks("customers", URI, commits, leases, lambda *_: False)
    assert overlaps == [] and len(late) == 1


def test_a_stale_read_of_a_conflicting_commit_is_an_overlap() -> None:
    leases = leases_from(
        [_row(10, "grant", "a"), _row(20, "release", "a"), _row(21, "grant", "b"), _row(30, "release", "b")]
    )
    commits = [_commit(1, 19, "update", "a", 0), _commit(2, 29, "delete", "b", 0)]
    overlaps, _, _ = lease_checks("customers", URI, commits, leases, lambda *_: True)
    assert overlaps and "read v0" in overlaps[0]


def test_rows_are_computed_from_the_committed_writes_and_compared_as_multisets() -> None:
    p = example_pipeline()
    day = "2026-11-21"
    info = {"airflow.run_id": "r1"}
    commits = {
        "events": [
            Commit(1, "WRITE", datetime.now(UTC), None, {**info, "airflow.task_id": "log_events_orders"})
        ],
        "customers": [
            Commit(1, "DELETE", datetime.now(UTC), 0, {**info, "airflow.task_id": "delete_closed_customers"})
        ],
        "sales_fact": [],
    }
    expected = expected_tables(p, day, commits, {"r1": day})
    assert expected["events"] == p.event_rows(day, "orders")
    assert all(r["status"] != "closed" for r in expected["customers"])
    assert len(expected["customers"]) == 24
    lost, dup = compare_rows(
        "events", expected["events"][1:] + expected["events"][:1] * 2, expected["events"]
    )
    assert lost == [] and len(dup) == 1
    lost, dup = compare_rows("events", expected["events"][1:], expected["events"])
    assert len(lost) == 1 and dup == []


def test_expired_leases_say_whether_they_carried_connect_work_and_how_they_were_fenced() -> None:
    handle = '{"remote_work":[{"kind":"spark_connect","endpoint":"sc://h:1","tag":"t1"}]}'
    rows = [
        _row(10, "grant", "a"),
        _row(10, "grant", "b"),
        _row(10, "grant", "c"),
        _row(49, "remote_fenced", "a"),
        _row(50, "expiry", "a"),  # handed over once the Connect server confirmed the MERGE ended
        _row(55, "remote_unfenced", "b"),
        _row(70, "expiry", "b"),  # handed over although the fence never confirmed
        _row(60, "expiry", "c"),  # a delta-rs holder: nothing to fence
    ]
    commits = {"customers": [_commit(1, 45, "merge", "a"), _commit(2, 75, "merge", "b")]}
    found = {e["lease"]: e for e in expired_leases(rows, {"a": handle, "b": handle}, [URI], commits)}
    assert found["a"]["remote_handles"] == [{"kind": "spark_connect", "tag": "t1"}]
    assert found["a"]["handed_over_after"] == "remote_fenced" and found["a"]["commits_after_end"] == []
    assert found["b"]["handed_over_after"] == "remote_unfenced"
    assert found["b"]["commits_after_end"] == ["v2 merge@r1"]
    assert found["c"]["remote_handles"] == [] and found["c"]["handed_over_after"] == "no fence"
    # only expiries of the audited tables
    assert expired_leases(rows, {}, ["s3://lake/elsewhere"], commits) == []
    # b's holder saw its work end after the failed fence and dropped the handle: that is what let it go
    found = {e["lease"]: e for e in expired_leases(rows, {"a": handle, "b": "{}"}, [URI], commits)}
    assert found["b"]["handed_over_after"].startswith("remote_unfenced, then its holder saw the work end")
    # the expiry itself says a fence confirmed the work (a remote_fenced entry that could not be logged)
    rows[6] = SimpleNamespace(**{**vars(rows[6]), "detail": '{"server_work": "fenced"}'})
    found = {e["lease"]: e for e in expired_leases(rows, {"a": handle, "b": handle}, [URI], commits)}
    assert found["b"]["handed_over_after"] == "remote_fenced"


def _held_leases(url: str, clock: list[float]) -> dict[str, str]:
    """Four writes, each on a table of its own, hold leases in a real SQLite store; none is released."""
    from deltaguard.core import EngineName, EngineProfile, Operation, OperationKind, TableConfig
    from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim
    from deltaguard.leases.manager import LeaseManager

    manager = LeaseManager(url, clock=lambda: clock[0])
    profile, config = EngineProfile(EngineName.DELTA_RS, "1.6"), TableConfig(version=1)
    uris = {}
    for task in ("running", "ended", "killed", "killed_connect"):
        uri = f"s3://lake/{task}"
        request = LeaseRequest(
            claims=(TableClaim(uri, Operation(OperationKind.DELETE, predicate="id = 1"), profile, config),),
            owner=Owner(dag_id="dag", task_id=task, run_id="r1"),
            ttl_s=60 if task != "running" else 600,
            request_id=f"lease-{task}",
        )
        assert isinstance(manager.acquire(request), Granted)
        if task == "killed_connect":
            handle = {"kind": "spark_connect", "endpoint": "sc://127.0.0.1:1", "tag": "t"}
            manager.record_remote_work(request.request_id, request.owner, handle)
        uris[task] = uri
    manager.store.close()
    return uris


def test_every_lease_left_is_an_orphan_except_an_expired_one_of_a_task_that_died(tmp_path) -> None:
    from benchmarks.cluster.audit import store_orphans

    url, clock = f"sqlite:///{tmp_path / 'leases.db'}", [1_000_000.0]
    uris = _held_leases(url, clock)
    # judged two minutes later: the 600 s lease is live, the 60 s ones expired and nobody reclaimed them
    died = {("r1", "killed"), ("r1", "killed_connect")}
    orphans, dead = store_orphans([url], uris.values(), died, now=clock[0] + 120)
    assert any("lease-running" in o and "still held" in o for o in orphans)
    # the holder ended (it was alive to release) and left its expired lease: an orphan
    assert any("lease-ended" in o and "never reclaimed, though its task ended" in o for o in orphans)
    # died with Spark Connect work recorded: the table stays held until a fence, an orphan too
    assert any("lease-killed_connect" in o and "awaiting a fence" in o for o in orphans)
    assert len(orphans) == 3
    # died (failed on a heartbeat timeout) without server-side work: the next request reclaims it
    assert len(dead) == 1 and "lease-killed" in dead[0] and "heartbeat timeout" in dead[0]
    # the same expired lease is an orphan when its task did not die
    orphans, dead = store_orphans([url], [uris["killed"]], set(), now=clock[0] + 120)
    assert len(orphans) == 1 and dead == []


# -- the store-side Connect fence of the frozen PySpark holder (the freeze fault with Spark) ----------------

HOLDER = ("r1", "merge_sales_fr")
HOLDER_KEY = '{"run_id": "r1", "task_id": "merge_sales_fr"}'


def _decision(at: float, kind: str, request: str, owner: str = "", detail: str = "x") -> SimpleNamespace:
    return SimpleNamespace(
        at=at, kind=kind, request_id=request, uri=URI, owner_key=owner or request, detail=detail
    )


def test_a_fenced_hand_over_of_the_frozen_holder_passes() -> None:
    log = [
        _decision(10, "grant", "h", HOLDER_KEY),
        _decision(20, "wait", "w"),
        _decision(120, "remote_fenced", "h", HOLDER_KEY, "interrupted and confirmed"),
        _decision(120, "expiry", "h", HOLDER_KEY),
        _decision(121, "grant", "w"),
    ]
    problems, fence = fence_checks(log, [HOLDER])
    assert problems == []
    assert any(": remote_fenced" in f for f in fence) and any("granted to w" in f for f in fence)


def test_an_unfenced_decision_with_its_reason_passes_and_without_one_fails() -> None:
    log = [
        _decision(10, "grant", "h", HOLDER_KEY),
        _decision(120, "remote_unfenced", "h", HOLDER_KEY, "timeout"),
    ]
    assert fence_checks(log, [HOLDER])[0] == []
    log[1] = _decision(120, "remote_unfenced", "h", HOLDER_KEY, " ")
    assert "without a reason" in fence_checks(log, [HOLDER])[0][0]


def test_no_fence_a_reclaim_without_one_a_fence_without_hand_over_or_no_frozen_holder_fail() -> None:
    granted = _decision(10, "grant", "h", HOLDER_KEY)
    # nobody asked for the table while the holder was frozen: nothing was fenced
    assert (
        "no fence decision"
        in fence_checks([granted, _decision(20, "release", "h", HOLDER_KEY)], [HOLDER])[0][0]
    )
    # the store reclaimed the lease before any fence decision
    reclaimed = [granted, _decision(100, "expiry", "h", HOLDER_KEY), _decision(100, "grant", "w")]
    assert "without a fence" in fence_checks(reclaimed, [HOLDER])[0][0]
    # fenced, but the waiting writer never got the table
    fenced = [
        granted,
        _decision(120, "remote_fenced", "h", HOLDER_KEY),
        _decision(120, "expiry", "h", HOLDER_KEY),
    ]
    assert "never granted" in fence_checks(fenced, [HOLDER])[0][0]
    # another task's grant is not the holder's
    assert (
        "no grant"
        in fence_checks([_decision(10, "grant", "x", '{"run_id": "r1", "task_id": "other"}')], [HOLDER])[0][0]
    )
    assert "not exercised" in fence_checks([granted], [])[0][0]


def test_a_commit_while_the_external_holder_held_the_table_is_an_overlap() -> None:
    commits = [_commit(1, 5, "update", "a"), _commit(2, 50, "delete", "b"), _commit(3, 200, "alter", "c")]
    found = held_overlaps("customers", commits, (10.0, 100.0))
    assert len(found) == 1 and "delete" in found[0]
    assert held_overlaps("customers", commits[:1] + commits[2:], (10.0, 100.0)) == []


def _seq_row(seq: int, at: float, kind: str, request: str) -> SimpleNamespace:
    return SimpleNamespace(
        seq=seq, at=at, kind=kind, request_id=request, uri=URI, owner_key=request, detail="{}"
    )


def test_a_release_and_the_grant_it_allowed_are_ordered_by_the_log_not_by_their_stamps() -> None:
    """The production-shaped run's decision log: release sequence 39 stamped .124, the next grant sequence
    40 stamped 2 ms earlier (a stamp is taken when the store call starts). Serial by the log; the audit
    must not report the two conflicting writes as holding leases at once."""
    rows = [
        _seq_row(12, 1796418790.0, "grant", "a"),
        _seq_row(39, 1796418797.124, "release", "a"),
        _seq_row(40, 1796418797.122, "grant", "b"),
        _seq_row(52, 1796418805.0, "release", "b"),
    ]
    leases = leases_from(rows)
    commits = [
        _commit(7, 1796418796.0, "upsert_customers", "a", 6),
        _commit(8, 1796418804.0, "upsert", "b", 7),
    ]
    assert lease_checks("customers", URI, commits, leases, lambda *_: True)[0] == []
    # the same log with the grant before the release really is an overlap
    rows[1], rows[2] = (
        _seq_row(40, 1796418797.124, "release", "a"),
        _seq_row(39, 1796418797.122, "grant", "b"),
    )
    overlaps = lease_checks("customers", URI, commits, leases_from(rows), lambda *_: True)[0]
    assert len(overlaps) == 1 and "held leases at once" in overlaps[0]


def test_the_audit_reads_a_real_stores_log_in_its_own_order(tmp_path) -> None:
    """A real SQLite store whose deciders' stamps cross (the releasing call started 2 ms after the granting
    one): read_decisions keeps the store's order, so the hand-over is serial."""
    from benchmarks.cluster.audit import read_decisions
    from deltaguard.core import EngineName, EngineProfile, Operation, OperationKind, TableConfig
    from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim
    from deltaguard.leases.manager import LeaseManager

    url = f"sqlite:///{tmp_path / 'leases.db'}"
    clock = SimpleNamespace(now=1796418790.0)
    manager = LeaseManager(url, clock=lambda: clock.now)
    claim = TableClaim(
        URI,
        Operation(OperationKind.UPDATE, predicate="id = 1"),
        EngineProfile(EngineName.DELTA_RS, "1.6.6"),
        TableConfig(),
    )
    try:
        a = manager.acquire(LeaseRequest(claims=[claim], owner=Owner(task_id="a"), request_id="a"))
        assert isinstance(a, Granted)
        clock.now = 1796418797.124
        manager.release(a.lease_id, Owner(task_id="a"))
        clock.now = 1796418797.122  # the next call's stamp is older than the release's
        b = manager.acquire(LeaseRequest(claims=[claim], owner=Owner(task_id="b"), request_id="b"))
        assert isinstance(b, Granted)
        clock.now = 1796418805.0
        manager.release(b.lease_id, Owner(task_id="b"))
    finally:
        manager.store.close()
    leases = leases_from(read_decisions([url]))
    assert leases[("b", URI)].granted_at < leases[("a", URI)].ended_at  # the stamps cross
    commits = [_commit(7, 1796418796.0, "update", "a", 6), _commit(8, 1796418804.0, "update", "b", 7)]
    assert lease_checks("customers", URI, commits, leases, lambda *_: True)[0] == []


def test_every_frozen_holder_needs_its_fence_not_only_the_last() -> None:
    first = ("r0", "merge_sales_de")
    first_key = json.dumps({"run_id": first[0], "task_id": first[1]})
    log = [
        _decision(5, "grant", "f", first_key),
        _decision(10, "grant", "h", HOLDER_KEY),
        _decision(120, "remote_fenced", "h", HOLDER_KEY, "interrupted and confirmed"),
        _decision(120, "expiry", "h", HOLDER_KEY),
        _decision(121, "grant", "w"),
    ]
    # the last frozen holder was fenced; the first one never was
    assert fence_checks(log, [HOLDER])[0] == []
    problems = fence_checks(log, [first, HOLDER])[0]
    assert len(problems) == 1 and "no fence decision" in problems[0] and "merge_sales_de" in problems[0]


def test_a_hand_over_after_the_server_closed_the_session_passes_as_interrupted() -> None:
    log = [
        _decision(10, "grant", "h", HOLDER_KEY),
        _decision(120, "remote_unfenced", "h", HOLDER_KEY, "session closed by the server"),
        _decision(420, "remote_interrupted", "h", HOLDER_KEY, "session closed by the server"),
        _decision(420, "expiry", "h", HOLDER_KEY),
        _decision(421, "grant", "w"),
    ]
    problems, fence = fence_checks(log, [HOLDER])
    assert problems == [] and any("granted to w" in f for f in fence)
