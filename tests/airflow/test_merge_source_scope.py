"""``DeltaMergeOperator``'s data-aware scope arguments under a real Airflow ``dag.test()`` (ADR 0019)."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from deltaguard.operators.dml import DeltaMergeOperator
from tests.airflow.helpers import decision_rows, rows, run_dag, sales_table, task_state, xcom_return

pytestmark = pytest.mark.usefixtures("airflow_db")

OPS = "from deltaguard.operators.dml import DeltaMergeOperator"


def test_outside_the_declared_partition_fails_before_any_lease_or_widens(tmp_path, lease_store_url) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    refused, widened = sales_table(str(tmp_path / "refused")), sales_table(str(tmp_path / "widened"))
    source = str(tmp_path / "changes.parquet")
    pq.write_table(pa.table({"id": [2, 9], "country": ["DE", "FR"], "amount": [21, 90]}), source)
    body = f"""
    source = {source!r}
    DeltaMergeOperator(task_id="refused", table={refused!r}, source=source, condition="t.id = s.id",
                       target_partition_values={{"country": "DE"}})
    DeltaMergeOperator(task_id="widened", table={widened!r}, source=source, condition="t.id = s.id",
                       target_partition_values={{"country": "DE"}}, on_source_outside_target="widen")
    """
    dag_run = run_dag("merge_scope_dag", body, OPS)
    assert task_state(dag_run, "refused") == "failed"
    assert DeltaTable(refused).version() == 0  # nothing written
    assert task_state(dag_run, "widened") == "success"
    assert [(r["id"], r["country"], r["amount"]) for r in rows(widened)] == [
        (1, "DE", 10),
        (2, "DE", 21),
        (3, "FR", 30),
        (9, "FR", 90),
    ]
    assert decision_rows(lease_store_url) == 2  # the widened task's grant and release; none for the refused
    assert "inserted country: narrowed to 2 source value(s)" in xcom_return(dag_run, "widened")["merge_scope"]


def test_arguments_are_checked_when_the_dag_is_parsed() -> None:
    with pytest.raises(ValueError, match="on_source_outside_target"):
        DeltaMergeOperator(
            task_id="m", table="/t", source="/s", condition="t.id = s.id", on_source_outside_target="ignore"
        )
    with pytest.raises(ValueError, match="max_in_values"):
        DeltaMergeOperator(
            task_id="m", table="/t", source="/s", condition="t.id = s.id", scope_max_in_values=0
        )


def test_a_resumed_task_writes_under_the_scope_it_queued_with(tmp_path) -> None:
    """The lease may be granted by the trigger for the scope asked before the wait; the resumed task keeps
    that scope (carried in the deferral kwargs) and the engine refuses a source that has left it."""
    import itertools

    import pyarrow as pa

    from deltaguard.engines.deltars.engine import DeltaRsEngine
    from deltaguard.engines.errors import InvalidWriteError
    from deltaguard.engines.specs import WriteContext
    from deltaguard.writes.prepared import PreparedWrite

    table = sales_table(str(tmp_path / "sales"))
    calls = itertools.count()

    def drifting() -> pa.Table:  # DE before the wait, FR after it
        country = "DE" if next(calls) == 0 else "FR"
        return pa.table({"id": [2], "country": [country], "amount": [21]})

    def operator() -> DeltaMergeOperator:
        op = DeltaMergeOperator(
            task_id="m", table=table, source=drifting, condition="t.id = s.id AND t.country = s.country"
        )
        op.resolved_engine = DeltaRsEngine()
        return op

    engine = DeltaRsEngine()
    before = operator()
    queued = before.build_spec(engine.table_config(table))
    assert queued.scope_conjunct() == "t.country IN ('DE')"
    config = engine.table_config(table)
    after = operator()
    # what a resumed try takes from the prepared write its deferral carried (tests/airflow/test_prepared_write.py)
    after.resumed_write = PreparedWrite(
        uri=table,
        operation=queued.operation(),
        profile=engine.profile(),
        table_config=config,
        source_scope=queued.source_scope,  # type: ignore[attr-defined]
    )
    resumed = after.build_spec(config)
    assert resumed.source_scope == queued.source_scope and resumed.operation() == queued.operation()
    assert next(calls) == 1  # the source was not read again to build the scope
    with pytest.raises(InvalidWriteError, match="FR"):
        engine.write(table, resumed, WriteContext())
    assert DeltaTable(table).version() == 0
