"""Running workload writes on real Delta tables (long transactions, real conflicts, serial replay) and the
chart writers."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from benchmarks.workload_tables import (
    TimedDeltaRsEngine,
    build_spec,
    create_tables,
    read_attempts,
    replay_serially,
    table_fingerprint,
)
from deltaguard.engines.errors import DeltaConflictError
from lab.simulation.charts import bar_chart, cost_chart, gantt_chart
from lab.simulation.workload import BenchTable, BenchWrite, Workload, generate

TABLE = BenchTable("t", partitions=2)


def _workload(*writes: BenchWrite) -> Workload:
    return Workload((TABLE,), writes)


def test_a_commit_inside_a_long_transaction_is_a_real_conflict(tmp_path: Path) -> None:
    first = BenchWrite("w0", "t", "update", "p0", 5.0, 0)
    second = BenchWrite("w1", "t", "update", "p0", 5.0, 1)
    workload = _workload(first, second)
    uri = create_tables(workload, tmp_path / "data")["t"]
    engine = TimedDeltaRsEngine()
    log = tmp_path / "attempts.jsonl"

    def commit_the_other_meanwhile(_: float) -> None:
        engine.write(uri, build_spec(first, TABLE))  # lands between the snapshot and the commit

    with pytest.raises(DeltaConflictError):
        engine.timed_write(uri, build_spec(second, TABLE), second, log, sleep=commit_the_other_meanwhile)
    engine.timed_write(uri, build_spec(second, TABLE), second, log, sleep=lambda _: None)
    assert [a["outcome"] for a in read_attempts(log)] == ["conflict", "ok"]


def test_every_kind_runs_and_serial_replay_reproduces_the_contents(tmp_path: Path) -> None:
    workload = generate(11, tables=4, writes=24, partitions=3)
    assert {w.kind for w in workload.writes} >= {"append", "merge", "update", "optimize"}
    order = [w.id for w in reversed(workload.writes)]
    first = replay_serially(workload, order, tmp_path / "a")
    again = replay_serially(workload, order, tmp_path / "b")
    for name in first:
        assert table_fingerprint(first[name]) == table_fingerprint(again[name])
    assert DeltaTable(first["t0"]).version() >= 3


def test_fingerprint_sees_a_changed_row_but_not_the_file_layout(tmp_path: Path) -> None:
    workload = _workload(BenchWrite("w0", "t", "optimize", None, 1.0, 0))
    uri = create_tables(workload, tmp_path / "x")["t"]
    before = table_fingerprint(uri)
    engine = TimedDeltaRsEngine()
    engine.write(uri, build_spec(workload.writes[0], TABLE))  # compaction: same rows, new files
    assert table_fingerprint(uri) == before
    engine.write(uri, build_spec(BenchWrite("w1", "t", "delete", "p0", 1.0, 1), TABLE))
    assert table_fingerprint(uri) != before


def test_tables_are_created_fresh_only(tmp_path: Path) -> None:
    workload = _workload()
    create_tables(workload, tmp_path)
    with pytest.raises(FileExistsError):
        create_tables(workload, tmp_path)


def test_charts_are_written(tmp_path: Path) -> None:
    runs = {
        "one_slot_pools": [{"table": "t0", "start": 0.0, "end": 5.0, "outcome": "ok"}],
        "optimistic": [
            {"table": "t0", "start": 0.0, "end": 4.0, "outcome": "conflict"},
            {"table": "t0", "start": 1.0, "end": 3.0, "outcome": "ok"},
            {"table": "t1", "start": 4.0, "end": 6.0, "outcome": "ok"},
        ],
    }
    gantt = gantt_chart(tmp_path / "g.png", runs, ["t0", "t1"], "title", lower_bound_s=3.0)
    summary = {
        "a": {"makespan_s": 10.0, "wasted_task_s": 0.0},
        "b": {"makespan_s": 7.0, "wasted_task_s": 4.0},
    }
    bars = bar_chart(tmp_path / "b.png", summary, 5.0, "title")
    cost = cost_chart(
        tmp_path / "c.png",
        [
            {"tables": 10, "running_per_table": 0, "us_per_decision": 3.0},
            {"tables": 100, "running_per_table": 0, "us_per_decision": 3.1},
        ],
    )
    for path in (gantt, bars, cost):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError):
        bar_chart(tmp_path / "x.png", {}, 1.0, "empty")


def test_an_append_after_a_schema_change_is_padded_with_nulls(tmp_path: Path) -> None:
    add = BenchWrite("w0", "t", "add_column", None, 1.0, 0)
    append = BenchWrite("w1", "t", "append", "p1", 1.0, 1)
    uri = create_tables(_workload(add, append), tmp_path)["t"]
    engine = TimedDeltaRsEngine()
    engine.write(uri, build_spec(add, TABLE))
    engine.timed_write(uri, build_spec(append, TABLE), append, None, sleep=lambda _: None)
    data = DeltaTable(uri).to_pyarrow_table()
    assert "c_w0" in data.column_names and data.num_rows == 2 * 6 + 3


def test_the_operator_path_finds_its_planned_write_from_the_task_app_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.workload_tables import BENCH_DIR_ENV, write_plan
    from deltaguard.engines.specs import WriteContext
    from deltaguard.writes.prepared import task_app_id

    write = BenchWrite("w0", "t", "update", "p0", 0.05, 0)
    workload = _workload(write)
    uri = create_tables(workload, tmp_path / "data")["t"]
    log = tmp_path / "attempts.jsonl"
    write_plan(tmp_path / "bench_x.json", workload, {"t": uri}, log)
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    run = {"run_id": "manual__2026-11-26T19:48:09+00:00"}
    context = WriteContext(app_id=task_app_id("bench_x", "w0", run), app_version=0)
    TimedDeltaRsEngine().write(uri, build_spec(write, TABLE), context)
    assert [(a["write"], a["outcome"]) for a in read_attempts(log)] == [("w0", "ok")]
