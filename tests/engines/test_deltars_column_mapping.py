"""Column-mapped tables on real delta-rs (ADR 0003): what deltalake 1.6.6 commits side by side.

With ``delta.columnMapping.mode`` ``name`` or ``id``, a stale DELETE/UPDATE/MERGE beside a concurrent commit
in another partition panics in delta-rs' conflict checker (pyo3's ``PanicException``, a ``BaseException``)
or fails; only two appends commit side by side. The model must call every other pair a conflict there, and
the engine must turn a panic into a typed error instead of letting a ``BaseException`` escape.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.discovery import read_table_config
from deltaguard.engines.errors import DeltaConflictError, EnginePanicError
from deltaguard.engines.specs import AppendSpec, UpdateSpec


def _rows(ids: list[int], p: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "p": pa.array([p] * len(ids)),
            "v": pa.array([0] * len(ids), pa.int64()),
        }
    )


def _table(path: Path, mode: str) -> str:
    write_deltalake(
        str(path), _rows([1, 2], "a"), partition_by=["p"], configuration={"delta.columnMapping.mode": mode}
    )
    write_deltalake(str(path), _rows([3, 4], "b"), mode="append")
    return str(path)


def _stale_fails(uri: str, first: object, second: object) -> bool:
    """Whether ``second`` fails (or panics) committing from the snapshot ``first`` committed over."""
    winner, stale = DeltaTable(uri), DeltaTable(uri)
    first(winner)  # type: ignore[operator]
    try:
        second(stale)  # type: ignore[operator]
    except BaseException:  # a panic is what is measured here
        return True
    return False


@pytest.mark.parametrize("mode", ["name", "id"])
def test_disjoint_partitions_fail_on_a_column_mapped_table_and_the_model_says_conflict(
    tmp_path: Path, mode: str
) -> None:
    uri = _table(tmp_path / "t", mode)
    config = read_table_config(uri)
    profile = DeltaRsEngine().profile()
    delete = Operation(K.DELETE, predicate="p = 'a'")
    update = Operation(K.UPDATE, predicate="p = 'b'")
    append = Operation(K.INSERT, predicate="p = 'c'")
    assert pair_verdict(delete, update, config, profile).conflict
    assert pair_verdict(append, update, config, profile).conflict
    assert not pair_verdict(append, append, config, profile).conflict
    # the engine: an append then a stale UPDATE of another partition does not commit
    assert _stale_fails(
        uri,
        lambda t: write_deltalake(t, _rows([9], "c"), mode="append"),
        lambda t: t.update(updates={"v": "1"}, predicate="p = 'b'"),
    )


def test_a_panic_inside_a_write_is_a_typed_error(tmp_path: Path) -> None:
    uri = _table(tmp_path / "t", "name")
    engine = DeltaRsEngine()
    stale = engine.open_table(uri)
    appended = engine.write(uri, AppendSpec(_rows([9], "c"))).version
    with pytest.raises((EnginePanicError, DeltaConflictError)) as raised:
        engine.write(uri, UpdateSpec(updates={"v": "1"}, predicate="p = 'b'"), snapshot=stale)
    assert raised.value.table_uri == uri
    assert DeltaTable(uri).version() == appended  # nothing committed after the append


def test_two_appends_commit_side_by_side_on_a_column_mapped_table(tmp_path: Path) -> None:
    uri = _table(tmp_path / "t", "id")
    assert not _stale_fails(
        uri,
        lambda t: write_deltalake(t, _rows([8], "c"), mode="append"),
        lambda t: write_deltalake(t, _rows([9], "d"), mode="append"),
    )
    assert DeltaTable(uri).version() == 3
