"""The lease trigger against a real SQLite lease store, and sensors whose poke and trigger agree."""

from __future__ import annotations

import asyncio
import threading
import time

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.manager import LeaseManager
from deltaguard.triggers.lease import LeaseAvailableTrigger
from deltaguard.triggers.table_version import DeltaAdmissionTrigger, DeltaTableVersionTrigger
from tests.airflow.helpers import open_store_handles, sales_table, store_handles_closed

PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")
CONFIG = TableConfig(partition_columns=("country",))


def _request(owner: str, kind: OperationKind, predicate: str | None = None) -> LeaseRequest:
    claim = TableClaim("/t/sales", Operation(kind, predicate=predicate, label=owner), PROFILE, CONFIG)
    return LeaseRequest(claims=(claim,), owner=Owner(name=owner), ttl_s=30)


def _watch_checks(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, list[object]], threading.Event]:
    """Record every ``LeaseManager.check`` answer by request id (the triggers' checks); the event is set at
    each one, so a test can wait for a trigger to have checked instead of sleeping."""
    answers: dict[str, list[object]] = {}
    checked = threading.Event()
    real = LeaseManager.check

    def recorded(self: LeaseManager, request_id: str):  # type: ignore[no-untyped-def]
        answer = real(self, request_id)
        answers.setdefault(request_id, []).append(answer)
        checked.set()
        return answer

    monkeypatch.setattr(LeaseManager, "check", recorded)
    return answers, checked


def _first_event(trigger, timeout: float = 30.0):
    async def first():
        async for event in trigger.run():
            return event
        return None

    return asyncio.run(asyncio.wait_for(first(), timeout))


def test_lease_trigger_serializes_round_trip() -> None:
    trigger = LeaseAvailableTrigger(store_url="sqlite:////tmp/x.db", request_id="r1", poll_interval=0.5)
    path, kwargs = trigger.serialize()
    assert path == "deltaguard.triggers.lease.LeaseAvailableTrigger"
    assert LeaseAvailableTrigger(**kwargs).serialize() == (path, kwargs)
    for cls, args in (
        (DeltaTableVersionTrigger, {"table_uri": "/t", "baseline_version": 3, "operations": ["MERGE"]}),
        (
            DeltaAdmissionTrigger,
            {
                "store_url": "sqlite:///x",
                "table_key": "/t",
                "operation": {},
                "table_config": {},
                "profile": {},
            },
        ),
    ):
        path, kwargs = cls(**args).serialize()
        assert cls(**kwargs).serialize() == (path, kwargs)


def test_lease_trigger_fires_when_another_thread_releases(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    manager = LeaseManager(url)
    holder = manager.acquire(_request("alter", OperationKind.SET_TBLPROPERTIES))
    assert isinstance(holder, Granted)
    waiting = manager.acquire(_request("merge", OperationKind.MERGE))
    assert isinstance(waiting, Waiting)
    answers, checked = _watch_checks(monkeypatch)

    released_at: list[float] = []
    before_release: list[object] = []

    def release_once_the_trigger_waits() -> None:
        checked.wait(timeout=30)  # the trigger has checked (and was told to wait): release now
        before_release.extend(answers.get(waiting.request_id, []))
        released_at.append(time.time())
        manager.release(holder.lease_id, Owner(name="alter"))

    thread = threading.Thread(target=release_once_the_trigger_waits)
    thread.start()
    event = _first_event(LeaseAvailableTrigger(url, waiting.request_id, poll_interval=0.1))
    fired_at = time.time()
    thread.join()
    assert event.payload["status"] == "granted" and event.payload["request_id"] == waiting.request_id
    # it really waited for the release: told to wait before it, fired after it
    assert before_release and all(isinstance(a, Waiting) for a in before_release)
    assert released_at and fired_at >= released_at[0]
    # the grant is visible to the task that resumes: asking again with the same id returns the lease
    again = manager.acquire(
        LeaseRequest(
            claims=_request("merge", OperationKind.MERGE).claims,
            owner=Owner(name="merge"),
            ttl_s=30,
            request_id=waiting.request_id,
        )
    )
    assert isinstance(again, Granted) and again.lease_id == event.payload["lease_id"]
    manager.store.close()


def test_version_sensor_poke_and_trigger_agree(tmp_path) -> None:
    from deltaguard.sensors.table_version import DeltaTableVersionSensor

    table = sales_table(str(tmp_path / "sales"))
    sensor = DeltaTableVersionSensor(task_id="wait", table=table, baseline_version=0, operations=["WRITE"])
    sensor._baseline = 0
    trigger = DeltaTableVersionTrigger(
        table_uri=table, baseline_version=0, operations=["WRITE"], poll_interval=0.1
    )
    assert sensor.poke({}).is_done is False
    polled = threading.Event()
    probe = trigger._probe

    def probe_and_note():  # type: ignore[no-untyped-def]
        found = probe()
        polled.set()
        return found

    trigger._probe = probe_and_note  # type: ignore[method-assign]

    def append_later() -> None:
        polled.wait(timeout=30)  # the trigger has probed the table once and found nothing new
        write_deltalake(table, pa.table({"id": [9], "country": ["DE"], "amount": [1]}), mode="append")

    thread = threading.Thread(target=append_later)
    thread.start()
    event = _first_event(trigger)
    thread.join()
    poked = sensor.poke({})
    assert poked.is_done and poked.xcom_value == event.payload["commit"]
    assert event.payload["commit"]["version"] == 1 and event.payload["commit"]["operation"] == "WRITE"
    # a filter that matches nothing keeps both waiting
    sensor.operations = ["MERGE"]
    assert sensor.poke({}).is_done is False


def test_admission_sensor_poke_and_trigger_agree(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from deltaguard.leases import codec
    from deltaguard.sensors.admission import DeltaAdmissionSensor
    from deltaguard.writes.table_uri import table_key

    table = sales_table(str(tmp_path / "sales"))
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    sensor = DeltaAdmissionSensor(task_id="gate", table=table, operation="optimize", lease_store_url=url)
    _store, key, operation, config, profile = sensor._inputs()
    assert key == table_key(table)
    trigger = DeltaAdmissionTrigger(
        store_url=url,
        table_key=key,
        operation=codec.operation_to_json(operation),
        table_config=codec.config_to_json(config),
        profile=codec.profile_to_json(profile),
        poll_interval=0.1,
    )
    manager = LeaseManager(url)
    claim = TableClaim(key, Operation(OperationKind.SET_TBLPROPERTIES, label="alter"), profile, config)
    held = manager.acquire(LeaseRequest(claims=(claim,), owner=Owner(name="alter"), ttl_s=30))
    assert isinstance(held, Granted)
    blocked = sensor.poke({})
    assert blocked.is_done is False and "alter" in blocked.xcom_value["reason"]
    assert trigger._probe() == (False, blocked.xcom_value["reason"])  # the same function, the same answer
    threading.Timer(0.5, manager.release, args=(held.lease_id, Owner(name="alter"))).start()
    event = _first_event(trigger)
    assert event.payload["status"] == "success"
    assert sensor.poke({}).is_done is True
    manager.store.close()


@pytest.mark.parametrize("listen", [True, False])
def test_sqlite_lease_triggers_share_one_handle_and_one_log_watcher(
    tmp_path, monkeypatch: pytest.MonkeyPatch, listen: bool
) -> None:
    """One store handle for every trigger; one decision-log watcher wakes them (ADR 0025), unless listening
    is turned off, when they poll."""
    from deltaguard.hooks import lease as shared_store

    url = f"sqlite:///{tmp_path / 'leases.db'}"
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", url)
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_LISTEN", str(listen))
    manager = LeaseManager(url)
    holder = manager.acquire(_request("alter", OperationKind.SET_TBLPROPERTIES))
    assert isinstance(holder, Granted)
    waiting = [manager.acquire(_request(f"merge{i}", OperationKind.MERGE)) for i in range(3)]
    assert all(isinstance(w, Waiting) for w in waiting)
    answers, _ = _watch_checks(monkeypatch)

    async def scenario() -> tuple[int, bool, str, int]:
        async def first(rid: str) -> dict:
            async for event in LeaseAvailableTrigger(url, rid, poll_interval=0.1).run():
                return event.payload
            raise AssertionError("no event")

        tasks = [asyncio.create_task(first(w.request_id)) for w in waiting]
        deadline = time.monotonic() + 30
        while not all(answers.get(w.request_id) for w in waiting):  # every trigger has checked once
            assert time.monotonic() < deadline, "the triggers never checked"
            await asyncio.sleep(0.02)
        handles = open_store_handles()
        (entry,) = shared_store._SHARED.values()
        listens = entry.listener is not None
        await asyncio.to_thread(manager.release, holder.lease_id, Owner(name="alter"))
        payload = await asyncio.wait_for(tasks[0], 10)  # the first in the queue is granted
        for task in tasks[1:]:
            task.cancel()
        await asyncio.gather(*tasks[1:], return_exceptions=True)
        await store_handles_closed()
        return handles, listens, payload["status"], open_store_handles()

    handles, listens, status, left = asyncio.run(scenario())
    assert handles == 1 and listens is listen and status == "granted" and left == 0
    manager.store.close()


def test_a_sqlite_release_wakes_the_waiting_trigger_before_its_next_poll(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltaguard.hooks import lease as shared_store

    url = f"sqlite:///{tmp_path / 'leases.db'}"
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", url)
    manager = LeaseManager(url)
    holder = manager.acquire(_request("alter", OperationKind.SET_TBLPROPERTIES))
    waiting = manager.acquire(_request("merge", OperationKind.MERGE))
    assert isinstance(holder, Granted) and isinstance(waiting, Waiting)
    poll_s = 4.0

    async def scenario() -> tuple[str, float]:
        async def first() -> dict:
            async for event in LeaseAvailableTrigger(url, waiting.request_id, poll_interval=poll_s).run():
                return event.payload
            raise AssertionError("no event")

        task = asyncio.create_task(first())
        # just past the first check (after the trigger's first sleep of poll_s): the next poll is poll_s away
        deadline = time.monotonic() + 30
        while not any(e.listener is not None and e.listener.waiters for e in shared_store._SHARED.values()):
            assert time.monotonic() < deadline, "the trigger never waited on the watcher"
            await asyncio.sleep(0.02)
        released = time.monotonic()
        await asyncio.to_thread(manager.release, holder.lease_id, Owner(name="alter"))
        payload = await asyncio.wait_for(task, 30)
        woken_after = time.monotonic() - released
        await store_handles_closed()
        return payload["status"], woken_after

    try:
        status, woken_after = asyncio.run(scenario())
    finally:
        manager.store.close()
    # polling alone would check again only after 6 poll intervals (the safety poll while a watcher runs)
    assert status == "granted" and woken_after < 1.5
