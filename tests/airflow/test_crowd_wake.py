"""A release in front of many waiting triggers of one triggerer: the woken triggers share one re-admission
of the table's queue (ADR 0031) instead of one locking decision each, and every one gets its answer."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from deltaguard.core.admission import LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.sql.base import SqlLeaseStore
from deltaguard.triggers.lease import LeaseAvailableTrigger
from tests.airflow.hang import HANG_S, stacks, wind_down, within
from tests.airflow.helpers import store_handles_closed, store_held_by

PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")
CONFIG = TableConfig(partition_columns=("country",))
N = 30


# The holder's lease outlives the test however loaded the machine: with a 60 s TTL it expired before the
# release on a loaded machine, a waiter's own check reclaimed it and granted the crowd, and the count below
# held even with the triggers' shared re-admission removed (31 transactions once the lease no longer expires).
def _request(owner: str, kind: OperationKind, predicate: str | None = None) -> LeaseRequest:
    claim = TableClaim("/t/crowd", Operation(kind, predicate=predicate, label=owner), PROFILE, CONFIG)
    return LeaseRequest(claims=(claim,), owner=Owner(name=owner), ttl_s=600, wait_ttl_s=120)


async def _first(trigger: LeaseAvailableTrigger, fired: dict[str, dict[str, Any]]) -> None:
    async for event in trigger.run():
        fired[trigger.request_id] = event.payload
        return


def test_one_release_wakes_a_crowd_with_one_decision_of_the_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, manager, holder = store_held_by(
        tmp_path, monkeypatch, _request("alter", OperationKind.SET_TBLPROPERTIES)
    )
    ids = []
    for i in range(N):
        # appends (compatible with each other) and, every tenth, an overwrite of one partition
        kind, predicate = (
            (OperationKind.REPLACE_WHERE, f"country = 'c{i}'")
            if i % 10 == 5
            else (OperationKind.INSERT, None)
        )
        answer = manager.acquire(_request(f"w{i}", kind, predicate))
        assert isinstance(answer, Waiting)
        ids.append(answer.request_id)

    transactions: list[float] = []
    real = SqlLeaseStore.transaction

    def counted(self: SqlLeaseStore, *args: Any, **kwargs: Any) -> Any:
        transactions.append(time.monotonic())
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SqlLeaseStore, "transaction", counted)

    async def scenario() -> tuple[dict[str, dict[str, Any]], float]:
        fired: dict[str, dict[str, Any]] = {}
        # a safety poll far beyond the test: only the release's wake-up can make a trigger ask again
        tasks = [asyncio.create_task(_first(LeaseAvailableTrigger(url, rid, 30.0), fired)) for rid in ids]
        # every trigger has checked once and waits (one transaction each), however loaded the machine; each
        # await below fails with every task's and thread's stack past HANG_S instead of hanging silently
        deadline = time.monotonic() + HANG_S
        while len(transactions) < N and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert len(transactions) >= N, f"hung: {len(transactions)} of {N} triggers checked\n{stacks()}"
        await asyncio.sleep(0.5)
        released = time.monotonic()
        await within(
            asyncio.to_thread(manager.release, holder.lease_id, Owner(name="alter")), "the holder's release"
        )
        # the granted ones fire; give the others the same time to ask. 25 s: on a loaded machine (make test
        # runs two pytest processes) the woken triggers' one re-admission once took over 10 s; the triggers'
        # own polls come 30 s after their last check, so none of them asks by itself before this ends, and
        # one that did would show in the count of transactions below.
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline and len(fired) < len(granted_now()):
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        before_cancel = dict(fired)
        for task in tasks:
            task.cancel()
        # a trigger that ignored its cancellation kept polling until the grants above expired (600 s)
        await within(asyncio.gather(*tasks, return_exceptions=True), "the cancelled triggers")
        assert fired == before_cancel, "a trigger fired after its cancellation"
        await within(store_handles_closed(), "the shared store's closing")
        await wind_down()
        return fired, released

    def granted_now() -> set[str]:
        return {x.lease_id for x in manager.leases("/t/crowd")}

    fired, released = asyncio.run(scenario())
    leases = granted_now()
    assert len(leases) >= 2, "the release admits several appends together"
    assert set(fired) == leases and all(p["status"] == "granted" for p in fired.values())
    # after the release, one re-admission (a second finds the grants) instead of one decision per waiter
    after = [t for t in transactions if t >= released]
    assert len(after) <= 3, f"{len(after)} locking transactions for one release in front of {N} waiters"
    manager.store.close()
