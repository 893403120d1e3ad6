"""The simulator on tiny workloads: invariants of each strategy in virtual time, and the CLI."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from deltaguard.core.profiles import EngineName, EngineProfile
from lab.simulation.__main__ import main
from lab.simulation.simulator import (
    STRATEGIES,
    Stream,
    admission_cost,
    generate_stream,
    simulate,
    stream_lower_bound,
)
from lab.simulation.workload import BenchTable, BenchWrite, Workload, model_conflicts

DATABRICKS = EngineProfile(EngineName.DATABRICKS, "15.4")


def _overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


@pytest.fixture(scope="module")
def stream() -> Stream:
    # a busy small day: few tables, so writes on one table overlap often
    return generate_stream(7, tables=4, writes=300, period_s=3600.0, hot_share=0.0, partitions=3, median_s=60)


def test_generation_is_seeded(stream: Stream) -> None:
    again = generate_stream(
        7, tables=4, writes=300, period_s=3600.0, hot_share=0.0, partitions=3, median_s=60
    )
    assert again == stream
    assert list(stream.arrivals) == sorted(stream.arrivals)
    assert generate_stream(8, tables=4, writes=300, period_s=3600.0).workload.writes != stream.workload.writes


def test_every_strategy_finishes_every_write(stream: Stream) -> None:
    for strategy in STRATEGIES:
        result = simulate(strategy, stream, slots=50, profile=DATABRICKS, conflict_probability=0.0)
        assert all(f >= 0 for f in result.finish), strategy
        assert all(s >= a for s, a in zip(result.first_start, stream.arrivals, strict=True)), strategy


def test_one_slot_never_overlaps_on_a_table(stream: Stream) -> None:
    result = simulate("one_slot_pools", stream, slots=50, profile=DATABRICKS)
    by_table: dict[str, list[tuple[float, float]]] = {}
    for attempt in result.attempts:
        by_table.setdefault(stream.workload.writes[attempt.write].table, []).append(
            (attempt.start, attempt.end)
        )
    for spans in by_table.values():
        spans.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


@pytest.mark.parametrize(
    ("slot_order", "slack", "slots"),
    [("fifo", 0.0, 50), ("chain", 1.0, 5), ("priority", 0.0, 5)],  # few slots: the slot order decides often
)
def test_deltaguard_never_runs_two_conflicting_writes_at_once(
    stream: Stream, slot_order: str, slack: float, slots: int
) -> None:
    conflicts = model_conflicts(stream.workload, DATABRICKS)
    result = simulate(
        "deltaguard", stream, slots=slots, profile=DATABRICKS, slot_order=slot_order, backfill_slack=slack
    )
    writes = stream.workload.writes
    spans = sorted(result.attempts, key=lambda a: a.start)
    overlapping_pairs = 0
    for i, a in enumerate(spans):
        for b in spans[i + 1 :]:
            if b.start >= a.end:
                break
            if writes[a.write].table != writes[b.write].table:
                continue
            overlapping_pairs += 1
            assert not conflicts(writes[a.write], writes[b.write]), (writes[a.write], writes[b.write])
    assert overlapping_pairs > 0  # it did run compatible writes side by side
    assert not [a for a in result.attempts if not a.ok]


def test_optimistic_wastes_work_when_conflicts_always_bite(stream: Stream) -> None:
    result = simulate("optimistic", stream, slots=50, profile=DATABRICKS, conflict_probability=1.0)
    summary = result.summary(stream.arrivals)
    assert summary["failed_attempts"] > 0 and summary["wasted_task_s"] > 0
    calm = simulate("optimistic", stream, slots=50, profile=DATABRICKS, conflict_probability=0.0)
    assert calm.summary(stream.arrivals)["wasted_task_s"] == 0


def test_optimistic_without_conflicting_pairs_wastes_nothing() -> None:
    tables = (BenchTable("t", partitions=8),)
    writes = tuple(BenchWrite(f"w{i}", "t", "append", f"p{i}", 10.0, i) for i in range(6))
    result = simulate(
        "optimistic",
        Stream(Workload(tables, writes), (0.0, 1, 2, 3, 4, 5)),
        slots=10,
        profile=DATABRICKS,
        conflict_probability=1.0,
    )
    assert not [a for a in result.attempts if not a.ok]


def test_slots_limit_concurrency(stream: Stream) -> None:
    result = simulate("optimistic", stream, slots=2, profile=DATABRICKS, conflict_probability=0.0)
    events = sorted([(a.start, 1) for a in result.attempts] + [(a.end, -1) for a in result.attempts])
    running = peak = 0
    for _, delta in events:
        running += delta
        peak = max(peak, running)
    assert peak <= 2


def test_lower_bound_is_below_every_makespan(stream: Stream) -> None:
    bound = stream_lower_bound(stream, 50, model_conflicts(stream.workload, DATABRICKS))
    for strategy in STRATEGIES:
        summary = simulate(strategy, stream, slots=50, profile=DATABRICKS).summary(stream.arrivals)
        assert summary["makespan_s"] >= bound["value_s"] - 1e-6


def test_bad_strategy_and_parameters_are_refused(stream: Stream) -> None:
    with pytest.raises(ValueError):
        simulate("yolo", stream, slots=1, profile=DATABRICKS)
    with pytest.raises(ValueError):
        simulate("deltaguard", stream, slots=0, profile=DATABRICKS)


def test_admission_cost_rows() -> None:
    rows = admission_cost(DATABRICKS, table_counts=(1, 10), running_counts=(0, 2), decisions=5)
    assert [(r["tables"], r["running_per_table"]) for r in rows] == [(1, 0), (1, 2), (10, 0), (10, 2)]
    assert all(r["us_per_decision"] > 0 for r in rows)


def test_cli_writes_json_and_charts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "--writes",
            "400",
            "--out",
            str(tmp_path),
            "--cost-tables",
            "1,10",
            "--cost-running",
            "0,1",
            "--cost-decisions",
            "3",
        ]
    )
    assert code == 0
    data = json.loads((tmp_path / "simulation.json").read_text())
    assert set(STRATEGIES) <= set(data) and data["lower_bound_s"] > 0
    for name in ("simulation_bars.png", "simulation_gantt.png", "simulation_admission_cost.png"):
        assert (tmp_path / name).stat().st_size > 1000
    assert "deltaguard" in capsys.readouterr().out


def test_cli_names_the_charts_extra_when_matplotlib_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec

    def without_matplotlib(name: str, *args: object, **kwargs: object) -> object:
        return None if name == "matplotlib" else real_find_spec(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", without_matplotlib)
    assert main(["--writes", "400", "--out", str(tmp_path)]) == 2
    assert "airflow-provider-deltaguard[charts]" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # refused before simulating anything
    assert main(["--writes", "400", "--format", "json"]) == 0  # without --out it still runs


def test_cli_refuses_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--writes", "0"]) == 2
    assert main(["--writes", "10", "--engine", "duckdb"]) == 2


def test_deltaguard_respects_the_table_pool() -> None:
    tables = (BenchTable("t", partitions=8),)
    writes = tuple(BenchWrite(f"w{i}", "t", "append", f"p{i}", 10.0, i) for i in range(6))
    stream = Stream(Workload(tables, writes), tuple(float(i) / 10 for i in range(6)))
    free = simulate("deltaguard", stream, slots=10, profile=DATABRICKS, table_slots=None)
    pooled = simulate("deltaguard", stream, slots=10, profile=DATABRICKS, table_slots=2)
    assert max(free.finish) < 11.0  # all six appends at once
    assert max(pooled.finish) >= 30.0  # two at a time


def test_the_worker_slot_goes_to_the_write_heading_the_longest_conflict_chain() -> None:
    """Two slots; four appends on one table arrive just before four whole-table MERGEs on another (they
    conflict pairwise, so they run one after another), all at the same instant. First come, first served,
    the appends take the slots and the MERGE chain starts late (60 s); longest chain first starts it at
    once (40 s, the optimum: the chain's length). Estimates stay noisy (±30 %)."""
    tables = (BenchTable("a", partitioned=False), BenchTable("b", partitioned=False))
    writes = [BenchWrite(f"w{i}", "b", "append", None, 10.0, i) for i in range(4)]
    writes += [BenchWrite(f"w{i}", "a", "merge_all", None, 10.0, i) for i in range(4, 8)]
    stream = Stream(Workload(tables, tuple(writes)), tuple(0.0 for _ in writes))
    makespan = {
        order: simulate("deltaguard", stream, slots=2, profile=DATABRICKS, slot_order=order, seed=3).summary(
            stream.arrivals
        )["makespan_s"]
        for order in ("fifo", "chain", "priority")
    }
    # the dag_policy's static priorities (the MERGE table's chain is 40 s, the appends' 10 s) do the same
    assert makespan == {"fifo": 60.0, "chain": 40.0, "priority": 40.0}
    with pytest.raises(ValueError, match="slot order"):
        simulate("deltaguard", stream, slots=2, profile=DATABRICKS, slot_order="random")
