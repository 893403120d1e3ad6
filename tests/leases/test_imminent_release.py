"""A write whose blockers are expected to leave within seconds waits in the worker (and its trigger fires
early) instead of paying Airflow's resume after the release: the rule, and the estimates read from a real
SQLite lease store."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from deltaguard.core.admission import Blocker, Granted, LeaseRequest, Owner, Waiting
from deltaguard.leases.imminent import (
    IMMINENT_POLL_S,
    IMMINENT_S,
    MAX_IMMINENT_S,
    WAKE_LEAD_S,
    expected_wait_s,
    imminent_limit_s,
    is_imminent,
    lease_end_reader,
    wake_in_s,
)
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.waiting import Defer, Sleep, TimeOut, next_step

from .conftest import FakeClock, op, request

UPDATE = op("UPDATE", "date = '2024-01-01'")


def _blocker(kind: str = "lease", id: str = "a") -> Blocker:
    return Blocker("t", id, Owner(name=id), kind, "UPDATE")  # type: ignore[arg-type]


def test_an_imminent_release_is_awaited_in_the_worker_not_deferred() -> None:
    step = next_step(admitted=False, waited_s=3.0, timeout_s=None, poll_s=5.0, deferrable=True, imminent=True)
    assert step == Sleep(IMMINENT_POLL_S)
    assert next_step(admitted=False, waited_s=3.0, timeout_s=None, poll_s=5.0, deferrable=True) == Defer(None)
    # the task's timeout still wins
    late = next_step(admitted=False, waited_s=9.0, timeout_s=9.0, poll_s=5.0, deferrable=True, imminent=True)
    assert late == TimeOut(9.0)


def test_the_expected_wait_is_the_last_blockers_end_and_unknown_when_it_cannot_be_foreseen() -> None:
    ends = {"a": 110.0, "b": 104.0, "c": None}
    end = lambda b: ends[b.id]  # noqa: E731
    assert expected_wait_s([_blocker(id="a"), _blocker(id="b")], end, now=100.0) == 10.0
    assert expected_wait_s([_blocker(id="c")], end, now=100.0) is None  # no estimate
    assert expected_wait_s([_blocker("waiting", "a")], end, now=100.0) is None  # not started yet
    assert expected_wait_s([], end, now=100.0) is None
    # overdue a little: still imminent; overdue by more than IMMINENT_S: unknown again (defer)
    assert is_imminent(expected_wait_s([_blocker(id="a")], end, now=115.0))
    assert expected_wait_s([_blocker(id="a")], end, now=110.0 + IMMINENT_S + 1) is None
    assert not is_imminent(expected_wait_s([_blocker(id="a")], end, now=110.0 - IMMINENT_S - 1))


@pytest.fixture
def manager(tmp_path: Path, clock: FakeClock) -> Iterator[LeaseManager]:
    m = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}", clock=clock)
    yield m
    m.store.close()


def _est(req: LeaseRequest, seconds: float | None) -> LeaseRequest:
    return dataclasses.replace(req, expected_duration_s=seconds)


@pytest.mark.parametrize(("holder_s", "after_s", "imminent"), [(40.0, 30.0, True), (40.0, 10.0, False)])
def test_a_holders_end_comes_from_its_grant_and_estimate_in_the_store(
    manager: LeaseManager, clock: FakeClock, holder_s: float, after_s: float, imminent: bool
) -> None:
    assert isinstance(manager.acquire(_est(request("hold", ("t", UPDATE), ttl_s=1000), holder_s)), Granted)
    clock.advance(after_s)
    answer = manager.acquire(request("next", ("t", UPDATE), wait_ttl_s=1000))
    assert isinstance(answer, Waiting)
    wait = expected_wait_s(answer.blockers, lease_end_reader(manager), clock())
    assert wait == pytest.approx(holder_s - after_s)
    assert is_imminent(wait) is imminent


def test_a_holder_without_an_estimate_is_never_imminent(manager: LeaseManager, clock: FakeClock) -> None:
    assert isinstance(manager.acquire(request("hold", ("t", UPDATE), ttl_s=1000)), Granted)
    clock.advance(59)
    answer = manager.acquire(request("next", ("t", UPDATE), wait_ttl_s=1000))
    assert isinstance(answer, Waiting)
    assert expected_wait_s(answer.blockers, lease_end_reader(manager), clock()) is None


def test_the_limit_is_the_tasks_own_start_up_between_the_fixed_limit_and_its_cap() -> None:
    assert imminent_limit_s(None) == IMMINENT_S
    assert imminent_limit_s(float("nan")) == IMMINENT_S
    assert imminent_limit_s(2.0) == IMMINENT_S  # an idle machine: as before
    assert imminent_limit_s(40.0) == 40.0
    assert imminent_limit_s(1e6) == MAX_IMMINENT_S
    assert is_imminent(36.0, imminent_limit_s(40.0))
    assert not is_imminent(36.0)
    assert not is_imminent(None, MAX_IMMINENT_S)


class _Deferred(Exception):
    pass


class _Slept(Exception):
    pass


@pytest.mark.parametrize(("startup_s", "waits_in_worker"), [(40.0, True), (2.0, False), (None, False)])
def test_a_slow_start_waits_in_the_worker_for_a_blocker_ending_sooner_than_a_restart(
    manager: LeaseManager,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    startup_s: float | None,
    waits_in_worker: bool,
) -> None:
    """A holder expected to end in 36 s: a task whose own start took 40 s waits for it in the worker (a
    deferral would cost at least another such start); one that started in 2 s defers, as before."""
    import types

    from deltaguard.hooks import lease as lease_hook
    from deltaguard.leases.waiting import WaitState

    assert isinstance(manager.acquire(_est(request("hold", ("t", UPDATE), ttl_s=1000), 40.0)), Granted)
    clock.advance(4.0)
    hook = lease_hook.DeltaLeaseHook(types.SimpleNamespace(poll_s=5.0, deferrable=True))  # type: ignore[arg-type]
    hook._manager = manager
    monkeypatch.setattr(lease_hook, "process_age_s", lambda now: startup_s)

    def sleep(seconds: float) -> None:
        raise _Slept(seconds)

    def defer(left: float | None) -> None:
        raise _Deferred(left)

    monkeypatch.setattr(lease_hook.time, "sleep", sleep)
    ask = lambda rid: manager.acquire(request(rid or "next", ("t", UPDATE), wait_ttl_s=1000))  # noqa: E731
    with pytest.raises(_Slept if waits_in_worker else _Deferred):
        hook.wait_for_grant(
            ask, owner=Owner(name="next"), wait=WaitState(clock()), timeout_s=None, defer=defer, what="t"
        )


def test_a_deferred_write_wakes_the_lead_before_its_blockers_are_expected_to_leave() -> None:
    assert wake_in_s(20.0, 6.0) == 14.0
    assert wake_in_s(6.0, 6.0) == 0.0
    assert wake_in_s(-3.0, 6.0) == 0.0  # already overdue (within IMMINENT_S): wake now
    assert wake_in_s(None) is None  # unforeseeable (a queued request, a slot, no estimate): no early wake
    assert wake_in_s(float("inf")) is None
    # woken, it waits in its worker: the lead is inside what the resumed task counts as imminent
    assert is_imminent(WAKE_LEAD_S, imminent_limit_s(None))
    with pytest.raises(ValueError, match="lead_s"):
        wake_in_s(10.0, IMMINENT_S)
    with pytest.raises(ValueError, match="lead_s"):
        wake_in_s(10.0, -1.0)


def test_a_slot_wait_is_never_woken_early() -> None:
    ends = {"a": 100.0}
    slot = _blocker("slot", "a")
    assert wake_in_s(expected_wait_s([slot], lambda b: ends[b.id], now=99.0)) is None
    assert wake_in_s(expected_wait_s([_blocker("lease", "a")], lambda b: ends[b.id], now=99.0)) == 0.0
