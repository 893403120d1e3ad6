"""The plan orders the run as the priority policy does, from what the policy can read at parse time."""

from __future__ import annotations

import dataclasses

from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.priority import DEFAULT_EXPECTED_S
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.planning.analysis import PlannedTask, TableSetting, Target, build_plan
from deltaguard.planning.leased_run import SlotTimes

PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")
SETTINGS = {"t": TableSetting(TableConfig(uri="t"), "assumed", "", PROFILE)}


def update(name: str, seconds: float, source: str) -> PlannedTask:
    # an UPDATE of every row: any two conflict
    return PlannedTask(
        name, name, (Target("t", Operation(OperationKind.UPDATE, label=name)),), seconds, source
    )


def test_a_duration_known_only_from_the_decision_log_does_not_order_the_start() -> None:
    # `recorded` declares nothing: dag_policy weighs it by the default (60 s), above `declared`'s 30 s, so
    # Airflow starts it first and it holds the table first; the plan still plays its recorded 13 s
    assert DEFAULT_EXPECTED_S > 30
    tasks = [update("declared", 30, "declared"), update("recorded", 13, "recorded")]
    played = build_plan("d", tasks, SETTINGS, handoff_s=0, slot_times=SlotTimes(0, 0)).schedules["deltaguard"]
    assert played.starts["recorded"] == 0
    assert played.ends["recorded"] == 13 and played.starts["declared"] == 13


def test_a_write_lets_the_tasks_the_policy_named_ask_first_whatever_its_lease_priority() -> None:
    """``asks_after`` is what ``dag_policy`` set on the parsed task; the policy also sets the lease priority,
    so a write of a middle phase carries both. Played first in the race for the table, ``z`` is held until
    ``m`` has asked, so no play puts ``z`` ahead."""
    m = update("m", 30, "declared")
    z = dataclasses.replace(update("z", 20, "declared"), lease_priority=2, asks_after=("m",))
    after_z = PlannedTask("n", "n", (), 30, "other task", ("z",))  # z first would end the run sooner
    times = SlotTimes(1, 0)
    unheld = dataclasses.replace(z, asks_after=())
    free = build_plan("d", [m, unheld, after_z], SETTINGS, slot_times=times)
    held = build_plan("d", [m, z, after_z], SETTINGS, slot_times=times, phase_wait_s=5)
    assert free.race is not None and held.race is not None
    assert free.race.best.ends["z"] < free.race.best.ends["m"]
    assert all(play.ends["m"] < play.ends["z"] for play in (held.race.best, held.race.worst))
