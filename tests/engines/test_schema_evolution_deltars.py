"""delta-rs 1.6.6 measured: a schema-evolving write fails every concurrent write, and the model says so.

The second writer's snapshot is a table object loaded before the schema-evolving commit (the race forced
deterministically); where the model judges the pair without evolution compatible, the control runs it
and both commit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from deltaguard.core import pair_verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

DELTA_RS = EngineProfile(EngineName.DELTA_RS, "1.6.6")
TABLE = TableConfig(partition_columns=("p",))


def _append_a(path: str, evolve: bool) -> None:
    extra = {"extra": ["x"]} if evolve else {}
    write_deltalake(
        path,
        pa.table({"id": [3], "p": ["a"], **extra}),
        mode="append",
        schema_mode="merge" if evolve else None,
    )


def _merge_a(path: str, evolve: bool) -> None:
    extra = {"extra": ["y"]} if evolve else {}
    source = pa.table({"id": [1], "p": ["a"], **extra})
    merger = DeltaTable(path).merge(
        source, "t.id = s.id AND t.p = 'a'", source_alias="s", target_alias="t", merge_schema=evolve
    )
    merger.when_matched_update_all().when_not_matched_insert_all().execute()


def _append_b(stale: DeltaTable) -> None:
    write_deltalake(stale, pa.table({"id": [9], "p": ["b"]}), mode="append")


def _merge_b(stale: DeltaTable) -> None:
    merger = stale.merge(
        pa.table({"id": [2], "p": ["b"]}), "t.id = s.id AND t.p = 'b'", source_alias="s", target_alias="t"
    )
    merger.when_matched_update_all().when_not_matched_insert_all().execute()


FIRST = {"append": _append_a, "merge": _merge_a}
SECOND = {"append": _append_b, "merge": _merge_b}
#: the two writes as the model sees them (the MERGE of partition b neither moves nor inserts elsewhere)
MODEL = {
    "append": Operation(OperationKind.INSERT, predicate="p = 'a'"),
    "merge": Operation(OperationKind.MERGE, merge_condition="t.id = s.id AND t.p = 'a'", inserts="p = 'a'"),
}
SECOND_MODEL = {
    "append": Operation(OperationKind.INSERT, predicate="p = 'b'"),
    "merge": Operation(OperationKind.MERGE, merge_condition="t.id = s.id AND t.p = 'b'", inserts="p = 'b'"),
}


def _race(
    tmp_path: Path, first: Callable[[str, bool], None], second: Callable[[DeltaTable], None], evolve: bool
) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [1, 2], "p": ["a", "b"]}), partition_by=["p"])
    stale = DeltaTable(path)  # the second write's snapshot, taken before the first commits
    first(path, evolve)
    second(stale)


@pytest.mark.parametrize("second", sorted(SECOND))
@pytest.mark.parametrize("first", sorted(FIRST))
def test_a_schema_evolving_write_fails_a_concurrent_write_and_is_judged_a_conflict(
    tmp_path: Path, first: str, second: str
) -> None:
    if not pair_verdict(MODEL[first], SECOND_MODEL[second], TABLE, DELTA_RS).conflict:
        _race(tmp_path / "control", FIRST[first], SECOND[second], evolve=False)  # commits, as judged
    with pytest.raises(CommitFailedError, match="Metadata changed"):
        _race(tmp_path / "evolving", FIRST[first], SECOND[second], evolve=True)
    evolving = replace(MODEL[first], evolves_schema=True)
    verdict = pair_verdict(evolving, SECOND_MODEL[second], TABLE, DELTA_RS)
    assert verdict.conflict and "schema evolution" in verdict.reason
