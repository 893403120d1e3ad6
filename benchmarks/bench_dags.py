"""The benchmark's DAGs: one per strategy, the same writes, built from the plan in ``$DELTAGUARD_BENCH_DIR``.

A generated DAG file in the benchmark's own ``AIRFLOW_HOME/dags`` is two lines around
:func:`benchmark_dag`. Strategies:

* ``one_slot_pools``: each write is a ``PythonOperator`` in its table's 1-slot pool
  (``bench_one_slot_<table>``), no retries;
* ``optimistic``: the same tasks without pools, retried with exponential backoff when they fail (on a
  Delta conflict);
* ``deltaguard``: deltaguard's operators (lease manager, the default deployment: no pools),
  no retries; the engine is :class:`~benchmarks.workload_tables.TimedDeltaRsEngine`, so each write holds
  its snapshot for its duration exactly like the baselines.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from benchmarks.workload_tables import build_spec, load_plan, run_planned_write
from lab.simulation.workload import BenchTable, BenchWrite

STRATEGIES = ("one_slot_pools", "optimistic", "deltaguard")
ENGINE_PATH = "benchmarks.workload_tables:TimedDeltaRsEngine"
#: Optimistic retries: first delay, cap, and how many.
RETRY_DELAY_S = 5
MAX_RETRY_DELAY_S = 60
RETRIES = 8
#: deltaguard's operators get each write's duration only as an estimate (``expected_duration``): the true one
#: times a factor drawn uniformly from ``[1 - e, 1 + e]``, seeded per write, as in the virtual-time sweep.
ESTIMATE_ERROR = 0.3


def dag_id_for(strategy: str) -> str:
    return f"bench_{strategy}"


def one_slot_pool(table: str) -> str:
    return f"bench_one_slot_{table}"


def estimated_duration(seed: int, write: BenchWrite, error: float = ESTIMATE_ERROR) -> float:
    """The noisy estimate of ``write``'s duration that deltaguard's operator is told (never the true one)."""
    return round(write.duration_s * random.Random(f"{seed}:{write.id}").uniform(1 - error, 1 + error), 1)


def _source(dag_id: str, write_id: str) -> Any:
    workload, _, _ = load_plan(dag_id)
    write = workload.write(write_id)
    spec = build_spec(write, workload.table(write.table))
    return spec.source  # type: ignore[union-attr]


def _deltaguard_task(
    dag_id: str,
    write: BenchWrite,
    table: BenchTable,
    uri: str,
    seed: int,
    engine: Mapping[str, Any] | None = None,
) -> Any:
    from deltaguard.operators.dml import (
        DeltaDeleteOperator,
        DeltaInsertOperator,
        DeltaMergeOperator,
        DeltaUpdateOperator,
    )
    from deltaguard.operators.maintenance import DeltaAlterTableOperator, DeltaOptimizeOperator

    spec: Any = build_spec(write, table)
    common: dict[str, Any] = {
        "task_id": write.id,
        "table": uri,
        "engine": ENGINE_PATH,
        "expected_duration": estimated_duration(seed, write),
        **(engine or {}),
    }
    # rows are produced when the task runs, not when the DAG file is parsed
    source = functools.partial(_source, dag_id, write.id)
    if write.kind == "append":
        return DeltaInsertOperator(
            source=source,
            source_reads_target=False,  # generated rows, never read from the table
            partition_values=dict(spec.partition_values),
            **common,
        )
    if write.kind in ("merge", "merge_all"):
        return DeltaMergeOperator(
            source=source,
            source_reads_target=False,
            condition=spec.condition,
            target_partition_values=dict(spec.target_partition_values),
            matched_update=dict(spec.matched_update),
            not_matched_insert_all=True,
            **common,
        )
    if write.kind == "update":
        return DeltaUpdateOperator(updates=dict(spec.updates), predicate=spec.predicate, **common)
    if write.kind == "delete":
        return DeltaDeleteOperator(predicate=spec.predicate, **common)
    if write.kind in ("optimize", "optimize_zorder"):
        return DeltaOptimizeOperator(
            zorder_by=spec.zorder_by, partition_filters=dict(spec.partition_filters), **common
        )
    return DeltaAlterTableOperator(add_columns=dict(spec.columns), **common)


def benchmark_dag(
    strategy: str,
    *,
    write_callable: Callable[[str, str], Any] = run_planned_write,
    engine: Mapping[str, Any] | None = None,
) -> Any:
    """Build the DAG of one strategy from its plan.

    :param write_callable: the baselines' task body, ``(dag_id, write_id)``.
    :param engine: the deltaguard operators' engine arguments (default: ``engine=`` :data:`ENGINE_PATH`).
    :raises ValueError: on an unknown strategy.
    """
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG

    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; choose one of {STRATEGIES}")
    dag_id = dag_id_for(strategy)
    workload, uris, _ = load_plan(dag_id)
    default_args: dict[str, Any] = {"retries": 0, "execution_timeout": timedelta(minutes=20)}
    if strategy == "optimistic":
        default_args.update(
            retries=RETRIES,
            retry_delay=timedelta(seconds=RETRY_DELAY_S),
            retry_exponential_backoff=True,
            max_retry_delay=timedelta(seconds=MAX_RETRY_DELAY_S),
        )
    with DAG(
        dag_id=dag_id,
        schedule=None,
        start_date=datetime(2026, 11, 1),
        catchup=False,
        max_active_runs=1,
        default_args=default_args,
        tags=["deltaguard", "benchmark"],
    ) as dag:
        for write in workload.writes:
            table = workload.table(write.table)
            if strategy == "deltaguard":
                _deltaguard_task(dag_id, write, table, uris[write.table], workload.seed, engine)
                continue
            PythonOperator(
                task_id=write.id,
                python_callable=write_callable,
                op_args=[dag_id, write.id],
                pool=one_slot_pool(write.table) if strategy == "one_slot_pools" else "default_pool",
            )
    return dag
