"""Each deltaguard operator on a real Delta table, run by a real Airflow ``dag.test()``."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from tests.airflow.helpers import decision_rows, rows, run_dag, sales_table, task_state, xcom_return

pytestmark = pytest.mark.usefixtures("airflow_db")

OPS = "from deltaguard.operators.dml import *\nfrom deltaguard.operators.maintenance import *\nfrom deltaguard.operators.sql import *"


def test_merge_on_a_partition(tmp_path, lease_store_url) -> None:
    table = sales_table(str(tmp_path / "sales"))
    body = f"""
    DeltaMergeOperator(
        task_id="merge_de",
        table={table!r},
        source=lambda: pa.table({{"id": [2, 4], "country": ["DE", "DE"], "amount": [21, 40]}}),
        condition="t.id = s.id",
        target_partition_values={{"country": "DE"}},
    )
    """
    dag_run = run_dag("merge_dag", body, OPS)
    assert task_state(dag_run, "merge_de") == "success"
    assert [(r["id"], r["amount"]) for r in rows(table)] == [(1, 10), (2, 21), (3, 30), (4, 40)]
    result = xcom_return(dag_run, "merge_de")
    assert result["version"] == 1 and result["operation"] == "MERGE"
    assert (
        result["app_id"] == f"merge_dag/merge_de@{dag_run.run_id}" and "granted at once" in result["decision"]
    )
    commit = DeltaTable(table).history(1)[0]
    assert commit["airflow.dag_id"] == "merge_dag" and commit["airflow.task_id"] == "merge_de"
    assert commit["airflow.run_id"] == dag_run.run_id and commit["lease_id"] == result["lease_id"]
    assert decision_rows(lease_store_url) >= 2  # grant and release were logged


def test_every_operator_in_one_pipeline(tmp_path, lease_store_url) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    seed = tmp_path / "seed.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "country": ["DE", "DE", "FR"], "amount": [10, 20, 30]}), seed)
    table = str(tmp_path / "pipeline")
    body = f"""
    t = {table!r}
    create = DeltaInsertOperator(task_id="create", table=t, source={str(seed)!r}, partition_by=["country"])
    append = DeltaInsertOperator(
        task_id="append_fr", table=t, partition_values={{"country": "FR"}},
        source=lambda: pa.table({{"id": [4], "country": ["FR"], "amount": [40]}}),
    )
    update = DeltaUpdateOperator(task_id="update", table=t, updates={{"amount": "amount * 2"}}, predicate="id = 1")
    delete = DeltaDeleteOperator(task_id="delete", table=t, predicate="id = 3")
    replace = DeltaReplaceWhereOperator(
        task_id="replace_fr", table=t, predicate="country = 'FR'",
        source=lambda: pa.table({{"id": [5], "country": ["FR"], "amount": [50]}}),
    )
    optimize = DeltaOptimizeOperator(task_id="optimize_de", table=t, partition_filters={{"country": "DE"}})
    props = DeltaAlterTableOperator(task_id="props", table=t, set_properties={{"delta.logRetentionDuration": "interval 60 days"}})
    columns = DeltaAlterTableOperator(task_id="add_note", table=t, add_columns={{"note": "string"}})
    sql = DeltaSqlOperator(task_id="sql_delete", table=t, sql="DELETE FROM sales WHERE id = 2")
    create >> append >> update >> delete >> replace >> optimize >> props >> columns >> sql
    """
    dag_run = run_dag("pipeline_dag", body, OPS)
    states = {
        t: task_state(dag_run, t)
        for t in (
            "create",
            "append_fr",
            "update",
            "delete",
            "replace_fr",
            "optimize_de",
            "props",
            "add_note",
            "sql_delete",
        )
    }
    assert set(states.values()) == {"success"}, states
    assert [(r["id"], r["country"], r["amount"], r["note"]) for r in rows(table)] == [
        (1, "DE", 20, None),
        (5, "FR", 50, None),
    ]
    history = {c["version"]: c for c in DeltaTable(table).history()}
    assert history[1]["airflow.task_id"] == "append_fr"
    assert DeltaTable(table).metadata().configuration.get("delta.logRetentionDuration") == "interval 60 days"
    assert xcom_return(dag_run, "sql_delete")["operation"] == "DELETE"
    assert decision_rows(lease_store_url) >= 18  # a grant and a release per task


def test_bad_input_fails_before_any_lease(tmp_path, lease_store_url) -> None:
    table = sales_table(str(tmp_path / "sales"))
    body = f"""
    t = {table!r}
    DeltaDeleteOperator(task_id="bad_scheme", table="ftp://host/t", predicate="id = 1")
    DeltaDeleteOperator(task_id="bad_predicate", table=t, predicate="id = = 3")
    DeltaMergeOperator(task_id="merge_without_on", table=t, source=lambda: pa.table({{"id": [1]}}), condition=" ")
    DeltaInsertOperator(
        task_id="not_a_partition", table=t, partition_values={{"amount": 1}},
        source=lambda: pa.table({{"id": [9], "country": ["DE"], "amount": [1]}}),
    )
    DeltaSqlOperator(task_id="sql_refused", table=t, sql="MERGE INTO t USING other s ON t.id = s.id WHEN MATCHED THEN DELETE")
    """
    dag_run = run_dag("bad_input_dag", body, OPS)
    for task_id in ("bad_scheme", "bad_predicate", "merge_without_on", "not_a_partition", "sql_refused"):
        assert task_state(dag_run, task_id) == "failed", task_id
    assert DeltaTable(table).version() == 0  # nothing written
    assert decision_rows(lease_store_url) == 0  # and no lease was ever asked for


def test_retry_after_commit_does_not_append_twice(tmp_path, lease_store_url) -> None:
    table = sales_table(str(tmp_path / "sales"))
    body = f"""
    class CrashAfterCommit(DeltaInsertOperator):
        def execute(self, context):
            result = super().execute(context)
            if context["ti"].try_number == 1:
                raise RuntimeError("worker died after the commit")
            return result

    CrashAfterCommit(
        task_id="append", table={table!r}, retries=1, retry_delay=dt.timedelta(seconds=0),
        source=lambda: pa.table({{"id": [7], "country": ["DE"], "amount": [70]}}),
    )
    """
    dag_run = run_dag("retry_dag", body, OPS)
    assert task_state(dag_run, "append") == "success"
    assert [r["id"] for r in rows(table)].count(7) == 1
    assert DeltaTable(table).version() == 1
    assert xcom_return(dag_run, "append")["duplicate"] is True
    assert (
        xcom_return(dag_run, "append")["app_version"] == 0
    )  # max_tries - retries from Airflow: never cleared


def test_waiting_deferred_in_worker_and_timeout(tmp_path, lease_store_url) -> None:
    table = sales_table(str(tmp_path / "sales"))
    body = f"""
    t = {table!r}

    @task
    def hold(waiter, until="appears"):
        return hold_lease_until_waiter(t, waiter, until)

    def append(task_id, **kwargs):
        return DeltaInsertOperator(
            task_id=task_id, table=t, trigger_rule="all_done",
            source=lambda: pa.table({{"id": [8], "country": ["FR"], "amount": [80]}}), **kwargs,
        )

    (
        hold.override(task_id="hold1")("deferred")
        >> append("deferred", deferrable=True)
        >> hold.override(task_id="hold2", trigger_rule="all_done")("in_worker")
        >> append("in_worker", deferrable=False)
        >> hold.override(task_id="hold3", trigger_rule="all_done")("timeout", "withdrawn")
        >> append("timeout", deferrable=False, lease_wait_timeout=1)
    )
    """
    imports = (
        OPS + "\nfrom airflow.sdk import task\nfrom tests.airflow.helpers import hold_lease_until_waiter"
    )
    dag_run = run_dag("waiting_dag", body, imports)
    for task_id in ("deferred", "in_worker"):
        assert task_state(dag_run, task_id) == "success", task_id
        result = xcom_return(dag_run, task_id)
        assert result["waited_s"] >= 1 and result["waited_behind"] == ["maintenance"], result
        assert result["decision"].startswith("deltaguard: waited") and "maintenance" in result["decision"]
    assert task_state(dag_run, "timeout") == "failed"
    # the deferred and in-worker appends committed once each, the timed-out one never
    assert [r["id"] for r in rows(table)].count(8) == 2
