"""The Spark orchestration benchmark's bound in measured durations, on hand-made schedules whose answer is
known by construction (no JVM, no run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.bench_orchestration_spark import airflow_options, measured_bound_fields, recompute
from benchmarks.harness.measured_bound import (
    committed_write_times,
    measured_lower_bound,
    summary_floor,
    with_durations,
)
from deltaguard.core.profiles import EngineName, EngineProfile
from lab.simulation.workload import BenchTable, BenchWrite, Workload, lower_bound, model_conflicts

# Two tables; on t1 the two MERGEs into p0 conflict (a chain), every other pair is disjoint by partition.
TABLES = (BenchTable("t0"), BenchTable("t1"))
WRITES = (
    BenchWrite("w0", "t1", "merge", "p0", 10.0, 0),
    BenchWrite("w1", "t1", "merge", "p0", 10.0, 1),
    BenchWrite("w2", "t0", "append", "p1", 10.0, 2),
    BenchWrite("w3", "t0", "append", "p2", 10.0, 3),
)
WORKLOAD = Workload(tables=TABLES, writes=WRITES)
CHAIN = {frozenset({"w0", "w1"})}


def by_hand(a: BenchWrite, b: BenchWrite) -> bool:
    return frozenset({a.id, b.id}) in CHAIN


def test_the_chain_of_measured_durations_is_the_bound() -> None:
    measured = {"w0": 40.0, "w1": 35.0, "w2": 5.0, "w3": 5.0}
    bound = measured_lower_bound(WORKLOAD, 4, by_hand, measured)
    # the chain runs one after the other: 40 + 35; the work is 85 / 4, the longest 40
    assert bound.value_s == 75.0
    assert bound.chain_table == "t1"
    assert bound.chain_writes == ("w0", "w1")
    assert bound.work_s == 85.0 / 4
    assert bound.longest_s == 40.0
    # planned durations give the chain of 10 + 10: the measured bound is not the planned one
    assert lower_bound(WORKLOAD, 4, by_hand).value_s == 20.0


def test_the_work_term_wins_on_one_slot_and_a_long_unchained_write_moves_the_chain() -> None:
    measured = {"w0": 12.0, "w1": 13.0, "w2": 30.0, "w3": 1.0}
    assert measured_lower_bound(WORKLOAD, 1, by_hand, measured).value_s == 56.0
    bound = measured_lower_bound(WORKLOAD, 4, by_hand, measured)
    # t0 has no conflicting pair: its heaviest "chain" is its longest write alone
    assert (bound.value_s, bound.chain_table, bound.chain_writes) == (30.0, "t0", ("w2",))


def test_the_delta_spark_model_sees_the_same_chain() -> None:
    conflicts = model_conflicts(WORKLOAD, EngineProfile(EngineName.DELTA_SPARK, "4.4.0"))
    bound = measured_lower_bound(WORKLOAD, 4, conflicts, {"w0": 40.0, "w1": 35.0, "w2": 5.0, "w3": 5.0})
    assert (bound.value_s, bound.chain_writes) == (75.0, ("w0", "w1"))


def test_every_write_needs_a_measured_duration_and_only_those() -> None:
    with pytest.raises(ValueError, match=r"\['w3'\]"):
        with_durations(WORKLOAD, {"w0": 1.0, "w1": 1.0, "w2": 1.0})
    with pytest.raises(ValueError, match="w9"):
        with_durations(WORKLOAD, {"w0": 1.0, "w1": 1.0, "w2": 1.0, "w3": 1.0, "w9": 1.0})


def test_the_committed_attempt_counts_not_the_failed_ones() -> None:
    attempts = [
        {"write": "w0", "outcome": "conflict", "start": 0.0, "end": 7.0},
        {"write": "w0", "outcome": "ok", "start": 10.0, "end": 42.5},
        {"write": "w1", "outcome": "ok", "start": 1.0, "end": 2.0},
    ]
    assert committed_write_times(attempts) == {"w0": 32.5, "w1": 1.0}
    with pytest.raises(ValueError, match="two successful"):
        committed_write_times([*attempts, {"write": "w1", "outcome": "ok", "start": 3.0, "end": 4.0}])


def test_the_floor_from_min_median_max() -> None:
    # 10 sorted times: 5 at least the minimum 10, the median 20 and 3 more at least 20, the maximum 30
    summary = {"count": 10, "min_s": 10.0, "median_s": 20.0, "max_s": 30.0}
    assert summary_floor(summary, 4) == (5 * 10 + 4 * 20 + 30) / 4
    assert summary_floor(summary, 10) == 30.0
    assert summary_floor({"count": 1, "min_s": 1.0, "median_s": 1.0, "max_s": 1.0}, 4) is None


def test_a_run_with_per_write_times_gets_the_measured_bound_and_its_ratio() -> None:
    results = {
        "deltaguard": {"makespan_s": 90.0},
        "one_slot_pools": {"engine_write_s_per_write": {"w0": 40.0, "w1": 35.0, "w2": 5.0, "w3": 5.0}},
    }
    fields = measured_bound_fields(results, WORKLOAD, 4, by_hand)
    assert fields["lower_bound_measured_s"] == 75.0
    assert fields["deltaguard_vs_lower_bound_measured"] == 1.2
    assert fields["lower_bound_measured"]["durations_from"] == "one_slot_pools"


def test_the_bound_over_the_deltaguard_runs_own_times_is_given_beside() -> None:
    # the pools run's first write slow (a server warming up), the deltaguard run's not
    results = {
        "deltaguard": {
            "makespan_s": 90.0,
            "engine_write_s_per_write": {"w0": 30.0, "w1": 30.0, "w2": 5.0, "w3": 5.0},
        },
        "one_slot_pools": {"engine_write_s_per_write": {"w0": 45.0, "w1": 30.0, "w2": 5.0, "w3": 5.0}},
    }
    fields = measured_bound_fields(results, WORKLOAD, 4, by_hand)
    assert fields["lower_bound_measured_s"] == 75.0
    assert fields["deltaguard_vs_lower_bound_measured"] == 1.2
    assert fields["lower_bound_deltaguard_times_s"] == 60.0
    assert fields["deltaguard_vs_lower_bound_deltaguard_times"] == 1.5
    assert fields["lower_bound_deltaguard_times"]["durations_from"] == "deltaguard"
    # without the deltaguard run's times the goal's bound stands alone
    del results["deltaguard"]["engine_write_s_per_write"]
    assert "lower_bound_deltaguard_times_s" not in measured_bound_fields(results, WORKLOAD, 4, by_hand)


def _recorded(tmp_path: Path, pools: dict[str, object], planned_s: float) -> Path:
    path = tmp_path / "result.json"
    path.write_text(
        json.dumps(
            {
                "lower_bound_s": planned_s,
                "workload": WORKLOAD.to_json(),
                "parallelism": 4,
                "machine": {"delta-spark": "4.4.0"},
                "one_slot_pools": pools,
                "deltaguard": {"makespan_s": 90.0},
                "other": {"kept": [1, 2]},
            }
        )
    )
    return path


def test_recompute_adds_the_keys_and_keeps_the_others(tmp_path: Path) -> None:
    pools = {"makespan_s": 120.0, "engine_write_s_per_write": {"w0": 40.0, "w1": 35.0, "w2": 5.0, "w3": 5.0}}
    path = _recorded(tmp_path, pools, 20.0)
    before = json.loads(path.read_text())
    recompute(path, "abc1234")
    after = json.loads(path.read_text())
    assert {k: after[k] for k in before} == before
    assert after["lower_bound_measured_s"] == 75.0
    assert after["deltaguard_vs_lower_bound_measured"] == 1.2
    assert "abc1234" in after["lower_bound_measured_recomputed"]


def test_recompute_of_a_summary_only_run_gives_no_exact_bound_but_its_floor(tmp_path: Path) -> None:
    pools = {"engine_write_s": {"count": 4, "min_s": 5.0, "median_s": 35.0, "max_s": 40.0}}
    path = _recorded(tmp_path, pools, 20.0)
    recompute(path, "abc1234")
    after = json.loads(path.read_text())
    assert after["lower_bound_measured_s"] is None
    # sorted 5, >=5, 35, 40: total at least 85, over 4 slots 21.25, under the longest 40
    assert after["lower_bound_measured"]["floor_from_one_slot_pools_summary_s"] == 40.0


def test_recompute_refuses_a_file_whose_planned_bound_the_model_no_longer_gives(tmp_path: Path) -> None:
    path = _recorded(tmp_path, {"engine_write_s_per_write": {}}, 99.0)
    before = path.read_text()
    with pytest.raises(ValueError, match="conflict model changed"):
        recompute(path, "abc1234")
    assert path.read_text() == before


def test_airflow_options_for_a_diagnostic_run() -> None:
    assert airflow_options(["workers.min_heartbeat_interval=1", "core.x = a=b"]) == {
        "workers": {"min_heartbeat_interval": "1"},
        "core": {"x": "a=b"},
    }
    assert airflow_options([]) == {}
    for bad in ("min_heartbeat_interval=1", "workers.min_heartbeat_interval", ".k=1", "s.=1"):
        with pytest.raises(ValueError, match=r"SECTION\.KEY=VALUE"):
            airflow_options([bad])
