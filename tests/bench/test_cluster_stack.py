"""The production-shaped stack's own cheap parts (benchmarks/cluster/stack.py), without starting it."""

from __future__ import annotations

import time
from pathlib import Path

from benchmarks.cluster.procs import Service
from benchmarks.cluster.stack import ClusterStack


def test_the_dags_folder_links_only_the_dags_the_runs_trigger(tmp_path: Path) -> None:
    for spark, wanted in (
        (False, {"deltaguard_daily_sales.py", "example_pipeline.py"}),
        # with Spark, the freeze fault's conflicting writer too (the stack's own DAG file)
        (
            True,
            {
                "deltaguard_daily_sales.py",
                "example_pipeline.py",
                "pyspark_daily_sales.py",
                "pyspark_optimize_sales.py",
            },
        ),
    ):
        stack = ClusterStack(tmp_path / f"spark-{spark}", spark=spark)
        stack.home.mkdir()
        folder = stack._dags_folder()
        assert {p.name for p in folder.iterdir()} == wanted
        assert all(
            p.resolve().is_file() and p.resolve().parent.name in ("dags_examples", "dags")
            for p in folder.iterdir()
        )


def test_down_gives_an_airflow_part_a_short_grace_and_a_server_its_own(tmp_path: Path) -> None:
    stack = ClusterStack(tmp_path / "home", spark=False)
    # a part that ignores SIGTERM, as a busy Airflow component may: only SIGKILL ends it
    stubborn = ["sh", "-c", "trap '' TERM; while :; do sleep 0.2; done"]
    for name in ("scheduler", "redis"):
        service = Service(name, stubborn, {"PATH": "/usr/bin:/bin"}, tmp_path / f"{name}.log", grace=12.0)
        service.start()
        stack.services[name] = service
    began = time.monotonic()
    stack._stop_one("scheduler")
    assert time.monotonic() - began < 8.0  # DOWN_GRACE (5 s) and the SIGKILL
    assert not stack.services["scheduler"].alive()
    began = time.monotonic()
    stack._stop_one("redis")  # not an Airflow part: its own grace
    assert time.monotonic() - began >= 12.0
    assert not stack.services["redis"].alive()
