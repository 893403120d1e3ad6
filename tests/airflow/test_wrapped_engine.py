"""A wrapped operator's lease claim names the engine and commit coordinator of what the operator is.

Without ``engine=``, a ``SparkSubmitOperator`` used to be stored and judged as the ``delta`` connection's
delta-rs with the ``storage`` coordinator, so two spark-submit jobs on one table were admitted together
although each commits through its own driver (ADR 0026).
"""

from __future__ import annotations

from typing import Any

import pytest
from airflow.sdk import BaseOperator

from deltaguard.core.admission import Granted, LeaseRequest, Owner, Waiting
from deltaguard.core.profiles import SINGLE_DRIVER_COORDINATION, STORAGE_COORDINATION, EngineName
from deltaguard.leases.manager import LeaseManager
from deltaguard.operators import wrapped_engine
from tests.airflow.helpers import sales_table, task_context


class Opaque(BaseOperator):
    """An operator deltaguard knows nothing about."""

    def execute(self, context: Any) -> None:
        return None


def _claim(operator: BaseOperator, table: str, **kwargs: Any) -> Any:
    from deltaguard.operators.leased import with_delta_lease

    wrapper = with_delta_lease(operator, tables=table, operation="INSERT", **kwargs)
    (claim,) = wrapper._claims(task_context(wrapper.task_id))
    return claim


def _spark_submit(task_id: str) -> BaseOperator:
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    return SparkSubmitOperator(task_id=task_id, application="/jobs/load.py")


def test_a_spark_submit_job_is_a_delta_spark_driver_of_its_own(tmp_path) -> None:
    table = sales_table(str(tmp_path / "sales"))
    claim = _claim(_spark_submit("load"), table)
    assert claim.profile.name is EngineName.DELTA_SPARK
    assert claim.profile.commit_coordination == f"{SINGLE_DRIVER_COORDINATION}:wrapped:adhoc_airflow/load@r1"


def test_two_spark_submit_jobs_on_one_table_are_not_admitted_together(tmp_path) -> None:
    """Two blind appends through different drivers: the second waits (they commit through different log
    store instances on a local table)."""
    table = sales_table(str(tmp_path / "sales"))
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}")
    try:
        first = manager.acquire(
            LeaseRequest(claims=[_claim(_spark_submit("a"), table)], owner=Owner(task_id="a"))
        )
        second = manager.acquire(
            LeaseRequest(claims=[_claim(_spark_submit("b"), table)], owner=Owner(task_id="b"))
        )
    finally:
        manager.store.close()
    assert isinstance(first, Granted)
    assert isinstance(second, Waiting)


def test_a_databricks_operator_without_a_runtime_is_judged_as_the_strictest_databricks(tmp_path) -> None:
    from airflow.providers.databricks.operators.databricks_sql import DatabricksSqlOperator

    table = sales_table(str(tmp_path / "sales"))
    claim = _claim(DatabricksSqlOperator(task_id="load", sql="INSERT INTO t VALUES (1)"), table)
    assert claim.profile.name is EngineName.DATABRICKS
    assert claim.profile.row_level_off
    assert not claim.profile.at_least(13, 3)
    # Databricks on local/HDFS-like storage commits through the storage's put-if-absent (ADR 0026)
    assert claim.profile.commit_coordination == STORAGE_COORDINATION


def test_a_declared_databricks_runtime_wins(tmp_path) -> None:
    from airflow.providers.databricks.operators.databricks_sql import DatabricksSqlOperator

    table = sales_table(str(tmp_path / "sales"))
    op = DatabricksSqlOperator(task_id="load", sql="INSERT INTO t VALUES (1)")
    claim = _claim(op, table, databricks_runtime="15.4")
    assert (claim.profile.name, claim.profile.version, claim.profile.row_level_off) == (
        EngineName.DATABRICKS,
        "15.4",
        False,
    )


def test_an_unknown_operator_is_judged_strictly_with_a_coordinator_of_its_own(tmp_path) -> None:
    table = sales_table(str(tmp_path / "sales"))
    claim = _claim(Opaque(task_id="mystery"), table)
    assert claim.profile.name is EngineName.DELTA_SPARK
    assert claim.profile.commit_coordination == (
        f"{SINGLE_DRIVER_COORDINATION}:unknown-engine:adhoc_airflow/mystery@r1"
    )
    # a declared engine is taken at its word
    assert _claim(Opaque(task_id="rs"), table, engine="delta-rs").profile.name is EngineName.DELTA_RS


def test_an_unknown_operator_never_runs_beside_a_delta_rs_append(tmp_path) -> None:
    table = sales_table(str(tmp_path / "sales"))
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}")
    try:
        rs = _claim(Opaque(task_id="rs"), table, engine="delta-rs")
        first = manager.acquire(LeaseRequest(claims=[rs], owner=Owner(task_id="rs")))
        second = manager.acquire(
            LeaseRequest(claims=[_claim(Opaque(task_id="x"), table)], owner=Owner(task_id="x"))
        )
    finally:
        manager.store.close()
    assert isinstance(first, Granted)
    assert isinstance(second, Waiting)


@pytest.mark.parametrize(
    ("conn_type", "kind"),
    [
        ("spark", wrapped_engine.SPARK_DRIVER),
        ("spark_connect", wrapped_engine.SPARK_DRIVER),
        ("databricks", wrapped_engine.DATABRICKS),
        ("postgres", wrapped_engine.UNKNOWN),
        (None, wrapped_engine.UNKNOWN),
    ],
)
def test_a_sql_operator_is_judged_by_its_connection(conn_type: str | None, kind: str) -> None:
    from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

    op = SQLExecuteQueryOperator(task_id="q", conn_id="warehouse", sql="INSERT INTO t VALUES (1)")
    found, _why = wrapped_engine.wrapped_engine_kind(op, declared=False, conn_type=lambda _c: conn_type)
    assert found == kind


def test_a_sql_operator_on_a_spark_connection_gets_the_task_s_own_driver(tmp_path, monkeypatch) -> None:
    from airflow.providers.common.sql.operators.sql import SQLExecuteQueryOperator

    monkeypatch.setenv("AIRFLOW_CONN_THRIFT", "spark://spark-master:7077")
    table = sales_table(str(tmp_path / "sales"))
    op = SQLExecuteQueryOperator(task_id="q", conn_id="thrift", sql="INSERT INTO t VALUES (1)")
    claim = _claim(op, table)
    assert claim.profile.name is EngineName.DELTA_SPARK
    assert claim.profile.commit_coordination.startswith(f"{SINGLE_DRIVER_COORDINATION}:wrapped:")
