"""The table-commit event trigger against real delta-rs tables: one event a commit, by any writer."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltaguard.triggers.table_version import DeltaTableCommitTrigger, DeltaTableVersionTrigger


def _events(
    trigger: DeltaTableCommitTrigger, writes: list[Any], wanted: int, timeout: float = 120.0
) -> list[Any]:
    """Run the trigger, make ``writes`` (from a thread, as another writer would) once the trigger has read
    the version it starts after, and collect ``wanted`` events' payloads."""
    started = threading.Event()
    if trigger.start_version is None:
        read_start = trigger._current_version

        def noted() -> int:
            version = read_start()
            started.set()
            return version

        trigger._current_version = noted  # type: ignore[method-assign]
    else:
        started.set()

    async def collect() -> list[Any]:
        stream = trigger.run()
        got: list[Any] = []
        pending = list(writes)

        async def writer() -> None:
            await asyncio.to_thread(started.wait, timeout)
            for write in pending:
                await asyncio.to_thread(write)
                await asyncio.sleep(0.05)

        task = asyncio.create_task(writer())
        try:
            async with asyncio.timeout(timeout):
                async for event in stream:
                    got.append(event.payload)
                    if len(got) >= wanted:
                        break
        finally:
            await task
            await stream.aclose()
        return got

    return asyncio.run(collect())


def _append(path: str, value: int) -> Any:
    return lambda: write_deltalake(path, pa.table({"id": [value]}), mode="append")


def _delete(path: str, predicate: str) -> Any:
    return lambda: DeltaTable(path).delete(predicate)


def test_one_event_per_commit_after_the_start_oldest_first(tmp_path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [0]}))  # version 0: before the trigger starts, never reported
    trigger = DeltaTableCommitTrigger(table_uri=path, poll_interval=0.1)
    events = _events(trigger, [_append(path, 1), _delete(path, "id = 0"), _append(path, 2)], wanted=3)
    assert [(e["version"], e["operation"]) for e in events] == [(1, "WRITE"), (2, "DELETE"), (3, "WRITE")]
    assert all(e["table_uri"] == path for e in events)
    assert DeltaTable(path).version() == 3


def test_filters_skip_commits_without_reporting_them_later(tmp_path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [0, 1]}))
    trigger = DeltaTableCommitTrigger(table_uri=path, operations=["delete"], poll_interval=0.1)
    events = _events(
        trigger,
        [_append(path, 5), _delete(path, "id = 1"), _append(path, 6), _delete(path, "id = 5")],
        wanted=2,
    )
    assert [(e["version"], e["operation"]) for e in events] == [(2, "DELETE"), (4, "DELETE")]


def test_start_version_and_a_table_created_after_the_start(tmp_path) -> None:
    path = str(tmp_path / "later")
    # the table does not exist yet: its creation (version 0) is the first commit reported
    trigger = DeltaTableCommitTrigger(table_uri=path, poll_interval=0.1)
    events = _events(trigger, [_append(path, 1), _append(path, 2)], wanted=2)
    assert [e["version"] for e in events] == [0, 1]
    replay = DeltaTableCommitTrigger(table_uri=path, start_version=0, poll_interval=0.1)
    assert [e["version"] for e in _events(replay, [], wanted=1)] == [1]


def test_serializes_to_itself_and_serves_an_asset_watcher() -> None:
    from airflow.sdk import Asset, AssetWatcher
    from airflow.triggers.base import BaseEventTrigger

    trigger = DeltaTableCommitTrigger(table_uri="s3://lake/sales", operations=["MERGE"], start_version=4)
    classpath, kwargs = trigger.serialize()
    again = DeltaTableCommitTrigger(**kwargs)
    assert classpath == "deltaguard.triggers.table_version.DeltaTableCommitTrigger"
    assert again.serialize() == (classpath, kwargs)
    assert isinstance(trigger, BaseEventTrigger)
    asset = Asset("s3://lake/sales", watchers=[AssetWatcher(name="sales_commits", trigger=trigger)])
    assert asset.watchers[0].trigger is trigger
    # the sensor's one-shot trigger is no event trigger: Airflow refuses it for a watcher
    one_shot = DeltaTableVersionTrigger(table_uri="s3://lake/sales", baseline_version=0)
    with pytest.raises((TypeError, ValueError)):
        AssetWatcher(name="wrong", trigger=one_shot)
