"""The pure admission rule, with the real conflict model."""

from __future__ import annotations

import pytest

from deltaguard.core.admission import (
    Granted,
    Holder,
    LeaseRequest,
    Owner,
    TableClaim,
    TableView,
    Waiting,
    admit,
    default_decide,
    explain,
    queue_rank,
)
from deltaguard.core.decision import Decision
from deltaguard.core.model import decide
from deltaguard.core.operations import Operation, OperationKind

from .conftest import CONFIG, PROFILE, op

ALICE = Owner(dag_id="daily_sales", task_id="merge_de")
BOB = Owner(dag_id="daily_sales", task_id="merge_fr")


def view(uri: str, candidate, granted=(), waiting=()) -> TableView:
    return TableView(uri, candidate, CONFIG, PROFILE, granted=list(granted), waiting=list(waiting))


def lease(id_: str, o, owner: Owner = ALICE) -> Holder:
    return Holder(id_, owner, o, granted=True)


def queued(id_: str, o, rank: float, owner: Owner = BOB) -> Holder:
    return Holder(id_, owner, o, granted=False, rank=rank)


def test_default_decide_is_the_real_model() -> None:
    assert default_decide() is decide


def test_empty_table_grants() -> None:
    assert admit("r", 0.0, [view("t1", op("MERGE"))], decide).granted


@pytest.mark.parametrize("kind", [k.value for k in OperationKind])
def test_idle_tables_grant_every_operation_without_asking_the_model(kind: str) -> None:
    """What the PostgreSQL store's one-step grant relies on: with no lease and no queued request on any of
    its tables, a request is granted whatever its operations, and the model is not consulted."""

    def no_model(*args: object) -> Decision:
        raise AssertionError("the model must not be asked about idle tables")

    candidate = op(kind) if kind != "STREAMING_WRITE" else Operation(OperationKind.STREAMING_WRITE)
    views = [view("t1", candidate), view("t2", op("MERGE"))]
    assert admit("r", 0.0, views, no_model).granted


def test_conflict_with_a_lease_waits_with_blocker_and_reason() -> None:
    result = admit("r", 0.0, [view("t1", op("MERGE"), granted=[lease("L1", op("MERGE"))])], decide)
    assert not result.granted
    assert [(b.id, b.kind, b.owner) for b in result.blockers] == [("L1", "lease", ALICE)]
    assert result.reasons and all(not r.startswith("compatible") for r in result.reasons)
    assert result.position == 1


def test_compatible_with_lease_is_granted() -> None:
    assert admit("r", 0.0, [view("t1", op("INSERT"), granted=[lease("L1", op("INSERT"))])], decide).granted


def test_fifo_earlier_conflicting_waiter_blocks_later_waiter_does_not() -> None:
    earlier = queued("W1", op("MERGE"), rank=-1.0)
    later = queued("W2", op("MERGE"), rank=+1.0)
    result = admit("r", 0.0, [view("t1", op("MERGE"), waiting=[later, earlier])], decide)
    assert [b.id for b in result.blockers] == ["W1"]
    assert result.blockers[0].kind == "waiting"


def test_compatible_request_is_not_held_back_by_the_queue() -> None:
    # Partition-disjoint MERGEs are compatible per the model, so the queued MERGE ahead does not hold it back.
    ahead = queued("W1", op("MERGE", "t.id = s.id AND t.date = '2024-01-01'"), rank=-1.0)
    blocker = lease("L1", op("MERGE", "t.id = s.id AND t.date = '2024-01-01'"))
    mine = op("MERGE", "t.id = s.id AND t.date = '2024-01-02'")
    assert admit("r", 0.0, [view("t1", mine, granted=[blocker], waiting=[ahead])], decide).granted


def test_multi_table_is_all_or_nothing() -> None:
    tables = [view("t1", op("MERGE")), view("t2", op("MERGE"), granted=[lease("L1", op("MERGE"))])]
    result = admit("r", 0.0, tables, decide)
    assert not result.granted and {b.table for b in result.blockers} == {"t2"}


def test_metadata_change_is_exclusive_per_model_and_guard() -> None:
    set_props = op("SET_TBLPROPERTIES")
    for kind in ("INSERT", "MERGE", "OPTIMIZE", "DELETE", "REORG_UPGRADE"):
        assert not admit("r", 0.0, [view("t1", set_props, granted=[lease("L", op(kind))])], decide).granted
        assert not admit("r", 0.0, [view("t1", op(kind), granted=[lease("L", set_props)])], decide).granted
        # The model itself says so (the guard is only defence in depth).
        assert decide(set_props, [op(kind)], CONFIG, PROFILE).conflict


def test_metadata_guard_overrides_a_permissive_model() -> None:
    def permissive(candidate, running, table, profile):
        from deltaguard.core.decision import Decision, Verdict

        return Decision(Verdict.NO_CONFLICT)

    result = admit(
        "r", 0.0, [view("t1", op("SET_TBLPROPERTIES"), granted=[lease("L", op("INSERT"))])], permissive
    )
    assert not result.granted and "metadata change" in result.reasons[0]


def test_ageing_rank_bounds_overtaking() -> None:
    assert queue_rank(100.0, 1, ageing_s=10) == 90.0
    # A priority-1 request arriving 5 s after a priority-0 one goes ahead; arriving 15 s after, it does not.
    assert queue_rank(105.0, 1, 10) < queue_rank(100.0, 0, 10) < queue_rank(115.0, 1, 10)
    with pytest.raises(ValueError):
        queue_rank(0.0, 101)
    with pytest.raises(ValueError):
        queue_rank(0.0, 0, ageing_s=0)


def test_request_validation() -> None:
    claim = TableClaim("t1", op("INSERT"), PROFILE, CONFIG)
    with pytest.raises(ValueError, match="at least one table"):
        LeaseRequest(claims=(), owner=ALICE)
    with pytest.raises(ValueError, match="twice"):
        LeaseRequest(claims=(claim, claim), owner=ALICE)
    with pytest.raises(ValueError, match="positive"):
        LeaseRequest(claims=(claim,), owner=ALICE, ttl_s=0)
    with pytest.raises(ValueError, match="priority"):
        LeaseRequest(claims=(claim,), owner=ALICE, priority=500)
    with pytest.raises(ValueError, match="owner"):
        Owner()


def test_explain_lines() -> None:
    result = admit("r", 0.0, [view("s3://b/sales", op("MERGE"), granted=[lease("L1", op("MERGE"))])], decide)
    waiting = Waiting(
        "r", result.position, result.blockers, result.reasons, result.advice, result.exceptions, 0.0
    )
    line = explain(waiting, {"s3://b/sales": "sales"})
    assert line.startswith(
        "waiting (position 1) behind daily_sales.merge_de (MERGE (t.id = s.id)) on sales: "
    )
    assert "ConcurrentAppendException" in line or "Concurrent" in line
    assert "\n" not in line
    assert explain(Granted("r", "r", {"t1": 3}, 0.0)) == "granted lease r on t1#3"
