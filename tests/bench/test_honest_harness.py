"""The orchestration benchmark refuses to lie: every planned write is timed and logged (pinned snapshot or
not), a run missing a write is invalid, and tables are judged against a serial replay in the order the Delta
logs show, not the order the harness wrote down."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from benchmarks.bench_orchestration import analyse, problems
from benchmarks.workload_tables import (
    BENCH_DIR_ENV,
    TimedDeltaRsEngine,
    build_spec,
    create_tables,
    read_attempts,
    write_plan,
)
from deltaguard.engines.specs import WriteContext
from deltaguard.writes.task_identity import task_app_id
from lab.simulation.workload import BenchTable, BenchWrite, Workload

TABLE = BenchTable("t", partitions=2)
RUN = {"run_id": "manual__2026-11-27T10:00:00+00:00"}
# not commutative: the UPDATE adds 2 to the rows the MERGE inserted only when it runs after it
MERGE = BenchWrite("w0", "t", "merge", "p0", 0.0, 0)
UPDATE = BenchWrite("w1", "t", "update", "p0", 0.0, 2)


def _setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *writes: BenchWrite
) -> tuple[Workload, str, Path]:
    workload = Workload((TABLE,), writes)
    uri = create_tables(workload, tmp_path / "data")["t"]
    log = tmp_path / "bench_x.jsonl"
    write_plan(tmp_path / "bench_x.json", workload, {"t": uri}, log)
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    return workload, uri, log


def _judge(workload: Workload, uri: str, log: Path, tmp_path: Path) -> dict[str, object]:
    metrics, _ = analyse("deltaguard", workload, read_attempts(log), [], tmp_path / "judge", {"t": uri}, 1.0)
    metrics["dag_run_state"] = "success"
    return metrics


def test_a_write_from_a_pinned_snapshot_is_held_for_its_duration_and_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write = BenchWrite("w0", "t", "update", "p0", 0.4, 0)
    _, uri, log = _setup(tmp_path, monkeypatch, write)
    pinned = DeltaTable(uri)  # the operators pass the snapshot their lease was judged for
    context = WriteContext(app_id=task_app_id("bench_x", "w0", RUN), app_version=0)
    began = time.monotonic()
    result = TimedDeltaRsEngine().write(uri, build_spec(write, TABLE), context, snapshot=pinned)
    assert time.monotonic() - began >= 0.4
    [attempt] = read_attempts(log)
    assert (attempt["write"], attempt["outcome"], attempt["committed"]) == ("w0", "ok", True)
    assert attempt["read_version"] == 2 and attempt["version"] == result.version == 3


def test_a_run_missing_a_planned_write_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workload, uri, log = _setup(tmp_path, monkeypatch, MERGE, UPDATE)
    TimedDeltaRsEngine().timed_write(uri, build_spec(MERGE, TABLE), MERGE, log, sleep=lambda _: None)
    metrics = _judge(workload, uri, log, tmp_path)
    assert metrics["writes_never_logged"] == ["w1"] and metrics["writes_never_committed"] == ["w1"]
    assert any("w1" in p for p in problems("deltaguard", metrics))


def test_a_commit_the_harness_never_logged_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload, uri, log = _setup(tmp_path, monkeypatch, MERGE, UPDATE)
    engine = TimedDeltaRsEngine()
    engine.timed_write(uri, build_spec(MERGE, TABLE), MERGE, log, sleep=lambda _: None)
    engine.timed_write(uri, build_spec(UPDATE, TABLE), UPDATE, None, sleep=lambda _: None)  # no log
    metrics = _judge(workload, uri, log, tmp_path)
    assert metrics["commits_not_logged"] == ["w1"] and metrics["writes_never_committed"] == []
    assert problems("deltaguard", metrics)


def test_the_replay_follows_the_delta_log_not_the_harness_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload, uri, log = _setup(tmp_path, monkeypatch, MERGE, UPDATE)
    engine = TimedDeltaRsEngine()
    engine.timed_write(uri, build_spec(MERGE, TABLE), MERGE, log, sleep=lambda _: None)
    engine.timed_write(uri, build_spec(UPDATE, TABLE), UPDATE, log, sleep=lambda _: None)
    # the harness's clock says the UPDATE finished first; the Delta log says the MERGE committed first
    attempts = read_attempts(log)
    attempts[0]["end"], attempts[1]["end"] = attempts[1]["end"] + 1, attempts[0]["end"]
    log.write_text("".join(json.dumps(a) + "\n" for a in attempts))
    metrics = _judge(workload, uri, log, tmp_path)
    assert metrics["commit_order"] == ["w0", "w1"]
    assert metrics["divergent_tables"] == 0 and problems("deltaguard", metrics) == []


def test_a_table_that_differs_from_the_replay_in_delta_log_order_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload, uri, log = _setup(tmp_path, monkeypatch, MERGE, UPDATE)
    engine = TimedDeltaRsEngine()
    engine.timed_write(uri, build_spec(MERGE, TABLE), MERGE, log, sleep=lambda _: None)
    engine.timed_write(uri, build_spec(UPDATE, TABLE), UPDATE, log, sleep=lambda _: None)
    engine.write(uri, build_spec(UPDATE, TABLE))  # an unplanned change no serial replay makes
    metrics = _judge(workload, uri, log, tmp_path)
    assert metrics["divergent_table_names"] == ["t"]
    assert any("serial replay" in p for p in problems("deltaguard", metrics))


def test_a_write_that_committed_nothing_is_replayed_after_the_version_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    optimize = BenchWrite("w2", "t", "optimize", "p1", 0.0, 3)
    workload, uri, log = _setup(tmp_path, monkeypatch, MERGE, UPDATE, optimize)
    engine = TimedDeltaRsEngine()
    engine.timed_write(uri, build_spec(MERGE, TABLE), MERGE, log, sleep=lambda _: None)
    engine.timed_write(uri, build_spec(optimize, TABLE), optimize, log, sleep=lambda _: None)
    engine.timed_write(uri, build_spec(UPDATE, TABLE), UPDATE, log, sleep=lambda _: None)
    metrics = _judge(workload, uri, log, tmp_path)
    assert problems("deltaguard", metrics) == []
    assert metrics["commit_order"] == ["w0", "w2", "w1"]
