"""The plan orders the run as the priority policy does, from what the policy can read at parse time."""

from __future__ import annotations

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
