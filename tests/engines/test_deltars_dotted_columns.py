"""A partition column whose name holds a dot, on real delta-rs tables.

```a.b``` quoted is one column (Spark and delta-rs alike), not field ``b`` of a struct ``a``: an UPDATE
setting it moves the rows it reads into another partition, so a concurrent DELETE of that partition fails.
delta-rs reads an assignment key as an identifier path, so the engine quotes the keys that name columns
(unquoted, an UPDATE of ``a.b`` reported one updated row and changed nothing on deltalake 1.6.6).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from deltaguard.core.model import pair_verdict
from deltaguard.core.sql.classify import classify_sql
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.discovery import read_table_config
from deltaguard.engines.specs import MergeSpec, UpdateSpec
from tests.engines.stale_commits import either_order_fails


def _table(path: Path) -> Path:
    write_deltalake(
        str(path),
        pa.table({"id": pa.array([1, 2], pa.int64()), "a.b": ["x", "c"], "v": pa.array([0, 0], pa.int64())}),
        partition_by=["a.b"],
    )
    return path


def test_moving_rows_into_a_dotted_partition_conflicts_on_the_engine_and_in_the_model(tmp_path: Path) -> None:
    base = _table(tmp_path / "base")
    move = "UPDATE t SET `a.b` = 'c' WHERE `a.b` = 'x'"
    delete = "DELETE FROM t WHERE `a.b` = 'c'"
    engine_fails = either_order_fails(
        base,
        tmp_path / "work",
        lambda t: t.update(updates={"`a.b`": "'c'"}, predicate="`a.b` = 'x'"),
        lambda t: t.delete("`a.b` = 'c'"),
    )
    assert engine_fails
    config = read_table_config(str(base))
    verdict = pair_verdict(
        classify_sql(move).operation, classify_sql(delete).operation, config, DeltaRsEngine().profile()
    )
    assert verdict.conflict


def test_the_engine_updates_a_dotted_column_it_is_given_by_name(tmp_path: Path) -> None:
    uri = str(_table(tmp_path / "t"))
    result = DeltaRsEngine().write(uri, UpdateSpec(updates={"a.b": "'z'", "V": "1"}, predicate="`a.b` = 'x'"))
    assert result.committed
    rows = sorted(DeltaTable(uri).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "a.b": "z", "v": 1}, {"id": 2, "a.b": "c", "v": 0}]


def test_a_merge_sets_a_dotted_column_it_is_given_by_name(tmp_path: Path) -> None:
    uri = str(_table(tmp_path / "t"))
    source = pa.table(
        {"id": pa.array([2, 3], pa.int64()), "a.b": ["c", "q"], "v": pa.array([5, 6], pa.int64())}
    )
    DeltaRsEngine().write(
        uri,
        MergeSpec(
            source=source,
            condition="t.id = s.id",
            matched_update={"a.b": "'m'"},
            not_matched_insert={"id": "s.id", "a.b": "s.`a.b`", "v": "s.v"},
        ),
    )
    rows = sorted(DeltaTable(uri).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert [r["a.b"] for r in rows] == ["x", "m", "q"]
