"""The demo's live story: decision-log entries of a run's tasks told as plain lines while it goes on."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, write_deltalake

from benchmarks.harness.story import StoryPrinter, StoryReader
from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.manager import LeaseManager

PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")


def test_each_task_is_told_granted_waiting_and_committed(tmp_path: Path) -> None:
    table = str(tmp_path / "sales")
    write_deltalake(table, pa.table({"id": [1]}))
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    manager = LeaseManager(url)
    config = TableConfig(uri=table)
    optimize = Owner(dag_id="daily", run_id="r1", task_id="optimize")
    merge = Owner(dag_id="daily", run_id="r1", task_id="merge")
    other = Owner(dag_id="another_dag", run_id="r1", task_id="append")
    lines: list[str] = []
    reader = StoryReader(url, "daily", {"sales": table}, origin=time.time())
    with StoryPrinter(reader, emit=lines.append, interval=0.05):
        held = manager.acquire(
            LeaseRequest((TableClaim(table, Operation(OperationKind.OPTIMIZE), PROFILE, config),), optimize)
        )
        assert isinstance(held, Granted)
        waiting = manager.acquire(
            LeaseRequest(
                (
                    TableClaim(
                        table, Operation(OperationKind.MERGE, merge_condition="t.id = s.id"), PROFILE, config
                    ),
                ),
                merge,
                request_id="merge-request",
            )
        )
        assert isinstance(waiting, Waiting)
        manager.acquire(
            LeaseRequest(
                (
                    TableClaim(
                        str(tmp_path / "events"), Operation(OperationKind.INSERT), PROFILE, TableConfig()
                    ),
                ),
                other,
            )
        )
        # the OPTIMIZE commits, naming its task as deltaguard's engines do, then releases
        write_deltalake(
            table,
            pa.table({"id": [2]}),
            mode="append",
            commit_properties=CommitProperties(
                custom_metadata={"airflow.task_id": "optimize", "airflow.run_id": "r1"}
            ),
        )
        assert manager.release(held.lease_id, optimize)
        granted = manager.check("merge-request")
        assert isinstance(granted, Granted)
        assert manager.release(granted.lease_id, merge)
    story = [" ".join(line.split()[3:]) for line in lines]  # without the time column
    assert story == [
        "optimize sales granted at once",
        story[1],
        "optimize sales committed version 1, lease released",
        story[3],
        "merge sales lease released, nothing committed",
    ], lines
    assert story[1].startswith("merge sales waiting at position 1 behind optimize (running) because ")
    assert story[3].startswith("merge sales granted after waiting ")
    assert not any("append" in line for line in lines)  # another DAG's task is not told


def test_nothing_is_told_before_the_store_exists(tmp_path: Path) -> None:
    reader = StoryReader(f"sqlite:///{tmp_path / 'absent.db'}", "daily", {})
    assert reader.poll() == []
    assert not (tmp_path / "absent.db").exists()


def test_a_reason_is_told_without_the_blockers_descriptions() -> None:
    from benchmarks.harness.story import short_reason

    reason = "conflicts with running #0 (d/t@r (status = 'closed')): DELETE x UPDATE conflict: the table is unpartitioned"
    assert short_reason(reason) == "DELETE x UPDATE conflict: the table is unpartitioned"
    assert len(short_reason("x" * 500)) == 160


def test_a_delta_spark_commit_is_found_by_its_user_metadata(tmp_path: Path) -> None:
    """delta-spark writes the task's commit metadata as one JSON document in ``userMetadata``."""
    import json

    from benchmarks.harness.story import committed_version

    table = str(tmp_path / "t")
    write_deltalake(table, pa.table({"id": [1]}))
    metadata = json.dumps({"airflow.run_id": "r1", "airflow.task_id": "merge"}, sort_keys=True)
    write_deltalake(
        table,
        pa.table({"id": [2]}),
        mode="append",
        commit_properties=CommitProperties(custom_metadata={"userMetadata": metadata}),
    )
    assert committed_version(table, "r1", "merge") == 1
    assert committed_version(table, "r2", "merge") is None
