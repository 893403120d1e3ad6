"""One real Airflow stack in a user's ``AIRFLOW_HOME``, shared by the end-to-end modules that fit in it.

Starting a stack (scheduler, dag-processor, triggerer, api-server) costs about 100 s of CPU, most of it the
api-server's imports; on CI's 2 cores that is close to a minute of wall time per module. The modules that
need no options of their own share this one (``tests/e2e/conftest.py`` starts it on first use, keeps its
users together and stops it after the last of them):

* ``test_generated_home.py``: a write waiting deferred behind another job's lease, and the browser visit of
  the deltaguard UI around it;
* ``test_lineage_assets.py``: OpenLineage events, asset-scheduled and asset-watcher runs;
* ``test_scheduler_pipeline.py``: the delta-rs example pipeline under contention;
* ``test_leased_taskflow.py``: writers deltaguard does not run, under its leases, one of them deferred (its
  lease renewed from the triggerer).
* ``test_late_exit_report.py``: a deferred write resumed although its worker reported the deferring
  process's end late.

The home is the one a user has: Airflow generated its ``airflow.cfg`` (every default, ``[deltaguard]``
included) and the harness's settings reach the components as ``AIRFLOW__*`` environment variables
(``prepare_home(generated=True)``); of deltaguard's options only ``lease_ttl`` is set. Each module triggers
its own DAGs, on its own tables under the data directory, and judges its own runs. The DAGs folder is a copy
of the example DAGs, so a module may add a DAG file of its own (the dag-processor picks it up).

What a module needs of the stack is set per DAG, through the environment its DAG file reads (write and
deferral seconds), never as a ``[deltaguard]`` option of its own: a second home started only for other
options costs a stack start and stop (about 100 s on CI). ``test_pyspark_pipeline.py`` keeps its own stack
(a Spark Connect server the components must know when they start, and a data directory nothing else writes).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.harness.airflow_runner import (
    AirflowHome,
    AirflowStack,
    default_dags_folder,
    prepare_home,
    stack_processes,
)
from tests.e2e.shared import start_from_migrated_db

#: the one deltaguard option the home sets (with the generated file's other options, 0.1's literal 20 s
#: heartbeat refused a shorter one)
LEASE_TTL = "30"
#: the OpenLineage namespace of every event the stack emits (to its file transport)
OL_NAMESPACE = "deltaguard_e2e"
#: seconds each write of the example pipeline stands in for its upstream job: long enough that writes
#: started together are still running when the slowest of them starts, even with task start-up spread over
#: several seconds on a busy 2-core machine
EXAMPLE_WRITE_SECONDS = 12
#: seconds each write of ``dags_examples/leased_taskflow.py`` works before it commits (overlaps are visible)
LEASED_WORK_SECONDS = 6
#: seconds its ``fix_balances`` waits deferred in the triggerer: long enough to see the triggerer renew its lease
#: several times (every ``LEASE_TTL / 6`` = 5 s)
LEASED_DEFER_SECONDS = 30


@dataclass
class UserStack:
    """The running shared stack and where things are.

    :param home: the prepared home (generated ``airflow.cfg``).
    :param stack: its running components.
    :param dags: the DAGs folder (a copy of the example DAGs).
    :param data: the example DAGs' data directory; each module keeps its tables in a folder of its own.
    :param openlineage_file: where OpenLineage's file transport appends the events.
    """

    home: AirflowHome
    stack: AirflowStack
    dags: Path
    data: Path
    openlineage_file: Path
    #: processes of the stack still alive after :meth:`stop` (``None`` until it stopped)
    leftover_pids: list[int] | None = field(default=None)

    def stop(self) -> list[int]:
        """Stop the stack (once); return the processes of it still alive afterwards."""
        if self.leftover_pids is None:
            self.stack.stop()
            leftovers = set(self.stack.leftover_processes(self.stack.last_snapshot))
            self.leftover_pids = sorted(leftovers | set(stack_processes(self.home.home)))
        return self.leftover_pids


def start_user_stack(root: Path) -> UserStack:
    """Prepare the generated home under ``root`` and start its stack (from the migrated metadata DB)."""
    dags = root / "dags"
    shutil.copytree(default_dags_folder(), dags / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    data = root / "data"
    ol_file = root / "openlineage.jsonl"
    home = prepare_home(
        root / "airflow_home",
        dags,
        parallelism=16,
        data_dir=data,
        generated=True,
        options={"deltaguard": {"lease_ttl": LEASE_TTL}},
        extra_env={
            "DELTAGUARD_EXAMPLE_SCHEDULE": "none",
            "DELTAGUARD_EXAMPLE_WRITE_SECONDS": str(EXAMPLE_WRITE_SECONDS),
            # the partner-feed watcher reports commits after version 0, whenever the triggerer starts it
            "DELTAGUARD_EXAMPLE_WATCH_AFTER": "0",
            "DELTAGUARD_LEASED_WORK_SECONDS": str(LEASED_WORK_SECONDS),
            "DELTAGUARD_LEASED_DEFER_SECONDS": str(LEASED_DEFER_SECONDS),
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
                {"type": "file", "log_file_path": str(ol_file), "append": True}
            ),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": OL_NAMESPACE,
        },
    )
    stack = AirflowStack(home, migrate=not start_from_migrated_db(home.home))
    stack.__enter__()
    return UserStack(home, stack, dags, data, ol_file)
