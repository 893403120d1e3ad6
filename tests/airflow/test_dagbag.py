"""The example DAGs parse in a real Airflow DagBag with no import errors, and are shaped as documented.

The DagBag is built in a subprocess with its own ``AIRFLOW_HOME`` (prepared by the harness), so this test
neither reads nor writes the developer's ``~/airflow`` and does not depend on what other tests configured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.harness.airflow_runner import default_dags_folder, prepare_home

# Like the dag-processor does for a bundle, put the DAGs folder on sys.path (the DAGs share a module).
PROBE = """
import json
import sys
sys.path.insert(0, {folder!r})
from airflow.dag_processing.dagbag import DagBag
from deltaguard.operators.base import DeltaWriteOperator

def leased(task):
    if not hasattr(task, "delta_lease_targets"):
        return None
    return sorted([x.table, x.operation.kind.value] for x in task.delta_lease_targets())

bag = DagBag(dag_folder={folder!r})
out = {{"import_errors": {{k: v[-300:] for k, v in bag.import_errors.items()}}, "dags": {{}}}}
for dag_id, dag in bag.dags.items():
    out["dags"][dag_id] = {{
        "tasks": {{
            t.task_id: {{
                "deltaguard": isinstance(t, DeltaWriteOperator),
                "table": getattr(t, "table", None),
                "pool": t.pool,
                "retries": t.retries,
                "upstream": sorted(t.upstream_task_ids),
                "type": type(t).__name__,
                "wrapped": type(getattr(t, "operator", None)).__name__,
                "leased": leased(t),
            }}
            for t in dag.tasks
        }}
    }}
print("RESULT" + json.dumps(out))
"""

WRITE_TASKS = {
    "merge_sales_de",
    "merge_sales_fr",
    "merge_sales_it",
    "merge_sales_es",
    "log_events_orders",
    "log_events_shipments",
    "upsert_customers",
    "update_customer_tiers",
    "delete_closed_customers",
    "add_loyalty_column",
    "optimize_sales",
}


@pytest.fixture(scope="module")
def dagbag(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("dagbag")
    home = prepare_home(root / "airflow_home", data_dir=root / "data")
    folder = str(default_dags_folder())
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(folder=folder)],
        env=home.env(),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(x for x in result.stdout.splitlines() if x.startswith("RESULT"))
    return json.loads(line.removeprefix("RESULT")) | {"data_dir": str(root / "data")}


def test_example_dags_parse_without_import_errors(dagbag: dict) -> None:
    assert dagbag["import_errors"] == {}
    assert {"deltaguard_daily_sales", "conventional_daily_sales"} <= set(dagbag["dags"])


def test_both_variants_have_the_same_writes(dagbag: dict) -> None:
    for dag_id in ("deltaguard_daily_sales", "conventional_daily_sales"):
        tasks = dagbag["dags"][dag_id]["tasks"]
        assert set(tasks) == {"setup_tables", *WRITE_TASKS}, dag_id
        assert all(tasks[t]["upstream"] for t in WRITE_TASKS), "every write waits for the tables to exist"
        assert tasks["optimize_sales"]["upstream"] == sorted(t for t in WRITE_TASKS if t.startswith("merge_"))


def test_deltaguard_variant_uses_operators_on_tables_under_the_data_dir(dagbag: dict) -> None:
    tasks = dagbag["dags"]["deltaguard_daily_sales"]["tasks"]
    for task_id in WRITE_TASKS:
        assert tasks[task_id]["deltaguard"], task_id
        assert tasks[task_id]["retries"] == 0, "conflicts are avoided, not retried"
        assert Path(tasks[task_id]["table"]).is_relative_to(Path(dagbag["data_dir"]) / "deltaguard")
    assert not tasks["setup_tables"]["deltaguard"]


def test_conventional_variant_serializes_each_table_through_its_pool(dagbag: dict) -> None:
    tasks = dagbag["dags"]["conventional_daily_sales"]["tasks"]
    assert not any(t["deltaguard"] for t in tasks.values())
    pools = {task_id: tasks[task_id]["pool"] for task_id in WRITE_TASKS}
    assert {pools[t] for t in WRITE_TASKS if t.startswith("merge_") or t == "optimize_sales"} == {
        "conventional_sales_fact"
    }
    assert {pools[t] for t in WRITE_TASKS if t.startswith("log_events")} == {"conventional_events"}
    customer_tasks = (
        "upsert_customers",
        "update_customer_tiers",
        "delete_closed_customers",
        "add_loyalty_column",
    )
    assert {pools[t] for t in customer_tasks} == {"conventional_customers"}


def test_the_leased_examples_wrap_the_operators_teams_run(dagbag: dict) -> None:
    tasks = dagbag["dags"]["deltaguard_leased_databricks"]["tasks"]
    assert {t: (v["type"], v["wrapped"]) for t, v in tasks.items()} == {
        "merge_daily_sales": ("DeltaLeasedOperator", "DatabricksSqlOperator"),
        "rebuild_customer_360": ("DeltaLeasedOperator", "DatabricksSubmitRunOperator"),
        "compact_events": ("DeltaLeasedOperator", "SparkSubmitOperator"),
    }
    lake = "s3://example-lake/warehouse"
    assert tasks["merge_daily_sales"]["leased"] == [[f"{lake}/sales", "MERGE"]]  # from the operator's SQL
    assert tasks["rebuild_customer_360"]["leased"] == [
        [f"{lake}/customer_scores", "OVERWRITE"],
        [f"{lake}/customers", "OVERWRITE"],
    ]
    assert tasks["compact_events"]["upstream"] == ["merge_daily_sales"]
    taskflow = dagbag["dags"]["deltaguard_leased_taskflow"]["tasks"]
    assert taskflow["append_orders"]["type"] == "_DeltaWriteDecoratedOperator"
    assert taskflow["fix_balances"]["leased"][0][1] == "DELETE"
