"""A slice of the conformance harness against delta-spark: is the ``delta-spark`` profile sound?

Same judgement as for delta-rs: a cell is unsound when the model says ``no_conflict`` but delta-spark
conflicted, failed or corrupted data in a forced interleaving. Jar-gated (see conftest.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from deltaguard.conformance.cells import REPRESENTATIVE_PAIRS, CellResult, summarize
from deltaguard.conformance.scenarios import Layout
from deltaguard.core.profiles import EngineName
from deltaguard.engines.spark_setup import delta_jars_from_env
from tests.spark.jars.harness import SparkGroupRunner, delta_version_from_jars

#: Open-source Delta accepts only ``Serializable`` (and WriteSerializable on newer releases) as
#: ``delta.isolationLevel``; absent is the default.
SPELLINGS = (None, "Serializable")
LAYOUTS = (Layout.PARTITIONED_DISJOINT, Layout.PARTITIONED_SAME, Layout.UNPARTITIONED)
#: ``DELTAGUARD_SPARK_SLICE=full`` runs every representative pair on every layout.
FULL = os.environ.get("DELTAGUARD_SPARK_SLICE") == "full"


def _cells() -> list[tuple[Any, Any, Layout, str | None]]:
    layouts = tuple(Layout) if FULL else LAYOUTS
    pairs = REPRESENTATIVE_PAIRS if FULL else REPRESENTATIVE_PAIRS[:8]
    return [(a, b, layout, iso) for a, b in pairs for layout in layouts for iso in SPELLINGS]


@pytest.fixture(scope="module")
def results(delta_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> list[CellResult]:
    runner = SparkGroupRunner(
        delta_spark, tmp_path_factory.mktemp("conformance"), delta_version_from_jars(delta_jars_from_env())
    )
    assert runner.engine.profile().name is EngineName.DELTA_SPARK
    return [runner.run(a, b, layout, iso) for a, b, layout, iso in _cells()]


def test_delta_spark_profile_is_sound(results: list[CellResult]) -> None:
    unsound = [
        f"{r.cell.key}: predicted no_conflict, observed {r.observed_summary()} ({r.prediction.rule})"
        for r in results
        if r.unsound
    ]
    assert not unsound, "\n".join(unsound)


def test_the_interleavings_were_really_forced(results: list[CellResult]) -> None:
    summary = summarize(results)
    forced = [o for r in results for o in r.orders if o.observed.value != "not_run"]
    # OPTIMIZE/ALTER as the stale write cannot be paused; everything else must have been interleaved.
    assert len(forced) >= len(results), summary.to_json()
    assert any(o.observed.value == "conflict" for o in forced), (
        "no conflict observed: interleaving not forced?"
    )


def test_disjoint_partition_inserts_are_allowed_by_both(results: list[CellResult]) -> None:
    cells = [
        r
        for r in results
        if r.cell.a.value == "INSERT"
        and r.cell.b.value == "INSERT"
        and r.cell.layout is Layout.PARTITIONED_DISJOINT
    ]
    assert cells and all(r.engine_allows for r in cells)
    assert all(r.prediction.conflict is False for r in cells)


def test_report_can_be_written(results: list[CellResult], tmp_path: Path) -> None:
    from deltaguard.conformance.report import write_json

    write_json(tmp_path / "delta-spark.json", results, {"engine": "delta-spark"})
    assert (tmp_path / "delta-spark.json").stat().st_size > 0
