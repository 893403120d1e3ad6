"""Partition types delta-rs does not compare as the model does, on real delta-rs tables (ADR 0003 fact 13).

DataFusion compares a STRING column with a number as text: on a STRING partition holding ``'2'``, ``p < 5``
and ``p > 10`` both keep ``'2'`` (``'2' > '10'`` as text), so a stale write fails although the numbers are
disjoint. On a DECIMAL partition a stale commit fails evaluating its read predicate even for ``p = 1.5`` x
``p = 10.25``; on a DOUBLE partition ``-0.0`` makes ``p = 0`` x ``p < 0`` fail. The model must call such pairs
a conflict from the configuration the engine layer reads, and keep admitting them on a BIGINT partition.

Each pair runs in both orders from one snapshot: the first write commits, the second from its stale handle.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.discovery import read_table_config
from tests.engines.stale_commits import either_order_fails

#: (UPDATE predicate, DELETE predicate): numerically disjoint, overlapping as text on '2' / '30'
PAIRS = [
    ("p < 5", "p > 10"),
    ("p IN (2, 7)", "p >= 10"),
    ("p BETWEEN 1 AND 5", "p > 25"),
]


def _table(tmp_path: Path, typ: pa.DataType) -> Path:
    path = tmp_path / f"base_{typ}"
    values = ["2", "7", "12", "30"] if typ == pa.string() else [2, 7, 12, 30]
    write_deltalake(
        str(path),
        pa.table(
            {
                "id": pa.array([1, 2, 3, 4], pa.int64()),
                "v": pa.array([0] * 4, pa.int64()),
                "p": pa.array(values, typ),
            }
        ),
        partition_by=["p"],
    )
    return path


def _engine_conflicts(base: Path, work: Path, update: str, delete: str) -> bool:
    """Whether either commit order makes the stale write fail."""
    return either_order_fails(
        base, work, lambda t: t.update(predicate=update, updates={"v": "v + 1"}), lambda t: t.delete(delete)
    )


@pytest.mark.parametrize(("update", "delete"), PAIRS)
def test_numeric_range_on_string_partition_is_a_conflict(tmp_path: Path, update: str, delete: str) -> None:
    base = _table(tmp_path, pa.string())
    assert _engine_conflicts(
        base, tmp_path / "work", update, delete
    )  # the engine reads '2' (or '30') for both
    config = read_table_config(str(base))
    verdict = pair_verdict(
        Operation(K.UPDATE, update), Operation(K.DELETE, delete), config, DeltaRsEngine().profile()
    )
    assert verdict.conflict, verdict.reason
    assert "compares as text" in verdict.reason


@pytest.mark.parametrize(("update", "delete"), PAIRS[:1])
def test_numeric_range_on_bigint_partition_is_still_admitted(
    tmp_path: Path, update: str, delete: str
) -> None:
    base = _table(tmp_path, pa.int64())
    assert not _engine_conflicts(base, tmp_path / "work", update, delete)
    config = read_table_config(str(base))
    assert config.column_type("p") == "long"
    verdict = pair_verdict(
        Operation(K.UPDATE, update), Operation(K.DELETE, delete), config, DeltaRsEngine().profile()
    )
    assert not verdict.conflict, verdict.reason


@pytest.mark.parametrize(
    ("typ", "values", "update", "delete"),
    [
        (pa.decimal128(5, 2), [Decimal("1.50"), Decimal("10.25")], "p = 1.5", "p = 10.25"),
        (pa.decimal128(5, 2), [Decimal("1.50"), Decimal("10.25")], "p < 2", "p >= 10"),
        (pa.float64(), [-0.0, 0.0, 1.5], "p = 0", "p < 0"),
    ],
    ids=["decimal-eq", "decimal-range", "double-negative-zero"],
)
def test_decimal_and_double_partitions_are_not_compared(
    tmp_path: Path, typ: pa.DataType, values: list[object], update: str, delete: str
) -> None:
    base = tmp_path / "base"
    write_deltalake(
        str(base),
        pa.table(
            {
                "id": pa.array(range(len(values)), pa.int64()),
                "v": pa.array([0] * len(values), pa.int64()),
                "p": pa.array(values, typ),
            }
        ),
        partition_by=["p"],
    )
    assert _engine_conflicts(base, tmp_path / "work", update, delete)
    config = read_table_config(str(base))
    verdict = pair_verdict(
        Operation(K.UPDATE, update), Operation(K.DELETE, delete), config, DeltaRsEngine().profile()
    )
    assert verdict.conflict, verdict.reason
    assert "not compared: p (" in verdict.reason
