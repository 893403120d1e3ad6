"""deltalake 1.6.6 compares a STRING partition with a string literal as text: ``'01'`` and ``'1'`` are two
partitions. Stale deletes of ``k = '01'`` and ``k = '1'`` both commit, of ``k = '01'`` twice do not; the
model, given the column types discovery reads, tells exactly these apart."""

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
    data = pa.table({"k": pa.array(["01", "1", "2"]), "v": pa.array([1, 2, 3], pa.int64())})
    write_deltalake(str(path), data, partition_by=["k"])
    return path


def test_text_selects_only_its_own_partition(base: Path) -> None:
    DeltaTable(str(base)).delete("k = '01'")
    assert sorted(DeltaTable(str(base)).to_pyarrow_table()["k"].to_pylist()) == ["1", "2"]


@pytest.mark.parametrize(
    ("other", "same"), [("k = '1'", False), ("k IN ('1', '2')", False), ("k = '01'", True)]
)
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
    assert verdict.conflict is same, verdict.reason
