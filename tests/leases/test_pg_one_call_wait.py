"""PostgreSQL: a one-table request queued in one call behind a sole holder whose wait answer the requester's
model gave before (ADR 0010): the conditions under which the store does it, and that it writes what the
general decision would."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltaguard.core.admission import Blocker, Granted, Owner, Waiting
from deltaguard.core.decision import DeltaException
from deltaguard.leases import codec
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.store import IdleGrant, QueuedBehind, TableSnapshot
from deltaguard.leases.wait_texts import wait_detail, wait_shape, waiting_to_json

from .conftest import CONFIG, PROFILE, FakeClock, counting_model, op, request

pytestmark = pytest.mark.postgres


@pytest.fixture
def manager(pg_url: str) -> Iterator[LeaseManager]:
    m = LeaseManager(pg_url, clock=FakeClock())
    yield m
    m.store.close()


def _text(value: Any) -> str:
    return codec.dumps(codec.operation_to_json(dataclasses.replace(value, engine=PROFILE)))


def _pieces(uri: str) -> list[str]:
    """A wait template for ``uri`` (its texts are the store's to join; their content is not checked)."""
    blocker = Blocker("any", "any", Owner(name="any"), "lease", "INSERT (blind append)")
    wait = Waiting("x", 1, (blocker,), ("a reason",), ("advice",), (DeltaException.CONCURRENT_APPEND,), 0.0)
    shape = wait_shape(wait)
    assert shape is not None
    return shape.pieces_for(uri)


_OWNERS = (
    st.tuples(
        st.text(max_size=8),
        st.text(max_size=4),
        st.text(max_size=8),
        st.integers(-1, 10_000),
        st.integers(0, 9),
        st.one_of(st.just(""), st.text(min_size=1, max_size=8)),
    )
    .filter(lambda t: bool(t[0] or t[2] or t[5]))  # an owner needs a name, a dag_id or a task_id
    .map(lambda t: Owner(*t))
    .filter(lambda o: "\\u0000" not in o.key)  # PostgreSQL cannot read a NUL in JSON as text
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(owner=_OWNERS)
def test_the_sql_owner_name_is_the_python_one(manager: LeaseManager, owner: Owner) -> None:
    engine: sa.Engine = manager.store.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        name, as_json = conn.execute(
            sa.text("SELECT dg_owner_name(:o), to_json(dg_owner_name(:o))::TEXT"), {"o": owner.key}
        ).one()
    assert name == owner.describe() and json.loads(as_json) == owner.describe()


def _owner_key_of(manager: LeaseManager, lease: Granted) -> str:
    """The stored owner key of ``lease`` on table t1."""
    (info,) = [x for x in manager.leases("t1") if x.lease_id == lease.lease_id]
    return info.owner.key


def test_a_sole_live_holder_with_a_known_wait_answer_queues_in_one_call(manager: LeaseManager) -> None:
    store, clock = manager.store, manager.clock
    insert, merge = _text(op("INSERT")), _text(op("MERGE"))
    v1 = codec.dumps(codec.config_to_json(CONFIG))
    v2 = codec.dumps(codec.config_to_json(dataclasses.replace(CONFIG, version=2)))
    held = manager.acquire(request("holder", ("t1", op("INSERT"))))
    assert isinstance(held, Granted)
    now = clock()  # type: ignore[operator]
    key = Owner(dag_id="dag", task_id="direct").key

    def ask(request_id: str, uri: str = "t1", **fields: Any) -> Any:
        values: dict[str, Any] = {
            "request_id": request_id,
            "owner_key": key,
            "owner_json": key,
            "uris": (uri,),
            "op_jsons": (merge,),
            "config_versions": (1,),
            "config_jsons": (v1,),
            "now": now,
            "expires_at": now + 60.0,
            "ttl_s": 60.0,
            "rank": now,
            "payload": "{}",
            "details": ('{"operation":"MERGE","owner":"dag.direct","waited_s":0.0}',),
            "waits": {insert: _pieces(uri)},
            "wait_expires_at": now + 30.0,
        }
        values.update(fields)
        return store.grant_if_idle(IdleGrant(**values))

    def untouched(request_id: str) -> bool:
        return store.read_request(request_id) is None and manager.waiters("t1") == []

    assert isinstance(ask("r1", waits=None), TableSnapshot) and untouched("r1")  # nothing known
    assert isinstance(ask("r2", waits={merge: _pieces("t1")}), TableSnapshot)  # not the holder's operation
    assert untouched("r2")
    # Judged under another configuration than the one the decision would use (the stored one, as new):
    other = codec.dumps(codec.config_to_json(dataclasses.replace(CONFIG, partition_columns=())))
    assert isinstance(ask("r3", config_jsons=(other,)), TableSnapshot) and untouched("r3")
    with pytest.raises(ValueError, match="one table"):
        ask("r4", waits={insert: _pieces("t1")}, wait_expires_at=None)

    queued = ask("r5")
    assert queued == QueuedBehind("t1", held.lease_id, _owner_key_of(manager, held), insert)
    row = store.read_request("r5")
    assert row is not None and (row.status, row.expires_at, row.rank) == ("waiting", now + 30.0, now)
    assert [(w.request_id, w.expires_at) for w in manager.waiters("t1")] == [("r5", now + 30.0)]
    assert isinstance(ask("r5"), TableSnapshot)  # asked again: the request id is known now
    assert isinstance(ask("r6"), TableSnapshot)  # behind r5 now: FIFO is the general decision's
    assert store.read_request("r6") is None

    # Two holders: the answer behind one is not the answer behind both.
    manager.acquire(request("h2a", ("t2", op("INSERT"))))
    manager.acquire(request("h2b", ("t2", op("INSERT"))))
    assert isinstance(ask("r7", uri="t2"), TableSnapshot) and store.read_request("r7") is None
    # An expired holder must be reclaimed and logged: the general decision does that.
    manager.acquire(request("dying", ("t3", op("INSERT")), ttl_s=5.0))
    assert isinstance(ask("r8", uri="t3", now=now + 10.0), TableSnapshot) and store.read_request("r8") is None
    # A newer offered configuration is the one the decision uses: queued, the configuration replaced and
    # the fencing token unchanged (it moves on grants only).
    manager.acquire(request("h4", ("t4", op("INSERT"))))
    with store.transaction(["t4"]) as txn:  # type: ignore[attr-defined]
        fencing = txn.tables()["t4"].fencing
    assert isinstance(ask("r9", uri="t4", config_versions=(2,), config_jsons=(v2,)), QueuedBehind)
    with store.transaction(["t4"]) as txn:  # type: ignore[attr-defined]
        assert (txn.tables()["t4"].fencing, txn.tables()["t4"].config_json) == (fencing, v2)
    # A holder whose owner JSON escapes a NUL (PostgreSQL cannot read it as text): the general path.
    assert isinstance(
        manager.acquire(dataclasses.replace(request("nul\x00", ("t5", op("INSERT"))), request_id="nul")),
        Granted,
    )
    assert isinstance(ask("r10", uri="t5"), TableSnapshot) and store.read_request("r10") is None


def test_the_manager_learns_a_wait_from_its_model_and_queues_in_one_call_after(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked, counting_decide = counting_model()
    clock = FakeClock()
    manager = LeaseManager(pg_url, clock=clock, decide=counting_decide)
    engine = sa.create_engine(pg_url)
    try:
        holder = manager.acquire(request("holder", ("t1", op("INSERT"))))
        assert isinstance(holder, Granted)
        answers = []
        for n in range(2):
            queued = request(f"merge{n}", ("t1", op("MERGE")))
            answer = manager.acquire(queued)
            assert isinstance(answer, Waiting)
            answers.append(answer)
            # The stored texts are those of the answer, whichever path wrote them.
            with engine.connect() as conn:
                last_wait, detail = conn.execute(
                    sa.text(
                        "SELECT r.last_wait, d.detail FROM dg_requests r JOIN dg_decisions d "
                        "ON d.request_id = r.request_id AND d.kind = 'wait' WHERE r.request_id = :id"
                    ),
                    {"id": queued.request_id},
                ).one()
            assert last_wait == waiting_to_json(answer)
            assert detail == codec.dumps(wait_detail(answer))
            assert manager.check(queued.request_id) == answer  # read back from the stored answer
            assert manager.release(queued.request_id, queued.owner) is True  # withdrawn
            clock.advance(1.0)
        # The model answered once; the second wait was the store's, behind the same holder.
        assert asked == ["MERGE"]
        first, second = answers
        assert second.blockers == first.blockers and second.reasons == first.reasons
        assert (second.position, second.advice, second.exceptions) == (1, first.advice, first.exceptions)
        assert manager.waiters("t1") == []
        # Behind two holders, the model decides again.
        manager.acquire(request("holder2", ("t1", op("INSERT"))))
        assert isinstance(manager.acquire(request("merge2", ("t1", op("MERGE")))), Waiting)
        assert asked == ["MERGE", "INSERT", "MERGE"]
    finally:
        engine.dispose()
        manager.store.close()
