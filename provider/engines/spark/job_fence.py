"""Run one write's Spark jobs so that a lost lease stops them (ADR 0018, ADR 0033).

Classic sessions run the write under its own job group, cancelled when the fence reports the lease lost.
Spark Connect runs it under an operation tag on the server, which outlives a frozen or killed worker, so the
tag's fence handle is recorded on the lease first (:mod:`deltaguard.engines.spark.connect_fence`).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from deltaguard.engines.fencing import fenced_error
from deltaguard.engines.spark.setup import is_connect
from deltaguard.engines.specs import WriteContext

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@contextlib.contextmanager
def cancelled_when_lost(
    spark: SparkSession,
    context: WriteContext,
    url: str | None = None,
    conn_id: str | None = None,
) -> Iterator[threading.Event]:
    """Run the write's Spark jobs under their own job group (or Connect tag), cancelled if the lease is lost.

    Yields an event that is set once the fence reported the lease lost, so the interrupted write's error
    is reported as fenced rather than as a failure of the job (ADR 0018).

    On Spark Connect the work runs on the server and outlives a frozen or killed worker, whose ``on_lost``
    then never runs: the fence handle of the tag (:func:`~deltaguard.engines.spark.connect_fence.connect_handle`)
    is recorded on the lease first (the fence's optional ``remote_work``), so the lease is not reclaimed
    until a fence confirmed the work stopped (ADR 0033); once every operation of the write's session is
    seen ended, the handle is dropped again (``remote_work_ended``).
    """
    lost = threading.Event()
    fence = context.fence
    if fence is None:
        yield lost
        return
    group = f"deltaguard-{uuid.uuid4().hex}"
    interrupt: Callable[[], object]
    forget: Callable[[], object]
    handle: dict[str, str] | None = None
    if is_connect(spark):
        spark.addTag(group)
        interrupt = functools.partial(spark.interruptTag, group)
        forget = functools.partial(spark.removeTag, group)
        record = getattr(fence, "remote_work", None)
        if record is not None:
            from deltaguard.engines.spark.connect_fence import connect_handle

            handle = connect_handle(spark, group, url, conn_id)
            try:
                record(handle)
            except Exception as exc:
                spark.removeTag(group)
                raise fenced_error(exc, "the table") from exc
    else:
        jobs = spark.sparkContext
        jobs.setJobGroup(group, "deltaguard write", interruptOnCancel=True)
        interrupt = functools.partial(jobs.cancelJobGroup, group)
        # None removes the property (the JVM's SparkContext.setLocalProperty); pyspark types the value as str
        forget = functools.partial(jobs.setLocalProperty, "spark.jobGroup.id", None)  # type: ignore[arg-type]

    def cancel() -> None:
        lost.set()
        interrupt()

    unregister = fence.on_lost(cancel)
    try:
        yield lost
    finally:
        unregister()
        forget()
        ended = getattr(fence, "remote_work_ended", None)
        if handle is not None and ended is not None:
            from deltaguard.engines.spark.connect_fence import all_ended

            # Seen ended here: no fence is needed for it any more. Not seen ended (the session is then
            # released without waiting for it): the handle stays, and the lease, if it expires, is not
            # reclaimed until a fence or an operator confirms the work stopped.
            if all_ended(spark):
                ended(handle)
