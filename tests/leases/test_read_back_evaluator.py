"""A waiting request decided again from what the lease store holds is judged no less conservatively than
its writer's own process judged it with the engine's evaluator (ADR 0037).

On an INT partition delta-rs' DELETE of ``k = 1.5`` rewrites ``k = 1``; the hand reading, with its own
check of a fraction on an integer partition taken out (every test here), keeps the two apart. The request waits behind both holders (the evaluator refutes the separation from ``k = 1``); when
one of them leaves, another process decides it again from its stored payload, which carries no evaluator.
"""

from __future__ import annotations

import pytest

from deltaguard.core import TableConfig
from deltaguard.core.admission import Granted, Owner, Waiting
from deltaguard.engines.sources import attach_oracle
from deltaguard.leases.manager import LeaseManager
from tests.leases.conftest import INTS, INTS_URI, FakeClock
from tests.leases.conftest import ask_int_delete as _ask


@pytest.fixture(autouse=True)
def fraction_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    from deltaguard.core.rules import deltars

    monkeypatch.setattr(deltars, "fractional_columns", lambda p: frozenset())


def _waiting_behind_two(url: str, clock: FakeClock) -> tuple[Waiting, Granted, Granted, LeaseManager]:
    writer = LeaseManager(url, clock=clock)
    one = _ask(writer, "one", "k = 1")
    five = _ask(writer, "five", "k = 5")
    assert isinstance(one, Granted) and isinstance(five, Granted)  # the evaluator confirms k = 1 vs k = 5
    cast = _ask(writer, "cast", "k = 1.5 OR k = 5")
    assert isinstance(cast, Waiting)
    assert {b.id for b in cast.blockers} == {one.lease_id, five.lease_id}
    assert writer.release(five.lease_id, Owner(dag_id="dag", task_id="five"))
    return cast, one, five, writer


def test_decided_again_without_an_evaluator_it_still_waits(store_url: str) -> None:
    clock = FakeClock()
    cast, one, _, writer = _waiting_behind_two(store_url, clock)
    other = LeaseManager(store_url, clock=clock)  # another process: nothing but the store
    try:
        answer = other.check(cast.request_id)
        assert isinstance(answer, Waiting), "granted beside k = 1 on the hand reading alone"
        assert [b.id for b in answer.blockers] == [one.lease_id]
        assert any("read back from the lease store" in r for r in answer.reasons), answer.reasons
    finally:
        other.store.close()
        writer.store.close()


def test_decided_again_with_the_engines_evaluator_it_still_waits(store_url: str) -> None:
    clock = FakeClock()
    cast, one, _, writer = _waiting_behind_two(store_url, clock)
    other = LeaseManager(store_url, clock=clock, oracle_loader=attach_oracle)  # as the Airflow hooks open it
    try:
        answer = other.check(cast.request_id)
        assert isinstance(answer, Waiting)
        assert [b.id for b in answer.blockers] == [one.lease_id]
        assert any("selects one witness partition" in r for r in answer.reasons), answer.reasons
    finally:
        other.store.close()
        writer.store.close()


def test_the_queue_readmitted_by_another_process_keeps_it_waiting(store_url: str) -> None:
    clock = FakeClock()
    cast, one, _, writer = _waiting_behind_two(store_url, clock)
    for loader in (None, attach_oracle):
        other = LeaseManager(store_url, clock=clock, oracle_loader=loader)
        try:
            answer = other.readmit(INTS_URI).answers.get(cast.request_id)
            assert isinstance(answer, Waiting), (loader, answer)
            assert [b.id for b in answer.blockers] == [one.lease_id]
        finally:
            other.store.close()
    writer.store.close()


def test_a_table_no_evaluator_could_judge_is_left_to_the_hand_reading(store_url: str) -> None:
    """Without partition types no engine's evaluator is had in the writer's process either."""
    clock = FakeClock()
    manager = LeaseManager(store_url, clock=clock)
    config = manager.memo.read_back(TableConfig(partition_columns=("k",), version=1))
    assert config.meaning is None
    assert manager.memo.read_back(INTS).meaning is not None
    manager.store.close()
