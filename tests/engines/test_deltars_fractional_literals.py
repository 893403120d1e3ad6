"""A number that is not a whole number, compared with an integer partition, on real delta-rs tables.

DataFusion casts ``1.5`` to the column's type (``1``): the write rewrites a partition the model, reading the
literal exactly, calls disjoint. Each pair runs in both orders from one snapshot; the model must call it a
conflict from the configuration the engine layer reads, and keep admitting whole numbers (ADR 0003 fact 13).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.engines import specs
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.discovery import read_table_config
from tests.engines.stale_commits import either_order_fails


def _table(tmp_path: Path, typ: pa.DataType) -> Path:
    path = tmp_path / f"base_{typ}"
    write_deltalake(
        str(path),
        pa.table(
            {
                "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
                "v": pa.array([0] * 5, pa.int64()),
                "p": pa.array([0, 1, 2, 3, None], typ),  # a NULL partition too
            }
        ),
        partition_by=["p"],
    )
    return path


def _verdict(base: Path, update: str, delete: str) -> tuple[bool, str]:
    verdict = pair_verdict(
        Operation(K.UPDATE, update),
        Operation(K.DELETE, delete),
        read_table_config(str(base)),
        DeltaRsEngine().profile(),
    )
    return verdict.conflict, verdict.reason


def _rewritten_partitions(work: Path) -> set[str]:
    log = sorted((work / "_delta_log").glob("*.json"))[-1]
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    return {a["remove"]["partitionValues"]["p"] for a in actions if "remove" in a}


@pytest.mark.parametrize(
    ("update", "delete"),
    [("p = 1.5", "p = 1"), ("p >= 1.5", "p = 1"), ("p <= -0.5", "p = 0"), ("p IN (.5, 3)", "p = 0")],
)
@pytest.mark.parametrize("typ", [pa.int64(), pa.int16()], ids=["long", "short"])
def test_a_fraction_rewrites_the_truncated_partition_and_is_a_conflict(
    tmp_path: Path, typ: pa.DataType, update: str, delete: str
) -> None:
    base = _table(tmp_path, typ)
    assert either_order_fails(
        base,
        tmp_path / "work",
        lambda t: t.update(predicate=update, updates={"v": "v + 1"}),
        lambda t: t.delete(delete),
    )
    conflict, reason = _verdict(base, update, delete)
    assert conflict, reason
    assert "not a whole number" in reason


def test_deltaguards_engine_deletes_the_truncated_partition(tmp_path: Path) -> None:
    base = _table(tmp_path, pa.int64())
    DeltaRsEngine().write(str(base), specs.DeleteSpec(predicate="p = 1.5"))
    assert _rewritten_partitions(base) == {"1"}


def test_a_whole_number_is_still_admitted(tmp_path: Path) -> None:
    base = _table(tmp_path, pa.int64())
    update, delete = "p = 1.0", "p = 2"
    assert not either_order_fails(
        base,
        tmp_path / "work",
        lambda t: t.update(predicate=update, updates={"v": "v + 1"}),
        lambda t: t.delete(delete),
    )
    conflict, reason = _verdict(base, update, delete)
    assert not conflict, reason
