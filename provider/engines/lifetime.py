"""An engine lives as long as the task try that built it: released when the try ends, however it ends."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)


def close_engine(engine: Any) -> None:
    """``engine.close()``, logging rather than raising what it raises.

    A failure to release a session must neither turn a committed write into a failed task (a retry would
    only find its own commit) nor hide the error that ended a failed one.

    :param engine: a :class:`~deltaguard.engines.base.DeltaEngine`, or ``None`` (nothing to release).
    """
    if engine is None:
        return
    try:
        engine.close()
    except Exception:
        log.warning("deltaguard: could not release the %s engine's resources", engine.name, exc_info=True)


@contextlib.contextmanager
def engine_released(holder: Any) -> Iterator[None]:
    """Close ``holder.resolved_engine`` when the block ends: on success, on failure, and when the task
    defers (``TaskDeferred`` passes through; the resumed try builds its engine again).

    :param holder: the operator; its ``resolved_engine`` is read at exit, since the block creates it.
    """
    try:
        yield
    finally:
        close_engine(getattr(holder, "resolved_engine", None))
