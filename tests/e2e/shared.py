"""What the real-scheduler end-to-end tests share: the example pipeline module and task-log checks."""

from __future__ import annotations

import importlib.util
import json
import re
from types import ModuleType

from benchmarks.harness.airflow_runner import default_dags_folder
from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.manager import LeaseManager

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


def hold_customers(manager: LeaseManager, uri: str, holder: Owner, request_id: str) -> Granted:
    """Take a lease on ``customers`` for a MERGE of another (fictitious) job, through the real lease manager.

    Every write of the example DAG on that table conflicts with it, so the DAG's ``customers`` writers queue
    behind it whatever the timing of task start-up on a busy machine.
    """
    import deltalake

    claim = TableClaim(
        uri=uri,
        operation=Operation(OperationKind.MERGE, merge_condition="t.id = s.id"),
        profile=EngineProfile(EngineName.DELTA_RS, deltalake.__version__),
        config=TableConfig(uri=uri),
    )
    granted = manager.acquire(LeaseRequest((claim,), holder, ttl_s=600.0, request_id=request_id))
    assert isinstance(granted, Granted)
    return granted
