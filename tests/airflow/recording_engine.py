"""A real delta-rs engine that records when it is closed, for the operators' engine-release tests.

Built by the operators through ``engine="tests.airflow.recording_engine:RecordingEngine"`` (the registry's
``module:Class`` form). Each instance appends ``created <id>`` and ``closed <id>`` lines to the file named
by :data:`LOG_ENV`, so a test sees every engine a task built and whether it was released, whichever
module object the class was loaded through. Tables whose path contains ``fail-write`` make the write raise
after the engine validated it: the failure path of a task that got its lease.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from deltaguard.engines.base import WriteResult
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.specs import WriteContext, WriteSpec

LOG_ENV = "DELTAGUARD_TEST_ENGINE_LOG"


class RecordingEngine(DeltaRsEngine):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.instance = uuid.uuid4().hex[:8]
        self._record("created")

    def _record(self, event: str) -> None:
        with Path(os.environ[LOG_ENV]).open("a") as log:
            log.write(f"{event} {self.instance}\n")

    def write(self, table_uri: str, spec: WriteSpec, context: WriteContext) -> WriteResult:
        if "fail-write" in table_uri:
            raise RuntimeError("the write broke after its lease was granted")
        return super().write(table_uri, spec, context)

    def close(self) -> None:
        self._record("closed")
        super().close()


def events(log: Path) -> dict[str, list[str]]:
    """``instance -> [events]`` from the log (empty when no engine was built)."""
    seen: dict[str, list[str]] = {}
    if not log.exists():
        return seen
    for line in log.read_text().splitlines():
        event, instance = line.split()
        seen.setdefault(instance, []).append(event)
    return seen
