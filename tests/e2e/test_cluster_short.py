"""The short run of the production-shaped stack (``python -m benchmarks.cluster run --short``).

One run of the delta-rs example pipeline on S3 (moto's server) under Airflow's CeleryExecutor with two
Celery workers (Redis broker), two triggerers and a PostgreSQL lease store, with the cheap faults (a Celery
worker SIGKILLed mid-write, a triggerer SIGKILLed while tasks are deferred). The audit reads the Delta logs
and the decision log; the stack must stop without orphans.

Too slow for ``make test`` on two shared cores: 599 s at load 7-12 on 2026-11-28 (stack up 232 s, of which
Airflow's seven processes starting at once took 165 s; the runs with the fault 265 s; down 47 s), against
a 180 s target (587 s at load 15-21 with the stack's caches warm), so it runs only with
``DELTAGUARD_CLUSTER_TESTS=1`` (``make cluster-short``). The results' ``timings_s`` say where the time went
(printed below).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(
        os.environ.get("DELTAGUARD_CLUSTER_TESTS") != "1",
        reason="the production-shaped stack runs with DELTAGUARD_CLUSTER_TESTS=1 (make cluster-short)",
    ),
]


def test_short_cluster_run_passes_the_audit() -> None:
    pytest.importorskip("airflow.providers.celery", reason="install the cluster extra")
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
    from benchmarks.cluster.faults import CHEAP_KINDS
    from benchmarks.cluster.run import run

    # not under tmp_path: pytest makes its folders 0700, and the PostgreSQL servers run as their own user
    home = Path(tempfile.mkdtemp(prefix="deltaguard-cluster-"))
    home.chmod(0o755)
    try:
        result = run(home=home / "cluster", spark=False, runs=1, kinds=CHEAP_KINDS, seed=7)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(result["audit"], result["faults"], result["wall_s"], result["load_average"], result["timings_s"])
    assert result["stack"]["executor"] == "CeleryExecutor" and result["stack"]["celery_workers"] == 2
    assert result["leftover_processes"] == []
    assert result["writes"] >= 5, result
    assert sum(result["faults"].values()) >= 1, (result["faults_skipped"], result["fault_errors"])
    assert result["audit"] == {
        "overlaps": 0,
        "lost_rows": 0,
        "duplicated_rows": 0,
        "silent_successes": 0,
        "unexplained_failures": 0,
        "orphans": 0,
        "unlogged_decisions": 0,
    }, result["audit_details"]
