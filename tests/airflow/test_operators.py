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
    assert result["app_id"] == "merge_dag.merge_de" and "granted at once" in result["decision"]
    commit = DeltaTable(table).history(1)[0]
    assert commit["airflow.dag_id"] == "merge_dag" and commit["airflow.task_id"] == "merge_de"
    assert commit["airflow.run_id"] == dag_run.run_id and commit["lease_id"] == result["lease_id"]
    assert decision_rows(lease_store_url) >= 2  # grant and release were logged
