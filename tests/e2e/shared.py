"""What the real-scheduler end-to-end tests share: the example pipeline module and task-log checks."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
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


def migrated_metadata_db() -> Path:
    """A SQLite metadata DB ``airflow db migrate`` of the installed Airflow built, shared by every stack.

    Built once per Airflow version in the temporary folder (the same file ``tests/airflow/conftest.py`` and
    ``tests/ui/airflow_app.py`` use), in a clean environment: no ``AIRFLOW__*`` option of the test process
    reaches it. A stack started from a copy skips its own ``airflow db migrate``, which on 2 busy cores
    costs 20 to 60 s even when there is nothing to migrate (the command imports all of Airflow first).
    """
    from importlib.metadata import version

    cache = Path(tempfile.gettempdir()) / f"deltaguard-airflow-{version('apache-airflow-core')}.db"
    if cache.exists():
        return cache
    scratch = Path(tempfile.mkdtemp(prefix="deltaguard-migrate-"))
    build = cache.with_suffix(f".{os.getpid()}.tmp")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONFIG"))}
    env.update(
        AIRFLOW_HOME=str(scratch),
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{build}",
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
    )
    try:
        subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"],
            env=env,
            check=True,
            capture_output=True,
            timeout=600,
        )
        os.replace(build, cache)  # atomic: a concurrent run sees a complete file or none
    finally:
        build.unlink(missing_ok=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return cache


def start_from_migrated_db(home: Path) -> bool:
    """Give a fresh ``AIRFLOW_HOME`` a copy of :func:`migrated_metadata_db`; return whether it did (``False``
    when the home has a metadata DB already: the stack must then migrate it itself)."""
    target = home / "airflow.db"
    if target.exists():
        return False
    shutil.copyfile(migrated_metadata_db(), target)
    return True


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
