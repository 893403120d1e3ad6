"""The three shape classes on real delta-spark: each pair conflicts in the engine, and deltaguard refuses it.

One focused test per class (run them one at a time: each starts writes in two sessions of one JVM):
a generated partition column whose source an UPDATE sets, one instant written in two session time zones,
one table under its path and a symlink.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.fuzz.shapes import ShapeCase, ShapeLayout, ShapeWrite, SparkShapeRunner

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars, pytest.mark.slow]


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkShapeRunner]:
    from deltaguard.engines.spark.engine import SparkEngine
    from lab.conformance.spark_runner import delta_spark_session

    workdir = tmp_path_factory.mktemp("shapes")
    session = delta_spark_session(workdir)
    yield SparkShapeRunner(session, workdir, SparkEngine(session).profile())
    session.stop()


def _check(runner: SparkShapeRunner, case: ShapeCase) -> Any:
    result = runner.run(case, serial=False)
    observed = result.orders
    # the engine conflicts in at least one commit order: the pair is not safe to run at once ...
    assert any(text.startswith("conflict") for text in observed.values()), observed
    # ... and deltaguard does not admit it, saying why
    assert not result.verdict.admitted, result.verdict
    assert not result.unsound
    return result


def test_setting_the_source_of_a_generated_partition_conflicts(runner: SparkShapeRunner) -> None:
    move = ShapeWrite("UPDATE", "d = '2024-01-01'", "ts = TIMESTAMP '2024-02-01 12:00:00'")
    delete = ShapeWrite("DELETE", "d = '2024-02-01'")
    result = _check(runner, ShapeCase(ShapeLayout("generated"), (move, delete)))
    assert "CAST(ts AS DATE)" in result.verdict.reason


def test_one_instant_in_two_session_time_zones_conflicts(runner: SparkShapeRunner) -> None:
    utc = ShapeWrite("DELETE", "ts = TIMESTAMP '2024-01-01 01:00:00'", zone="UTC")
    paris = ShapeWrite("DELETE", "ts = TIMESTAMP '2024-01-01 02:00:00'", zone="Europe/Paris")
    result = _check(runner, ShapeCase(ShapeLayout("ts"), (utc, paris)))
    assert "Europe/Paris" in result.verdict.reason


def test_a_symlink_and_its_target_are_one_table(runner: SparkShapeRunner, tmp_path: Path) -> None:
    via_path = ShapeWrite("DELETE", "d = '2024-01-01'", alias="path")
    via_link = ShapeWrite("DELETE", "d = '2024-01-01'", alias="link")
    result = _check(runner, ShapeCase(ShapeLayout("generated"), (via_path, via_link)))
    assert result.verdict.keys[0] == result.verdict.keys[1]
