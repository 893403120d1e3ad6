"""A deferred write whose lease is free at once still resumes when its worker reports the deferral late.

Airflow 3.3's scheduler fails a task when the executor's report of the deferring try's exit (a *success* of
that try) arrives after the trigger fired and the task was queued again ("finished with state success, but
the task instance's state attribute is queued"; apache/airflow issues 66374, 71580, 72716). The report is
late when the task process has closed its sockets before it can be reaped: the task supervisor then sleeps
``[workers] min_heartbeat_interval`` (5 s) before it looks again. Measured on kept scheduler logs, one
deferral in six was reported that late (:func:`deltaguard.leases.waiting.first_event_after_s`).

This makes it certain rather than left to the machine: the DAG's write, when it defers, registers an exit
handler that closes the process's descriptors and lives on for a second, as a slow exit of a loaded machine
does, and the resumed try works a few seconds before its write, as real writes do, so that a report
arriving after the resume finds the task running. Its DAG file sets its own ``[deltaguard] poll_interval``
to 1 s, a setting a user may choose, so a trigger bound only by the poll interval would fire long before
the report. The other job's lease is released as soon as the task is seen deferred. The write must then
succeed in its first try, after the supervisor saw the deferring process end, late. (With the trigger
bound by the poll interval alone, the task failed with "finished with state success, but the task
instance's state attribute is running".)

Runs on the shared user's stack (:mod:`tests.e2e.user_stack`), with a DAG file and a table of its own.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltaguard.core.admission import Owner
from deltaguard.leases.manager import LeaseManager
from tests.e2e.shared import hold_customers
from tests.e2e.user_stack import UserStack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

DAG_ID = "late_exit_report"
HOLDER = Owner(dag_id="nightly_rebuild", run_id="manual__late_exit", task_id="rewrite", try_number=1)
#: seconds the deferring process lives on after closing its descriptors
LINGER_S = 1.0
#: seconds the resumed try works before its write, so that a late report finds it running, not done
WORK_S = 8
DAG = """
import atexit
import os
import time
from datetime import datetime

from airflow.sdk import DAG

from deltaguard.operators.dml import DeltaDeleteOperator

# read by the task when it asks for its lease (configuration is read at call time)
os.environ["AIRFLOW__DELTAGUARD__POLL_INTERVAL"] = "1"


def _close_then_linger():
    # the supervisor sees every socket at its end while the process can not yet be reaped
    os.closerange(0, 4096)
    time.sleep({linger})


class DeleteExitingLate(DeltaDeleteOperator):
    def defer_for_lease(self, *args, **kwargs):
        atexit.register(_close_then_linger)
        super().defer_for_lease(*args, **kwargs)

    def execute_complete(self, context, *args, **kwargs):
        time.sleep({work})  # the resumed try's own work before its write: real writes take seconds
        return super().execute_complete(context, *args, **kwargs)


with DAG(dag_id={dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    DeleteExitingLate(task_id="delete_closed", table={table!r}, predicate="id = 2", deferrable=True)
"""


@dataclass(frozen=True)
class Outcome:
    table: str
    run_state: str
    task_state: str
    try_number: int
    #: seconds from the task's deferral to its supervisor's report that the deferring process ended
    reported_after_s: float


def _deferral_and_report(log_dir: Path, ti_id: str) -> float:
    """Seconds from the task's ``Pausing task as DEFERRED`` record to its supervisor's ``Workload
    finished ... final_state=deferred`` line (the scheduler's log: the LocalExecutor's supervisors log there)."""
    paused: datetime | None = None
    for log in (log_dir / f"dag_id={DAG_ID}").rglob("attempt=1.log"):
        for line in log.read_text(errors="replace").splitlines():
            record = json.loads(line) if line.startswith("{") else {}
            if "Pausing task as DEFERRED" in str(record.get("event", "")):
                paused = datetime.fromisoformat(str(record["timestamp"]).replace("Z", "+00:00"))
    assert paused is not None, "the task never deferred"
    finished = re.compile(rf"^(\S+Z) .*Workload finished .*final_state=deferred .*workload_id={ti_id}")
    for line in (log_dir / "scheduler.log").read_text(errors="replace").splitlines():
        if match := finished.match(line):
            return (datetime.fromisoformat(match.group(1).replace("Z", "+00:00")) - paused).total_seconds()
    raise AssertionError("the supervisor never reported the deferring process's end")


@pytest.fixture(scope="module")
def outcome(user_stack: UserStack) -> Outcome:
    home, stack = user_stack.home, user_stack.stack
    table = str(user_stack.data / "late_exit" / "accounts")
    write_deltalake(table, pa.table({"id": [1, 2, 3], "balance": [10, 20, 30]}))
    (user_stack.dags / "late_exit_report.py").write_text(
        textwrap.dedent(DAG.format(dag_id=DAG_ID, table=table, linger=LINGER_S, work=WORK_S))
    )
    manager = LeaseManager(home.lease_store_url)
    try:
        hold_customers(manager, table, HOLDER, "e2e-late-exit-holder")
        stack.wait_for_dag(DAG_ID)
        run_id = stack.trigger(DAG_ID)

        def deferred() -> bool | None:
            tis = stack.task_instances(DAG_ID, run_id)
            state = tis[0].state if tis else None
            assert state not in ("success", "failed", "up_for_retry"), state
            return True if state == "deferred" else None

        stack.api.wait("the write to defer", deferred, 240, 0.2)
        manager.release("e2e-late-exit-holder", HOLDER)
        run_state = stack.wait_for_run(DAG_ID, run_id, timeout=240)
        (ti,) = stack.task_instances(DAG_ID, run_id)
        ti_id = str(
            stack.api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/delete_closed")["id"]
        )
    finally:
        manager.store.close()
    return Outcome(table, run_state, str(ti.state), ti.try_number, _deferral_and_report(home.log_dir, ti_id))


def test_the_deferring_process_was_reported_late(outcome: Outcome) -> None:
    # one supervisor exit poll at least: what made the report late in the failed runs
    assert outcome.reported_after_s >= 4.0, outcome.reported_after_s


def test_the_write_resumed_in_its_first_try_and_wrote_once(outcome: Outcome) -> None:
    assert (outcome.run_state, outcome.task_state, outcome.try_number) == ("success", "success", 1)
    ids = sorted(DeltaTable(outcome.table).to_pyarrow_table().column("id").to_pylist())
    assert ids == [1, 3]
