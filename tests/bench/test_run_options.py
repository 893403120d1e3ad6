"""The benchmark's Airflow options: Airflow's slots may exceed the lower bound's write slots, the writes may
not (the slot gate is pinned to ``--parallelism``)."""

from __future__ import annotations

import pytest

from benchmarks.bench_orchestration import run_options


def test_more_airflow_slots_keep_the_writes_to_the_bounds_slots() -> None:
    options = run_options([], ["core.parallelism=10", "scheduler.scheduler_idle_sleep_time=0.2"], 8)

    assert options["core"] == {"parallelism": "10"}
    assert options["scheduler"] == {"scheduler_idle_sleep_time": "0.2"}
    assert options["deltaguard"] == {"worker_slots": "8"}


def test_a_gate_given_on_the_command_line_is_kept() -> None:
    options = run_options(["worker_slots=0"], ["core.parallelism=10"], 8)

    assert options["deltaguard"] == {"worker_slots": "0"}


def test_without_airflow_options_only_deltaguards_are_set() -> None:
    assert run_options(["poll_interval=2"], [], 8) == {"deltaguard": {"poll_interval": "2"}}
    assert run_options([], [], 8) == {}


@pytest.mark.parametrize("bad", ["parallelism=10", "core.parallelism", ".x=1", "core.=1"])
def test_an_airflow_option_without_a_section_or_value_is_refused(bad: str) -> None:
    with pytest.raises(SystemExit, match=r"SECTION\.KEY=VALUE"):
        run_options([], [bad], 8)
