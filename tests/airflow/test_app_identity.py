"""App ids name exactly one task instance and run; the version moves only when that task instance is
cleared (``deltaguard.writes.prepared``, ADR 0018). On real delta-rs tables and, for the clears, the
installed Airflow's own ``clear_task_instances`` and ``dag.test`` task runner over a SQLite metadata DB."""

from __future__ import annotations

import contextlib
import datetime as dt
from types import SimpleNamespace

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.harness.app_ids import parse_app_id
from deltaguard.writes.prepared import MAX_APP_ID, app_id
from tests.airflow.helpers import rows, sales_table

START = dt.datetime(2026, 3, 1, 1, tzinfo=dt.UTC)
RUN = "scheduled__2026-03-01T01:00:00+00:00"  # two DAGs on one schedule share their run ids


def _context(dag_id: str, task_id: str, map_index: int = -1) -> dict:
    ti = SimpleNamespace(
        dag_id=dag_id, task_id=task_id, run_id=RUN, try_number=1, map_index=map_index, max_tries=0
    )
    dag_run = SimpleNamespace(
        run_id=RUN, start_date=START, run_after=START, logical_date=START, clear_number=0
    )
    return {"ti": ti, "dag_run": dag_run}


def _append(task_id: str, table: str, row_id: int) -> object:
    from deltaguard.operators.dml import DeltaInsertOperator

    return DeltaInsertOperator(
        task_id=task_id,
        table=table,
        source=lambda: pa.table({"id": [row_id], "country": ["DE"], "amount": [row_id]}),
    )


def test_a_dotted_dag_id_and_a_task_group_both_write(tmp_path, lease_store_url) -> None:
    """DAG ``etl.daily`` task ``load`` and DAG ``etl`` task ``daily.load`` (a task group) once shared the
    app id ``etl.daily.load@<run>``: the second write was skipped as a duplicate and its rows were lost."""
    from airflow.sdk import DAG, TaskGroup

    table = sales_table(str(tmp_path / "sales"))
    with DAG("etl.daily", schedule=None):
        plain = _append("load", table, 100)
    with DAG("etl", schedule=None), TaskGroup("daily"):
        grouped = _append("load", table, 200)
    assert grouped.task_id == "daily.load"
    first = plain.execute(_context("etl.daily", "load"))
    second = grouped.execute(_context("etl", "daily.load"))
    assert first["app_id"] != second["app_id"]
    assert (first["duplicate"], second["duplicate"]) == (False, False)
    assert sorted(r["id"] for r in rows(table)) == [1, 2, 3, 100, 200]


def test_a_mapped_index_and_a_dotted_task_id_both_write(tmp_path, lease_store_url) -> None:
    """A mapped ``t``\\[0] and a task ``t.0`` once shared ``d.t.0@<run>``."""
    from airflow.sdk import DAG

    table = sales_table(str(tmp_path / "sales"))
    with DAG("d", schedule=None):
        mapped = _append("t", table, 100)
        dotted = _append("t.0", table, 200)
    first = mapped.execute(_context("d", "t", map_index=0))
    second = dotted.execute(_context("d", "t.0"))
    assert (first["duplicate"], second["duplicate"]) == (False, False)
    assert sorted(r["id"] for r in rows(table)) == [1, 2, 3, 100, 200]


_NAME = st.text(alphabet=st.sampled_from("ab.%/@#_-:+é2"), max_size=12)


@given(
    a=st.tuples(_NAME, _NAME, st.one_of(st.none(), st.integers(0, 20)), st.one_of(st.none(), _NAME)),
    b=st.tuples(_NAME, _NAME, st.one_of(st.none(), st.integers(0, 20)), st.one_of(st.none(), _NAME)),
)
def test_app_ids_are_injective_and_parse_back(a, b) -> None:
    """Any characters, including the separators and the escape itself: equal ids only for equal tuples,
    and the tuple is recovered."""
    assert parse_app_id(app_id(*a)) == a
    assert (app_id(*a) == app_id(*b)) == (a == b)


def test_long_app_ids_end_in_a_hash_of_the_whole() -> None:
    long_run = "backfill__" + "x" * 300
    shortened = app_id("d", "t", 0, long_run)
    assert len(shortened) == MAX_APP_ID and shortened.startswith("d/t/0@backfill__")
    assert shortened != app_id("d", "t", 0, long_run + "y")
    # an unshortened id never holds a raw '#', so it cannot equal a shortened one
    assert "#" not in app_id("d#", "t#", None, "r#" * 20)
    with pytest.raises(ValueError):
        parse_app_id(shortened)


# ------------------------------------------------------------------------------ clears on Airflow 3.3
_DAG_BODY = """
class FailOnceAfterCommit(DeltaInsertOperator):
    # commits, then fails once when the marker file exists, so that its retry meets the committed write
    def execute(self, context):
        result = super().execute(context)
        marker = pathlib.Path({marker!r})
        if marker.exists():
            marker.unlink()
            raise RuntimeError("failing after the commit, once")
        return result


other = EmptyOperator(task_id="other")
load = FailOnceAfterCommit(
    task_id="load",
    table={table!r},
    retries=2,
    retry_delay=dt.timedelta(0),
    source=lambda: pa.table({{"id": [7], "country": ["DE"], "amount": [7]}}),
)
other >> load
"""


def _clear(dag_id: str, run_id: str, task_id: str) -> None:
    """Clear one task instance with Airflow's own ``clear_task_instances`` (as the UI and CLI do)."""
    from airflow.models.taskinstance import TaskInstance, clear_task_instances
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=dag_id, run_id=run_id, task_id=task_id).all()
        clear_task_instances(tis, session)


def _clear_number(dag_id: str, run_id: str) -> int:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        return session.query(DagRun).filter_by(dag_id=dag_id, run_id=run_id).one().clear_number


def _rerun(dag, run_id: str, task_id: str) -> None:
    """Run a cleared (or up-for-retry) task instance of an existing run as ``dag.test()``'s loop does:
    bump the try number, schedule it, and run it in process through the task runner."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.sdk.definitions.dag import _run_task
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState

    with create_session() as session:
        ti = session.query(TaskInstance).filter_by(dag_id=dag.dag_id, run_id=run_id, task_id=task_id).one()
        assert ti.state in (None, TaskInstanceState.UP_FOR_RETRY)
        ti.try_number += 1
        ti.state = TaskInstanceState.SCHEDULED
        session.commit()
        # a failed try is recorded in the metadata DB, as dag.test() does
        with contextlib.suppress(Exception):
            _run_task(ti=ti, task=dag.task_dict[task_id])


def _ti(dag_id: str, run_id: str, task_id: str) -> tuple[str, int, int]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        ti = session.query(TaskInstance).filter_by(dag_id=dag_id, run_id=run_id, task_id=task_id).one()
        return str(ti.state), ti.try_number, ti.max_tries


def _copies(table: str) -> int:
    return [r["id"] for r in rows(table)].count(7)


@pytest.mark.slow
@pytest.mark.usefixtures("airflow_db")
def test_retry_after_a_sibling_clear_is_a_no_op_and_an_own_clear_writes_again(
    tmp_path, lease_store_url
) -> None:
    """The version follows clears of this task instance only, on the installed Airflow (its
    ``clear_task_instances`` and ``dag.test()``'s in-process task runner over the SQLite metadata DB):

    1. a try commits and fails; its retry (``dag.test()``'s own loop) is a no-op;
    2. ``load`` is cleared: its re-run writes again, commits and fails;
    3. the sibling ``other`` is cleared and re-run (the run's clear_number goes up); ``load``'s retry must
       not write again (it did under the run's clear_number: 3 copies);
    4. ``load`` is cleared once more: it writes again.
    """
    from tests.airflow.helpers import task_state, write_dag, xcom_return

    table = sales_table(str(tmp_path / "sales"))
    marker = tmp_path / "fail-once"
    marker.touch()
    body = _DAG_BODY.format(marker=str(marker), table=table)
    imports = (
        "import pathlib\nfrom airflow.providers.standard.operators.empty import EmptyOperator\n"
        "from deltaguard.operators.dml import DeltaInsertOperator"
    )
    dag = write_dag("clear_dag_ti", body, imports)
    dag_run = dag.test(logical_date=START)
    run_id = dag_run.run_id
    # 1. try 1 committed and failed, try 2 (the retry) found its write
    assert task_state(dag_run, "load") == "success"
    assert _ti(dag.dag_id, run_id, "load")[1:] == (2, 2)
    assert xcom_return(dag_run, "load")["duplicate"] is True
    assert _copies(table) == 1

    # 2. clearing load: max_tries = try_number at the clear + retries, and the re-run writes
    marker.touch()
    _clear(dag.dag_id, run_id, "load")
    assert _ti(dag.dag_id, run_id, "load")[2] == 2 + 2
    _rerun(dag, run_id, "load")
    assert _ti(dag.dag_id, run_id, "load")[0] == "up_for_retry"
    assert _copies(table) == 2

    # 3. a sibling's clear moves the run's clear_number, not load's max_tries: the retry is a no-op
    before = _clear_number(dag.dag_id, run_id)
    _clear(dag.dag_id, run_id, "other")
    _rerun(dag, run_id, "other")
    assert _clear_number(dag.dag_id, run_id) == before + 1
    assert _ti(dag.dag_id, run_id, "load")[2] == 4
    _rerun(dag, run_id, "load")
    state, try_number, _ = _ti(dag.dag_id, run_id, "load")
    assert (state, try_number) == ("success", 4)
    result = xcom_return(dag_run, "load")
    assert result["duplicate"] is True and result["app_version"] == 2
    assert _copies(table) == 2

    # 4. clearing load again writes again, under the try number of this clear
    _clear(dag.dag_id, run_id, "load")
    _rerun(dag, run_id, "load")
    result = xcom_return(dag_run, "load")
    assert (result["duplicate"], result["app_version"]) == (False, 4)
    assert _copies(table) == 3
