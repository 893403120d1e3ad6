"""The planned run under deltaguard (pure): the lease manager's admission rule with its queue ranks and
estimates, Airflow's start order, worker slots and the hand-off of a grant out of the queue."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from deltaguard.core.admission import DecideFn, Owner
from deltaguard.core.decision import Decision, Verdict
from deltaguard.core.durations import write_duration
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.priority import DEFAULT_EXPECTED_S
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.planning.leased_run import LeasedWrite, SlotTimes, TableRules, simulate_leased
from deltaguard.planning.schedule import Because

PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")
RULES = {"t": TableRules(TableConfig(uri="t"), PROFILE), "u": TableRules(TableConfig(uri="u"), PROFILE)}


def model(*pairs: tuple[str, str]) -> DecideFn:
    """A conflict model in which exactly the named pairs of labels conflict."""
    conflicting = {frozenset(p) for p in pairs}

    def decide(
        candidate: Operation, running: Sequence[Operation], table: TableConfig, profile: EngineProfile
    ) -> Decision:
        hit = tuple(
            i for i, op in enumerate(running) if frozenset((candidate.label, op.label)) in conflicting
        )
        return Decision(Verdict.CONFLICT if hit else Verdict.NO_CONFLICT, conflicts_with=hit)

    return decide


def write(
    name: str,
    seconds: float,
    weight: float,
    priority: int = 0,
    table: str = "t",
    estimate: float | None = None,
) -> LeasedWrite:
    return LeasedWrite(
        id=name,
        duration_s=seconds,
        claims=((table, Operation(OperationKind.UPDATE, label=name)),),
        estimate_s=estimate,
        lease_priority=priority,
        weight=weight,
        owner=Owner(dag_id="d", task_id=name),
    )


# an exclusive first holder, then a Z-order-like write and two compatible MERGE-like writes queued behind it
EXCLUSIVE = model(("x", "z"), ("x", "m1"), ("x", "m2"), ("z", "m1"), ("z", "m2"))


def test_a_higher_lease_priority_is_granted_ahead_of_an_earlier_request() -> None:
    # Airflow starts x, then z, then the MERGEs (weights); the MERGEs' phase bonus ranks them ahead of z
    writes = [write("x", 10, 4), write("z", 10, 3, 0), write("m1", 10, 2, 2), write("m2", 10, 1, 2)]
    schedule = simulate_leased(writes, RULES, EXCLUSIVE, handoff_s=0)
    assert schedule.starts == {"x": 0, "m1": 10, "m2": 10, "z": 20}
    # without the bonus the queue is first come, first served: z goes before the MERGEs
    plain = [write("x", 10, 4), write("z", 10, 3), write("m1", 10, 2), write("m2", 10, 1)]
    schedule = simulate_leased(plain, RULES, EXCLUSIVE, handoff_s=0)
    assert schedule.starts == {"x": 0, "z": 10, "m1": 20, "m2": 20}


def test_a_grant_out_of_the_queue_pays_the_hand_off_and_a_first_ask_does_not() -> None:
    writes = [write("x", 10, 4), write("m1", 10, 2), write("other", 5, 1, table="u")]
    schedule = simulate_leased(writes, RULES, EXCLUSIVE, handoff_s=3)
    assert schedule.starts == {"x": 0, "other": 0, "m1": 13}
    assert schedule.makespan_s == 23
    assert schedule.critical_path[-1].because is Because.CONFLICT and schedule.critical_path[-1].after == "x"


def test_granted_writes_wait_for_a_worker_slot() -> None:
    # three slots: the MERGEs ask while x runs and defer (freeing their slots), two long writes on another
    # table take the slots; at x's release both MERGEs are granted, one slot is free, and the second MERGE
    # resumes (one hand-off later) when the first MERGE's slot frees
    writes = [
        write("x", 10, 6),
        write("m1", 10, 5),
        write("m2", 10, 4),
        write("long", 30, 3, table="u"),
        write("longer", 25, 2, table="u"),
    ]
    schedule = simulate_leased(writes, RULES, EXCLUSIVE, workers=3, handoff_s=1)
    assert schedule.starts == {"x": 0, "long": 0, "longer": 0, "m1": 11, "m2": 22}
    m2 = next(step for step in schedule.critical_path if step.job == "m2")
    assert m2.because is Because.WORKER and m2.after == "m1"
    unbounded = simulate_leased(writes, RULES, EXCLUSIVE, handoff_s=1)
    assert unbounded.starts["m2"] == 11


def test_only_a_request_with_an_estimate_backfills() -> None:
    # x holds the table for 30 s; w (conflicting with x and s) queues first; s conflicts only with w: with
    # estimates it ends (10 s) before w's reservation (x's end) and backfills; without, it waits behind w
    decide = model(("x", "w"), ("w", "s"))

    def run(estimates: bool) -> dict[str, float]:
        def est(seconds: float) -> float | None:
            return seconds if estimates else None

        writes = [
            write("x", 30, 3, estimate=est(30)),
            write("w", 10, 2, estimate=est(10)),
            write("s", 10, 1, estimate=est(10)),
        ]
        return simulate_leased(writes, RULES, decide, handoff_s=0).starts

    assert run(estimates=True) == {"x": 0, "s": 0, "w": 30}
    assert run(estimates=False) == {"x": 0, "w": 30, "s": 40}


def test_dependencies_and_plain_tasks() -> None:
    setup = LeasedWrite("setup", 0.0, weight=10)
    a = LeasedWrite(
        "a",
        5,
        ("setup",),
        (("t", Operation(OperationKind.UPDATE, label="a")),),
        weight=2,
        owner=Owner(name="a"),
    )
    report = LeasedWrite("report", 2, ("a",), weight=1)
    schedule = simulate_leased([setup, a, report], RULES, model(), handoff_s=3)
    assert schedule.starts == {"setup": 0, "a": 0, "report": 5} and schedule.makespan_s == 7
    assert schedule.critical_path[-1].because is Because.DEPENDENCY


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workers": 0}, "workers"),
        ({"handoff_s": -1}, "handoff_s"),
        ({"handoff_s": float("inf")}, "handoff_s"),
        ({"first_check_s": -1}, "first_check_s"),
    ],
)
def test_bad_parameters_are_refused(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        simulate_leased([write("x", 1, 1)], RULES, model(), **kwargs)


def test_a_write_on_an_unknown_table_or_a_cycle_is_refused() -> None:
    with pytest.raises(ValueError, match="no rules"):
        simulate_leased([write("x", 1, 1, table="v")], RULES, model())
    cycle = [LeasedWrite("a", 1, ("b",)), LeasedWrite("b", 1, ("a",))]
    with pytest.raises(ValueError, match="cycle"):
        simulate_leased(cycle, RULES, model())


def test_one_duration_rule_declared_then_recorded_then_none() -> None:
    reads: list[str] = []

    def recorded() -> float | None:
        reads.append("read")
        return 13.0

    assert write_duration(30, recorded) == write_duration(30.0) and reads == []  # declared: no log read
    chosen = write_duration(None, recorded)
    assert (chosen.seconds, chosen.source, reads) == (13.0, "recorded", ["read"])
    nothing = write_duration(None, lambda: None)
    assert (nothing.seconds, nothing.source, nothing.planning_s) == (None, "default", DEFAULT_EXPECTED_S)


def test_the_critical_path_names_the_release_on_the_write_s_own_table() -> None:
    # two tables whose first holders end at the same instant: b was let in by y's release, not x's
    decide = model(("x", "a"), ("y", "b"))
    writes = [
        write("y", 10, 4, table="u"),
        write("x", 10, 3),
        write("b", 12, 2, table="u"),
        write("a", 10, 1),
    ]
    schedule = simulate_leased(writes, RULES, decide, handoff_s=1)
    assert schedule.starts == {"y": 0, "x": 0, "b": 11, "a": 11}
    assert [(s.job, s.because, s.after) for s in schedule.critical_path] == [
        ("y", Because.START, None),
        ("b", Because.CONFLICT, "y"),
    ]


def test_a_write_holds_its_slot_before_its_question_and_after_its_commit() -> None:
    # x asks 2 s after taking its slot and is granted: it writes 2-12 and leaves its slot at 13; its lease
    # is released at its commit (12), so m1, queued behind it, writes one hand-off (3 s) later
    writes = [write("x", 10, 4), write("m1", 10, 2)]
    times = SlotTimes(start_s=2, end_s=1)
    schedule = simulate_leased(writes, RULES, EXCLUSIVE, handoff_s=3, slot_times=times)
    assert schedule.asks == {"x": 2, "m1": 2}
    assert (schedule.starts["x"], schedule.ends["x"]) == (0, 13)
    assert (schedule.starts["m1"], schedule.ends["m1"]) == (15, 26)
    assert schedule.makespan_s == 26


def test_a_deferred_write_frees_its_slot_only_after_its_start_up() -> None:
    # one slot: m1 takes it after x ends (13), asks at 15, is granted (x has released) and writes 15-25
    writes = [write("x", 10, 4), write("m1", 10, 2)]
    schedule = simulate_leased(writes, RULES, EXCLUSIVE, workers=1, handoff_s=3, slot_times=SlotTimes(2, 1))
    assert schedule.asks == {"x": 2, "m1": 15}
    assert schedule.starts["m1"] == 13 and schedule.makespan_s == 26
    # two slots: the other table's write waits for the slot m1 frees when it defers at its question (2 s)
    writes = [write("x", 10, 4), write("m1", 10, 3), write("other", 5, 1, table="u")]
    schedule = simulate_leased(writes, RULES, EXCLUSIVE, workers=2, handoff_s=3, slot_times=SlotTimes(2, 1))
    assert schedule.starts["other"] == 2 and schedule.asks["other"] == 4


def test_the_race_of_questions_asked_at_once_decides_the_first_holder() -> None:
    # x and z ask at the same instant; Airflow's start order lets x ask first, but either may win the race
    writes = [write("x", 10, 2), write("z", 20, 1)]
    nominal = simulate_leased(writes, RULES, EXCLUSIVE, handoff_s=0, slot_times=SlotTimes(1, 0))
    raced = simulate_leased(
        writes, RULES, EXCLUSIVE, handoff_s=0, slot_times=SlotTimes(1, 0), ask_first={"z"}
    )
    assert nominal.starts == {"x": 0, "z": 11}
    assert raced.starts == {"z": 0, "x": 21}


def test_bad_slot_times_are_refused() -> None:
    with pytest.raises(ValueError, match="start_s"):
        SlotTimes(start_s=-1)
    with pytest.raises(ValueError, match="end_s"):
        SlotTimes(end_s=float("nan"))


def test_a_write_whose_blocker_ends_soon_waits_in_its_worker_instead_of_deferring() -> None:
    # m1's blocker x is expected to end within the lease hook's imminent limit (15 s): m1 waits in its slot
    # and writes at its first question after the release, with no hand-off
    near = [write("x", 10, 4, estimate=10), write("m1", 10, 2, estimate=10)]
    schedule = simulate_leased(near, RULES, EXCLUSIVE, handoff_s=3)
    assert schedule.starts == {"x": 0, "m1": 10} and schedule.makespan_s == 20
    # a blocker expected to hold the table longer, or of unknown length, is waited for in the triggerer
    far = [write("x", 30, 4, estimate=30), write("m1", 10, 2, estimate=10)]
    assert simulate_leased(far, RULES, EXCLUSIVE, handoff_s=3).starts["m1"] == 33
    unknown = [write("x", 10, 4), write("m1", 10, 2, estimate=10)]
    assert simulate_leased(unknown, RULES, EXCLUSIVE, handoff_s=3).starts["m1"] == 13


def test_a_write_waiting_in_its_worker_defers_once_its_blocker_is_overdue() -> None:
    # x was expected to take 10 s but takes 40: m1 waits in its slot until x is 15 s overdue (25), then
    # defers, freeing the slot for the other table's write; granted at x's release, it resumes a hand-off later
    writes = [
        write("x", 40, 4, estimate=10),
        write("m1", 10, 3, estimate=10),
        write("other", 5, 1, table="u"),
    ]
    schedule = simulate_leased(writes, RULES, EXCLUSIVE, workers=2, handoff_s=3)
    assert schedule.starts == {"x": 0, "other": 25, "m1": 43}


def test_the_slot_gate_grants_no_more_leases_than_worker_slots() -> None:
    # two slots but a gate of one: b, on another table and compatible with everything, asks while a holds
    # the one lease the gate allows, defers, and is granted at a's release (a slot, not a conflict)
    writes = [write("a", 10, 2), write("b", 10, 1, table="u")]
    gated = simulate_leased(writes, RULES, model(), workers=2, worker_slots=1, handoff_s=1)
    assert gated.starts == {"a": 0, "b": 11}
    b = gated.critical_path[-1]
    assert (b.job, b.because, b.after) == ("b", Because.WORKER, "a")
    # without a gate both are granted at their first question
    assert simulate_leased(writes, RULES, model(), workers=2, handoff_s=1).starts == {"a": 0, "b": 0}


def test_a_release_grants_only_as_many_queued_writes_as_the_gate_has_slots_for() -> None:
    # x is exclusive on t; m1 and m2 queue behind it and defer; `long` takes a slot and a lease on u. At
    # x's release one slot of the gate is free: m1 (ahead in the queue) is granted, m2 waits for the next
    # release (m1's), holding no lease meanwhile
    writes = [
        write("x", 10, 6),
        write("m1", 10, 5),
        write("m2", 10, 4),
        write("long", 30, 3, table="u"),
    ]
    gated = simulate_leased(writes, RULES, EXCLUSIVE, workers=4, worker_slots=2, handoff_s=1)
    assert gated.starts == {"x": 0, "long": 0, "m1": 11, "m2": 22}
    # without the gate both MERGEs are granted at x's release and find free worker slots
    free = simulate_leased(writes, RULES, EXCLUSIVE, workers=4, handoff_s=1)
    assert free.starts == {"x": 0, "long": 0, "m1": 11, "m2": 11}


def test_a_write_held_by_the_gate_defers_rather_than_wait_in_its_worker() -> None:
    # a's lease ends within the imminent limit, but the wait is for a slot, never imminent: b defers and
    # pays the hand-off at its grant
    writes = [write("a", 5, 2, estimate=5), write("b", 5, 1, table="u", estimate=5)]
    gated = simulate_leased(writes, RULES, model(), workers=2, worker_slots=1, handoff_s=2)
    assert gated.starts["b"] == 7


def test_a_gate_below_one_slot_is_refused() -> None:
    with pytest.raises(ValueError, match="slots"):
        simulate_leased([write("x", 1, 1)], RULES, model(), worker_slots=0)


def test_a_freed_slot_is_raced_by_the_released_table_s_queue_and_the_writes_waiting_for_a_slot() -> None:
    # the gate holds two leases: x (t) and y (u). c queues behind x for a conflict, ahead in rank (its
    # phase priority); s, compatible with everything, waits only for a slot. At x's release one slot frees
    writes = [
        write("x", 10, 4),
        write("y", 30, 3, table="u"),
        write("c", 10, 2, priority=2),
        write("s", 10, 1, table="u"),
    ]
    decide = model(("x", "c"))
    # queue order: c, ahead in rank, is granted; s waits for c's release
    queued = simulate_leased(writes, RULES, decide, workers=4, worker_slots=2, handoff_s=1)
    assert queued.starts == {"x": 0, "y": 0, "c": 11, "s": 22}
    # the slot waiter's own check first: s is granted, and c then waits for a slot in turn
    raced = simulate_leased(
        writes, RULES, decide, workers=4, worker_slots=2, handoff_s=1, slot_waiters_first=True
    )
    assert raced.starts == {"x": 0, "y": 0, "s": 11, "c": 22}
    c = raced.critical_path[-1]
    assert (c.job, c.because, c.after) == ("c", Because.WORKER, "s")


def test_a_deferred_write_is_granted_no_earlier_than_its_trigger_s_first_check() -> None:
    # m defers at its question (1 s) behind x, which commits at 4 s; its trigger first checks one poll
    # interval after the deferral (6 s), so it is granted then and writes one hand-off later
    writes = [write("x", 3, 2), write("m", 5, 1)]
    slots = SlotTimes(1, 0)
    polled = simulate_leased(writes, RULES, model(("x", "m")), handoff_s=1, slot_times=slots, first_check_s=5)
    assert polled.starts["m"] == 7 and polled.makespan_s == 12
    # a check before the release changes nothing: granted at x's release
    assert simulate_leased(writes, RULES, model(("x", "m")), handoff_s=1, slot_times=slots).starts["m"] == 5


def test_a_later_phase_lets_the_earlier_phase_ask_first_for_a_bounded_time() -> None:
    """The Z-order-like ``z`` starts first (Airflow's weight) on a free table. Granted at once, it keeps both
    MERGE-like writes behind it; letting ``m1`` and ``m2`` (its earlier phase) ask first, they run together
    and ``z`` after them. A write it waits for that never starts holds it back only ``phase_wait_s``."""
    z = dataclasses.replace(write("z", 10, 4), after=("m1", "m2"))
    merges = [write("m1", 10, 2, 2), write("m2", 10, 1, 2)]
    times = SlotTimes(start_s=1.0)
    first_come = simulate_leased([z, *merges], RULES, EXCLUSIVE, handoff_s=0, slot_times=times)
    assert first_come.asks == {"z": 1, "m1": 1, "m2": 1}
    assert first_come.starts["m1"] == 11 and first_come.makespan_s == 21
    phased = simulate_leased([z, *merges], RULES, EXCLUSIVE, handoff_s=0, slot_times=times, phase_wait_s=5)
    assert phased.starts == {"m1": 0, "m2": 0, "z": 11}  # asked at 1 s, behind the MERGEs
    assert phased.asks["z"] == 1
    # m2 waits for a slot held by z (two workers): z asks when its wait ends, 5 s after its start-up
    bounded = simulate_leased(
        [z, *merges], RULES, EXCLUSIVE, workers=2, handoff_s=0, slot_times=times, phase_wait_s=5
    )
    assert bounded.asks["z"] == 6
    with pytest.raises(ValueError, match="unknown job"):
        simulate_leased([dataclasses.replace(z, after=("nobody",))], RULES, EXCLUSIVE, phase_wait_s=5)


def test_the_first_tasks_on_new_workers_start_up_slower() -> None:
    """A task that takes a worker slot no task of the run held before starts a worker: it pays the cold
    start-up. A task that takes a slot a deferred write freed starts warm."""
    writes = [write("x", 10, 4), write("m1", 10, 3), write("other", 5, 1, table="u")]
    times = SlotTimes(start_s=1.0, cold_start_s=6.0)
    schedule = simulate_leased(writes, RULES, EXCLUSIVE, workers=2, handoff_s=0, slot_times=times)
    # x and m1 start cold (6 s); m1 defers behind x and frees its slot; other takes it warm (1 s)
    assert schedule.asks == {"x": 6, "m1": 6, "other": 7}
    warm = simulate_leased(
        writes, RULES, EXCLUSIVE, workers=2, handoff_s=0, slot_times=SlotTimes(start_s=1.0)
    )
    assert warm.asks == {"x": 1, "m1": 1, "other": 2}
    with pytest.raises(ValueError, match="cold_start_s"):
        SlotTimes(cold_start_s=-1.0)
