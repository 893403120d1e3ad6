"""The harness's pieces that need no running Airflow: home preparation, process tracking, run analysis."""

from __future__ import annotations

import configparser
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from benchmarks.harness.airflow_api import TaskInstanceRecord, parse_timestamp
from benchmarks.harness.airflow_runner import descendants, prepare_home, stack_processes
from benchmarks.harness.run_analysis import Commit, WriteRecord, run_makespan, upstream_closure


def test_prepare_home_writes_a_local_executor_sqlite_config(tmp_path: Path) -> None:
    home = prepare_home(tmp_path / "home", parallelism=6, port=18080, options={"core": {"parallelism": "7"}})
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(home.home / "airflow.cfg")
    assert cfg["core"]["executor"] == "LocalExecutor"
    assert cfg["core"]["parallelism"] == "7"  # caller options win
    # LocalExecutor does not hold the scheduler to parallelism (apache/airflow#71914): the pool does
    assert cfg["core"]["default_pool_task_slot_count"] == "7"
    assert cfg["core"]["load_examples"] == "False"
    assert cfg["database"]["sql_alchemy_conn"] == f"sqlite:///{home.home / 'airflow.db'}"
    assert cfg["core"]["execution_api_server_url"] == "http://127.0.0.1:18080/execution/"
    assert cfg["deltaguard"]["lease_store_url"] == home.lease_store_url
    assert Path(cfg["core"]["dags_folder"]).name == "dags_examples"
    password = home.admin_password()
    assert len(password) >= 12
    # preparing again keeps the password (the UI login stays valid) but rewrites the config
    again = prepare_home(tmp_path / "home", port=18081)
    assert again.admin_password() == password
    assert "18081" in (again.home / "airflow.cfg").read_text()
    assert (again.home / "config" / "airflow_local_settings.py").exists()
    env = again.env()
    assert env["AIRFLOW_HOME"] == str(again.home) and not any(k.startswith("AIRFLOW__") for k in env)


def test_prepare_home_can_leave_airflow_cfg_to_airflow(tmp_path: Path) -> None:
    home = prepare_home(tmp_path / "home", port=18082, generated=True, options={"core": {"parallelism": "7"}})
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(home.home / "airflow.cfg")
    # Airflow wrote the file: every default, deltaguard's section from the provider info included
    assert cfg["operators"]["default_deferrable"] == "false"
    assert cfg["deltaguard"]["lease_store_url"] == home.lease_store_url
    assert cfg["deltaguard"]["heartbeat_interval"] == ""
    assert "Written by benchmarks.harness" not in (home.home / "airflow.cfg").read_text()
    # the harness's settings reach Airflow from the environment only
    env = home.env()
    assert home.generated
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert env["AIRFLOW__CORE__PARALLELISM"] == "7"  # caller options win
    assert env["AIRFLOW__CORE__DEFAULT_POOL_TASK_SLOT_COUNT"] == "7"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:18082/execution/"
    assert env["AIRFLOW__DELTAGUARD__LEASE_TTL"] == "60"
    assert not [k for k in env if k.startswith(("AIRFLOW__OPERATORS__", "AIRFLOW__DELTAGUARD__POLL"))]


def test_prepare_home_refuses_a_serial_setup(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 4"):
        prepare_home(tmp_path / "home", parallelism=2)
    with pytest.raises(ValueError, match="does not exist"):
        prepare_home(tmp_path / "home", tmp_path / "missing")


def test_process_tracking_finds_children_in_their_own_session(tmp_path: Path) -> None:
    home = tmp_path / "home"
    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], start_new_session=True); time.sleep(30)"
    parent = subprocess.Popen([sys.executable, "-c", code], env={"AIRFLOW_HOME": str(home), "PATH": ""})
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(descendants([parent.pid])) < 2:
            time.sleep(0.1)
        tree = descendants([parent.pid])
        assert len(tree) == 2 and parent.pid in tree
        assert set(stack_processes(home)) == set(tree)
    finally:
        for pid in descendants([parent.pid]):
            subprocess.run(["kill", "-9", str(pid)], check=False)
        parent.wait(timeout=10)


def _ti(task_id: str, start: float, end: float) -> TaskInstanceRecord:
    origin = datetime(2026, 11, 21, tzinfo=UTC)
    return TaskInstanceRecord(
        task_id, -1, "success", 1, origin + timedelta(seconds=start), origin + timedelta(seconds=end)
    )


def test_write_interval_is_commit_time_minus_engine_time() -> None:
    commit = Commit(3, "MERGE", datetime(2026, 11, 21, 0, 0, 30, tzinfo=UTC), 2, {"airflow.task_id": "m"})
    record = WriteRecord("m", "/t", _ti("m", 10, 31), commit, elapsed_s=12.5)
    assert record.write_start == datetime(2026, 11, 21, 0, 0, 17, 500000, tzinfo=UTC)
    assert record.write_end == commit.at
    assert WriteRecord("m", "/t", _ti("m", 10, 31), commit, elapsed_s=None).write_start is None


def test_upstream_closure_is_transitive() -> None:
    closure = upstream_closure({"a": ["b"], "b": ["c", "d"], "c": [], "d": [], "e": []})
    assert closure["c"] == {"a", "b"} and closure["d"] == {"a", "b"}
    assert closure["a"] == set() and closure["e"] == set()


def test_makespan_and_timestamps() -> None:
    assert run_makespan([_ti("a", 0, 10), _ti("b", 5, 42)]) == 42
    assert run_makespan([]) == 0.0
    assert parse_timestamp("2026-11-21T00:00:00Z") == datetime(2026, 11, 21, tzinfo=UTC)
    assert parse_timestamp(None) is None
