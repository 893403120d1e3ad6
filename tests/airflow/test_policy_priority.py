"""The priority policy: write tasks of the table with the longest serial chain start first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.priority import DEFAULT_EXPECTED_S, table_priorities
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

PARTITIONED = TableConfig(partition_columns=("day",))
SPARK = EngineProfile(EngineName.DELTA_SPARK, "3.0.0")


def update(day: str) -> Operation:
    return Operation(OperationKind.UPDATE, predicate=f"day = '{day}'")


def chain_through_s(
    ops: Sequence[Operation | None],
    expected: Sequence[float | None],
    table: TableConfig,
    profile: EngineProfile,
) -> list[float]:
    return table_priorities(ops, expected, table, profile).chains_s


def serial_work_s(
    ops: Sequence[Operation | None],
    expected: Sequence[float | None],
    table: TableConfig,
    profile: EngineProfile,
) -> float:
    """The table's serial work: its heaviest chain of pairwise-conflicting writes."""
    return max(chain_through_s(ops, expected, table, profile))


def test_serial_work_is_the_heaviest_chain_of_conflicting_writes() -> None:
    same_day = [update("a"), update("a"), update("b")]
    # the two updates of day a conflict; day b runs beside them
    assert serial_work_s(same_day, [10.0, 20.0, 100.0], PARTITIONED, SPARK) == 100.0
    assert serial_work_s(same_day, [10.0, 20.0, 5.0], PARTITIONED, SPARK) == 30.0
    # unpartitioned, the model cannot separate the days: all three conflict
    assert serial_work_s(same_day, [10.0, 20.0, 5.0], TableConfig(), SPARK) == 35.0


def test_unknown_operations_and_durations_count_conservatively() -> None:
    assert serial_work_s([update("a"), None], [1.0, 2.0], PARTITIONED, SPARK) == 3.0
    assert serial_work_s([update("a")], [None], PARTITIONED, SPARK) == DEFAULT_EXPECTED_S
    with pytest.raises(ValueError):
        serial_work_s([update("a")], [], PARTITIONED, SPARK)


def test_each_write_weighs_the_heaviest_chain_through_it() -> None:
    ops = [update("a"), update("a"), update("b"), update("a")]
    # day a: three updates in one chain (10 + 20 + 30 s); day b's update conflicts with none of them
    assert chain_through_s(ops, [10.0, 20.0, 100.0, 30.0], PARTITIONED, SPARK) == [60.0, 60.0, 100.0, 60.0]
    assert chain_through_s(ops, [10.0, 20.0, 5.0, 30.0], PARTITIONED, SPARK) == [60.0, 60.0, 5.0, 60.0]
    assert max(chain_through_s(ops, [10.0, 20.0, 5.0, 30.0], PARTITIONED, SPARK)) == serial_work_s(
        ops, [10.0, 20.0, 5.0, 30.0], PARTITIONED, SPARK
    )


def test_writes_that_can_run_together_share_a_phase_and_ask_first() -> None:
    ops = [update("a"), update("a"), update("b"), update("c")]
    # by duration: #1 opens phase 0; #0 conflicts with it (phase 1); #2 and #3 join phase 0. Days b and c
    # are chains of their own (5 s, 1 s): they do not borrow day a's 30 s.
    ranked = table_priorities(ops, [10.0, 20.0, 5.0, 1.0], PARTITIONED, SPARK)
    assert ranked.weights == [30, 31, 6, 2]
    assert ranked.phase_bonus == [0, 1, 1, 1]  # the lease priorities: phase 0 first
    assert ranked.after == [(1,), (), (), ()]  # #0 lets the write of phase 0 it conflicts with ask first
    assert table_priorities([update("a")] * 3, [1.0, 2.0, 3.0], PARTITIONED, SPARK).weights == [6, 7, 8]


def _day_a_updates(prefix: str, table: str, count: int, seconds: int) -> None:
    """``count`` UPDATEs of the same partition of ``table``: a chain that must run one after another."""
    from deltaguard.operators.dml import DeltaUpdateOperator

    for i in range(count):
        DeltaUpdateOperator(
            task_id=f"{prefix}_{i}",
            table=table,
            engine="delta-rs",
            updates={"v": "v + 1"},
            predicate="day = 'a'",
            expected_duration=seconds,
        )


def _dag(tasks: Any) -> Any:
    from airflow.sdk import DAG

    with DAG("priority_probe", schedule=None) as dag:
        tasks()
    return dag


def test_dag_policy_ranks_the_serial_table_first() -> None:
    from deltaguard.operators.dml import DeltaMergeOperator
    from deltaguard.operators.maintenance import DeltaOptimizeOperator
    from deltaguard.pools.policy import dag_policy

    def tasks() -> None:
        # "wide": three MERGEs into different partitions (compatible) plus a short OPTIMIZE of one of them
        for day in ("a", "b", "c"):
            DeltaMergeOperator(
                task_id=f"wide_{day}",
                table="/data/wide",
                engine="delta-rs",
                source="/s.parquet",
                condition="t.id = s.id",
                target_partition_values={"day": day},
                matched_update={"v": "s.v"},
                expected_duration=40,
            )
        # "narrow": three UPDATEs of the same partition, which must run one after another
        _day_a_updates("narrow", "/data/narrow", 3, 30)
        DeltaOptimizeOperator(
            task_id="mine", table="/data/narrow", engine="delta-rs", priority_weight=7, expected_duration=10
        )

    dag = _dag(tasks)
    dag_policy(dag)
    weights = {t.task_id: t.priority_weight for t in dag.tasks}
    assert {weights[f"wide_{d}"] for d in "abc"} == {40}
    # 3 x 30 s of updates and the OPTIMIZE (delta-rs: conflicts with them); the author's own weight is kept
    # (the four conflict pairwise: four phases, earlier ones a little higher)
    assert sorted(weights[f"narrow_{i}"] for i in range(3)) == [101, 102, 103]
    assert weights["mine"] == 7


def test_a_lone_write_on_a_busy_table_does_not_outrank_another_tables_chain() -> None:
    """A MERGE that conflicts with nothing on its table gets its own chain's weight, not its table's
    heaviest chain: the two UPDATEs of ``other`` (a 70 s chain) start before it."""
    from deltaguard.operators.dml import DeltaMergeOperator
    from deltaguard.pools.policy import dag_policy

    def tasks() -> None:
        _day_a_updates("busy", "/data/busy", 3, 30)
        DeltaMergeOperator(
            task_id="busy_lone_merge",
            table="/data/busy",
            engine="delta-rs",
            source="/s.parquet",
            condition="t.id = s.id AND t.day = 'b'",
            target_partition_values={"day": "b"},
            matched_update={"v": "s.v"},
            expected_duration=40,
        )
        _day_a_updates("other", "/data/other", 2, 35)

    dag = _dag(tasks)
    dag_policy(dag)
    weights = {t.task_id: t.priority_weight for t in dag.tasks}
    assert sorted(weights[f"busy_{i}"] for i in range(3)) == [90, 91, 92]
    assert sorted(weights[f"other_{i}"] for i in range(2)) == [70, 71]
    assert weights["busy_lone_merge"] < min(weights[f"other_{i}"] for i in range(2))


def test_a_write_the_model_cannot_judge_does_not_keep_its_dag_from_loading() -> None:
    """The policy runs while DAG files are parsed: raising there would drop the whole DAG. The writes of a
    table where one has an unparsable predicate keep Airflow's weight (that task fails at run time, before
    any lease); other tables still get their priorities."""
    from deltaguard.operators.dml import DeltaDeleteOperator
    from deltaguard.pools.policy import dag_policy

    def tasks() -> None:
        DeltaDeleteOperator(task_id="broken", table="/data/mixed", engine="delta-rs", predicate="id = = 3")
        DeltaDeleteOperator(task_id="beside", table="/data/mixed", engine="delta-rs", predicate="id = 1")
        _day_a_updates("fine", "/data/fine", 2, 30)

    dag = _dag(tasks)
    dag_policy(dag)
    weights = {t.task_id: t.priority_weight for t in dag.tasks}
    assert weights["broken"] == weights["beside"] == 1  # Airflow's default: that table is left alone
    assert weights["fine_0"] > 1 and weights["fine_1"] > 1


def test_writes_started_together_rank_by_phase_at_the_lease_manager(tmp_path: Any) -> None:
    """Eight free slots start a table's writes within a second of each other, in no useful order. Measured
    in the orchestration benchmark (seed 2, delta-rs): a Z-order OPTIMIZE, which conflicts with every
    other write, asked 0.3 s before a MERGE of another partition and queued behind the first MERGE; the
    later MERGE could then only queue behind it, and the table took four rounds instead of three. The
    policy's phase bonus, as the lease priority, ranks the MERGE ahead: it runs beside the first one."""
    from deltaguard.core.admission import Granted, Owner, TableClaim, Waiting
    from deltaguard.hooks.lease import claims_request
    from deltaguard.leases.manager import LeaseManager
    from deltaguard.operators.dml import DeltaMergeOperator
    from deltaguard.operators.maintenance import DeltaOptimizeOperator
    from deltaguard.pools.policy import dag_policy
    from deltaguard.pools.priority import engine_profile

    table = "/data/hot"

    def tasks() -> None:
        for day, seconds in (("a", 40), ("b", 39)):
            DeltaMergeOperator(
                task_id=f"merge_{day}",
                table=table,
                engine="delta-rs",
                source="/s.parquet",
                condition=f"t.id = s.id AND t.day = '{day}'",
                target_partition_values={"day": day},
                matched_update={"v": "s.v"},
                expected_duration=seconds,
            )
        for day in ("c", "d"):
            DeltaOptimizeOperator(
                task_id=f"compact_{day}",
                table=table,
                engine="delta-rs",
                partition_filters={"day": day},
                expected_duration=35,
            )
        DeltaOptimizeOperator(
            task_id="zorder", table=table, engine="delta-rs", zorder_by=["id"], expected_duration=35
        )
        DeltaOptimizeOperator(
            task_id="mine", table=table, engine="delta-rs", priority=-3, expected_duration=5
        )

    dag = _dag(tasks)
    dag_policy(dag)
    by_id = {t.task_id: t for t in dag.tasks}
    lease_priority = {task_id: task.priority for task_id, task in by_id.items()}
    # delta-rs: an OPTIMIZE conflicts with a MERGE anywhere on the table; the two compactions of different
    # partitions run together, the Z-order one with nothing. Phases: merges, compactions, Z-order.
    assert lease_priority["merge_a"] == lease_priority["merge_b"] > lease_priority["compact_c"]
    assert lease_priority["compact_c"] == lease_priority["compact_d"] > lease_priority["zorder"]
    assert lease_priority["mine"] == -3  # the author's own lease priority is kept
    asks_after = {task_id: task.asks_after for task_id, task in by_id.items()}
    assert asks_after["merge_a"] == asks_after["merge_b"] == ()
    assert asks_after["compact_c"] == asks_after["compact_d"] == ("merge_a", "merge_b")
    assert asks_after["zorder"] == ("compact_c", "compact_d", "merge_a", "merge_b")
    assert asks_after["mine"] == ()  # with its own priority it does not wait for the phases either

    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}")
    config = TableConfig(partition_columns=("day",), uri=table)
    profile = engine_profile("delta-rs")

    def ask(task_id: str) -> Granted | Waiting:
        task = by_id[task_id]
        return manager.acquire(
            claims_request(
                claims=(
                    TableClaim(
                        uri=table,
                        operation=task.conflict_operation(task.build_spec(config)),
                        profile=profile,
                        config=config,
                    ),
                ),
                owner=Owner(dag_id=dag.dag_id, task_id=task_id, run_id="r"),
                ttl_s=300,
                poll_interval_s=5,
                priority=task.priority,
                expected_duration_s=task.expected_duration_s,
            )
        )

    try:
        assert isinstance(ask("merge_b"), Granted)
        assert isinstance(ask("zorder"), Waiting)
        assert isinstance(ask("compact_c"), Waiting)  # waits for the MERGE, ranked ahead of the Z-order
        assert isinstance(ask("merge_a"), Granted)  # beside merge_b, ahead of both queued OPTIMIZEs
    finally:
        manager.store.close()


def test_the_policy_and_the_plan_judge_a_computed_source_as_the_operator_does() -> None:
    """``task_operation`` (the priority policy's and ``deltaguard plan``'s reading of a task) marks a write
    whose callable source may read its table, as the operator's own preparation does."""
    import pyarrow as pa

    from deltaguard.operators.dml import DeltaMergeOperator
    from deltaguard.pools.priority import task_operation

    def merge(**extra: Any) -> DeltaMergeOperator:
        return DeltaMergeOperator(
            task_id="m",
            table="/lake/sales",
            source=lambda: pa.table({"id": [1], "country": ["DE"]}),
            condition="t.id = s.id",
            target_partition_values={"country": "DE"},
            matched_update={"country": "s.country"},
            **extra,
        )

    config = TableConfig(partition_columns=("country",))
    assert task_operation(merge(), config).reads_target  # type: ignore[union-attr]
    assert not task_operation(merge(source_reads_target=False), config).reads_target  # type: ignore[union-attr]


def test_a_fresh_try_lets_the_earlier_phases_of_its_run_ask_first(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lease hook holds a try's first question until the tasks it names have asked for the table in
    the same DAG run, and never longer than ``phase_wait`` (read from Airflow's configuration): a question
    of another run does not count, and a store error ends the wait."""
    import time

    from deltaguard import config as dg_config
    from deltaguard.exceptions import StoreError
    from deltaguard.hooks.lease import DeltaLeaseHook, task_owner
    from deltaguard.pools.priority import engine_profile

    table = str(tmp_path / "lake" / "sales eu")
    run = "scheduled__2026-12-07T00:00:00+00:00"
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", f"sqlite:///{tmp_path / 'leases.db'}")

    def hook(limit: str) -> DeltaLeaseHook:
        monkeypatch.setenv("AIRFLOW__DELTAGUARD__PHASE_WAIT", limit)
        return DeltaLeaseHook(dg_config.lease_settings())

    def ask(leases: DeltaLeaseHook, task_id: str, run_id: str) -> None:
        leases.ask(
            table_key=table,
            operation=update(task_id),
            profile=engine_profile("delta-rs"),
            table_config=TableConfig(partition_columns=("day",), uri=table),
            owner=task_owner("nightly.sales", run_id, task_id, None, 1),
            priority=0,
            request_id=None,
        )

    def waited_s(leases: DeltaLeaseHook, run_id: str, after: tuple[str, ...]) -> float:
        started = time.monotonic()
        leases.let_earlier_ask(task_owner("nightly.sales", run_id, "compact.zorder", 3, 1), (table,), after)
        return time.monotonic() - started

    def unreadable(**_: Any) -> Any:
        raise StoreError("the decision log is gone")

    def unread(**_: Any) -> Any:
        raise AssertionError("the decision log is read although nothing is waited for")

    with hook("0.6") as leases:
        ask(leases, "merge.eu_de", "manual__2026-12-06T23:59:59+00:00")
        assert waited_s(leases, run, ("merge.eu_de",)) >= 0.6  # only this run's questions count
        leases.manager.store.decisions = unread  # type: ignore[method-assign]
        waited_s(leases, run, ())  # nothing to wait for: the decision log is not read at all
    with hook("600") as leases:
        ask(leases, "merge.eu_de", run)
        ask(leases, "merge.eu_fr", run)
        # asked already: no wait (a broken lookup would hold it the whole 600 s)
        assert waited_s(leases, run, ("merge.eu_de", "merge.eu_fr")) < 300

        # the wait only orders questions: a store error ends it, and the question meets the error itself
        leases.manager.store.decisions = unreadable  # type: ignore[method-assign]
        assert waited_s(leases, run, ("merge.eu_it",)) < 300
    with hook("0") as leases:
        leases.manager.store.decisions = unread  # type: ignore[method-assign]
        waited_s(leases, run, ("merge.eu_it",))  # off: not read either
