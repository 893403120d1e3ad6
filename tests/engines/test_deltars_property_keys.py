"""deltalake 1.6.6 reads a table property only by its exact key, and a boolean only in lower case (ADR 0036).

``delta.IsolationLevel = snapshotIsolation`` (set through ``alter.set_table_properties``; deltalake refuses it
at table creation) is kept as spelled in the log and ignored: the table runs Serializable, so a stale insert
reading the target fails after a blind append, where under ``delta.isolationLevel`` it commits. The model,
given the configuration discovery reads, must not admit that pair.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from deltaguard.core import pair_verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.engines.discovery import read_table_config

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.engines.stale_commits import stale_commit_fails

PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")


def _table(path: Path, key: str) -> Path:
    write_deltalake(str(path), pa.table({"id": pa.array([1, 2], pa.int64()), "v": pa.array([1.0, 2.0])}))
    DeltaTable(str(path)).alter.set_table_properties({key: "snapshotIsolation"}, raise_if_not_exists=False)
    return path


def _append(table: DeltaTable) -> None:
    write_deltalake(table, pa.table({"id": pa.array([10], pa.int64()), "v": pa.array([3.0])}), mode="append")


def _insert_if_absent(table: DeltaTable) -> None:
    source = pa.table({"id": pa.array([5], pa.int64()), "v": pa.array([9.0])})
    table.merge(
        source, "t.id = s.id", source_alias="s", target_alias="t"
    ).when_not_matched_insert_all().execute()


@pytest.mark.parametrize(
    ("key", "honoured"), [("delta.isolationLevel", True), ("delta.IsolationLevel", False)]
)
def test_only_the_exact_key_is_read(tmp_path: Path, key: str, honoured: bool) -> None:
    base = _table(tmp_path / "base", key)
    assert key in DeltaTable(str(base)).metadata().configuration  # kept exactly as spelled
    fails = stale_commit_fails(base, tmp_path / "work", _append, _insert_if_absent)
    assert fails is not honoured

    verdict = pair_verdict(
        Operation(OperationKind.INSERT, reads_target=True),
        Operation(OperationKind.INSERT),
        read_table_config(str(base)),
        PROFILE,
    )
    # Sound, and as precise as measured: the model says conflict exactly when the engine fails the pair.
    assert verdict.conflict == fails, verdict.reason
    if not honoured:
        assert key in verdict.reason


@pytest.mark.parametrize(("value", "honoured"), [("true", True), ("TRUE", False)])
def test_booleans_are_read_in_lower_case_only(tmp_path: Path, value: str, honoured: bool) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(
        uri, pa.table({"id": pa.array([1], pa.int64())}), configuration={"delta.appendOnly": value}
    )
    try:
        DeltaTable(uri).delete("id = 1")
        refused = False
    except CommitFailedError:
        refused = True
    assert refused is honoured
    # The model reads a boolean only when every engine reads it alike.
    table = read_table_config(uri)
    table = replace(table, properties={**table.properties, "delta.enableDeletionVectors": value})
    verdict = pair_verdict(
        Operation(OperationKind.DELETE, "id = 1"), Operation(OperationKind.DELETE, "id = 2"), table, PROFILE
    )
    assert verdict.conflict
    if not honoured:
        assert "'TRUE'" in verdict.reason
