"""Re-admitting a table's whole queue in one transaction after a release (ADR 0031): the same answers as
each waiter asking for itself in queue order, never two conflicting writes granted together, fencing tokens
in queue order, one store transaction for the crowd, and no renewal of queue entries it was not asked to
renew."""

from __future__ import annotations

from typing import Any

import pytest

from deltaguard.core import model
from deltaguard.core.admission import Granted, Waiting
from deltaguard.leases.manager import LeaseManager
from tests.leases.conftest import CONFIG, PROFILE, FakeClock, op, request

#: a crowd on one table, in queue order, behind an exclusive holder: appends (compatible with each other),
#: a whole-table MERGE, partition-scoped UPDATE/DELETE, a metadata change, more appends
CROWD = [
    ("INSERT", None),
    ("INSERT", None),
    ("UPDATE", "date = '2024-01-01'"),
    ("MERGE", None),
    ("INSERT", None),
    ("DELETE", "date = '2024-01-02'"),
    ("SET_TBLPROPERTIES", None),
    ("INSERT", None),
    ("UPDATE", "date = '2024-01-03'"),
]


def _setup(url: str, clock: FakeClock) -> tuple[LeaseManager, Granted, list[str], dict[str, Any]]:
    """The holder, then the crowd (one clock tick apart, so the queue order is the list's)."""
    manager = LeaseManager(url, clock=clock)
    holder = manager.acquire(request("alter", ("t1", op("SET_TBLPROPERTIES"))))
    assert isinstance(holder, Granted)
    ids, ops = [], {}
    for i, (kind, cond) in enumerate(CROWD):
        clock.advance(0.1)
        r = request(f"w{i}", ("t1", op(kind, cond)))
        assert isinstance(manager.acquire(r), Waiting)
        ids.append(r.request_id)
        ops[r.request_id] = r.claims[0].operation
    # one request on two tables, queued ahead of none of the above but behind the holder
    clock.advance(0.1)
    both = request("both", ("t1", op("INSERT")), ("t2", op("INSERT")))
    assert isinstance(manager.acquire(both), Waiting)
    ops[both.request_id] = both.claims[0].operation
    ids.append(both.request_id)
    return manager, holder, ids, ops


def _state(manager: LeaseManager) -> dict[str, int]:
    """Live leases on t1 by owner name, with their fencing tokens."""
    return {x.owner.task_id: x.fencing for x in manager.leases("t1")}


@pytest.fixture
def two_urls(store_url: str, tmp_path: Any) -> tuple[str, str]:
    if store_url.startswith("sqlite"):
        return store_url, f"sqlite:///{tmp_path / 'other.db'}"
    from tests.leases.conftest import fresh_pg_database

    return store_url, fresh_pg_database(store_url)


def test_one_readmission_answers_the_crowd_as_each_waiter_asking_in_queue_order(
    two_urls: tuple[str, str],
) -> None:
    batch_url, alone_url = two_urls
    batch_clock, alone_clock = FakeClock(), FakeClock()
    batch, batch_holder, batch_ids, _ = _setup(batch_url, batch_clock)
    alone, alone_holder, alone_ids, _ = _setup(alone_url, alone_clock)
    for manager, holder, clock in ((batch, batch_holder, batch_clock), (alone, alone_holder, alone_clock)):
        clock.advance(1)
        assert manager.release(holder.lease_id, request("alter", ("t1", op("INSERT"))).owner)

    answers = batch.readmit("t1").answers
    for rid in alone_ids:  # the reference: every waiter asks for itself, earliest first
        alone.check(rid)

    granted_batch = {rid.split("-")[0] for rid, a in answers.items() if isinstance(a, Granted)}
    assert granted_batch == set(_state(batch))
    assert _state(batch) == _state(alone)
    assert len(_state(batch)) >= 2, "the crowd must hold writes the release can admit together"
    assert len(_state(batch)) < len(CROWD), "and writes it cannot"
    # the request on two tables is left to its own check, but still ranks ahead of no one here
    assert batch_ids[-1] not in answers
    assert all(rid in answers for rid in batch_ids[:-1])
    batch.store.close()
    alone.store.close()


def test_a_readmission_never_grants_two_conflicting_writes_and_keeps_the_token_order(store_url: str) -> None:
    clock = FakeClock()
    manager, holder, ids, ops = _setup(store_url, clock)
    clock.advance(1)
    manager.release(holder.lease_id, request("alter", ("t1", op("INSERT"))).owner)
    answers = manager.readmit("t1").answers
    granted = [rid for rid in ids if isinstance(answers.get(rid), Granted)]
    assert len(granted) >= 2
    for i, a in enumerate(granted):
        for b in granted[i + 1 :]:
            decision = model.decide(ops[a], [ops[b]], CONFIG, PROFILE)
            assert not decision.conflict, f"{a} and {b} granted together: {decision.reasons}"
    tokens = [answers[rid].fencing["t1"] for rid in granted]  # type: ignore[union-attr]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
    assert min(tokens) == holder.fencing["t1"] + 1
    # the waiting ones are told what they wait behind: something still there
    live = {x.lease_id for x in manager.leases("t1")} | {w.request_id for w in manager.waiters("t1")}
    for answer in answers.values():
        if isinstance(answer, Waiting):
            assert answer.blockers and {b.id for b in answer.blockers} <= live
    manager.store.close()


def test_a_readmission_is_one_transaction_and_renews_no_queue_entry(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    manager, holder, _, _ = _setup(store_url, clock)
    clock.advance(1)
    manager.release(holder.lease_id, request("alter", ("t1", op("INSERT"))).owner)
    before = {w.request_id: w.expires_at for w in manager.waiters("t1")}
    calls: list[str] = []
    for name in ("run", "transaction", "read_request", "alive", "read_lease", "read_requests"):
        real = getattr(manager.store, name, None)
        if real is None:
            continue

        def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(manager.store, name, counted)
    clock.advance(5)
    answers = manager.readmit("t1").answers
    assert len(answers) == len(CROWD)
    # one locking transaction (`run` is its retrying wrapper), no unlocked read besides
    assert calls.count("transaction") == 1 and set(calls) <= {"run", "transaction"}, calls
    monkeypatch.undo()
    after = {w.request_id: w.expires_at for w in manager.waiters("t1")}
    still = [rid for rid, a in answers.items() if isinstance(a, Waiting)]
    assert still and all(after[rid] == before[rid] for rid in still)
    manager.store.close()


def test_a_waiter_decided_again_keeps_its_queue_entry_expiry(store_url: str) -> None:
    """A waiter whose last blockers all left is decided in full; if it still waits (behind a request that
    was queued later with a higher priority, so not among its last blockers), its entry is not renewed."""
    clock = FakeClock()
    manager = LeaseManager(store_url, clock=clock)
    holder = manager.acquire(request("alter", ("t1", op("SET_TBLPROPERTIES"))))
    assert isinstance(holder, Granted)
    late = request("late", ("t1", op("MERGE")))
    assert isinstance(manager.acquire(late), Waiting)
    clock.advance(1)
    urgent = request("urgent", ("t1", op("MERGE")), priority=5)
    assert isinstance(manager.acquire(urgent), Waiting)
    expiry = {w.request_id: w.expires_at for w in manager.waiters("t1")}[late.request_id]
    clock.advance(10)
    manager.release(holder.lease_id, request("alter", ("t1", op("INSERT"))).owner)
    answers = manager.readmit("t1").answers
    assert isinstance(answers[urgent.request_id], Granted)
    behind = answers[late.request_id]
    assert isinstance(behind, Waiting) and [b.id for b in behind.blockers] == [urgent.request_id]
    assert {w.request_id: w.expires_at for w in manager.waiters("t1")}[late.request_id] == expiry
    manager.store.close()


def test_an_abandoned_waiter_is_not_granted_by_a_readmission(store_url: str) -> None:
    clock = FakeClock()
    manager = LeaseManager(store_url, clock=clock)
    holder = manager.acquire(request("alter", ("t1", op("SET_TBLPROPERTIES"))))
    assert isinstance(holder, Granted)
    gone = request("gone", ("t1", op("INSERT")), wait_ttl_s=5)
    assert isinstance(manager.acquire(gone), Waiting)
    clock.advance(1)
    live = request("live", ("t1", op("INSERT")), wait_ttl_s=60)
    assert isinstance(manager.acquire(live), Waiting)
    clock.advance(10)  # "gone" never asked again: its entry expired
    manager.release(holder.lease_id, request("alter", ("t1", op("INSERT"))).owner)
    answers = manager.readmit("t1").answers
    assert gone.request_id not in answers
    assert isinstance(answers[live.request_id], Granted)
    assert set(_state(manager)) == {"live"}
    manager.store.close()


def test_a_readmission_out_of_time_stops_in_queue_order_and_the_next_goes_on(store_url: str) -> None:
    clock = FakeClock()
    manager, holder, ids, _ = _setup(store_url, clock)
    clock.advance(1)
    manager.release(holder.lease_id, request("alter", ("t1", op("INSERT"))).owner)
    cut = manager.readmit("t1", budget_s=0.0)
    assert not cut.complete and not cut.answers and not _state(manager)
    full = manager.readmit("t1", budget_s=60.0)
    assert full.complete and set(full.answers) == set(ids[:-1])
    manager.store.close()


def test_the_in_memory_view_forgets_what_the_store_releases(store_url: str) -> None:
    """The batch's view is a whole store transaction: a release passes on to the store and leaves memory."""
    from deltaguard.leases.readmit import CrowdTxn

    manager, holder, _, _ = _setup(store_url, FakeClock())
    (row,) = manager.store.read_lease(holder.lease_id)
    with manager.store.transaction([row.uri]) as txn:
        view = CrowdTxn(txn)
        assert view.release_lease(holder.lease_id, "someone else") == []
        assert [r.lease_id for r in view.leases()] == [holder.lease_id]
        released = view.release_lease(holder.lease_id, row.owner_key)
        assert [r.lease_id for r in released] == [holder.lease_id]
        assert view.leases() == [] and view.lease_rows(holder.lease_id) == []
    assert manager.store.read_lease(holder.lease_id) == []


def _pairs_judged_by_one_readmission(
    url: str, n: int, labelled: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[int, int]:
    """(pairs the model judged, waiters granted) for one re-admission of ``n`` appends queued behind an
    exclusive holder, every one of which the release admits (so each is judged beside all granted before it)."""
    import dataclasses

    clock = FakeClock()
    manager = LeaseManager(url, clock=clock)
    holder = manager.acquire(request("alter", ("t1", op("SET_TBLPROPERTIES"))))
    assert isinstance(holder, Granted)
    for i in range(n):
        clock.advance(0.01)
        append = dataclasses.replace(op("INSERT"), label=f"append{i}") if labelled else op("INSERT")
        assert isinstance(manager.acquire(request(f"w{i}", ("t1", append))), Waiting)
    clock.advance(1)
    manager.release(holder.lease_id, request("alter", ("t1", op("INSERT"))).owner)
    judged: list[int] = []
    real = model._judge_all

    def counted(*args: Any) -> Any:
        judged.append(1)
        return real(*args)

    with monkeypatch.context() as patch:
        patch.setattr(model, "_judge_all", counted)
        answers = manager.readmit("t1").answers
    manager.store.close()
    return len(judged), sum(isinstance(a, Granted) for a in answers.values())


@pytest.mark.parametrize("labelled", [False, True], ids=["equal", "labelled"])
def test_a_readmission_judges_each_distinct_pair_once_not_each_waiter_against_each_grant(
    store_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, labelled: bool
) -> None:
    """N appends behind one release: all granted, each beside every one granted before it (N²/2 pairs).
    Equal operations (or equal but for labels the verdict does not name) are judged once per pass, so the
    model's work does not grow with the queue at all, let alone with its square."""
    small, granted_small = _pairs_judged_by_one_readmission(store_url, 10, labelled, monkeypatch)
    if store_url.startswith("sqlite"):
        other = f"sqlite:///{tmp_path / 'larger.db'}"
    else:
        from tests.leases.conftest import fresh_pg_database

        other = fresh_pg_database(store_url.rsplit("/", 1)[0] + "/postgres")
    large, granted_large = _pairs_judged_by_one_readmission(other, 40, labelled, monkeypatch)
    assert (granted_small, granted_large) == (10, 40)
    # one pair (append beside append) per pass however long the queue; 45 and 780 judged one by one
    assert large <= small <= 2, (small, large)


class _Clocks:
    """Stand-ins for the pass's clocks: each reading moves on by a fixed step (seconds)."""

    def __init__(self, cpu_step: float, wall_step: float) -> None:
        self.cpu = self.wall = 0.0
        self.cpu_step, self.wall_step = cpu_step, wall_step

    def thread_time(self) -> float:
        self.cpu += self.cpu_step
        return self.cpu

    def monotonic(self) -> float:
        self.wall += self.wall_step
        return self.wall


@pytest.mark.parametrize(
    ("cpu_step", "wall_step", "complete"),
    [
        (0.0, 1.0, True),  # a pass starved of CPU (each row 1 s of wall clock, no CPU): not cut at 5 s
        (1.0, 0.0, False),  # a pass that uses CPU: cut at its 5 s budget
        (0.0, 3.0, False),  # starved beyond twice its budget: cut by the wall-clock backstop
    ],
)
def test_a_readmission_budget_counts_the_deciding_threads_cpu_time(
    store_url: str, monkeypatch: pytest.MonkeyPatch, cpu_step: float, wall_step: float, complete: bool
) -> None:
    from deltaguard.leases import readmit

    clock = FakeClock()
    manager, holder, ids, _ = _setup(store_url, clock)
    clock.advance(1)
    manager.release(holder.lease_id, request("alter", ("t1", op("INSERT"))).owner)
    clocks = _Clocks(cpu_step, wall_step)
    monkeypatch.setattr(readmit, "_cpu_clock", clocks.thread_time)
    monkeypatch.setattr(readmit, "_wall_clock", clocks.monotonic)
    result = manager.readmit("t1", budget_s=5.0)
    monkeypatch.undo()
    assert result.complete is complete
    if complete:
        assert set(result.answers) == set(ids[:-1])
    else:  # cut in queue order: what it answered is a prefix of the queue
        assert 0 < len(result.answers) < len(ids) - 1
        assert set(result.answers) == set(ids[: len(result.answers)])
    manager.store.close()
