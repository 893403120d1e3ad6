"""``SparkEngine.close()`` on classic sessions: it stops the session it created, never one it was handed or
borrowed (the process's shared Delta session plays the user's session here)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from deltaguard.engines.spark.engine import SparkEngine
from tests.spark.conftest import SMALL_CONF

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars]


def test_close_leaves_sessions_it_did_not_create_running(delta_spark: Any) -> None:
    from pyspark.sql import SparkSession

    SparkSession.builder.getOrCreate()  # makes the shared session this thread's active one
    borrowed = SparkEngine()  # no settings: the active session
    handed_in = SparkEngine(delta_spark)
    factory = SparkEngine(lambda: delta_spark)
    # a master of its own, but a SparkContext already runs: getOrCreate() returns the running session
    got_existing = SparkEngine(master="local[1]", conf=SMALL_CONF)
    for engine in (borrowed, handed_in, factory, got_existing):
        assert engine.session() is delta_spark or engine.session().sparkContext is delta_spark.sparkContext
        engine.close()
        assert delta_spark.range(3).count() == 3  # still running
    # a closed engine opens its session again when used again
    assert borrowed.session().range(2).count() == 2


OWNED = """
from pyspark import SparkContext
from deltaguard.engines.spark.engine import SparkEngine

engine = SparkEngine(master="local[1]", conf={conf!r})
assert engine.session().range(4).count() == 4
assert SparkContext._active_spark_context is not None
engine.close()
print("stopped" if SparkContext._active_spark_context is None else "running")
"""


def test_close_stops_the_session_it_created() -> None:
    # in a child process: stopping the SparkContext here would stop the process's shared session too
    conf = {**SMALL_CONF, "spark.driver.bindAddress": "127.0.0.1", "spark.driver.host": "127.0.0.1"}
    out = subprocess.run(
        [sys.executable, "-c", OWNED.format(conf=conf)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-1:] == ["stopped"], out.stdout
