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
from deltaguard.core.sql.predicates import null_widened_terms, parse_predicate, provably_disjoint_terms
from deltaguard.engines.discovery import read_table_config

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.engines.stale_commits import either_order_fails, stale_commit_fails

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


def test_numeric_text_reads_no_null_partition(tmp_path: Path) -> None:
    """A top-level ``k = '01'`` on a STRING partition is pruned exactly, as ``k = 'a'`` is (ADR 0003 fact 11):
    a stale delete of it commits after a delete of the NULL partition, and the model's reading of what it
    read leaves that partition out only where it knows the column is a STRING."""
    base = tmp_path / "base"
    data = pa.table({"k": pa.array(["01", None, "2"]), "v": pa.array([1, 2, 3], pa.int64())})
    write_deltalake(str(base), data, partition_by=["k"])

    def remove_null(table: DeltaTable) -> None:
        table.delete("k IS NULL")

    def stale(table: DeltaTable) -> None:
        table.delete("k = '01'")

    assert not stale_commit_fails(base, tmp_path / "work", remove_null, stale)
    removed = parse_predicate("k IS NULL").terms_over(frozenset({"k"}))
    read_as_text = null_widened_terms(parse_predicate("k = '01'"), ["k"], text=["k"])
    assert provably_disjoint_terms(read_as_text, removed)
    assert not provably_disjoint_terms(null_widened_terms(parse_predicate("k = '01'"), ["k"]), removed)
