"""The shape generator and its delta-rs runner: timestamp partitions, generated columns, zones, aliases."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pytest

from deltaguard.core.profiles import DELTA_RS_TIME_ZONE, EngineName, EngineProfile
from lab.fuzz.shapes import (
    DeltaRsShapeRunner,
    ShapeCase,
    ShapeLayout,
    ShapeWrite,
    generate,
    summarise,
)

PROFILE = EngineProfile(EngineName.DELTA_RS, deltalake.__version__, session_time_zone=DELTA_RS_TIME_ZONE)


def test_generated_cases_cover_every_class() -> None:
    cases = generate(seed=3, count=60, spark=True)
    tags = {tag for case in cases for tag in case.tags()}
    for wanted in (
        "partition_generated",
        "partition_ts",
        "sets_generation_source",
        "timestamp_literal",
        "date_on_timestamp",
        "zones_differ",
        "aliases_differ",
        "identity",
        "check",
        "column_mapping",
    ):
        assert wanted in tags, wanted
    assert generate(seed=3, count=10, spark=True) == generate(seed=3, count=10, spark=True)


def test_deltars_cases_leave_out_what_only_spark_creates() -> None:
    for case in generate(seed=5, count=30, spark=False):
        assert set(case.layout.extras) <= {"check"}


@pytest.mark.parametrize("second", ["link", "file_uri"])
def test_one_partition_through_two_names_conflicts_on_deltars_and_is_refused(
    tmp_path: Path, second: str
) -> None:
    case = ShapeCase(
        ShapeLayout("generated"),
        (
            ShapeWrite("DELETE", "d = '2024-01-01'", alias="path"),
            ShapeWrite("DELETE", "d = '2024-01-01'", alias=second),
        ),
    )
    result = DeltaRsShapeRunner(tmp_path).run(case, PROFILE)
    assert any(text.startswith("conflict") for text in result.orders.values()), result.orders
    assert not result.verdict.admitted
    assert not result.unsound


def test_different_partitions_through_two_names_run_together(tmp_path: Path) -> None:
    case = ShapeCase(
        ShapeLayout("generated", ("check",)),
        (ShapeWrite("DELETE", "d = '2024-01-01'", alias="link"), ShapeWrite("DELETE", "d = '2024-02-01'")),
    )
    result = DeltaRsShapeRunner(tmp_path).run(case, PROFILE)
    assert result.verdict.admitted
    assert result.orders == {"A,B": "commit", "B,A": "commit"}
    assert not result.unsound


def test_a_small_deltars_run_finds_nothing_unsound(tmp_path: Path) -> None:
    runner = DeltaRsShapeRunner(tmp_path)
    results = [runner.run(case, PROFILE) for case in generate(seed=8, count=8, spark=False)]
    summary = summarise(results)
    assert summary["cases"] == len(results) > 0
    assert summary["unsound"] == []
