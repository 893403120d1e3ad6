"""A deferred write behind a lease expected to end within seconds is brought back to its worker before the
release (ADR 0024, :mod:`deltaguard.leases.imminent`): its trigger fires an ``imminent`` event while the
lease is still held, no earlier than the lead before the holder's expected end; a holder with no estimate
is waited for as before."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.imminent import WAKE_LEAD_S
from deltaguard.leases.manager import LeaseManager
from deltaguard.triggers.lease import LeaseAvailableTrigger
from tests.airflow.helpers import store_handles_closed

PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")
CONFIG = TableConfig(partition_columns=("country",))
URI = "/t/mine"


def _request(owner: str, kind: OperationKind, expected_s: float | None = None) -> LeaseRequest:
    claim = TableClaim(URI, Operation(kind, label=owner), PROFILE, CONFIG)
    return LeaseRequest(
        claims=(claim,), owner=Owner(name=owner), ttl_s=600, wait_ttl_s=900, expected_duration_s=expected_s
    )


def _setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holder_expected_s: float | None) -> Any:
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", url)
    manager = LeaseManager(url)
    holder = manager.acquire(_request("alter", OperationKind.SET_TBLPROPERTIES, holder_expected_s))
    assert isinstance(holder, Granted)
    granted_at = time.time()
    waiting = manager.acquire(_request("append", OperationKind.INSERT, 5.0))
    assert isinstance(waiting, Waiting) and {b.kind for b in waiting.blockers} == {"lease"}
    return url, manager, holder, waiting, granted_at


async def _first_event(
    url: str, request_id: str, within_s: float, early_wake: bool = True
) -> dict[str, Any] | None:
    """The trigger's first event, or ``None`` when it has none within ``within_s`` (then it is cancelled)."""
    fired: dict[str, Any] = {}

    async def first() -> None:
        async for event in LeaseAvailableTrigger(url, request_id, 0.5, early_wake=early_wake).run():
            fired.update(event.payload)
            return

    try:
        await asyncio.wait_for(first(), within_s)
    except TimeoutError:
        return None
    finally:
        await store_handles_closed()
    return fired


def test_a_trigger_behind_a_lease_about_to_end_fires_imminent_while_it_is_still_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # expected to end WAKE_LEAD_S + 2 s after its grant: the trigger's first checks find it too far, then a
    # timed check finds it within the lead
    url, manager, holder, waiting, granted_at = _setup(tmp_path, monkeypatch, WAKE_LEAD_S + 2.0)

    # the hang guard only: the lease is never released, so without the early wake there is no event at all
    fired = asyncio.run(_first_event(url, waiting.request_id, 300.0))
    woke_at = time.time()

    assert fired is not None and fired["status"] == "imminent"
    assert fired["request_id"] == waiting.request_id
    assert fired["expected_wait_s"] <= WAKE_LEAD_S
    # not before the lead: the holder's grant plus its estimate, less the lead
    assert woke_at >= granted_at + 2.0 - 0.05
    # a hint only: the holder still holds its lease and the write still waits
    assert {x.lease_id for x in manager.leases(URI)} == {holder.lease_id}
    again = manager.check(waiting.request_id)
    assert isinstance(again, Waiting)
    manager.store.close()


def test_a_trigger_behind_a_lease_without_an_estimate_waits_for_its_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, manager, holder, waiting, _ = _setup(tmp_path, monkeypatch, None)

    async def scenario() -> dict[str, Any] | None:
        task = asyncio.create_task(_first_event(url, waiting.request_id, 300.0))
        await asyncio.sleep(3.0)  # several checks (poll 0.5 s): none may fire while the holder stays
        assert not task.done(), "fired while an unforeseeable holder stayed"
        await asyncio.to_thread(manager.release, holder.lease_id, Owner(name="alter"))
        return await task

    fired = asyncio.run(scenario())
    assert fired is not None and fired["status"] == "granted"
    manager.store.close()


def test_no_early_wake_while_every_worker_slot_holds_a_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # one worker slot, held by the blocker itself: a woken task would find no worker, and nobody would ask
    # for its request meanwhile
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__WORKER_SLOTS", "1")
    url, manager, holder, waiting, _ = _setup(tmp_path, monkeypatch, 1.0)

    async def scenario() -> dict[str, Any] | None:
        task = asyncio.create_task(_first_event(url, waiting.request_id, 300.0))
        await asyncio.sleep(4.0)  # past the holder's expected end: an early wake would have fired by now
        assert not task.done(), "woken early while the only worker slot held a lease"
        await asyncio.to_thread(manager.release, holder.lease_id, Owner(name="alter"))
        return await task

    fired = asyncio.run(scenario())
    assert fired is not None and fired["status"] == "granted"
    manager.store.close()


def test_the_early_wake_is_off_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # measured worse than none (docs/benchmarks.md, "Sweep with the early wake"): a trigger built as the
    # operators build it waits for the release, however near the holder's expected end
    url, manager, holder, waiting, _ = _setup(tmp_path, monkeypatch, 1.0)
    assert LeaseAvailableTrigger(url, waiting.request_id).serialize()[1]["early_wake"] is False

    async def scenario() -> dict[str, Any] | None:
        task = asyncio.create_task(_first_event(url, waiting.request_id, 300.0, early_wake=False))
        await asyncio.sleep(4.0)  # past the holder's expected end
        assert not task.done(), "woken early without early_wake"
        await asyncio.to_thread(manager.release, holder.lease_id, Owner(name="alter"))
        return await task

    fired = asyncio.run(scenario())
    assert fired is not None and fired["status"] == "granted"
    manager.store.close()
