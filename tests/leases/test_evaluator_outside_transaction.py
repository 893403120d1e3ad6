"""No engine's evaluator is asked while a lease store transaction is open (ADR 0037).

Asking delta-rs' evaluator takes about 35 ms a question, a decision beside n holders asking n
(``benchmarks/bench_lock_hold.py``), and a Spark session's up to a second per pair; asked inside the
decision's transaction, that long every other decision of a SQLite store waited for its one write lock, and
task starts on a busy machine failed their store timeout. A question with no kept answer now ends the
transaction, is asked outside it, and the transaction runs again: the answers, and so the decisions, are the
engine's as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from deltaguard.core.admission import Granted, Waiting
from deltaguard.core.oracle import AnswerCache
from deltaguard.engines.deltars.meaning import DataFusionOracle
from deltaguard.leases import store as store_module
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.sql.base import SqlLeaseStore
from deltaguard.leases.sql.postgres import PostgresLeaseStore
from tests.leases.conftest import FakeClock
from tests.leases.conftest import ask_int_delete as _ask


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


def test_the_evaluator_is_asked_outside_every_transaction_and_decides_as_before(
    store_url: str, transactions: _Transactions, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltaguard.core.rules import deltars

    # the hand reading's own check of a fraction on an integer partition taken out, so that only the
    # evaluator can say what k = 1.5 selects
    monkeypatch.setattr(deltars, "fractional_columns", lambda p: frozenset())
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


def _second_beside_first(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Granted | Waiting, Granted | Waiting, int, LeaseManager]:
    """``k = 1`` asked, then ``k = 2`` beside it: both answers, the store transactions the second took (the
    general path's; PostgreSQL decides a busy table on a snapshot first) and the closed manager."""
    runs: list[int] = []
    inner = SqlLeaseStore.run

    def counted(*args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        return inner(*args, **kwargs)

    monkeypatch.setattr(SqlLeaseStore, "run", counted)
    manager = LeaseManager(store_url, clock=FakeClock())
    try:
        first = _ask(manager, "one", "k = 1")
        before = len(runs)
        second = _ask(manager, "two", "k = 2")
    finally:
        manager.store.close()
    return first, second, len(runs) - before, manager


def test_a_question_never_kept_is_refused_after_the_last_round(
    store_url: str, transactions: _Transactions, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The questions are asked outside but their answers are never kept: the decision still ends, within the
    rounds, waiting (closed world), and nothing decided on answers no engine gave is remembered."""
    monkeypatch.setattr(AnswerCache, "_ask_outside", lambda *args, **kwargs: None)
    first, second, runs, manager = _second_beside_first(store_url, monkeypatch)
    assert isinstance(first, Granted)
    assert isinstance(second, Waiting), "granted on a separation no engine confirmed"
    assert any("not asked while a lease store transaction is open" in r for r in second.reasons)
    assert runs <= store_module.ASK_ROUNDS
    # neither the exploring rounds' grant (on assumed answers) nor the last round's refusal is remembered
    assert not manager.memo.compatible
    assert not manager.memo.conflicting


def test_an_engine_error_outside_refuses_the_separation_naming_it(
    store_url: str, transactions: _Transactions, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine fails the question asked outside: the next transaction refuses it with the engine's own
    error (not as unasked), without a third round."""

    def failing(self: DataFusionOracle, predicates: Any, given: Any) -> Any:
        raise RuntimeError("the witness write failed")

    monkeypatch.setattr(DataFusionOracle, "_evaluate", failing)
    first, second, runs, manager = _second_beside_first(store_url, monkeypatch)
    assert isinstance(first, Granted)
    assert isinstance(second, Waiting)
    assert any("the witness write failed" in r for r in second.reasons), second.reasons
    # a wait resting on an engine's error is not the model's answer for the pair: the next request asks again
    assert not manager.memo.conflicting
    if store_url.startswith("sqlite"):
        assert runs == 2
