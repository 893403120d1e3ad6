"""deltalake 1.6.6 reads integer text compared with an INT partition as a number (ADR 0036, precision).

``DELETE WHERE k = '01'`` on an INT partition deletes the rows of ``k = 1``; a stale rewrite of ``k = '01'``
commits beside one of ``k = 2`` and fails beside one of ``k = 1``. The model, given the column types
discovery reads, tells exactly these apart.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltaguard.core import pair_verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.engines.discovery import read_table_config

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.engines.stale_commits import either_order_fails

PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")


@pytest.fixture
def base(tmp_path: Path) -> Path:
    path = tmp_path / "base"
    data = pa.table({"k": pa.array([1, 2, 3], pa.int32()), "v": pa.array([1, 2, 3], pa.int64())})
    write_deltalake(str(path), data, partition_by=["k"])
    return path


def test_integer_text_selects_the_number(base: Path) -> None:
    DeltaTable(str(base)).delete("k = '01'")
    assert sorted(DeltaTable(str(base)).to_pyarrow_table()["k"].to_pylist()) == [2, 3]


@pytest.mark.parametrize(("other", "same"), [("k = 2", False), ("k = 1", True), ("k = '1'", True)])
def test_the_model_agrees_with_the_engine(base: Path, tmp_path: Path, other: str, same: bool) -> None:
    def first(table: DeltaTable) -> None:
        table.delete("k = '01'")

    def second(table: DeltaTable) -> None:
        table.delete(other)

    fails = either_order_fails(base, tmp_path / "work", first, second)
    assert fails is same
    verdict = pair_verdict(
        Operation(OperationKind.DELETE, "k = '01'"),
        Operation(OperationKind.DELETE, other),
        read_table_config(str(base)),
        PROFILE,
    )
    assert verdict.conflict is same
