"""Runs of alike waiters in a re-admission (ADR 0031): granting a run on the proof of its last member's
decision answers, writes and logs exactly what deciding every waiter on its own, in queue order, does.

The reference is the same pass with runs switched off (``readmit.GROUP_RUNS = False``: each waiter decided
by ``decide_locked`` against the view every earlier decision changed). Random crowds mix what makes a run
(equal appends, equal but for labels), what ends one (a request on two tables, a waiter whose blockers are
still there, another operation, an estimate, another engine or configuration) and what a run's proof must
refuse (equal operations that conflict with each other).
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases import readmit
from deltaguard.leases.manager import LeaseManager
from tests.leases.conftest import FakeClock

K = OperationKind
SHAPES = [
    Operation(K.INSERT),
    Operation(K.INSERT, predicate="date = '2024-01-01'"),
    Operation(K.UPDATE, predicate="date = '2024-01-01'"),
    Operation(K.DELETE, predicate="id = 4"),
    Operation(K.MERGE, merge_condition="t.id = s.id AND t.date = '2024-01-02'"),
    Operation(K.OPTIMIZE),
    Operation(K.SET_TBLPROPERTIES),
]
PROFILES = [EngineProfile(EngineName.DATABRICKS, "14.3"), EngineProfile(EngineName.DELTA_SPARK, "4.0")]
ROW_LEVEL = {"delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true"}
CONFIGS = [
    TableConfig(partition_columns=("date",), version=1),
    TableConfig(partition_columns=("date",), version=2, properties=ROW_LEVEL),
]

#: one waiter: (shape, label, profile, configuration, priority, on two tables, duration estimate)
_waiter = st.tuples(
    st.sampled_from(range(len(SHAPES))),
    st.sampled_from([None, "nightly", "own"]),
    st.sampled_from([0, 0, 0, 1]),
    st.sampled_from([0, 0, 0, 1]),
    st.sampled_from([0, 0, 1, 2]),
    st.sampled_from([False, False, False, False, True]),
    st.sampled_from([None, None, None, None, 30.0]),
)
#: crowds that are mostly appends (runs), with anything else among them
_crowd = st.lists(
    st.one_of(_waiter, _waiter.map(lambda w: (0, *w[1:]))),
    min_size=1,
    max_size=14,
)


def _request(i: int, spec: tuple[Any, ...], ttl_s: float = 600.0) -> LeaseRequest:
    shape, label, profile, config, priority, two_tables, estimate = spec
    operation = dataclasses.replace(SHAPES[shape], label=f"w{i}" if label == "own" else label)
    tables = ("t1", "t2") if two_tables else ("t1",)
    return LeaseRequest(
        claims=tuple(TableClaim(t, operation, PROFILES[profile], CONFIGS[config]) for t in tables),
        owner=Owner(dag_id="dag", task_id=f"w{i}"),
        ttl_s=ttl_s,
        wait_ttl_s=ttl_s,
        priority=priority,
        expected_duration_s=estimate,
        request_id=f"w{i}",
    )


def _holder(name: str) -> LeaseRequest:
    return LeaseRequest(
        claims=(TableClaim("t1", Operation(K.SET_TBLPROPERTIES), PROFILES[0], CONFIGS[0]),),
        owner=Owner(dag_id="dag", task_id=name),
        ttl_s=600.0,
        request_id=name,
    )


def _dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the store's tables (the decision log in the order it was written)."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        found = {
            table: sorted(tuple(r) for r in conn.execute(sa.text(f"SELECT * FROM {table}")))
            for table in ("dg_tables", "dg_leases", "dg_queue", "dg_requests")
        }
        found["dg_decisions"] = [
            tuple(r) for r in conn.execute(sa.text("SELECT * FROM dg_decisions ORDER BY rowid"))
        ]
    engine.dispose()
    return found


def _replay(url: str, crowd: list[tuple[Any, ...]], runs: bool) -> tuple[list[dict[str, Any]], Any]:
    """Queue ``crowd`` behind an exclusive holder, release it and re-admit the queue; then release the first
    lease granted and re-admit again. Returns both passes' answers and the store's rows."""
    clock = FakeClock()
    manager = LeaseManager(url, clock=clock)
    assert isinstance(manager.acquire(_holder("alter")), Granted)
    for i, spec in enumerate(crowd):
        clock.advance(0.5)
        manager.acquire(_request(i, spec))
    passes = []
    released = ("alter", Owner(dag_id="dag", task_id="alter"))
    old = readmit.GROUP_RUNS
    readmit.GROUP_RUNS = runs
    try:
        for _ in range(2):
            clock.advance(1.0)
            manager.release(*released)
            answers = manager.readmit("t1").answers
            passes.append(answers)
            first = next((rid for rid, a in answers.items() if isinstance(a, Granted)), None)
            if first is None:
                break
            released = (first, Owner(dag_id="dag", task_id=first))
    finally:
        readmit.GROUP_RUNS = old
    manager.store.close()
    return passes, _dump(url)


def _same_as_one_by_one(crowd: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        grouped = _replay(f"sqlite:///{Path(tmp) / 'runs.db'}", crowd, runs=True)
        alone = _replay(f"sqlite:///{Path(tmp) / 'alone.db'}", crowd, runs=False)
    assert grouped[0] == alone[0]
    assert grouped[1] == alone[1]
    return grouped[0]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crowd=_crowd)
def test_a_pass_with_runs_answers_and_writes_as_deciding_each_waiter_in_queue_order(
    crowd: list[tuple[Any, ...]],
) -> None:
    _same_as_one_by_one(crowd)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(crowd=_crowd)
def test_many_random_crowds_with_runs_answer_as_one_by_one(crowd: list[tuple[Any, ...]]) -> None:
    _same_as_one_by_one(crowd)


def test_a_run_of_equal_writes_that_conflict_with_each_other_grants_only_its_head() -> None:
    """Equal MERGEs, each queued with a higher priority than the one before (so it ranks ahead of them, and
    none has another among its last blockers): after the release they are a run, but each conflicts with
    the one granted before it, so the run's proof (its last member decided with the others granted ahead
    of it) fails, and only the head is granted."""
    merges = [(4, "own", 0, 0, priority, False, None) for priority in range(6)]
    passes = _same_as_one_by_one(merges)
    assert [rid for rid, a in passes[0].items() if isinstance(a, Granted)] == ["w5"]
    assert all(isinstance(passes[0][f"w{i}"], Waiting) for i in range(5))


def test_a_run_stops_at_a_waiter_it_does_not_decide() -> None:
    """A request on two tables, queued (by its priority) between alike appends that do not wait for it, is
    still queued ahead of the later ones (this pass leaves it to its own check): its metadata change blocks
    them, so the run ends before it."""
    early = (0, "own", 0, 0, 1, False, None)  # ranked a minute earlier than they came
    late = (0, "own", 0, 0, 0, False, None)
    both = (6, "own", 0, 0, 1, True, None)  # arrives last, ranked between the two
    passes = _same_as_one_by_one([early, early, late, late, both])
    assert [isinstance(passes[0].get(f"w{i}"), Granted) for i in range(5)] == [
        True,
        True,
        False,
        False,
        False,
    ]
    assert isinstance(passes[0]["w2"], Waiting) and [b.id for b in passes[0]["w2"].blockers] == ["w4"]


@pytest.mark.parametrize("size", [3, 40])
def test_a_run_of_appends_is_granted_whole(size: int) -> None:
    append = (0, "own", 0, 0, 0, False, None)
    passes = _same_as_one_by_one([append] * size)
    tokens = [passes[0][f"w{i}"].fencing["t1"] for i in range(size)]  # type: ignore[union-attr]
    assert tokens == list(range(2, size + 2))
