"""The race of first questions: the writes that ask for a table at the same instant, each played first."""

from __future__ import annotations

from collections.abc import Collection

import pytest

from deltaguard.planning import first_holders
from deltaguard.planning.first_holders import Play, first_holder_range, racing_first_askers, with_slot_race
from deltaguard.planning.leased_run import LeasedWrite, SlotTimes, simulate_leased
from deltaguard.planning.schedule import Schedule
from tests.planning.test_leased_run import EXCLUSIVE, RULES, model, write

# a long Z-order-like write and two short MERGE-like writes that conflict with it but not with each other;
# a report follows the first MERGE
WRITES = [
    write("m1", 10, 3),
    write("m2", 10, 2),
    write("z", 30, 1),
    LeasedWrite("report", 5, ("m1",), weight=0.5),
]
DECIDE = model(("z", "m1"), ("z", "m2"))
TABLES_OF = {w.id: {"t"} for w in WRITES if w.claims}


def play(ask_first: Collection[str] = (), ask_last: Collection[str] = ()) -> Schedule:
    return simulate_leased(
        WRITES,
        RULES,
        DECIDE,
        handoff_s=2,
        slot_times=SlotTimes(1, 0),
        ask_first=ask_first,
        ask_last=ask_last,
    )


def test_every_write_asking_at_the_table_s_first_instant_is_played_first() -> None:
    nominal = play()
    assert racing_first_askers(nominal, TABLES_OF) == {"t": ("m1", "m2", "z")}
    race = first_holder_range(play, nominal, TABLES_OF)
    # a MERGE first: both MERGEs write 1-11, z after them (11 + 2 + 30), the report 11-16; z first: the
    # MERGEs wait for it (31 + 2 + 10) and the report ends last
    assert nominal.makespan_s == 43 and race.best.makespan_s == 43
    # the slowest play: m2 first, m1 asking last queues behind z (m2 1-11, z 13-43, m1 45-55, report 55-60)
    assert race.worst_first == ("m2",) and race.worst_last == ("m1",)
    assert race.worst.makespan_s == 60
    # three first askers, then each of the six ordered pairs of a first and a last asker
    assert race.plays == 1 + 3 + 6 and race.exhaustive
    # the mean is over the first askers alone, each equally likely: m1, m2 (43 s each) and z (48 s)
    assert race.mean_s == pytest.approx((43 + 43 + 48) / 3)


def test_a_write_asking_later_is_not_in_the_race() -> None:
    # one slot: the writes ask one after another, so the first question is Airflow's start order's
    nominal = simulate_leased(WRITES, RULES, DECIDE, workers=1, handoff_s=2, slot_times=SlotTimes(1, 0))
    assert racing_first_askers(nominal, TABLES_OF) == {}
    race = first_holder_range(play, nominal, TABLES_OF)
    assert race.plays == 1 and race.best is race.worst is nominal


def test_too_many_combinations_vary_one_table_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    writes = [write(f"{t}{i}", 10, 10 - i, table=t) for t in ("t", "u") for i in range(3)]
    tables_of = {w.id: {w.claims[0][0]} for w in writes}

    def played(ask_first: Collection[str] = (), ask_last: Collection[str] = ()) -> Schedule:
        return simulate_leased(writes, RULES, EXCLUSIVE, handoff_s=0, ask_first=ask_first, ask_last=ask_last)

    nominal = played()
    # 9 combinations of first askers, then 2 tables x 6 ordered pairs of a first and a last asker
    assert first_holder_range(played, nominal, tables_of).plays == 1 + 9 + 12
    monkeypatch.setattr(first_holders, "MAX_PLAYS", 8)
    race = first_holder_range(played, nominal, tables_of)
    # 6 first askers one table at a time; 12 pairs are too many: each write asking last, the rest nominal
    assert race.plays == 1 + 6 + 6 and not race.exhaustive


def test_the_race_for_a_freed_slot_widens_the_range() -> None:
    # two slots of the gate: x (t) and y (u) hold them; c queues behind x, s waits only for a slot
    writes = [
        write("x", 10, 4),
        write("y", 30, 3, table="u"),
        write("c", 40, 2, priority=2),
        write("s", 10, 1, table="u"),
    ]
    decide = model(("x", "c"))
    tables_of = {w.id: {w.claims[0][0]} for w in writes}

    def played(slot_first: bool) -> Play:
        def one(ask_first: Collection[str] = (), ask_last: Collection[str] = ()) -> Schedule:
            return simulate_leased(
                writes,
                RULES,
                decide,
                workers=4,
                worker_slots=2,
                handoff_s=1,
                ask_first=ask_first,
                ask_last=ask_last,
                slot_waiters_first=slot_first,
            )

        return one

    queued = first_holder_range(played(False), played(False)(), tables_of)
    raced = first_holder_range(played(True), played(True)(), tables_of)
    both = with_slot_race(queued, raced)
    # queue order: c (40 s) writes from 11; s waits for a slot until y's release (30), one hand-off later
    assert queued.worst.makespan_s == 51
    # s first: c waits for s's release (21) and ends at 22 + 40
    assert raced.worst.makespan_s == 62
    assert both.worst.makespan_s == 62 and both.worst_slot_waiters_first
    assert both.best.makespan_s == 51 and not both.best_slot_waiters_first
    assert both.plays == queued.plays + raced.plays
    assert both.mean_s == (queued.mean_s + raced.mean_s) / 2


def test_a_write_losing_the_race_queues_behind_a_higher_phase_and_the_range_plays_it() -> None:
    # the shape the orchestration benchmark ran into: two OPTIMIZE-like writes (o1, o2, phase 1) that run
    # together, a MERGE m (phase 2) and a MERGE n (phase 0) on m's partition; both OPTIMIZEs conflict
    # with both MERGEs. All four ask at once, Airflow's start order o1, o2, m, n.
    writes = [write("o1", 10, 4, 1), write("o2", 10, 3, 1), write("m", 10, 2, 2), write("n", 10, 1, 0)]
    decide = model(("o1", "m"), ("o1", "n"), ("o2", "m"), ("o2", "n"), ("m", "n"))
    tables_of = {w.id: {"t"} for w in writes}

    def played(ask_first: Collection[str] = (), ask_last: Collection[str] = ()) -> Schedule:
        return simulate_leased(writes, RULES, decide, handoff_s=0, ask_first=ask_first, ask_last=ask_last)

    nominal = played()
    # o1 and o2 together (0-10), m (10-20), then n (20-30)
    assert nominal.makespan_s == 30
    # o2 asking a moment after m: it queues behind m's higher phase, and n (phase 0) behind o2
    late = played(("o1",), ("o2",))
    assert late.starts == {"o1": 0, "m": 10, "o2": 20, "n": 30} and late.makespan_s == 40
    race = first_holder_range(played, nominal, tables_of)
    assert race.worst.makespan_s == 40 and race.worst_last == ("o2",)
