"""The Spark orchestration benchmark's pure parts, without a JVM: the serial order read from ``readVersion``,
the lease overhead accounting, the hold UDF and the held specs (what the engine runs is what was judged)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from benchmarks.harness.lease_overhead import lease_overheads, summarize_overheads
from benchmarks.harness.run_analysis import delta_log_order
from benchmarks.harness.serial_order import LoggedCommit, delta_serial_order, serial_positions
from benchmarks.spark_workload import HOLD_FUNCTION, HOLDABLE_KINDS, SPARK_MIX, held_spec, hold_for
from benchmarks.workload_tables import WRITE_KEY, build_spec
from deltaguard.core import pair_verdict
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.engines import specs
from lab.simulation.workload import BenchTable, BenchWrite, generate

# -- serial order ------------------------------------------------------------------------------------


def test_an_update_that_read_before_a_blind_append_is_serialized_before_it() -> None:
    # delta-spark, WriteSerializable: the UPDATE read v2, the append committed v3, the UPDATE v4 without conflict
    commits = [
        LoggedCommit(3, "append", 2, blind_append=True),
        LoggedCommit(4, "update", 2, blind_append=False),
        LoggedCommit(5, "merge", 4, blind_append=False),
    ]
    assert [c.write for c in serial_positions(commits)] == ["update", "append", "merge"]


def test_non_blind_commits_that_read_the_same_version_keep_version_order() -> None:
    commits = [LoggedCommit(2, "b", 1, False), LoggedCommit(1, "a", 0, False), LoggedCommit(3, "c", 1, False)]
    assert [c.write for c in serial_positions(commits)] == ["a", "b", "c"]
    # a commit without readVersion stays at its version
    assert [
        c.write for c in serial_positions([LoggedCommit(2, "x", None, False), LoggedCommit(1, "y", 0, True)])
    ] == [
        "y",
        "x",
    ]


def _spark_like_commit(table: Path, version: int, operation: str, read: int, blind: bool, write: str) -> None:
    """A commit as delta-spark writes its commitInfo (readVersion, isBlindAppend, userMetadata JSON)."""
    info = {
        "timestamp": 1_800_000_000_000 + version,
        "operation": operation,
        "operationParameters": {},
        "readVersion": read,
        "isBlindAppend": blind,
        "userMetadata": json.dumps({WRITE_KEY: write}),
    }
    (table / "_delta_log" / f"{version:020d}.json").write_text(json.dumps({"commitInfo": info}) + "\n")


def test_delta_serial_order_reads_read_versions_from_a_real_log(tmp_path: Path) -> None:
    table = tmp_path / "t0"
    write_deltalake(str(table), pa.table({"p": ["p0"], "k": [1], "v": [1]}))
    _spark_like_commit(table, 1, "WRITE", 0, True, "w_append")
    _spark_like_commit(table, 2, "UPDATE", 0, False, "w_update")
    plan = {"w_append": "t0", "w_update": "t0"}
    by_version = delta_log_order({"t0": str(table)}, plan, {}, WRITE_KEY)
    serial = delta_serial_order({"t0": str(table)}, plan, {}, WRITE_KEY)
    assert by_version.order == ("w_append", "w_update")
    assert serial.order == ("w_update", "w_append")
    assert serial.committed == {"w_append": ("t0", 1), "w_update": ("t0", 2)}
    assert serial.duplicates == () and serial.misplaced == ()


# -- lease overhead -------------------------------------------------------------------------------------


def _decision(at: float, kind: str, task: str) -> SimpleNamespace:
    return SimpleNamespace(at=at, kind=kind, owner_key=json.dumps({"task_id": task}))


def test_lease_overhead_counts_the_resumed_ask_not_the_wait() -> None:
    events = [
        {"write": "w1", "event": "scope_read", "started": 99.0, "at": 99.4},
        {"write": "w1", "event": "validated", "at": 100.0},  # first try: asked, waited, deferred
        {"write": "w1", "event": "validated", "at": 160.0},  # resumed try
        {"write": "w2", "event": "validated", "at": 100.0},
    ]
    attempts = [
        {"write": "w1", "start": 160.5, "end": 190.5, "outcome": "ok"},
        {"write": "w2", "start": 100.2, "end": 130.2, "outcome": "ok"},
        {"write": "w2", "start": 90.0, "end": 95.0, "outcome": "conflict"},
    ]
    decisions = [
        _decision(100.1, "wait", "w1"),
        _decision(160.3, "grant", "w1"),
        _decision(190.8, "release", "w1"),
        _decision(100.1, "grant", "w2"),
        _decision(130.3, "release", "w2"),
    ]
    rows = {r.write: r for r in lease_overheads(events, attempts, decisions)}
    assert set(rows) == {"w1", "w2"}
    w1 = rows["w1"]
    assert w1.acquire_s == pytest.approx(0.5) and w1.ask_s == pytest.approx(0.3)
    assert w1.scope_s == pytest.approx(0.4) and w1.release_s == pytest.approx(0.3)
    assert w1.share == pytest.approx(1.2 / 30.0)
    summary = summarize_overheads(list(rows.values()), {"w1": 30.0, "w2": 30.0})
    assert summary["writes"] == 2 and summary["releases_missing"] == []
    assert summary["share_of_write"]["max_s"] == pytest.approx(round(1.2 / 30.0, 2))


def test_a_wait_in_the_worker_for_a_conflicting_holder_is_not_the_lease_cost() -> None:
    # as w000 at seed 0: validated, waited in its worker for the MERGE ahead of it, granted at its release
    events = [{"write": "w0", "event": "validated", "at": 100.0}]
    attempts = [{"write": "w0", "start": 119.1, "end": 156.1, "outcome": "ok"}]
    decisions = [
        _decision(100.4, "wait", "w0"),
        _decision(119.0, "grant", "w0"),
        _decision(156.2, "release", "w0"),
    ]
    (row,) = lease_overheads(events, attempts, decisions)
    assert row.acquire_s == pytest.approx(19.1) and row.ask_s == pytest.approx(19.0)
    assert row.waited_s == pytest.approx(18.6)
    assert row.total_s == pytest.approx(0.4 + 0.1 + 0.1)
    summary = summarize_overheads([row], {"w0": 30.0})
    assert summary["waited_in_worker_s"]["max_s"] == pytest.approx(18.6)
    assert summary["per_write"][0]["share"] == pytest.approx(round(0.6 / 37.0, 4))


def test_lease_overhead_refuses_a_write_without_a_validation_before_it() -> None:
    with pytest.raises(ValueError, match="w9"):
        lease_overheads([], [{"write": "w9", "start": 1.0, "end": 2.0, "outcome": "ok"}], [])


# -- holding a write inside its job ------------------------------------------------------------------


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_hold_waits_once_from_the_first_row_across_workers(tmp_path: Path) -> None:
    fake = FakeTime()
    marker = str(tmp_path / "hold")
    first, other_worker = (hold_for(25.0, marker, fake.clock, fake.sleep) for _ in range(2))
    fake.now += 3.0  # the job's first row arrives after planning
    assert first(7) == 7 and fake.slept == [25.0]
    assert first(8) == 8 and fake.slept == [25.0]  # later rows do not wait again
    fake.now -= 10.0  # a task of another worker reaching the UDF earlier in the job's time
    assert other_worker(9) == 9 and fake.slept == [25.0, 10.0]  # it waits for what is left only


def _write(kind: str) -> BenchWrite:
    return BenchWrite("w001", "t", kind, "p1", 20.0, 1)


def test_held_specs_change_values_only_never_what_the_model_judged() -> None:
    table = BenchTable("t", partitions=2)
    update = build_spec(_write("update"), table)
    held = held_spec(update)
    assert isinstance(held, specs.UpdateSpec) and isinstance(update, specs.UpdateSpec)
    assert held.predicate == update.predicate
    assert held.updates == {c: f"{HOLD_FUNCTION}({e})" for c, e in update.updates.items()}
    # the operation differs in the assignment's text only: same columns, same predicate, same verdicts
    assert (
        dataclasses.replace(held.operation(), assignments=update.operation().assignments)
        == update.operation()
    )
    profile = EngineProfile(EngineName.DELTA_SPARK, "4.4.0")
    others = [
        build_spec(BenchWrite(f"o{i}", "t", k, p, 20.0, 10 + i), table)
        for i, (k, p) in enumerate((k, p) for k in HOLDABLE_KINDS for p in ("p0", "p1"))
    ]
    for other in others:
        for a, b in ((held, other), (other, held)):
            plain = (update, other) if a is held else (other, update)
            assert (
                pair_verdict(a.operation(), b.operation(), table.config(), profile).conflict
                == pair_verdict(plain[0].operation(), plain[1].operation(), table.config(), profile).conflict
            )
    for kind in ("merge", "merge_all", "append"):
        spec = build_spec(_write(kind), table)
        wrapped = held_spec(spec)
        assert wrapped.operation() == spec.operation()
        if isinstance(spec, specs.MergeSpec):
            assert isinstance(wrapped, specs.MergeSpec) and wrapped.condition == spec.condition
    with pytest.raises(ValueError, match="cannot be held"):
        held_spec(build_spec(BenchWrite("w002", "t", "delete", "p1", 20.0, 2), table))


def test_the_spark_workload_draws_only_holdable_kinds() -> None:
    workload = generate(0, tables=2, writes=40, mix=SPARK_MIX, partitions=4)
    assert {w.kind for w in workload.writes} <= set(HOLDABLE_KINDS)
