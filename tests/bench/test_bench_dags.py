"""The benchmark's generated DAGs: one task per write, the strategy's pools, retries and operators."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.bench_dags import ENGINE_PATH, RETRIES, STRATEGIES, benchmark_dag, dag_id_for, one_slot_pool
from benchmarks.workload_tables import BENCH_DIR_ENV, write_plan
from deltaguard.simulation.workload import generate


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
