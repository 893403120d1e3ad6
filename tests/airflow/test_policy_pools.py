"""Cluster policy routing and pool sync (the sync through a real ``airflow pools`` CLI on a temp home)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deltaguard.pools import (
    PoolsConfig,
    desired_pools,
    load_pools_config,
    parse_pools_config,
    pool_name,
    task_table_key,
)


@pytest.fixture
def pools_file(tmp_path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "pools.json"
    path.write_text(
        json.dumps(
            {
                "default_slots": 6,
                "tables": {"/data/sales": {"slots": 4}, "/data/ids": {"slots": 3, "identity_columns": True}},
            }
        )
    )
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__POOLS_FILE", str(path))
    return path


def test_pool_names_and_keys() -> None:
    assert task_table_key("file:///data/sales/", None) == "/data/sales"
    assert task_table_key("sales/daily", "lake") == "lake/sales/daily"
    assert task_table_key("{{ params.t }}", None) is None
    assert pool_name("/data/sales") == "delta_data_sales"
    long_a, long_b = pool_name("/x/" + "a" * 300), pool_name("/y/" + "a" * 300)
    assert len(long_a) <= 200 and long_a != long_b
    with pytest.raises(ValueError, match="slots must be a positive integer"):
        parse_pools_config({"tables": {"/t": {"slots": 0}}})
    with pytest.raises(ValueError, match="unknown settings"):
        parse_pools_config({"tables": {"/t": {"slotz": 2}}})


def test_policy_routes_tasks_and_gives_exclusive_ops_all_slots(pools_file) -> None:
    from deltaguard.operators.dml import DeltaInsertOperator, DeltaMergeOperator
    from deltaguard.operators.maintenance import DeltaAlterTableOperator, DeltaOptimizeOperator
    from deltaguard.operators.sql import DeltaSqlOperator
    from deltaguard.pools.policy import task_policy

    merge = DeltaMergeOperator(task_id="m", table="/data/sales", source="/s.parquet", condition="t.id = s.id")
    alter = DeltaAlterTableOperator(task_id="a", table="/data/sales", add_columns={"x": "string"})
    sql_alter = DeltaSqlOperator(
        task_id="s", table="/data/sales", sql="ALTER TABLE t SET TBLPROPERTIES ('a'='b')"
    )
    overwrite = DeltaInsertOperator(task_id="o", table="/data/other", source="/s.parquet", mode="overwrite")
    optimize = DeltaOptimizeOperator(task_id="z", table="/data/ids")
    chosen = DeltaOptimizeOperator(task_id="c", table="/data/sales", pool="my_pool")
    templated = DeltaOptimizeOperator(task_id="t", table="{{ params.table }}")
    for task in (merge, alter, sql_alter, overwrite, optimize, chosen, templated):
        task_policy(task)
    assert (merge.pool, merge.pool_slots) == ("delta_data_sales", 1)
    assert (alter.pool, alter.pool_slots) == ("delta_data_sales", 4)
    assert (sql_alter.pool, sql_alter.pool_slots) == ("delta_data_sales", 4)
    assert (overwrite.pool, overwrite.pool_slots) == ("delta_data_other", 6)  # default size from the file
    assert (optimize.pool, optimize.pool_slots) == (
        "delta_data_ids",
        3,
    )  # identity columns: all writes exclusive
    assert chosen.pool == "my_pool"
    assert templated.pool == "default_pool"


def test_sql_with_schema_evolution_gets_its_tables_pool_to_itself(pools_file) -> None:
    """A MERGE that may add columns is a metadata change (ADR 0035): every concurrent write fails on it."""
    from deltaguard.operators.sql import DeltaSqlOperator
    from deltaguard.pools.policy import task_policy

    merge = (
        "MERGE {}INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    evolving = DeltaSqlOperator(task_id="e", table="/data/sales", sql=merge.format("WITH SCHEMA EVOLUTION "))
    plain = DeltaSqlOperator(task_id="p", table="/data/sales", sql=merge.format(""))
    for task in (evolving, plain):
        task_policy(task)
    assert (evolving.pool, evolving.pool_slots) == ("delta_data_sales", 4)
    assert (plain.pool, plain.pool_slots) == ("delta_data_sales", 1)


def test_desired_pools_merge_file_and_scan(pools_file) -> None:
    config = load_pools_config(pools_file)
    pools = desired_pools(config, {"/data/sales", "lake/events"})
    assert [(p.name, p.slots) for p in pools] == [
        ("delta_data_ids", 3),
        ("delta_data_sales", 4),
        ("delta_lake_events", 6),
    ]
    assert desired_pools(PoolsConfig()) == []


def test_pools_sync_through_the_airflow_cli(tmp_path, pools_file) -> None:
    """``deltaguard pools sync`` against a real ``airflow pools`` CLI on a private, migrated home."""
    from tests.airflow.conftest import _migrated_template

    home = tmp_path / "home"
    home.mkdir()
    db = home / "airflow.db"
    db.write_bytes(_migrated_template().read_bytes())
    env = dict(
        os.environ,
        AIRFLOW_HOME=str(home),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{db}",
        AIRFLOW__DELTAGUARD__POOLS_FILE=str(pools_file),
    )
    deltaguard = [sys.executable, "-m", "deltaguard.cli"]
    done = subprocess.run(
        [*deltaguard, "pools", "sync"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    airflow = str(Path(sys.executable).with_name("airflow"))
    listed = subprocess.run(
        [airflow, "pools", "list", "--output", "json"], env=env, capture_output=True, text=True, timeout=300
    )
    # log lines may precede the JSON on stdout: take the line that is the JSON list
    document = next(line for line in listed.stdout.splitlines() if line.startswith("[{"))
    pools = {p["pool"]: p for p in json.loads(document)}
    assert int(pools["delta_data_sales"]["slots"]) == 4 and int(pools["delta_data_ids"]["slots"]) == 3
    assert str(pools["delta_data_sales"]["include_deferred"]).lower() == "false"


def test_dag_scan_finds_deltaguard_tables(tmp_path) -> None:
    from deltaguard.pools import scan_dag_tables

    (tmp_path / "pipeline.py").write_text(
        "import datetime as dt\n"
        "from airflow.sdk import DAG\n"
        "from deltaguard.operators.maintenance import DeltaOptimizeOperator\n"
        "with DAG(dag_id='scan_me', schedule=None, start_date=dt.datetime(2026, 1, 1)):\n"
        "    DeltaOptimizeOperator(task_id='a', table='file:///data/sales')\n"
        "    DeltaOptimizeOperator(task_id='b', table='events', delta_conn_id='lake')\n"
        "    DeltaOptimizeOperator(task_id='c', table='{{ params.t }}')\n"
    )
    assert scan_dag_tables(tmp_path) == {"/data/sales", "lake/events"}
    (tmp_path / "broken.py").write_text("from airflow.sdk import DAG\nraise ImportError('boom')\n")
    with pytest.raises(RuntimeError, match=r"broken\.py"):
        scan_dag_tables(tmp_path)
