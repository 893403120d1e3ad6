"""The priority ``dag_policy`` is on in every install: Airflow's own policy plugin manager loads it from the
``airflow.policy`` entry point, and ``[deltaguard] priority_policy = False`` turns it off at call time."""

from __future__ import annotations

import configparser
from pathlib import Path
from typing import Any

import pytest

SETUP_CFG = Path(__file__).resolve().parents[2] / "setup.cfg"


def _policy_manager() -> Any:
    """A fresh copy of Airflow's policy plugin manager, loaded the way Airflow loads it."""
    import pluggy
    from airflow import policies, settings

    manager = pluggy.PluginManager(policies.local_settings_hookspec.project_name)
    manager.add_hookspecs(policies)
    manager.register(policies.DefaultPolicy)
    settings.load_policy_plugins(manager)
    return manager


def _dag() -> Any:
    from airflow.sdk import DAG

    from deltaguard.operators.dml import DeltaUpdateOperator

    with DAG("entry_point_probe", schedule=None) as dag:
        for i in range(3):  # three UPDATEs of one partition: one chain of 3 x 20 s
            DeltaUpdateOperator(
                task_id=f"u{i}",
                table="/tmp/entry_point_probe",
                updates={"v": "v + 1"},
                predicate="p = 'a'",
                expected_duration=20,
            )
    return dag


def test_the_entry_point_is_declared_in_setup_cfg() -> None:
    parser = configparser.ConfigParser()
    parser.read(SETUP_CFG)
    declared = parser.get("options.entry_points", "airflow.policy")
    assert "deltaguard = deltaguard.pools.entry_point" in declared


def test_airflows_policy_manager_applies_the_priority_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__DELTAGUARD__PRIORITY_POLICY", raising=False)
    manager = _policy_manager()
    assert any(impl.plugin_name == "deltaguard" for impl in manager.hook.dag_policy.get_hookimpls())
    dag = _dag()
    manager.hook.dag_policy(dag=dag)
    assert sorted(t.priority_weight for t in dag.tasks) == [60, 61, 62]


def test_the_switch_turns_it_off_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    manager = _policy_manager()  # loaded while the policy is on
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__PRIORITY_POLICY", "False")
    dag = _dag()
    manager.hook.dag_policy(dag=dag)
    assert [t.priority_weight for t in dag.tasks] == [1, 1, 1]
