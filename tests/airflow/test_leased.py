"""Leased wrappers: any operator (and a ``@task`` function) under a deltaguard lease.

Operators are called directly with a minimal task context, against a real SQLite lease store and real
Delta tables; the wrapped operators are small real operators (one defers to Airflow's own
``TimeDeltaTrigger``, which is run to completion inside the wrapping trigger).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest
from airflow.sdk import DAG, BaseOperator, TaskGroup
from airflow.sdk.exceptions import TaskDeferred

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.exceptions import LeaseWaitTimeout
from deltaguard.leases.manager import LeaseManager
from deltaguard.writes.table_uri import table_key
from tests.airflow.helpers import sales_table, task_context


class Probe(BaseOperator):
    """Records, when it runs, which leases the store shows on its tables; then succeeds or fails."""

    def __init__(self, *, store_url: str, keys: list[str], fail: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.store_url = store_url
        self.keys = keys
        self.fail = fail
        self.seen: dict[str, list[str]] = {}

    def execute(self, context: Any) -> str:
        manager = LeaseManager(self.store_url)
        try:
            self.seen = {k: [lease.owner.task_id for lease in manager.leases(k)] for k in self.keys}
        finally:
            manager.store.close()
        if self.fail:
            raise RuntimeError("the wrapped write failed")
        return "written"


class Deferring(BaseOperator):
    """Defers to Airflow's ``TimeDeltaTrigger`` (as ``DatabricksSubmitRunOperator(deferrable=True)`` defers to its
    run trigger), then finishes in ``execute_complete``."""

    def __init__(self, *, seconds: float = 0.3, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seconds = seconds
        self.completed_with: Any = None

    def execute(self, context: Any) -> None:
        from airflow.providers.standard.triggers.temporal import TimeDeltaTrigger

        self.defer(
            trigger=TimeDeltaTrigger(dt.timedelta(seconds=self.seconds)),
            method_name="execute_complete",
            kwargs={"note": "from execute"},
        )

    def execute_complete(self, context: Any, event: Any = None, note: str | None = None) -> str:
        self.completed_with = (event, note)
        return "done"


def _leases(url: str, key: str) -> list[Any]:
    manager = LeaseManager(url)
    try:
        return manager.leases(key)
    finally:
        manager.store.close()


def _kinds(url: str, key: str) -> list[str]:
    manager = LeaseManager(url)
    try:
        return [d.kind for d in manager.decisions(uri=key)]
    finally:
        manager.store.close()


def _hold(
    url: str, key: str, kind: OperationKind = OperationKind.SET_TBLPROPERTIES
) -> tuple[LeaseManager, Granted]:
    manager = LeaseManager(url)
    claim = TableClaim(
        key, Operation(kind, label="other"), EngineProfile(EngineName.DELTA_RS, "1.6.6"), TableConfig()
    )
    granted = manager.acquire(LeaseRequest(claims=(claim,), owner=Owner(name="other"), ttl_s=120))
    assert isinstance(granted, Granted)
    return manager, granted


def test_the_wrapper_holds_the_lease_while_the_operator_runs_and_releases_it(
    tmp_path, lease_store_url
) -> None:
    from deltaguard.operators.leased import with_delta_lease

    table = sales_table(str(tmp_path / "sales"))
    key = table_key(table)
    probe = Probe(task_id="load", store_url=lease_store_url, keys=[key])
    wrapper = with_delta_lease(probe, tables=table, operation="DELETE", predicate="country = 'FR'")
    assert wrapper.execute(task_context("load")) == "written"  # the wrapped result is the task's
    assert probe.seen == {key: ["load"]}  # held while execute ran
    assert _leases(lease_store_url, key) == []  # released after
    assert _kinds(lease_store_url, key)[:2] == ["release", "grant"]
    assert wrapper.leased_uris == (key,)


def test_the_wrapper_releases_the_lease_when_the_operator_fails(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.leased import with_delta_lease

    table = sales_table(str(tmp_path / "sales"))
    key = table_key(table)
    probe = Probe(task_id="load", store_url=lease_store_url, keys=[key], fail=True)
    wrapper = with_delta_lease(probe, tables=table, sql=f"UPDATE delta.`{table}` SET amount = 0 WHERE id = 1")
    with pytest.raises(RuntimeError, match="wrapped write failed"):
        wrapper.execute(task_context("load"))
    assert probe.seen == {key: ["load"]}
    assert _leases(lease_store_url, key) == []
    assert _kinds(lease_store_url, key)[:2] == ["release", "grant"]


def test_a_multi_table_lease_is_all_or_nothing(tmp_path, lease_store_url, monkeypatch) -> None:
    from deltaguard.operators.leased import with_delta_lease

    a, b = sales_table(str(tmp_path / "a")), sales_table(str(tmp_path / "b"))
    manager, held = _hold(lease_store_url, table_key(b))
    try:
        probe = Probe(task_id="both", store_url=lease_store_url, keys=[table_key(a), table_key(b)])
        wrapper = with_delta_lease(
            probe, tables=[a, b], operation="INSERT", deferrable=False, lease_wait_timeout=1.0
        )
        with pytest.raises(LeaseWaitTimeout):
            wrapper.execute(task_context("both"))
        assert probe.seen == {}  # never ran
        assert _leases(lease_store_url, table_key(a)) == []  # a was not taken alone
        manager.release(held.lease_id, Owner(name="other"))
        assert wrapper.execute(task_context("both")) == "written"
        assert probe.seen == {table_key(a): ["both"], table_key(b): ["both"]}
    finally:
        manager.store.close()


def test_a_deferring_operator_keeps_its_lease_in_the_triggerer_until_it_ends(
    tmp_path, lease_store_url
) -> None:
    from deltaguard.operators.leased import RESUME_WRAPPED, with_delta_lease
    from deltaguard.triggers.leased import LeaseKeepingTrigger

    table = sales_table(str(tmp_path / "sales"))
    key = table_key(table)
    inner = Deferring(task_id="statement", seconds=1.5)
    wrapper = with_delta_lease(inner, tables=table, operation="MERGE", predicate="t.country = 'DE'")
    with pytest.raises(TaskDeferred) as deferred:
        wrapper.execute(task_context("statement"))
    trigger = deferred.value.trigger
    assert isinstance(trigger, LeaseKeepingTrigger) and deferred.value.method_name == RESUME_WRAPPED
    (held,) = _leases(lease_store_url, key)  # the worker left; the lease did not
    assert held.owner.task_id == "statement"

    # the trigger as the triggerer runs it: rebuilt from its serialized form, renewing every 0.3 s
    path, kwargs = trigger.serialize()
    assert path == "deltaguard.triggers.leased.LeaseKeepingTrigger"
    rebuilt = LeaseKeepingTrigger(**{**kwargs, "heartbeat_s": 0.3})

    async def first_event() -> Any:
        async for event in rebuilt.run():
            return event.payload
        return None

    payload = asyncio.run(first_event())
    assert payload["lease_lost"] is None and payload["lease_id"] == held.lease_id
    (renewed,) = _leases(lease_store_url, key)
    assert renewed.expires_at > held.expires_at  # heartbeats from the trigger extended it

    result = wrapper.resume_execution(
        RESUME_WRAPPED, {**deferred.value.kwargs, "event": payload}, task_context("statement")
    )
    assert result == "done"
    assert inner.completed_with[1] == "from execute"  # the wrapped operator's own resume kwargs
    assert _leases(lease_store_url, key) == []  # released once the work ended


def test_a_failed_wrapped_deferral_releases_the_lease(tmp_path, lease_store_url) -> None:
    from airflow.sdk.exceptions import TaskDeferralTimeout

    from deltaguard.operators.leased import with_delta_lease

    table = sales_table(str(tmp_path / "sales"))
    key = table_key(table)
    wrapper = with_delta_lease(Deferring(task_id="statement"), tables=table, operation="OPTIMIZE")
    with pytest.raises(TaskDeferred):
        wrapper.execute(task_context("statement"))
    assert _leases(lease_store_url, key) != []
    # Airflow resumes a timed-out deferral with "__fail__" and the error in place of the kwargs
    with pytest.raises(TaskDeferralTimeout):
        wrapper.resume_execution("__fail__", {"error": "Trigger timeout"}, task_context("statement"))
    assert _leases(lease_store_url, key) == []


def test_ending_the_deferred_task_releases_the_lease_from_the_trigger(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.leased import with_delta_lease

    table = sales_table(str(tmp_path / "sales"))
    key = table_key(table)
    wrapper = with_delta_lease(
        Deferring(task_id="statement", seconds=600), tables=table, operation="OPTIMIZE"
    )
    with pytest.raises(TaskDeferred) as deferred:
        wrapper.execute(task_context("statement"))
    assert _leases(lease_store_url, key) != []
    asyncio.run(deferred.value.trigger.on_kill())  # Airflow calls it when a user ends the task
    assert _leases(lease_store_url, key) == []


def test_the_wrapper_waits_behind_a_conflicting_lease_with_the_shared_rule(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.leased import with_delta_lease
    from deltaguard.triggers.lease import LeaseAvailableTrigger

    table = sales_table(str(tmp_path / "sales"))
    key = table_key(table)
    manager, held = _hold(lease_store_url, key)
    try:
        probe = Probe(task_id="load", store_url=lease_store_url, keys=[key])
        wrapper = with_delta_lease(probe, tables=table, operation="INSERT")
        with pytest.raises(TaskDeferred) as deferred:  # deferrable by default, like deltaguard's operators
            wrapper.execute(task_context("load"))
        assert isinstance(deferred.value.trigger, LeaseAvailableTrigger)
        assert deferred.value.method_name == "execute_complete"
        assert probe.seen == {}
        assert "wait" in _kinds(lease_store_url, key)
        manager.release(held.lease_id, Owner(name="other"))
        assert (
            wrapper.resume_execution("execute_complete", deferred.value.kwargs, task_context("load"))
            == "written"
        )
        assert probe.seen == {key: ["load"]}
    finally:
        manager.store.close()


def test_the_wrapper_takes_the_wrapped_operators_place_in_the_dag() -> None:
    from deltaguard.operators.leased import DeltaLeasedOperator, with_delta_lease

    with DAG(dag_id="wrapping", schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) as dag:
        with TaskGroup("loads"):
            inner = Probe(task_id="load", store_url="sqlite://", keys=[], retries=3)
            wrapped = with_delta_lease(inner, tables="/data/t", operation="INSERT")
        after = Probe(task_id="after", store_url="sqlite://", keys=[])
        wrapped >> after
    assert set(dag.task_dict) == {"loads.load", "after"}
    assert isinstance(dag.task_dict["loads.load"], DeltaLeasedOperator)
    assert wrapped.retries == 3 and wrapped.operator is inner
    assert dag.task_dict["after"].upstream_task_ids == {"loads.load"}


def test_a_bad_declaration_fails_when_the_dag_is_parsed() -> None:
    from deltaguard.operators.leased import with_delta_lease

    with pytest.raises(ValueError, match="unknown operation"):
        with_delta_lease(Probe(task_id="a", store_url="", keys=[]), tables="/t", operation="UPSERT")
    with pytest.raises(ValueError, match="cannot classify"):
        with_delta_lease(Probe(task_id="b", store_url="", keys=[]), tables="/t", sql="SELECT 1")
    with pytest.raises(ValueError, match="declare the operation"):
        with_delta_lease(Probe(task_id="c", store_url="", keys=[]), tables="/t")


def test_the_wrapped_operators_own_sql_is_classified(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.leased import with_delta_lease

    class SqlProbe(Probe):
        def __init__(self, *, sql: str, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.sql = sql

    table = sales_table(str(tmp_path / "sales"))
    probe = SqlProbe(
        task_id="q",
        store_url=lease_store_url,
        keys=[table_key(table)],
        sql=f"DELETE FROM delta.`{table}` WHERE country = 'DE'",
    )
    wrapper = with_delta_lease(probe)  # the table and operation come from the statement
    (target,) = wrapper.delta_lease_targets()
    assert target.table == table and target.operation.kind is OperationKind.DELETE
    assert target.operation.predicate == "country = 'DE'"
    assert wrapper.execute(task_context("q")) == "written"
    assert probe.seen == {table_key(table): ["q"]}


def test_the_taskflow_decorator_runs_the_function_under_the_lease(tmp_path, lease_store_url) -> None:
    from deltaguard.decorators.delta_write import delta_write_task

    table = sales_table(str(tmp_path / "sales"))
    key = table_key(table)
    seen: list[list[str]] = []

    def write(n: int) -> int:
        seen.append([lease.owner.task_id for lease in _leases(lease_store_url, key)])
        return n + 1

    with DAG(dag_id="tf", schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)):
        out = delta_write_task(write, tables=table, operation="INSERT", predicate="country = 'DE'")(41)
    op = out.operator
    assert op.execute(task_context("write")) == 42
    assert seen == [["write"]]
    assert _leases(lease_store_url, key) == []
    assert _kinds(lease_store_url, key)[:2] == ["release", "grant"]


def test_two_compatible_wrapped_writers_hold_leases_at_once(tmp_path, lease_store_url) -> None:
    """Blind appends to one table do not conflict: the second is granted while the first holds its lease
    (the wrapped work declares that it commits with delta-rs, as the holder does)."""
    from deltaguard.operators.leased import with_delta_lease

    table = sales_table(str(tmp_path / "sales"))
    key = table_key(table)
    manager, held = _hold(lease_store_url, key, OperationKind.INSERT)
    try:
        probe = Probe(task_id="append", store_url=lease_store_url, keys=[key])
        with_delta_lease(
            probe,
            tables=table,
            operation="INSERT",
            engine="delta-rs",
            deferrable=False,
            lease_wait_timeout=20,
        ).execute(task_context("append"))
        # both held at once (the other has no task id): granted beside it, not after a wait (which the
        # 20 s lease_wait_timeout would have failed, the other lease being held throughout)
        assert sorted(probe.seen[key]) == ["", "append"]
    finally:
        manager.release(held.lease_id, Owner(name="other"))
        manager.store.close()


def test_a_mapping_of_tables_to_operations_needs_no_other_operation() -> None:
    from deltaguard.operators.leased import with_delta_lease

    wrapper = with_delta_lease(
        Probe(task_id="both", store_url="", keys=[]), tables={"/t/a": "OVERWRITE", "/t/b": "insert"}
    )
    kinds = {t.table: t.operation.kind for t in wrapper.delta_lease_targets()}
    assert kinds == {"/t/a": OperationKind.OVERWRITE, "/t/b": OperationKind.INSERT}


def test_the_wrapped_operators_templates_are_rendered_and_its_sql_classified_after(tmp_path) -> None:
    from deltaguard.operators.leased import with_delta_lease

    class TemplatedSql(Probe):
        template_fields = ("sql",)

        def __init__(self, *, sql: str, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.sql = sql

    inner = TemplatedSql(
        task_id="t", store_url="", keys=[], sql="DELETE FROM delta.`/data/t` WHERE day = '{{ run_id }}'"
    )
    wrapper = with_delta_lease(inner)  # templated: checked when the task runs, not at parse time
    wrapper.render_template_fields({"run_id": "2026-03-01"})
    assert inner.sql == "DELETE FROM delta.`/data/t` WHERE day = '2026-03-01'"
    (target,) = wrapper.delta_lease_targets()
    assert target.operation.predicate == "day = '2026-03-01'"


@pytest.mark.parametrize("fails", [False, True])
def test_a_real_databricks_sql_operator_runs_its_statement_under_the_lease(
    tmp_path, lease_store_url, monkeypatch, fails: bool
) -> None:
    """``DatabricksSqlOperator`` as DAGs use it; only ``DatabricksSqlHook.run`` is replaced, since no SQL
    warehouse is reachable here: the replacement records the leases on the table when the statement would
    be sent."""
    from airflow.providers.databricks.hooks.databricks_sql import DatabricksSqlHook
    from airflow.providers.databricks.operators.databricks_sql import DatabricksSqlOperator

    from deltaguard.operators.leased import with_delta_lease

    table = sales_table(str(tmp_path / "sales"))
    key = table_key(table)
    sent: list[tuple[str, list[str]]] = []

    def run(self: Any, sql: Any, *args: Any, **kwargs: Any) -> None:
        sent.append((sql, [lease.owner.task_id for lease in _leases(lease_store_url, key)]))
        if fails:
            raise RuntimeError("the warehouse rejected the statement")

    monkeypatch.setattr(DatabricksSqlHook, "run", run)
    statement = f"MERGE INTO delta.`{table}` t USING updates s ON t.id = s.id AND t.country = 'FR' WHEN MATCHED THEN UPDATE SET *"
    wrapper = with_delta_lease(
        DatabricksSqlOperator(task_id="merge", sql=statement, do_xcom_push=False),
        databricks_runtime="15.4",
    )
    if fails:
        with pytest.raises(RuntimeError, match="rejected"):
            wrapper.execute(task_context("merge"))
    else:
        wrapper.execute(task_context("merge"))
    assert sent == [(statement, ["merge"])]  # the lease was held when the statement went out
    assert _leases(lease_store_url, key) == []
    assert _kinds(lease_store_url, key)[:2] == ["release", "grant"]


def test_each_claim_names_the_commit_coordinator_of_the_wrapped_engine(tmp_path, lease_store_url) -> None:
    """delta-rs in the worker commits through the local file system's no-replace rename (shared by every
    writer); a spark-submit job's driver is its own, with a log store on local files that excludes only
    that driver's commits, so its coordinator is the task's alone and every other writer conflicts."""
    from deltaguard.core.profiles import STORAGE_COORDINATION
    from deltaguard.operators.leased import with_delta_lease

    table = sales_table(str(tmp_path / "sales"))

    def coordination(**kwargs: Any) -> str:
        wrapper = with_delta_lease(
            Probe(task_id=f"w{len(kwargs)}", store_url="", keys=[]),
            tables=table,
            operation="INSERT",
            **kwargs,
        )
        (claim,) = wrapper._claims(task_context(wrapper.task_id))
        return claim.profile.commit_coordination

    assert coordination(engine="delta-rs") == STORAGE_COORDINATION
    assert coordination(engine="spark", priority=0) == "single-driver:wrapped:adhoc_airflow/w2@r1"


class ReportsLineage(Probe):
    """A wrapped operator with OpenLineage facets of its own (as the SQL operators have)."""

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.generated.base import InputDataset

        return OperatorLineage(inputs=[InputDataset(namespace="postgres://db:5432", name="shop.orders")])


def test_the_wrapper_reports_the_leased_tables_to_openlineage(tmp_path, lease_store_url) -> None:
    from deltaguard.lineage.record import dataset_name
    from deltaguard.operators.leased import with_delta_lease

    first, second = sales_table(str(tmp_path / "sales")), sales_table(str(tmp_path / "returns"))
    probe = ReportsLineage(task_id="load", store_url=lease_store_url, keys=[])
    wrapper = with_delta_lease(probe, tables={first: "INSERT", second: "INSERT"})
    wrapper.execute(task_context("load"))
    lineage = wrapper.get_openlineage_facets_on_complete(None)
    assert [(i.namespace, i.name) for i in lineage.inputs] == [("postgres://db:5432", "shop.orders")]
    expected = {(dataset_name(t).namespace, dataset_name(t).name) for t in (first, second)}
    assert {(o.namespace, o.name) for o in lineage.outputs} == expected
    assert all(o.facets["storage"].storageLayer == "delta" for o in lineage.outputs)


def test_a_leased_task_must_say_what_work_it_runs() -> None:
    from airflow.sdk import BaseOperator

    from deltaguard.operators.leased import DeltaLeaseMixin

    class Incomplete(DeltaLeaseMixin, BaseOperator):
        pass

    with pytest.raises(TypeError, match="abstract"):
        Incomplete(task_id="incomplete")


def test_a_leased_claim_is_judged_with_the_engines_evaluator(tmp_path, lease_store_url, monkeypatch) -> None:
    """The wrapper reads its table through the one door (``deltaguard.engines.sources``): on an INT partition
    a DELETE of ``k = 1.5`` rewrites ``k = 1`` on delta-rs, which the hand reading keeps apart once its own
    check of a fraction is taken out."""
    import dataclasses

    from deltaguard.core.rules import deltars

    monkeypatch.setattr(deltars, "fractional_columns", lambda p: frozenset())

    import pyarrow as pa
    from deltalake import write_deltalake

    from deltaguard.core.model import pair_verdict
    from deltaguard.operators.leased import with_delta_lease

    path = str(tmp_path / "ints")
    write_deltalake(path, pa.table({"k": pa.array([1, 2], pa.int32()), "v": [1, 2]}), partition_by=["k"])
    wrapper = with_delta_lease(
        Probe(task_id="w", store_url="", keys=[]),
        tables=path,
        operation=Operation(OperationKind.DELETE, predicate="k = 1.5"),
        engine="delta-rs",
    )
    (claim,) = wrapper._claims(task_context(wrapper.task_id))
    assert claim.config is not None
    other = Operation(OperationKind.DELETE, predicate="k = 1")
    hand = pair_verdict(
        claim.operation, other, dataclasses.replace(claim.config, meaning=None), claim.profile
    )
    assert not hand.conflict  # what the lease would have granted without the engine
    verdict = pair_verdict(claim.operation, other, claim.config, claim.profile)
    assert verdict.conflict and verdict.rule == "deltars.engine_unconfirmed", verdict.reason
