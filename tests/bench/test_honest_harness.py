"""The orchestration benchmark refuses to lie: every planned write is timed and logged (pinned snapshot or
not), a run missing a write is invalid, and tables are judged against a serial replay in the order the Delta
logs show, not the order the harness wrote down."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from benchmarks.bench_orchestration import analyse, corrupted_tables, main, problems
from benchmarks.harness.run_analysis import files_removed_twice
from benchmarks.workload_tables import (
    BENCH_DIR_ENV,
    TimedDeltaRsEngine,
    build_spec,
    create_tables,
    read_attempts,
    write_plan,
)
from deltaguard.engines.specs import WriteContext
from deltaguard.writes.prepared import task_app_id
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


def _two_optimizes_of_the_same_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Workload, str, Path]:
    """A Z-order of the whole table commits while a compaction of p0 holds the same snapshot: delta-rs lets
    the compaction commit too (ADR 0003 fact 1), and p0's rows are then there twice."""
    zorder = BenchWrite("w1", "t", "optimize_zorder", None, 0.0, 2)
    compact = BenchWrite("w2", "t", "optimize", "p0", 0.0, 3)
    workload, uri, log = _setup(tmp_path, monkeypatch, zorder, compact)
    engine = TimedDeltaRsEngine()

    def zorder_meanwhile(_: float) -> None:
        engine.timed_write(uri, build_spec(zorder, TABLE), zorder, log, sleep=lambda _: None)

    engine.timed_write(uri, build_spec(compact, TABLE), compact, log, sleep=zorder_meanwhile)
    return workload, uri, log


def test_a_file_removed_by_two_commits_is_read_from_the_delta_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, uri, _ = _two_optimizes_of_the_same_files(tmp_path, monkeypatch)
    found = files_removed_twice(uri)
    assert found and all(d.versions == (3, 4) for d in found)
    assert all(d.path.startswith("p=p0/") for d in found)


def test_the_unguarded_baseline_may_corrupt_a_table_the_log_shows_it_corrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload, uri, log = _two_optimizes_of_the_same_files(tmp_path, monkeypatch)
    metrics, _ = analyse("optimistic", workload, read_attempts(log), [], tmp_path / "judge", {"t": uri}, 1.0)
    metrics["dag_run_state"] = "success"
    assert metrics["divergent_table_names"] == ["t"]
    assert metrics["tables_with_files_removed_twice"] == ["t"]
    # the optimistic figure stands, with the corruption reported; a guarded strategy's run is refused
    assert corrupted_tables("optimistic", metrics) == ["t"] and problems("optimistic", metrics) == []
    assert corrupted_tables("deltaguard", metrics) == []
    refused = problems("deltaguard", metrics)
    assert any("serial replay" in p for p in refused) and any("removed the same file" in p for p in refused)


def test_an_unguarded_divergence_the_log_does_not_explain_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workload, uri, log = _setup(tmp_path, monkeypatch, MERGE, UPDATE)
    engine = TimedDeltaRsEngine()
    engine.timed_write(uri, build_spec(MERGE, TABLE), MERGE, log, sleep=lambda _: None)
    engine.timed_write(uri, build_spec(UPDATE, TABLE), UPDATE, log, sleep=lambda _: None)
    engine.write(uri, build_spec(UPDATE, TABLE))  # an unplanned change, and no file removed twice
    metrics, _ = analyse("optimistic", workload, read_attempts(log), [], tmp_path / "judge", {"t": uri}, 1.0)
    metrics["dag_run_state"] = "success"
    assert corrupted_tables("optimistic", metrics) == []
    assert any("serial replay" in p for p in problems("optimistic", metrics))


def test_a_refused_seed_is_rejudged_from_its_kept_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "seed2"
    workload, uri, log = _two_optimizes_of_the_same_files(tmp_path / "run", monkeypatch)
    metrics, _ = analyse("optimistic", workload, read_attempts(log), [], tmp_path / "judge", {"t": uri}, 1.0)
    (work / "bench" / "data" / "optimistic").mkdir(parents=True)
    Path(uri).rename(work / "bench" / "data" / "optimistic" / "t")  # where a sweep keeps a strategy's tables
    results: dict[str, object] = {"seed": 2, "lower_bound_s": 1.0, "total_wall_s": 1.0, "date": "d"}
    for strategy in ("one_slot_pools", "optimistic", "deltaguard"):
        (work / "bench" / "data" / strategy).mkdir(parents=True, exist_ok=True)
        # as the refusing rules wrote it: no Delta-log evidence of files removed twice yet
        kept = {k: v for k, v in metrics.items() if "removed_twice" not in k}
        kept = kept if strategy == "optimistic" else {**kept, "divergent_table_names": []}
        results[strategy] = {**kept, "dag_run_state": "success", "loadavg_before": [], "loadavg_after": []}
    results["problems"] = ["optimistic: tables that differ from a serial replay in Delta-log order: t"]
    (work / "rejected_orchestration.json").write_text(json.dumps(results))
    out = tmp_path / "results"
    out.mkdir()
    (out / "orchestration_sweep.json").write_text(json.dumps({"seeds": [0, 2], "runs": []}))
    assert main(["--rejudge", str(work), "--out", str(out)]) == 0
    [row] = json.loads((out / "orchestration_sweep.json").read_text())["runs"]
    assert row["valid"] and row["optimistic_corrupted_tables"] == ["t"]
    # the same evidence with the guarded strategy diverging stays refused
    results["deltaguard"] = results["optimistic"]
    (work / "rejected_orchestration.json").write_text(json.dumps(results))
    (work / "bench" / "data" / "deltaguard").rmdir()
    (work / "bench" / "data" / "deltaguard").symlink_to(work / "bench" / "data" / "optimistic")
    assert main(["--rejudge", str(work), "--out", str(out)]) == 1


def _row(seed: int, ratio: float | None, valid: bool = True) -> dict[str, object]:
    return {
        "seed": seed,
        "valid": valid,
        "deltaguard_vs_pools": ratio,
        "deltaguard_vs_lower_bound": None if ratio is None else 2 * ratio,
        "handoff_pairs": [],
    }


def test_a_sweep_measured_in_parts_is_merged_into_the_fixed_seeds(tmp_path: Path) -> None:
    out, part = tmp_path / "results", tmp_path / "part"
    out.mkdir()
    part.mkdir()
    whole = {"seeds": [0, 1, 2, 3, 4], "runs": [_row(0, 0.6), _row(1, 0.5), _row(2, 0.7)]}
    (out / "orchestration_sweep.json").write_text(json.dumps(whole))
    later = {
        "command": "python -m benchmarks.bench_orchestration --seeds 3-4",
        "runs": [_row(4, 0.4), _row(3, 0.9)],
    }
    (part / "orchestration_sweep.json").write_text(json.dumps(later))
    assert main(["--add-to-sweep", str(part / "orchestration_sweep.json"), "--out", str(out)]) == 0
    merged = json.loads((out / "orchestration_sweep.json").read_text())
    assert [r["seed"] for r in merged["runs"]] == [0, 1, 2, 3, 4] and merged["complete"]
    assert merged["deltaguard_vs_pools"] == {"median": 0.6, "worst": 0.9, "values": [0.4, 0.5, 0.6, 0.7, 0.9]}
    assert merged["runs"][3]["command"] == later["command"] and "command" not in merged["runs"][0]
    # an invalid part row counts as run, adds no figure, and fails the command
    (part / "orchestration_sweep.json").write_text(
        json.dumps({"command": "c", "runs": [_row(3, None, False)]})
    )
    assert main(["--add-to-sweep", str(part / "orchestration_sweep.json"), "--out", str(out)]) == 1
    merged = json.loads((out / "orchestration_sweep.json").read_text())
    assert merged["invalid_runs"] == [3] and merged["deltaguard_vs_pools"]["values"] == [0.4, 0.5, 0.6, 0.7]
    # a seed chosen after the fact is not a row of this sweep
    (part / "orchestration_sweep.json").write_text(json.dumps({"command": "c", "runs": [_row(7, 0.1)]}))
    with pytest.raises(SystemExit, match="not among the sweep's fixed seeds"):
        main(["--add-to-sweep", str(part / "orchestration_sweep.json"), "--out", str(out)])
