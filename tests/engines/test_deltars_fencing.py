"""delta-rs checks the commit fence as late as it can and commits nothing when the fence refuses."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.errors import CommitFencedError
from deltaguard.engines.specs import (
    AppendSpec,
    DeleteSpec,
    MergeSpec,
    OptimizeSpec,
    OverwriteSpec,
    ReplaceWhereSpec,
    WriteContext,
)
from tests.engines.helpers import ids, rows


class Fence:
    """Refuses from its ``fail_from``-th check on; records when each check ran."""

    def __init__(self, fail_from: int, events: list[str] | None = None) -> None:
        self.fail_from = fail_from
        self.checks = 0
        self.events = events if events is not None else []

    def check(self) -> None:
        self.checks += 1
        self.events.append(f"check {self.checks}")
        if self.checks >= self.fail_from:
            raise RuntimeError("lease lost")

    def on_lost(self, cancel: Callable[[], None]) -> Callable[[], None]:
        return lambda: None


def _streamed(events: list[str]) -> pa.RecordBatchReader:
    data = rows([10, 11, 12, 13], "2024-01-01")

    def batches():
        for batch in data.to_batches(max_chunksize=1):
            events.append("batch")
            yield batch

    return pa.RecordBatchReader.from_batches(data.schema, batches())


@pytest.mark.parametrize(
    "spec",
    [
        AppendSpec(rows([10], "2024-01-01")),
        OverwriteSpec(rows([10], "2024-01-01")),
        ReplaceWhereSpec(rows([10], "2024-01-01"), "day = '2024-01-01'"),
        MergeSpec(
            rows([1, 10], "2024-01-01"), "t.id = s.id", matched_update_all=True, not_matched_insert_all=True
        ),
    ],
    ids=["append", "overwrite", "replace_where", "merge"],
)
def test_a_fence_refusing_after_the_source_was_read_stops_the_commit(
    engine: DeltaRsEngine, partitioned: str, spec
) -> None:
    before = DeltaTable(partitioned).version()
    fence = Fence(fail_from=2)  # passes before delta-rs starts, refuses when the source ends
    with pytest.raises(CommitFencedError, match="lease lost"):
        engine.write(partitioned, spec, WriteContext(fence=fence))
    assert fence.checks == 2
    assert DeltaTable(partitioned).version() == before
    assert ids(partitioned) == [1, 2, 3, 4]


def test_the_source_end_check_runs_after_every_batch(engine: DeltaRsEngine, partitioned: str) -> None:
    events: list[str] = []
    engine.write(partitioned, AppendSpec(lambda: _streamed(events)), WriteContext(fence=Fence(99, events)))
    assert events == ["check 1", "batch", "batch", "batch", "batch", "check 2"]
    assert ids(partitioned) == [1, 2, 3, 4, 10, 11, 12, 13]


@pytest.mark.parametrize(
    "spec",
    [DeleteSpec("day = '2024-01-01'"), OptimizeSpec()],
    ids=["delete", "optimize"],
)
def test_writes_without_a_source_are_fenced_before_delta_rs_starts(
    engine: DeltaRsEngine, partitioned: str, spec
) -> None:
    before = DeltaTable(partitioned).version()
    with pytest.raises(CommitFencedError):
        engine.write(partitioned, spec, WriteContext(fence=Fence(fail_from=1)))
    assert DeltaTable(partitioned).version() == before


def test_a_passing_fence_lets_the_write_commit(engine: DeltaRsEngine, partitioned: str) -> None:
    fence = Fence(fail_from=99)
    result = engine.write(partitioned, DeleteSpec("day = '2024-01-01'"), WriteContext(fence=fence))
    assert result.committed and fence.checks == 1
    assert ids(partitioned) == [3, 4]
