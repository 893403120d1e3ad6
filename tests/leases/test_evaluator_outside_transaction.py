"""No engine's evaluator is asked while a lease store transaction is open (ADR 0037).

Asking delta-rs' evaluator took 90-250 ms per decision beside one to three holders, a Spark session's up to a
second per pair; asked inside the decision's transaction, that long every other decision of a SQLite store
waited for its one write lock, and task starts on a busy machine failed their store timeout. A question
with no kept answer now ends the transaction, is asked outside it, and the transaction runs again: the
answers, and so the decisions, are the engine's as before.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from deltaguard.core import EngineName, EngineProfile, Operation, OperationKind, TableConfig, oracle
from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.core.oracle import AnswerCache
from deltaguard.engines.deltars.meaning import DataFusionOracle
from deltaguard.engines.sources import attach_oracle
from deltaguard.leases import store as store_module
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.sql.base import SqlLeaseStore
from deltaguard.leases.sql.postgres import PostgresLeaseStore
from tests.leases.conftest import FakeClock

RS = EngineProfile(EngineName.DELTA_RS, "1.6.6")
INTS = TableConfig(partition_columns=("k",), column_types=(("k", "integer"), ("v", "long")), version=1)
KEY = "file:///tables/ints"


class _Transactions:
    """Counts the store transactions open in this process, and the engine questions asked inside one."""

    def __init__(self) -> None:
        self.open = 0
        self.lock = threading.Lock()
        self.asked_inside = 0
        self.asked_outside = 0

    def around(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                self.open += 1
            try:
                return method(*args, **kwargs)
            finally:
                with self.lock:
                    self.open -= 1

        return wrapped

    def asking(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            if self.open:
                self.asked_inside += 1
            else:
                self.asked_outside += 1
            return method(*args, **kwargs)

        return wrapped


@pytest.fixture
def transactions(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Transactions]:
    seen = _Transactions()
    monkeypatch.setattr(SqlLeaseStore, "run", seen.around(SqlLeaseStore.run))
    monkeypatch.setattr(
        PostgresLeaseStore, "run_on_snapshot", seen.around(PostgresLeaseStore.run_on_snapshot)
    )
    monkeypatch.setattr(DataFusionOracle, "_evaluate", seen.asking(DataFusionOracle._evaluate))
    yield seen


def _ask(manager: LeaseManager, who: str, predicate: str) -> Granted | Waiting:
    config = attach_oracle(INTS)  # a new evaluator, with no kept answer, as a new task process has
    claim = TableClaim(KEY, Operation(OperationKind.DELETE, predicate=predicate), RS, config)
    request = LeaseRequest(
        claims=(claim,),
        owner=Owner(dag_id="dag", task_id=who),
        ttl_s=600.0,
        wait_ttl_s=600.0,
        request_id=f"{who}-{uuid.uuid4().hex[:8]}",
    )
    return manager.acquire(request)


def test_the_evaluator_is_asked_outside_every_transaction_and_decides_as_before(
    store_url: str, transactions: _Transactions
) -> None:
    manager = LeaseManager(store_url, clock=FakeClock())
    try:
        # each decision beside n holders has n questions: all are asked in one round, outside
        answers = {p: _ask(manager, p, p) for p in ("k = 1", "k = 2", "k = 3", "k = 4", "k = 6", "k = 7")}
        # delta-rs' DELETE of k = 1.5 on an INT partition rewrites k = 1: the evaluator refutes the hand reading
        cast = _ask(manager, "cast", "k = 1.5 OR k = 5")
    finally:
        manager.store.close()
    assert all(isinstance(a, Granted) for a in answers.values()), answers
    assert isinstance(cast, Waiting)
    assert [b.id for b in cast.blockers] == [answers["k = 1"].lease_id]
    assert any("selects one witness partition" in r for r in cast.reasons), cast.reasons
    assert transactions.asked_outside >= 3
    assert transactions.asked_inside == 0


def test_a_question_never_kept_is_refused_after_the_last_round(
    store_url: str, transactions: _Transactions, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An evaluator whose answers are never kept: the decision still ends, within the rounds, waiting
    (closed world), and nothing decided on answers no engine gave is remembered."""

    def never_kept(self: AnswerCache, predicates: Any, candidates: Any, ask: Any) -> Any:
        within = oracle._ROUND.get()
        if within is not None:
            within.unasked.append(lambda: None)
            if within.exploring:
                return [tuple(False for _ in predicates)]  # as the real cache answers while exploring
            raise LookupError("not asked while a lease store transaction is open")
        return ask(tuple(predicates), candidates)

    monkeypatch.setattr(AnswerCache, "answer", never_kept)
    manager = LeaseManager(store_url, clock=FakeClock())
    runs: list[int] = []
    monkeypatch.setattr(SqlLeaseStore, "run", _counting(SqlLeaseStore.run, runs))
    try:
        first = _ask(manager, "one", "k = 1")
        before = len(runs)
        second = _ask(manager, "two", "k = 2")
    finally:
        manager.store.close()
    assert isinstance(first, Granted)
    assert isinstance(second, Waiting), "granted on a separation no engine confirmed"
    assert any("not asked while a lease store transaction is open" in r for r in second.reasons)
    assert len(runs) - before <= store_module.ASK_ROUNDS
    # neither the exploring rounds' grant (on assumed answers) nor the last round's refusal is remembered
    assert not manager.memo.compatible
    assert not manager.memo.conflicting


def _counting(method: Callable[..., Any], runs: list[int]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        return method(*args, **kwargs)

    return wrapped


def test_an_engine_error_outside_refuses_the_separation_naming_it(
    store_url: str, transactions: _Transactions, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine fails the question asked outside: the next transaction refuses it with the engine's own
    error (not as unasked), without a third round."""

    def failing(self: DataFusionOracle, predicates: Any, given: Any) -> Any:
        raise RuntimeError("the witness write failed")

    monkeypatch.setattr(DataFusionOracle, "_evaluate", failing)
    manager = LeaseManager(store_url, clock=FakeClock())
    runs: list[int] = []
    monkeypatch.setattr(SqlLeaseStore, "run", _counting(SqlLeaseStore.run, runs))
    try:
        first = _ask(manager, "one", "k = 1")
        before = len(runs)
        second = _ask(manager, "two", "k = 2")
    finally:
        manager.store.close()
    assert isinstance(first, Granted)
    assert isinstance(second, Waiting)
    assert any("the witness write failed" in r for r in second.reasons), second.reasons
    if store_url.startswith("sqlite"):  # PostgreSQL decides busy tables on a snapshot first
        assert len(runs) - before == 2
