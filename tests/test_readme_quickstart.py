"""The README's quickstart runs as written: its DAG file saved where it says, its shell lines run in a fresh
home (``HOME`` a temporary folder, no ``AIRFLOW_*`` variables), and the tables it writes checked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def quickstart_blocks(readme: str) -> tuple[str, str]:
    """The Quickstart section's Python block (the DAG file) and its shell block (how to run it)."""
    section = readme.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    python = re.findall(r"```python\n(.*?)```", section, re.S)
    shell = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(python) == 1 and len(shell) == 1, "the quickstart has one DAG file and one shell block"
    return python[0], shell[0]


def test_the_quickstart_runs_as_written(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    readme = (REPO / "README.md").read_text()
    dag_file, commands = quickstart_blocks(readme)
    assert "~/airflow/dags/daily_sales.py" in readme  # where the README says to save it
    dags = tmp_path / "airflow" / "dags"
    dags.mkdir(parents=True)
    (dags / "daily_sales.py").write_text(dag_file)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DELTAGUARD"))}
    env["HOME"] = str(tmp_path)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", commands],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-4000:]
    for task in ("create_sales", "merge_de", "merge_fr", "log_events", "optimize_sales"):
        assert f"end task task_id={task}" in log, task
    assert "lease granted" in log and "committed MERGE" in log
    # the plan, before the run: the table is partitioned as create_sales creates it, the MERGEs overlap
    assert "as create_sales creates it" in log and "merge_de + merge_fr" in log

    lake = tmp_path / "airflow" / "lake"
    sales = DeltaTable(str(lake / "sales"))
    assert [h["operation"] for h in sales.history()] == ["MERGE", "MERGE", "WRITE"]
    rows = sorted((r["country"], r["id"], r["amount"]) for r in sales.to_pyarrow_table().to_pylist())
    assert rows == [("DE", 1, 100), ("DE", 2, 101), ("FR", 1, 100), ("FR", 2, 101)]
    assert DeltaTable(str(lake / "events")).to_pyarrow_table().to_pylist() == [{"event": "loaded"}]
