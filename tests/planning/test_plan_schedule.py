"""The planned run's schedule (pure): dependencies, blocking writes, worker slots and the critical path."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from deltaguard.planning.schedule import Because, Job, bottom_levels, simulate


def nothing(job: str, running: Sequence[str]) -> Sequence[str]:
    return ()


def pairs(*conflicting: tuple[str, str]) -> object:
    found = {frozenset(p) for p in conflicting}

    def admit(job: str, running: Sequence[str]) -> Sequence[str]:
        return [other for other in running if frozenset((job, other)) in found]

    return admit


def test_dependencies_alone_give_the_longest_path() -> None:
    jobs = [Job("a", 10), Job("b", 5, ("a",)), Job("c", 30), Job("d", 1, ("b", "c"))]
    schedule = simulate(jobs, nothing)
    assert schedule.makespan_s == 31
    assert [s.job for s in schedule.critical_path] == ["c", "d"]
    assert schedule.critical_path[1].because is Because.DEPENDENCY and schedule.critical_path[1].after == "c"


def test_a_conflicting_pair_runs_one_after_the_other_and_the_path_names_the_wait() -> None:
    jobs = [Job("a", 10), Job("b", 20), Job("c", 5)]
    schedule = simulate(jobs, pairs(("a", "b")))  # type: ignore[arg-type]
    # b heads the longer work, so it starts first (the critical-path rule); a waits for it; c runs beside
    assert schedule.starts == {"b": 0, "c": 0, "a": 20}
    assert schedule.makespan_s == 30
    last = schedule.critical_path[-1]
    assert (last.job, last.because, last.after) == ("a", Because.CONFLICT, "b")


def test_worker_slots_bound_how_many_run_at_once() -> None:
    jobs = [Job(name, 10) for name in "abcd"]
    assert simulate(jobs, nothing).makespan_s == 10
    two = simulate(jobs, nothing, workers=2)
    assert two.makespan_s == 20 and two.critical_path[-1].because is Because.WORKER


def test_bottom_levels_add_the_longest_downstream_chain() -> None:
    jobs = [Job("a", 1), Job("b", 2, ("a",)), Job("c", 4, ("a",))]
    assert bottom_levels(jobs) == {"a": 5, "b": 2, "c": 4}


@pytest.mark.parametrize(
    "jobs",
    [
        [Job("a", 1, ("b",)), Job("b", 1, ("a",))],
        [Job("a", 1, ("missing",))],
        [Job("a", 1), Job("a", 2)],
        [Job("a", -1)],
    ],
)
def test_bad_jobs_are_refused(jobs: list[Job]) -> None:
    with pytest.raises(ValueError):
        simulate(jobs, nothing)


def test_downstream_sums_follow_airflows_default_weight_rule() -> None:
    from deltaguard.planning.schedule import downstream_sums

    jobs = [Job("a", 1), Job("b", 1, ("a",)), Job("c", 1, ("b",)), Job("d", 1)]
    assert downstream_sums(jobs, {"a": 1, "b": 10, "c": 100, "d": 5}) == {
        "a": 111,
        "b": 110,
        "c": 100,
        "d": 5,
    }


def test_a_given_priority_decides_which_conflicting_job_starts_first() -> None:
    jobs = [Job("a", 10), Job("b", 20)]
    admit = pairs(("a", "b"))
    assert simulate(jobs, admit).starts["b"] == 0  # type: ignore[arg-type]  # longest first by default
    assert simulate(jobs, admit, priority={"a": 2, "b": 1}).starts["a"] == 0  # type: ignore[arg-type]


def test_a_job_on_a_new_worker_takes_the_cold_start_longer() -> None:
    jobs = [Job("a", 10), Job("b", 20), Job("c", 5)]
    schedule = simulate(jobs, pairs(("a", "b")), workers=2, cold_extra_s=4)  # type: ignore[arg-type]
    # b and c start on the two new workers; a, after b, on b's worker
    assert schedule.ends == {"b": 24, "c": 9, "a": 34}
