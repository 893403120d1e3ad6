"""What a worker without Delta's jars sees, checked in a child pytest whose Spark has no Delta jars at all
(``DELTAGUARD_DELTA_JARS=none``): this process's JVM has them on its classpath for good."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
MODULES = ("tests/spark/test_spark_local.py", "tests/airflow/test_spark_wiring.py")


def test_spark_without_delta_jars_in_a_process_of_its_own(tmp_path: Path) -> None:
    env = {**os.environ, "DELTAGUARD_DELTA_JARS": "none"}
    env.pop("PYTEST_CURRENT_TEST", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "without_delta_jars",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--basetemp={tmp_path / 'child'}",
            *MODULES,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-3000:]
    assert " passed" in summary and "skipped" not in summary and "deselected" in summary, summary
