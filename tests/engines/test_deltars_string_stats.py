"""Truncated string statistics on real delta-rs tables (ADR 0020).

Measured: delta-rs records a string statistic longer than 64 UTF-8 bytes as its longest prefix of whole
characters within 64 bytes; a cut maximum has its last character that can be incremented in place (same
UTF-8 length) incremented and the rest dropped, and when no character can be, it stays the full value. The
pairs below made the model admit writes that then failed on the engine: a new file's bounds were taken from
the literal it writes, not from what the engine records.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from deltaguard.core.file_stats import STATS_TRUNCATE_BYTES, recorded_high, recorded_low
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.engines.deltars.engine import DeltaRsEngine

EURO, KIP = "\u20ac", "\u20ad"


def _recorded(tmp_path: Path, values: list[str]) -> tuple[str, str]:
    path = str(tmp_path / f"r{len(list(tmp_path.iterdir()))}")
    write_deltalake(path, pa.table({"s": pa.array(values, pa.string())}))
    row = pa.table(DeltaTable(path).get_add_actions(flatten=True)).to_pylist()[0]
    return row["min.s"], row["max.s"]


@pytest.mark.parametrize(
    ("value", "low", "high"),
    [
        ("a" * 64, "a" * 64, "a" * 64),  # at the limit: kept
        ("a" * 65, "a" * 64, "a" * 63 + "b"),  # bytes, not characters, and the max bumped
        (EURO * 22, EURO * 21, EURO * 20 + KIP),  # 66 bytes: 21 whole characters fit
        ("\x7f" * 70, "\x7f" * 64, "\x7f" * 70),  # nothing can be bumped in place: the full value
        ("z" * 20 + "\U0010ffff" * 20, "z" * 20 + "\U0010ffff" * 11, "z" * 19 + "{"),  # bumped earlier
    ],
)
def test_truncation_rule(tmp_path: Path, value: str, low: str, high: str) -> None:
    assert _recorded(tmp_path, [value]) == (low, high)
    assert len(low.encode()) <= STATS_TRUNCATE_BYTES
    # the model's bounds hold for what was recorded
    assert recorded_low(value) <= low
    widened = recorded_high(value)
    assert widened is None or high <= widened


def _make_table(path: Path) -> None:
    write_deltalake(str(path), pa.table({"id": pa.array([1, 2], pa.int64()), "s": pa.array(["a", "a"])}))
    write_deltalake(
        str(path),
        pa.table({"id": pa.array([11, 12], pa.int64()), "s": pa.array(["\uffee", "\uffee"])}),
        mode="append",
    )


def _run(op: Operation) -> Callable[[DeltaTable], object]:
    if op.kind is K.DELETE:
        return lambda t: t.delete(op.predicate)
    return lambda t: t.update(predicate=op.predicate, updates=dict(op.assignments))


def _conflicts(base: Path, work: Path, first: Operation, second: Operation) -> bool:
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(base, work)
    winner, stale = DeltaTable(str(work)), DeltaTable(str(work))
    _run(first)(winner)
    try:
        _run(second)(stale)
    except CommitFailedError:
        return True
    return False


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # max side: the new file records 20 euro signs and a kip, inside the DELETE's range
        (
            Operation(K.UPDATE, "s = 'a'", assignments=(("s", f"'{EURO * 22}'"),)),
            Operation(K.DELETE, f"s >= '{EURO * 21 + KIP}'"),
        ),
        # min side: the new file records 21 euro signs, below the DELETE's bound
        (
            Operation(K.UPDATE, "id > 10", assignments=(("s", f"'{EURO * 22}'"),)),
            Operation(K.DELETE, f"s < '{EURO * 22}'"),
        ),
    ],
)
def test_long_literal_pairs_are_sound(tmp_path: Path, a: Operation, b: Operation) -> None:
    base = tmp_path / "base"
    _make_table(base)
    engine = DeltaRsEngine(file_stats=True)
    table = engine.table_config(str(base))
    assert table.file_stats is not None
    work = tmp_path / "work"
    engine_conflicts = _conflicts(base, work, a, b) or _conflicts(base, work, b, a)
    assert engine_conflicts  # measured: the pair fails on delta-rs
    assert pair_verdict(a, b, table, engine.profile()).conflict
