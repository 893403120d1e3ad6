"""A Spark write checks its fence right before the statement that writes, not only when it starts.

A write runs several Spark Connect operations before its MERGE (the source, its guard, a temporary view).
A worker frozen among them resumes with its lease lost; the keeper's ``interruptTag`` then finds nothing
running, so only a check right before the writing statement keeps the MERGE from being sent. Measured in
the production-shaped run (``benchmarks/results/cluster-spark-freeze.json``): without it, a MERGE sent
4.7 minutes after the loss committed. These tests drive the Spark runners with a session that records the
statements it is sent (no JVM).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from deltaguard.engines.errors import CommitFencedError
from deltaguard.engines.spark import ops
from deltaguard.engines.spark.runners import RUNNERS
from deltaguard.engines.spark.target import SparkTarget
from deltaguard.engines.specs import DeleteSpec, MergeSpec, UpdateSpec, WriteContext, WriteSpec


class Fence:
    """A fence that is lost once ``lose()`` was called."""

    def __init__(self) -> None:
        self.lost = False

    def lose(self) -> None:
        self.lost = True

    def check(self) -> None:
        if self.lost:
            raise CommitFencedError("lease lost")

    def on_lost(self, cancel: Callable[[], None]) -> Callable[[], None]:
        return lambda: None


class Recording:
    """The few session calls the SQL runners make; ``sql`` records each statement."""

    def __init__(self) -> None:
        self.statements: list[str] = []
        self.catalog = self
        self.conf = self

    def sql(self, text: str) -> Any:
        self.statements.append(text)
        return self

    def collect(self) -> list[Any]:
        return []

    def dropTempView(self, name: str) -> None:
        pass

    def get(self, key: str, default: Any = None) -> Any:
        return default

    def set(self, key: str, value: Any) -> None:
        pass

    def unset(self, key: str) -> None:
        pass


class Source:
    """A source whose preparation takes the lease away, as a freeze between two Connect calls does."""

    def __init__(self, fence: Fence) -> None:
        self.fence = fence

    def createOrReplaceTempView(self, name: str) -> None:
        self.fence.lose()


def run(spec: WriteSpec, spark: Recording, fence: Fence) -> None:
    RUNNERS.runner(spec).run(spark, SparkTarget.parse("/lake/t"), spec, WriteContext(fence=fence), None)  # type: ignore[arg-type]


def test_a_lease_lost_while_the_merge_source_is_prepared_sends_no_merge(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fence, spark = Fence(), Recording()
    monkeypatch.setattr(ops, "to_spark_dataframe", lambda session, source: source)
    monkeypatch.setattr(ops, "guarded_source", lambda frame, spec: frame)
    spec = MergeSpec(source=Source(fence), condition="t.id = s.id", matched_update_all=True)
    with pytest.raises(CommitFencedError):
        run(spec, spark, fence)
    assert not [s for s in spark.statements if s.startswith("MERGE")]


def test_with_the_lease_live_the_merge_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    fence, spark = Fence(), Recording()
    monkeypatch.setattr(ops, "to_spark_dataframe", lambda session, source: source)
    monkeypatch.setattr(ops, "guarded_source", lambda frame, spec: frame)

    class Quiet(Source):
        def createOrReplaceTempView(self, name: str) -> None:
            pass

    run(MergeSpec(source=Quiet(fence), condition="t.id = s.id", matched_update_all=True), spark, fence)
    assert [s.splitlines()[0] for s in spark.statements if s.startswith("MERGE")] == [
        "MERGE INTO delta.`/lake/t` AS `t`"
    ]


@pytest.mark.parametrize(
    "spec", [UpdateSpec(updates={"v": "v + 1"}, predicate="p = 'a'"), DeleteSpec(predicate="p = 'a'")]
)
def test_a_lost_lease_sends_no_dml(spec: WriteSpec) -> None:
    fence, spark = Fence(), Recording()
    fence.lose()
    with pytest.raises(CommitFencedError):
        run(spec, spark, fence)
    assert spark.statements == []
