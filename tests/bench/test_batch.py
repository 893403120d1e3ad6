"""Batch makespans: the CP-SAT optimum and backfilling in the simulator (same ``admit`` as the lease
manager, noisy estimates)."""

from __future__ import annotations

import json

import pytest

from deltaguard.core.profiles import EngineName, EngineProfile
from lab.simulation import __main__ as simulate_command
from lab.simulation.optimum import optimal_makespan
from lab.simulation.simulator import Stream, batch_row, simulate, stream_of
from lab.simulation.workload import BenchTable, BenchWrite, Workload, generate, model_conflicts

PROFILE = EngineProfile(EngineName.DATABRICKS, "15.4")
TABLE = BenchTable("t")


def workload(*writes: tuple[str, str | None, float]) -> Workload:
    return Workload(
        (TABLE,), tuple(BenchWrite(f"w{i}", "t", k, p, d, i) for i, (k, p, d) in enumerate(writes))
    )


#: a MERGE into p0 runs long; a whole-table MERGE queues behind it; a MERGE into p1 conflicts only with that
def scenario(first: float = 100.0, third: float = 50.0) -> Workload:
    return workload(("merge", "p0", first), ("merge_all", None, 10.0), ("merge", "p1", third))


def test_the_optimum_serialises_exactly_the_conflicting_pairs() -> None:
    w = scenario()
    conflicts = model_conflicts(w, PROFILE)
    first, whole, other = w.writes
    # what the scenario needs, from the real model
    assert conflicts(first, whole) and conflicts(whole, other) and not conflicts(first, other)
    assert optimal_makespan(w.writes, [0.0] * 3, conflicts, slots=8) == 110.0
    assert optimal_makespan(w.writes, [0.0] * 3, conflicts, slots=1) == 160.0
    assert optimal_makespan(w.writes, [0.0, 0.0, 200.0], conflicts, slots=8) == 250.0


def test_backfilling_runs_a_compatible_write_ahead_of_a_queued_conflicting_one() -> None:
    """FIFO holds the p1 MERGE behind the queued whole-table MERGE (160 s); with estimates it backfills
    beside the p0 MERGE (110 s, the optimum)."""
    stream = stream_of(scenario())
    fifo = simulate("deltaguard", stream, slots=8, profile=PROFILE, estimate_error=None)
    backfill = simulate("deltaguard", stream, slots=8, profile=PROFILE, estimate_error=0.3, seed=1)
    assert fifo.summary(stream.arrivals)["makespan_s"] == 160.0
    assert backfill.summary(stream.arrivals)["makespan_s"] == 110.0


def test_an_estimate_too_long_for_the_reservation_does_not_backfill() -> None:
    stream = stream_of(scenario(third=101.0))  # ends after the whole-table MERGE's reservation (100 s)
    exact = simulate("deltaguard", stream, slots=8, profile=PROFILE, estimate_error=0.0)
    assert exact.summary(stream.arrivals)["makespan_s"] == 100.0 + 10.0 + 101.0


@pytest.mark.parametrize("seed", [1, 2])
def test_a_batch_row_is_bounded_by_the_optimum_and_the_lower_bound(seed: int) -> None:
    stream = stream_of(generate(seed, tables=2, writes=10))
    row = batch_row(stream, slots=4, profile=PROFILE, time_limit_s=20.0)
    assert row["optimum_s"] is not None
    assert row["lower_bound_s"] <= row["optimum_s"] + 1e-6
    # (optimistic runs no per-table pool and its conflicts are drawn, so the optimum does not bound it)
    for name in ("one_slot_pools_s", "deltaguard_s", "deltaguard_fifo_s", "deltaguard_chain_s"):
        assert row[name] >= row["optimum_s"] - 1e-6, name


def test_the_batch_command_prints_rows_and_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    simulate_command.add_arguments(parser)
    args = parser.parse_args(
        ["batch", "--seeds", "3-4", "--tables", "2", "--writes", "8", "--format", "json"]
    )
    assert simulate_command.run(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["seed"] for r in data["rows"]] == [3, 4]
    assert set(data["rows"][0]) >= {
        "lower_bound_s",
        "optimum_s",
        "one_slot_pools_s",
        "optimistic_s",
        "deltaguard_s",
    }
    assert data["summary"]["deltaguard"]["seeds"] == 2


def test_stream_of_releases_every_write_at_once() -> None:
    assert stream_of(scenario()) == Stream(scenario(), (0.0, 0.0, 0.0))
