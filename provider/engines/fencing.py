"""The engine side of fenced commits (ADR 0018): the hook an engine calls right before it commits.

A writer hands the engine a :class:`CommitFence` in :class:`~deltaguard.engines.specs.WriteContext`. The
engine must call :meth:`CommitFence.check` as late before its commit as it can, and register a way to
cancel its running work with :meth:`CommitFence.on_lost`:

* delta-rs (:mod:`deltaguard.engines.deltars`) runs every write in one Rust call that writes the data files
  and commits; Python gets control back only after the commit. For writes with a source, the source is
  handed to delta-rs as a stream whose end runs the check (:func:`fenced_source`): delta-rs pulls the last
  batch only after all others are written, so what remains unchecked is the flush of the last files and
  the commit itself. Writes without a source (DELETE, UPDATE, OPTIMIZE, ALTER) are checked just before the
  call. A delta-rs call cannot be cancelled from Python; it registers nothing with ``on_lost``.
* Spark should run each write in its own job group (``SparkContext.setJobGroup(group, ..., True)``, or a
  Spark Connect operation tag), call ``check`` right before the action that commits, and register
  ``on_lost(lambda: sc.cancelJobGroup(group))`` (Spark Connect: ``spark.interruptTag(tag)``), so a lost
  lease interrupts the running job; Delta's ``OptimisticTransaction.commit`` then never runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

import pyarrow as pa


class CommitFence(Protocol):
    """What a writer gives the engine to fence its commit."""

    def check(self) -> None:
        """Return if the writer's lease is certainly live for the commit; raise otherwise.

        :raises deltaguard.engines.errors.CommitFencedError: the lease is lost or not certainly live.
        """

    def on_lost(self, cancel: Callable[[], None]) -> Callable[[], None]:
        """Call ``cancel`` (once, from another thread) if the lease is lost; return an unregister function."""


class FenceTrip:
    """Remembers the fence failure raised inside a stream that the engine consumed.

    delta-rs turns a Python exception raised while it pulls the stream into a generic ``DeltaError``; the
    engine re-raises the remembered :class:`CommitFencedError` instead.
    """

    def __init__(self) -> None:
        self.error: BaseException | None = None


def fenced_source(
    data: pa.Table | pa.RecordBatchReader, fence: CommitFence, trip: FenceTrip
) -> pa.RecordBatchReader:
    """``data`` as a stream whose end checks ``fence`` before the consumer sees it end.

    :param data: the resolved source.
    :param fence: the writer's fence.
    :param trip: receives the fence's error, if it raises.
    """
    batches = data.to_batches() if isinstance(data, pa.Table) else data

    def stream() -> Iterator[pa.RecordBatch]:
        yield from batches
        try:
            fence.check()
        except BaseException as exc:
            trip.error = exc
            raise

    return pa.RecordBatchReader.from_batches(data.schema, stream())
