"""The CI slice of the delta-spark conformance: is the ``delta-spark`` profile sound on real delta-spark?

Same judgement as for delta-rs: a cell is unsound when the model says ``no_conflict`` but delta-spark
conflicted, failed or corrupted data in a forced interleaving. The whole table is measured by
``python -m lab.conformance --engine delta-spark`` (docs/adr/0014-delta-spark-profile.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deltaguard.core.profiles import EngineName
from deltaguard.engines.spark.setup import delta_jars_from_env
from lab.conformance.cells import CellResult, Observed, summarize
from lab.conformance.scenarios import Layout, ProbeOp
from lab.conformance.spark_runner import delta_version_from_jars, run_spark_cells, spark_cells


@pytest.fixture(scope="module")
def results(delta_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> list[CellResult]:
    version = delta_version_from_jars(delta_jars_from_env())
    assert version is not None
    return run_spark_cells(spark_cells("ci"), delta_spark, tmp_path_factory.mktemp("conformance"), version)


def test_delta_spark_profile_is_sound(results: list[CellResult]) -> None:
    assert all(r.prediction.rule for r in results)
    unsound = [
        f"{r.cell.key}: predicted no_conflict, observed {r.observed_summary()}" for r in results if r.unsound
    ]
    assert not unsound, "\n".join(unsound)


def test_the_interleavings_were_really_forced(results: list[CellResult]) -> None:
    forced = [o for r in results for o in r.orders if o.observed is not Observed.NOT_RUN]
    # every probe of the CI slice has something to pause in: both orders of every cell were interleaved
    assert len(forced) == 2 * len(results), summarize(results).to_json()
    assert any(o.observed is Observed.CONFLICT for o in forced), (
        "no conflict observed: interleaving not forced?"
    )


def test_disjoint_partition_inserts_are_allowed_by_both(results: list[CellResult]) -> None:
    (cell,) = [
        r
        for r in results
        if (r.cell.a, r.cell.b, r.cell.layout)
        == (ProbeOp.INSERT, ProbeOp.INSERT, Layout.PARTITIONED_DISJOINT)
    ]
    assert cell.engine_allows and cell.prediction.conflict is False


def test_append_against_rewrite_of_the_same_rows_conflicts(results: list[CellResult]) -> None:
    (cell,) = [r for r in results if (r.cell.a, r.cell.b) == (ProbeOp.INSERT, ProbeOp.UPDATE)]
    assert not cell.engine_allows and cell.prediction.conflict is True


def test_profile_is_delta_spark(delta_spark: Any) -> None:
    from deltaguard.engines.spark.engine import SparkEngine

    assert SparkEngine(delta_spark).profile().name is EngineName.DELTA_SPARK


def test_report_can_be_written(results: list[CellResult], tmp_path: Path) -> None:
    from lab.conformance.report import write_json

    write_json(tmp_path / "delta-spark.json", results, {"engine": "delta-spark"})
    assert (tmp_path / "delta-spark.json").stat().st_size > 0
