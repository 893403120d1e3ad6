"""The engine side of fenced commits (ADR 0018): the hook an engine calls right before it commits.

A writer hands the engine a :class:`CommitFence` in :class:`~deltaguard.engines.specs.WriteContext`. The
engine must call :meth:`CommitFence.check` as late before its commit as it can, and register a way to
cancel its running work with :meth:`CommitFence.on_lost`:

* delta-rs (:mod:`deltaguard.engines.deltars.engine`): appends and overwrites are staged
  (:mod:`deltaguard.engines.deltars.staged`): the data files are written first, ``check`` runs, then the
  files are committed, so only the commit call is unchecked. Every other write runs in one Rust call that
  writes the data files and commits; Python gets control back only after the commit. For writes with a source, the source is
  handed to delta-rs as a stream whose end runs the check (:func:`fenced_source`): delta-rs pulls the last
  batch only after all others are written, so what remains unchecked is the flush of the last files and
  the commit itself. Writes without a source (DELETE, UPDATE, OPTIMIZE, ALTER) are checked just before the
  call. A delta-rs call cannot be cancelled from Python; it registers nothing with ``on_lost``.
* Spark (:mod:`deltaguard.engines.spark.engine`) runs each write under its own job group (classic sessions,
  ``SparkContext.setJobGroup(group, ..., interruptOnCancel=True)``) or operation tag (Spark Connect),
  calls ``check`` right before the statement that writes and commits, and registers a cancel with
  ``on_lost`` (``cancelJobGroup`` / ``interruptTag``), so a lease lost while the Spark jobs run interrupts
  them and Delta's ``OptimisticTransaction.commit`` never runs. What remains unchecked is the time between
  the last job's end and the commit on the driver.

Where a window remains, engines report the commit to the fence's optional ``after_commit``, which fails a
commit that landed after the lease was lost with another writer admitted (``LateCommitError``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

import pyarrow as pa

from deltaguard.exceptions import CommitFencedError


class CommitFence(Protocol):
    """What a writer gives the engine to fence its commit."""

    def check(self) -> None:
        """Return if the writer's lease is certainly live for the commit; raise otherwise.

        :raises deltaguard.engines.errors.CommitFencedError: the lease is lost or not certainly live.
        """

    def on_lost(self, cancel: Callable[[], None]) -> Callable[[], None]:
        """Call ``cancel`` (once, from another thread) if the lease is lost; return an unregister function."""

    # Optional: ``after_commit(table_uri, version, committed_at)``, called by an engine once its commit
    # landed, ``committed_at`` the storage's write time of the log entry, a zero-argument callable that
    # reads it, or None (unknown); raises ``LateCommitError`` when the commit may have landed after the lease was lost with
    # another writer admitted (the keeper implements it; engines look it up with ``getattr``).


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


def check_fence(fence: CommitFence, table_uri: str) -> None:
    """Run ``fence.check()``; any failure becomes a :class:`CommitFencedError` naming the table."""
    try:
        fence.check()
    except Exception as exc:
        raise fenced_error(exc, table_uri) from exc


def fenced_error(cause: BaseException, table_uri: str) -> CommitFencedError:
    """``cause`` as the error a fenced write raises."""
    if isinstance(cause, CommitFencedError):
        return cause
    return CommitFencedError(f"write to {table_uri} stopped before its commit: {cause}")
