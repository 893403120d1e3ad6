"""End to end in an ``AIRFLOW_HOME`` whose ``airflow.cfg`` Airflow generated itself, as a user's does.

Airflow writes every default into the file it generates: the whole ``[deltaguard]`` section and
``[operators] default_deferrable = false``. Everything else reaches the components as ``AIRFLOW__*``
environment variables only (``prepare_home(generated=True)``, as in the official Docker image), and of
deltaguard's options only ``lease_ttl`` is set. A deltaguard write that must wait for a lease held by
another job then waits *deferred* in the triggerer: its state is ``deferred`` and its pool holds no running
slot, and it writes once the lease is released. The example DAGs lie in the same DAGs folder: the
dag-processor parses them without an import error.

The home and its stack are the shared user's stack (:mod:`tests.e2e.user_stack`); this module adds its DAG
file to the stack's DAGs folder and its table to a folder of its own. The deltaguard UI is visited in a
browser around the same run (:mod:`tests.e2e.browser`): while the write waits, the Tables page, the table's
matrix, the waiting task's and its run's Delta leases tabs; after the release, the finished writer's "Delta
leases" extra link. A failed visit fails only :func:`test_the_ui_in_a_browser_mid_run`.
"""

from __future__ import annotations

import configparser
import contextlib
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from benchmarks.harness.airflow_runner import AirflowHome
from deltaguard.core.admission import Owner
from deltaguard.leases.manager import LeaseManager
from deltaguard.plugins.reads import UiReader
from deltaguard.pools import pool_name
from deltaguard.writes.table_uri import table_key
from tests.e2e.browser import CHROMIUM, SCREENSHOTS, UiVisit
from tests.e2e.shared import hold_customers
from tests.e2e.user_stack import LEASE_TTL, UserStack

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

DAG_ID = "generated_home_waiting_write"
HOLDER = Owner(dag_id="nightly_rebuild", run_id="manual__e2e", task_id="rewrite", try_number=1)
DAG = """
from datetime import datetime

from airflow.sdk import DAG

from deltaguard.operators.dml import DeltaDeleteOperator

with DAG(dag_id={dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    DeltaDeleteOperator(task_id="delete_closed", table={table!r}, predicate="id = 2", pool={pool!r})
"""


@dataclass(frozen=True)
class Outcome:
    home: AirflowHome
    table: str
    #: the task's state and its pool while the lease was held
    waiting_state: str
    waiting_pool: dict[str, Any]
    final_state: str
    task_state: str
    import_errors: list[dict[str, Any]]
    #: where the browser's screenshots are, and what stopped its visit (``None``: it went through)
    screenshots: Path
    browser_error: BaseException | None
    #: ``default_pool``'s size in the running stack
    default_pool_slots: int


@pytest.fixture(scope="module")
def outcome(user_stack: UserStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Outcome]:
    home, stack = user_stack.home, user_stack.stack
    table = str(user_stack.data / "generated" / "accounts")
    write_deltalake(table, pa.table({"id": [1, 2, 3], "balance": [10, 20, 30]}))
    # The pool-routing task_policy is opt-in (a fresh install does not route): the task names its pool, so
    # the pool's slot counts show whether the waiting write holds a worker slot.
    pool = pool_name(table_key(table))
    dag_file = user_stack.dags / "waiting_write.py"
    dag_file.write_text(textwrap.dedent(DAG.format(dag_id=DAG_ID, table=table, pool=pool)))
    screenshots = tmp_path_factory.mktemp("screenshots")
    browser_error: BaseException | None = None
    manager = LeaseManager(home.lease_store_url)
    try:
        hold_customers(manager, table, HOLDER, "e2e-generated-holder")
        with contextlib.ExitStack() as browsing:
            stack.wait_for_dag(DAG_ID)
            stack.api.set_pool(pool, 8, "the accounts table", include_deferred=False)
            run_id = stack.trigger(DAG_ID)

            def task_state() -> str | None:
                tis = stack.task_instances(DAG_ID, run_id)
                state = tis[0].state if tis else None
                return state if state in ("deferred", "success", "failed", "up_for_retry") else None

            waiting_state = str(stack.api.wait("the write to wait", task_state, 240, 2.0))
            waiting_pool = dict(stack.api.get(f"/api/v2/pools/{pool}"))
            default_pool_slots = stack.api.pool_slots("default_pool")
            visit: UiVisit | None = None
            if CHROMIUM.exists():
                try:
                    visit = browsing.enter_context(UiVisit(home, HOLDER, screenshots))
                    visit.while_waiting(DAG_ID, run_id, UiReader(manager.store))
                except Exception as exc:  # judged by the browser test alone, after the run
                    browser_error, visit = exc, None
            manager.release("e2e-generated-holder", HOLDER)
            final_state = stack.wait_for_run(DAG_ID, run_id, timeout=240)
            tis = stack.task_instances(DAG_ID, run_id)
            import_errors = stack.api.import_errors()
            if visit is not None:
                try:
                    visit.after_release(stack, DAG_ID, run_id)
                except Exception as exc:
                    browser_error = exc
    finally:
        manager.store.close()
    yield Outcome(
        home,
        table,
        waiting_state,
        waiting_pool,
        final_state,
        str(tis[0].state),
        import_errors,
        screenshots,
        browser_error,
        default_pool_slots,
    )


def test_the_home_is_a_users(outcome: Outcome) -> None:
    parser = configparser.RawConfigParser()
    parser.read(outcome.home.home / "airflow.cfg")
    assert parser.get("operators", "default_deferrable") == "false"  # Airflow's default, written out
    assert parser.get("deltaguard", "lease_ttl") == "120"
    env = outcome.home.env()
    assert env["AIRFLOW__DELTAGUARD__LEASE_TTL"] == LEASE_TTL
    assert not [
        k for k in env if k.startswith("AIRFLOW__DELTAGUARD__") and k != "AIRFLOW__DELTAGUARD__LEASE_TTL"
    ]
    assert "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE" not in env
    # the stack started from a metadata DB migrated elsewhere (default_pool: 128 slots) and sized the pool
    # to its LocalExecutor's parallelism (apache/airflow#71914)
    assert outcome.default_pool_slots == int(env["AIRFLOW__CORE__PARALLELISM"]) == 16


def test_a_waiting_write_defers_and_frees_its_slot(outcome: Outcome) -> None:
    assert outcome.waiting_state == "deferred"
    assert outcome.waiting_pool["running_slots"] == 0
    assert outcome.waiting_pool["deferred_slots"] == 1


def test_it_writes_once_the_lease_is_released(outcome: Outcome) -> None:
    assert (outcome.final_state, outcome.task_state) == ("success", "success")
    ids = sorted(DeltaTable(outcome.table).to_pyarrow_table().column("id").to_pylist())
    assert ids == [1, 3]


def test_the_dag_processor_parses_the_examples(outcome: Outcome) -> None:
    assert outcome.import_errors == []


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt install chromium)")
def test_the_ui_in_a_browser_mid_run(outcome: Outcome) -> None:
    if outcome.browser_error is not None:
        raise outcome.browser_error
    for name in SCREENSHOTS:
        assert (outcome.screenshots / name).stat().st_size > 10_000, name
