"""The benchmark's generated DAGs: one task per write, the strategy's pools, retries and operators."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.bench_dags import (
    ENGINE_PATH,
    ESTIMATE_ERROR,
    RETRIES,
    STRATEGIES,
    benchmark_dag,
    dag_id_for,
    estimated_duration,
    one_slot_pool,
)
from benchmarks.workload_tables import BENCH_DIR_ENV, write_plan
from lab.simulation.workload import generate


@pytest.fixture
def plans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    workload = generate(9, tables=4, writes=20)
    uris = {t.name: str(tmp_path / "data" / t.name) for t in workload.tables}
    for strategy in STRATEGIES:
        write_plan(tmp_path / f"{dag_id_for(strategy)}.json", workload, uris, tmp_path / "a.jsonl")
    monkeypatch.setenv(BENCH_DIR_ENV, str(tmp_path))
    return {"workload": workload, "uris": uris}


def test_each_strategy_gets_one_task_per_write(plans: dict[str, object]) -> None:
    workload = plans["workload"]
    dags = {s: benchmark_dag(s) for s in STRATEGIES}
    for dag in dags.values():
        assert sorted(dag.task_dict) == sorted(w.id for w in workload.writes)  # type: ignore[attr-defined]
    for write in workload.writes:  # type: ignore[attr-defined]
        pooled = dags["one_slot_pools"].task_dict[write.id]
        assert pooled.pool == one_slot_pool(write.table) and pooled.retries == 0
        optimistic = dags["optimistic"].task_dict[write.id]
        assert optimistic.pool == "default_pool" and optimistic.retries == RETRIES
        guarded = dags["deltaguard"].task_dict[write.id]
        assert type(guarded).__module__.startswith("deltaguard.operators")
        assert guarded.engine == ENGINE_PATH and guarded.retries == 0
        assert guarded.table == plans["uris"][write.table]  # type: ignore[index]


def test_unknown_strategy_is_refused(plans: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        benchmark_dag("yolo")


def test_deltaguard_tasks_get_noisy_estimates_not_true_durations(plans: dict[str, object]) -> None:
    workload = plans["workload"]
    guarded = benchmark_dag("deltaguard")
    ratios = []
    for write in workload.writes:  # type: ignore[attr-defined]
        told = guarded.task_dict[write.id].expected_duration_s
        assert told == estimated_duration(workload.seed, write)  # type: ignore[attr-defined]
        ratios.append(told / write.duration_s)
    assert all(1 - ESTIMATE_ERROR - 0.01 <= r <= 1 + ESTIMATE_ERROR + 0.01 for r in ratios)
    assert len({round(r, 2) for r in ratios}) > len(ratios) // 2  # noise, not one constant factor


def test_the_spark_benchmark_dags_write_through_the_timed_spark_engine(plans: dict[str, object]) -> None:
    from benchmarks.bench_orchestration_spark import DAG_FILE
    from benchmarks.spark_workload import CONNECT_CONN_ID, run_planned_spark_write, task_kwargs

    namespace: dict[str, object] = {}
    exec(DAG_FILE.format(strategy="deltaguard"), namespace)  # the generated file, as Airflow parses it
    guarded = namespace["dag"]
    baseline = benchmark_dag("optimistic", write_callable=run_planned_spark_write, engine=task_kwargs())
    for write in plans["workload"].writes:  # type: ignore[attr-defined]
        task = guarded.task_dict[write.id]  # type: ignore[attr-defined]
        assert task.engine == "benchmarks.spark_workload:TimedSparkEngine"
        assert task.spark_connect_conn_id == CONNECT_CONN_ID
        assert baseline.task_dict[write.id].python_callable is run_planned_spark_write
