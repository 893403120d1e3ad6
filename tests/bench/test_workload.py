"""The workload generator (determinism, shape, bad input) and the lower bound on hand-made cases."""

from __future__ import annotations

import pytest

from deltaguard.core.operations import OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from lab.simulation.workload import (
    DEFAULT_MIX,
    KINDS,
    BenchTable,
    BenchWrite,
    Workload,
    generate,
    heaviest_conflict_chain,
    lower_bound,
    model_conflicts,
    operation,
)

DELTA_RS = EngineProfile(EngineName.DELTA_RS, "1.6.6")


def test_same_seed_same_workload_other_seed_differs() -> None:
    assert generate(5, writes=30).to_json() == generate(5, writes=30).to_json()
    assert generate(5, writes=30).writes != generate(6, writes=30).writes


def test_shape_follows_the_parameters() -> None:
    w = generate(1, tables=5, writes=40, partitions=3, duration=(10.0, 20.0), mix=DEFAULT_MIX)
    assert len(w.tables) == 5 and len(w.writes) == 40
    assert sorted(len(ws) for ws in w.by_table().values()) == [8] * 5  # an explicit mix splits evenly
    assert all(10.0 <= x.duration_s <= 20.0 for x in w.writes)
    assert {x.partition for x in w.writes} <= {None, "p0", "p1", "p2"}
    assert {x.kind for x in w.writes} <= set(KINDS)
    assert len({x.id for x in w.writes}) == 40


def test_roles_give_fact_tables_more_writes_and_logs_appends() -> None:
    w = generate(2, tables=4, writes=60)
    counts = {name: len(ws) for name, ws in w.by_table().items()}
    assert counts["t0"] > counts["t1"] > counts["t3"]  # fact > log > dimension
    assert {x.kind for x in w.by_table()["t1"]} <= {"append", "optimize", "add_column"}


def test_zero_overlap_gives_fresh_partitions_while_there_are_any() -> None:
    w = generate(3, tables=1, writes=4, partitions=8, overlap=0.0, mix={"merge": 1.0})
    assert len({x.partition for x in w.writes}) == 4


def test_round_trip_through_json() -> None:
    w = generate(4, writes=12)
    assert Workload.from_json(w.to_json()) == w


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tables": 0},
        {"overlap": 1.5},
        {"duration": (5.0, 1.0)},
        {"mix": {"truncate": 1.0}},
        {"mix": {"append": 0.0}},
    ],
)
def test_bad_parameters_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        generate(0, **kwargs)  # type: ignore[arg-type]


def test_operations_match_the_write_kinds() -> None:
    table = BenchTable("t", partitioned=True)
    merge = operation(BenchWrite("w0", "t", "merge", "p1", 1.0, 0), table)
    assert merge.kind is OperationKind.MERGE and "'p1'" in (merge.merge_condition or "")
    assert operation(BenchWrite("w1", "t", "merge_all", None, 1.0, 1), table).merge_condition == (
        "t.p = s.p AND t.k = s.k"
    )
    assert operation(BenchWrite("w2", "t", "optimize_zorder", None, 1.0, 2), table).zorder_by == ("k",)
    assert operation(BenchWrite("w3", "t", "append", "p2", 1.0, 3), table).predicate == "p = 'p2'"


def _w(wid: str, duration: float, table: str = "t") -> BenchWrite:
    return BenchWrite(wid, table, "update", "p0", duration, int(wid[1:]))


def test_heaviest_chain_is_the_heaviest_clique() -> None:
    # a-b, b-c, a-c conflict (a triangle of weight 6); d conflicts with a only: a+d weighs 5
    writes = [_w("w1", 1.0), _w("w2", 2.0), _w("w3", 3.0), _w("w4", 4.0)]
    edges = {frozenset(p) for p in (("w1", "w2"), ("w2", "w3"), ("w1", "w3"), ("w1", "w4"))}
    weight, ids, exact = heaviest_conflict_chain(writes, lambda a, b: frozenset((a.id, b.id)) in edges)
    assert (weight, ids, exact) == (6.0, ("w1", "w2", "w3"), True)


def test_lower_bound_takes_the_largest_term() -> None:
    tables = (BenchTable("t"), BenchTable("u"))
    writes = (_w("w1", 10.0), _w("w2", 10.0), _w("w3", 10.0), _w("w4", 25.0, "u"))
    workload = Workload(tables, writes)
    everything = lower_bound(workload, slots=1, conflicts=lambda a, b: True)
    assert everything.work_s == 55.0 and everything.value_s == 55.0  # one slot: all the work
    chained = lower_bound(workload, slots=10, conflicts=lambda a, b: a.table == b.table)
    assert chained.chain_s == 30.0 and chained.chain_table == "t" and chained.value_s == 30.0
    nothing = lower_bound(workload, slots=10, conflicts=lambda a, b: False)
    assert nothing.value_s == 25.0 == nothing.longest_s
    with pytest.raises(ValueError):
        lower_bound(workload, slots=0, conflicts=lambda a, b: True)


def test_model_conflicts_uses_the_real_model() -> None:
    workload = Workload(
        (BenchTable("t", partitions=4),),
        (
            BenchWrite("w0", "t", "merge", "p0", 1.0, 0),
            BenchWrite("w1", "t", "merge", "p1", 1.0, 1),
            BenchWrite("w2", "t", "merge", "p0", 1.0, 2),
            BenchWrite("w3", "t", "add_column", None, 1.0, 3),
        ),
    )
    conflicts = model_conflicts(workload, DELTA_RS)
    w = workload.writes
    assert not conflicts(w[0], w[1])  # disjoint partitions
    assert conflicts(w[0], w[2])  # the same partition
    assert conflicts(w[0], w[3]) and conflicts(w[3], w[1])  # a schema change conflicts with everything
