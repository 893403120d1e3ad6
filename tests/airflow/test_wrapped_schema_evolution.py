"""A wrapped Spark or Databricks job whose own conf turns on Delta's schema auto-merge is judged as a schema
change (ADR 0035).

Under ``spark.databricks.delta.schema.autoMerge.enabled`` its MERGE or INSERT may add columns as it commits,
which fails every concurrent write (measured on delta-spark 4.4.0). Before, a ``SparkSubmitOperator`` with
that conf, declared as a MERGE of one partition, was admitted beside a MERGE of another.
"""

from __future__ import annotations

from typing import Any

import pytest
from airflow.sdk import BaseOperator

from deltaguard.core.admission import Granted, LeaseRequest, Owner, Waiting
from deltaguard.leases.manager import LeaseManager
from deltaguard.operators.wrapped_schema import AUTO_MERGE_KEY, auto_merge_source
from tests.airflow.helpers import sales_table, task_context


def _claim(operator: BaseOperator, table: str, operation: str = "MERGE", **kwargs: Any) -> Any:
    from deltaguard.operators.leased import with_delta_lease

    wrapper = with_delta_lease(operator, tables=table, operation=operation, **kwargs)
    (claim,) = wrapper._claims(task_context(wrapper.task_id))
    return claim


def _spark_submit(task_id: str, conf: dict[str, Any] | None = None) -> BaseOperator:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    return SparkSubmitOperator(task_id=task_id, application="/jobs/merge.py", conf=conf)


def test_spark_submit_with_auto_merge_is_judged_as_a_schema_change(tmp_path) -> None:
    table = sales_table(str(tmp_path / "sales"))
    claim = _claim(_spark_submit("merge", {AUTO_MERGE_KEY: "true"}), table, predicate="country = 'DE'")
    assert claim.operation.evolves_schema
    assert claim.operation.changes_metadata
    plain = _claim(_spark_submit("plain", {AUTO_MERGE_KEY: "false"}), table, predicate="country = 'DE'")
    assert not plain.operation.evolves_schema


def test_an_insert_under_auto_merge_waits_for_blind_appends(tmp_path) -> None:
    """Two blind appends run side by side; a third whose job may add columns waits (without the conf it
    is admitted with them)."""
    table = sales_table(str(tmp_path / "sales"))
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}")

    def ask(task_id: str, conf: dict[str, Any] | None = None) -> Any:
        claim = _claim(_spark_submit(task_id, conf), table, operation="INSERT", engine="delta-rs")
        return manager.acquire(LeaseRequest(claims=[claim], owner=Owner(task_id=task_id)))

    try:
        first, second = ask("a"), ask("b")
        evolving = ask("c", {AUTO_MERGE_KEY: True})
    finally:
        manager.store.close()
    assert isinstance(first, Granted)
    assert isinstance(second, Granted)
    assert isinstance(evolving, Waiting)
    assert any("schema" in reason for reason in evolving.reasons), evolving


def test_update_and_delete_are_not_made_schema_changes(tmp_path) -> None:
    table = sales_table(str(tmp_path / "sales"))
    claim = _claim(
        _spark_submit("upd", {AUTO_MERGE_KEY: "true"}), table, operation="UPDATE", predicate="country = 'DE'"
    )
    assert not claim.operation.evolves_schema


@pytest.mark.parametrize(
    "build",
    [
        lambda: __import__(
            "airflow.providers.apache.spark.operators.spark_sql", fromlist=["x"]
        ).SparkSqlOperator(task_id="q", sql="SELECT 1", conf=f"spark.executor.cores=1,{AUTO_MERGE_KEY}=true"),
        lambda: __import__(
            "airflow.providers.databricks.operators.databricks", fromlist=["x"]
        ).DatabricksSubmitRunOperator(
            task_id="d",
            new_cluster={"spark_version": "15.4.x-scala2.12", "spark_conf": {AUTO_MERGE_KEY: "true"}},
            spark_python_task={"python_file": "dbfs:/jobs/merge.py"},
        ),
        lambda: __import__(
            "airflow.providers.databricks.operators.databricks_sql", fromlist=["x"]
        ).DatabricksSqlOperator(
            task_id="w",
            sql="MERGE INTO t USING s ON t.id = s.id",
            session_configuration={AUTO_MERGE_KEY: "TRUE"},
        ),
        lambda: __import__(
            "airflow.providers.databricks.operators.databricks", fromlist=["x"]
        ).DatabricksRunNowOperator(
            task_id="n", job_id=1, spark_submit_params=["--conf", f"{AUTO_MERGE_KEY}=true"]
        ),
    ],
    ids=["spark-sql-conf-string", "databricks-cluster-spark-conf", "sql-warehouse-session", "run-now-params"],
)
def test_the_switch_is_found_where_the_spark_and_databricks_operators_carry_it(build) -> None:
    operator = build()
    source = auto_merge_source(operator)
    assert source is not None and AUTO_MERGE_KEY in source


def test_settings_without_the_switch_are_not_flagged() -> None:
    assert auto_merge_source(_spark_submit("x", {"spark.executor.memory": "1g"})) is None
    assert auto_merge_source(_spark_submit("y", {AUTO_MERGE_KEY: "false"})) is None
    assert auto_merge_source(_spark_submit("z")) is None
