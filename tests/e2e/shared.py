"""What the real-scheduler end-to-end tests share: the example pipeline module and task-log checks."""

from __future__ import annotations

import importlib.util
import json
import re
from types import ModuleType

from deltaguard.airflow_runner import default_dags_folder

#: Text a failed Delta commit leaves in a task's error records, on either engine.
CONFLICT_TEXT = re.compile(
    r"Concurrent\w+Exception|MetadataChangedException|ProtocolChangedException|CommitFailed|DeltaConflictError"
)


def load_example_pipeline(module_name: str) -> ModuleType:
    """``dags_examples/example_pipeline.py`` loaded under ``module_name`` (each test module its own copy)."""
    path = default_dags_folder() / "example_pipeline.py"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def error_records(text: str) -> list[str]:
    """Error-level records of a task log (JSON lines): where a failed commit would show up."""
    errors = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and (
            record.get("level") in ("error", "critical") or "error_detail" in record
        ):
            errors.append(json.dumps(record))
    return errors
