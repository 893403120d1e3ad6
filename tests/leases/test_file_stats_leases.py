"""File statistics in lease decisions (ADR 0020, *Freshness* and *Deployment*): real delta-rs tables, the real
lease stores, writes pinned to the version their lease records."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from deltaguard.core import Operation, OperationKind, TableConfig
from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.core.model import decide
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.discovery import config_from_table
from deltaguard.engines.errors import DeltaConflictError
from deltaguard.engines.sources import pinned_snapshot
from deltaguard.engines.specs import UpdateSpec
from deltaguard.leases import codec
from deltaguard.leases.manager import LeaseManager

ENGINE = DeltaRsEngine()
PROFILE = ENGINE.profile()
DAY1, DAY3, DAY5 = "2024-01-01", "2024-01-03", "2024-01-05"


def frame(ids: list[int], day: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "day": pa.array([dt.date.fromisoformat(day)] * len(ids), pa.date32()),
            "v": pa.array([0] * len(ids), pa.int64()),
        }
    )


def clustered(tmp_path: Path, name: str = "t") -> str:
    """An unpartitioned table with one file per day: version 0 holds day 1 (ids 0-50), version 1 adds
    day 3 (ids 200-300)."""
    uri = str(tmp_path / name)
    write_deltalake(uri, frame(list(range(0, 51)), DAY1))
    write_deltalake(uri, frame(list(range(200, 301)), DAY3), mode="append")
    return uri


def append_day5(uri: str) -> None:
    """A file of day 5 with ids 60-70: an ``id < 100`` rewrite keeps it, a day-3 one does not."""
    write_deltalake(uri, frame(list(range(60, 71)), DAY5), mode="append")


def stats_at(uri: str, version: int) -> TableConfig:
    config = config_from_table(ENGINE.open_table(uri, version), uri, file_stats=True)
    assert config.file_stats is not None and config.version == version
    return config


def update(predicate: str) -> UpdateSpec:
    return UpdateSpec({"v": "v + 1"}, predicate)


def ask(
    owner: str, uri: str, spec: UpdateSpec, config: TableConfig | None, read_version: int | None
) -> LeaseRequest:
    return LeaseRequest(
        claims=(TableClaim(uri, spec.operation(), PROFILE, config, read_version=read_version),),
        owner=Owner(dag_id="dag", task_id=owner),
        request_id=owner,
    )


@pytest.fixture
def manager(store_url: str) -> LeaseManager:
    return LeaseManager(store_url)


def pin(manager: LeaseManager, request: LeaseRequest) -> object:
    claim = request.claims[0]
    return pinned_snapshot(
        manager,
        ENGINE,
        uri=claim.uri,
        table_key=claim.uri,
        operation=claim.operation,
        profile=claim.profile,
        owner=request.owner,
        lease_id=request.request_id,
    )


def recorded_version(manager: LeaseManager, request_id: str, uri: str) -> int | None:
    row = manager.store.read_request(request_id)
    assert row is not None
    return codec.payload_read_versions(row.payload).get(uri)


def test_per_date_updates_of_one_snapshot_are_granted_together_and_both_commit(
    tmp_path: Path, manager: LeaseManager
) -> None:
    uri = clustered(tmp_path)
    config = stats_at(uri, 1)
    day1, day3 = update(f"day = '{DAY1}'"), update(f"day = '{DAY3}'")
    first, second = ask("day1", uri, day1, config, 1), ask("day3", uri, day3, config, 1)
    assert isinstance(manager.acquire(first), Granted)
    answer = manager.acquire(second)
    assert isinstance(answer, Granted), answer
    # Both writes start before either commits: each reads the version its lease records.
    snapshots = [pin(manager, first), pin(manager, second)]
    assert [s.version() for s in snapshots] == [1, 1]  # type: ignore[attr-defined]
    results = [ENGINE.write(uri, spec, snapshot=s) for spec, s in zip((day1, day3), snapshots, strict=True)]
    assert [r.committed for r in results] == [True, True]
    assert sorted(r.version for r in results) == [2, 3]


def test_a_holder_that_read_a_newer_snapshot_than_the_statistics_makes_them_unused(
    tmp_path: Path, manager: LeaseManager
) -> None:
    uri = clustered(tmp_path)
    stale = stats_at(uri, 1)
    holder, requester = update("id < 100"), update(f"day = '{DAY3}'")
    held = ask("ids", uri, holder, stale, 1)
    assert isinstance(manager.acquire(held), Granted)
    append_day5(uri)
    # The holder's write starts at version 2 and its lease moves there (nothing else holds the table).
    assert pin(manager, held).version() == 2  # type: ignore[attr-defined]
    # On the statistics of version 1 the pair is disjoint: the model alone would admit it ...
    alone = decide(requester.operation(), [holder.operation()], stale, PROFILE)
    assert not alone.conflict, alone.reasons
    # ... but the holder reads version 2, whose day-5 file it rewrites together with day 1.
    answer = manager.acquire(ask("day3", uri, requester, stale, 1))
    assert isinstance(answer, Waiting), answer
    assert any("read version 2, newer than the statistics" in r for r in answer.reasons), answer.reasons
    # delta-rs agrees that statistics of version 1 could not decide: the pair really conflicts.
    old = ENGINE.open_table(uri, 1)
    assert ENGINE.write(uri, holder, snapshot=ENGINE.open_table(uri, 2)).committed
    with pytest.raises(DeltaConflictError):
        ENGINE.write(uri, requester, snapshot=old)


def test_a_holder_that_read_an_older_snapshot_does_not_stop_the_statistics(
    tmp_path: Path, manager: LeaseManager
) -> None:
    uri = clustered(tmp_path)
    before = stats_at(uri, 1)
    append_day5(uri)  # a commit between the holder's read and the statistics
    day1, day3 = update(f"day = '{DAY1}'"), update(f"day = '{DAY3}'")
    assert isinstance(manager.acquire(ask("day1", uri, day1, before, 1)), Granted)
    assert isinstance(manager.acquire(ask("day3", uri, day3, stats_at(uri, 2), 2)), Granted)
    # Both commit in either order, each from the version its lease records.
    copy = str(tmp_path / "copy")
    shutil.copytree(uri, copy)
    for table, order in ((uri, ((day1, 1), (day3, 2))), (copy, ((day3, 2), (day1, 1)))):
        handles = [(spec, ENGINE.open_table(table, version)) for spec, version in order]
        assert all(ENGINE.write(table, spec, snapshot=h).committed for spec, h in handles)


def test_a_holder_without_a_read_version_or_a_requester_not_pinned_keeps_the_predicate_rules(
    tmp_path: Path, manager: LeaseManager
) -> None:
    uri = clustered(tmp_path)
    config = stats_at(uri, 1)
    day1, day3 = update(f"day = '{DAY1}'"), update(f"day = '{DAY3}'")
    assert isinstance(manager.acquire(ask("day1", uri, day1, config, None)), Granted)
    answer = manager.acquire(ask("day3", uri, day3, config, 1))
    assert isinstance(answer, Waiting)
    assert any("recorded no read version" in r for r in answer.reasons), answer.reasons
    unpinned = manager.acquire(ask("day3b", uri, day3, config, None))
    assert isinstance(unpinned, Waiting)
    assert any("does not read that snapshot" in r for r in unpinned.reasons), unpinned.reasons


def test_a_holder_committing_after_the_statistics_were_read_is_handled(
    tmp_path: Path, manager: LeaseManager
) -> None:
    uri = clustered(tmp_path)
    config = stats_at(uri, 1)
    day1, day3 = update(f"day = '{DAY1}'"), update(f"day = '{DAY3}'")
    holder, requester = ask("day1", uri, day1, config, 1), ask("day3", uri, day3, config, 1)
    assert isinstance(manager.acquire(holder), Granted)
    # The holder commits (adds a file) while still holding its lease; the requester's statistics predate it.
    assert ENGINE.write(uri, day1, snapshot=pin(manager, holder)).committed  # version 2
    assert isinstance(manager.acquire(requester), Granted)
    # Its write starts at version 2: the lease is judged again there and moved to it.
    snapshot = pin(manager, requester)
    assert snapshot.version() == 2  # type: ignore[attr-defined]
    assert recorded_version(manager, "day3", uri) == 2
    assert ENGINE.write(uri, day3, snapshot=snapshot).committed


def test_a_lease_not_compatible_at_the_newer_version_writes_from_the_recorded_one(
    tmp_path: Path, manager: LeaseManager
) -> None:
    uri = clustered(tmp_path)
    config = stats_at(uri, 1)
    day1, day3 = update(f"day = '{DAY1}'"), update(f"day = '{DAY3}'")
    holder, requester = ask("day1", uri, day1, config, 1), ask("day3", uri, day3, config, 1)
    assert isinstance(manager.acquire(holder), Granted)
    assert isinstance(manager.acquire(requester), Granted)
    # A writer outside the leases adds a file spanning days 1-3: at version 2 both UPDATEs keep it.
    write_deltalake(uri, pa.concat_tables([frame([900], DAY1), frame([901], DAY3)]), mode="append")
    snapshot = pin(manager, requester)
    assert snapshot.version() == 1  # type: ignore[attr-defined]
    assert recorded_version(manager, "day3", uri) == 1


def test_a_grant_reached_with_statistics_is_not_remembered_for_one_call_grants(
    tmp_path: Path, manager: LeaseManager
) -> None:
    uri = clustered(tmp_path)
    config = stats_at(uri, 1)
    assert isinstance(manager.acquire(ask("day1", uri, update(f"day = '{DAY1}'"), config, 1)), Granted)
    assert isinstance(manager.acquire(ask("day3", uri, update(f"day = '{DAY3}'"), config, 1)), Granted)
    # The remembered key (operation and configuration texts) does not see the holders' read versions.
    assert manager.memo.compatible == {}


def test_a_wait_decided_with_statistics_is_not_remembered_for_one_call_queueing(
    tmp_path: Path, manager: LeaseManager
) -> None:
    uri = clustered(tmp_path)
    config = stats_at(uri, 1)
    assert isinstance(manager.acquire(ask("day1", uri, update(f"day = '{DAY1}'"), config, 1)), Granted)
    assert isinstance(manager.acquire(ask("day1b", uri, update(f"day = '{DAY1}'"), config, 1)), Waiting)
    assert manager.memo.conflicting == {}


def test_read_versions_travel_in_the_request_payload_and_older_payloads_still_read() -> None:
    op = Operation(OperationKind.UPDATE, predicate="day = '2024-01-01'")
    pinned = ask("a", "/t", update(f"day = '{DAY1}'"), TableConfig(version=4), 4)
    text = codec.request_payload(pinned)
    assert codec.payload_read_versions(text) == {"/t": 4}
    assert codec.request_from_payload("a", text).claims[0].read_version == 4
    old = LeaseRequest(claims=(TableClaim("/t", op, PROFILE, TableConfig(version=4)),), owner=Owner(name="o"))
    old_text = codec.request_payload(old)
    assert "read_version" not in json.loads(old_text)["claims"][0]
    assert codec.payload_read_versions(old_text) == {}
    assert codec.request_from_payload("b", old_text).claims[0].read_version is None
