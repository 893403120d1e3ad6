"""Operators release their engine when the task ends: after a commit, after a failed write, after bad input.

The engine is a real delta-rs engine that records ``close()`` (:mod:`tests.airflow.recording_engine`); the
Spark engine's own release (what it stops, what it leaves to its owner) is tested against real PySpark in
``tests/spark/test_engine_close.py`` and over Spark Connect in ``tests/spark/jars/test_spark_connect_delta.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.airflow.helpers import decision_rows, run_dag, sales_table, task_state
from tests.airflow.recording_engine import LOG_ENV, events

pytestmark = pytest.mark.usefixtures("airflow_db")

ENGINE = "tests.airflow.recording_engine:RecordingEngine"
OPS = "from deltaguard.operators.dml import *"


def test_engine_closed_after_success_failed_write_and_bad_input(
    tmp_path: Path, lease_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "engines.log"
    monkeypatch.setenv(LOG_ENV, str(log))
    table = sales_table(str(tmp_path / "sales"))
    broken = sales_table(str(tmp_path / "fail-write"))
    body = f"""
    DeltaDeleteOperator(task_id="commits", table={table!r}, predicate="id = 1", engine={ENGINE!r})
    DeltaDeleteOperator(task_id="write_fails", table={broken!r}, predicate="id = 1", engine={ENGINE!r})
    DeltaDeleteOperator(task_id="bad_input", table={table!r}, predicate="id = = 3", engine={ENGINE!r})
    """
    dag_run = run_dag("engine_release_dag", body, OPS)
    assert task_state(dag_run, "commits") == "success"
    assert task_state(dag_run, "write_fails") == "failed"
    assert task_state(dag_run, "bad_input") == "failed"
    assert DeltaTable(table).version() == 1 and DeltaTable(broken).version() == 0
    assert decision_rows(lease_store_url) > 0  # the failed write did hold a lease
    seen = events(log)
    # one engine per task try, each closed exactly once, after it was created
    assert len(seen) == 3, seen
    assert all(history == ["created", "closed"] for history in seen.values()), seen


def test_admission_sensor_closes_the_engine_it_read_the_table_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltaguard.sensors.admission import DeltaAdmissionSensor

    log = tmp_path / "engines.log"
    monkeypatch.setenv(LOG_ENV, str(log))
    table = sales_table(str(tmp_path / "sales"))
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    sensor = DeltaAdmissionSensor(
        task_id="gate", table=table, operation="optimize", engine=ENGINE, lease_store_url=url
    )
    assert sensor.poke({}).is_done is True
    assert sensor.poke({}).is_done is True
    seen = events(log)
    assert len(seen) == 2 and all(history == ["created", "closed"] for history in seen.values()), seen
