"""A deferred write freed by its table's release while the worker slots are full is held by the slot gate
(ADR 0028) in its trigger, behind the leases that fill the slots; the release of one of them, on another
table, wakes it and grants it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.manager import LeaseManager
from deltaguard.triggers import lease as lease_trigger
from deltaguard.triggers.lease import LeaseAvailableTrigger
from tests.airflow.helpers import store_handles_closed

PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")
CONFIG = TableConfig(partition_columns=("country",))


def _request(owner: str, uri: str, kind: OperationKind = OperationKind.INSERT) -> LeaseRequest:
    claim = TableClaim(uri, Operation(kind, label=owner), PROFILE, CONFIG)
    return LeaseRequest(claims=(claim,), owner=Owner(name=owner), ttl_s=600, wait_ttl_s=900)


def test_a_trigger_freed_by_its_table_waits_for_a_slot_then_a_release_elsewhere_grants_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", url)
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__WORKER_SLOTS", "1")
    # the safety poll beyond the test: only a release's wake-up can make the trigger ask again
    monkeypatch.setattr(lease_trigger, "NOTIFY_POLL_POLLS", 10_000)
    manager = LeaseManager(url)  # the holders were granted before the gate (no gate here)
    busy = manager.acquire(_request("busy", "/t/other"))
    alter = manager.acquire(_request("alter", "/t/mine", OperationKind.SET_TBLPROPERTIES))
    assert isinstance(busy, Granted) and isinstance(alter, Granted)
    waiting = manager.acquire(_request("append", "/t/mine"))
    assert isinstance(waiting, Waiting) and {b.kind for b in waiting.blockers} == {"lease"}

    async def scenario() -> dict[str, Any]:
        fired: dict[str, Any] = {}

        async def first() -> None:
            async for event in LeaseAvailableTrigger(url, waiting.request_id, 1.0).run():
                fired.update(event.payload)
                return

        task = asyncio.create_task(first())
        await asyncio.sleep(3.0)  # its first check (after one poll interval) finds the conflict
        await asyncio.to_thread(manager.release, alter.lease_id, Owner(name="alter"))
        # woken, it finds its table free and the one worker slot taken by `busy`: it waits for the slot
        for _ in range(600):
            row = manager.store.read_request(waiting.request_id)
            if fired or (row is not None and row.last_wait and '"slot"' in row.last_wait):
                break
            await asyncio.sleep(0.1)
        assert not fired, "granted while the only worker slot was taken"
        await asyncio.to_thread(manager.release, busy.lease_id, Owner(name="busy"))
        # its next poll is 300 s away (a third of its queue entry's life): firing before it is the wake-up
        await asyncio.wait_for(task, 150)
        await store_handles_closed()
        return fired

    fired = asyncio.run(scenario())
    assert fired["status"] == "granted"
    assert {x.lease_id for x in manager.leases("/t/mine")} == {waiting.request_id}
    manager.store.close()
