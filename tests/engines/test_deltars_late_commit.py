"""The unchecked window before a delta-rs commit: shrunk to the commit call where deltalake allows it,
detected after the commit where it does not (ADR 0018).

Real delta-rs tables in tmp dirs and, for the detection, a real SQLite lease store with an injected clock:
a writer "frozen" right after its last fence check is played by advancing the clock and granting the
table to another writer inside the check.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

from deltaguard.core.admission import Granted, LeaseRequest, Owner
from deltaguard.core.operations import OperationKind
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.specs import AppendSpec, DeleteSpec, OverwriteSpec, WriteContext
from deltaguard.exceptions import CommitFencedError, LateCommitError, LeaseLostError
from deltaguard.leases.manager import OVERRUN_KIND, LeaseManager
from tests.engines.leased import Clock, claim, leased_keeper

ROWS = 5000


def _table(path: Path) -> str:
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "country": ["DE", "DE", "FR"]})
    write_deltalake(str(path), data, partition_by=["country"])
    return str(path)


def _new_rows() -> pa.Table:
    return pa.table(
        {"id": pa.array(range(100, 100 + ROWS), pa.int64()), "country": ["DE", "IT"] * (ROWS // 2)}
    )


def _data_files(uri: str) -> set[Path]:
    return {p for p in Path(uri).rglob("*.parquet") if "_delta_log" not in p.parts}


def _rows_in_new_files(uri: str, before: set[Path]) -> int:
    """Rows in finished data files written since ``before`` was listed (no deltalake call: the check may
    run inside delta-rs' own runtime); a file still being written has no footer yet and counts nothing."""
    rows = 0
    for path in _data_files(uri) - before:
        with contextlib.suppress(OSError, pa.ArrowInvalid):
            rows += pq.read_metadata(path).num_rows
    return rows


class LosesAtSecondCheck:
    """A fence that passes the check before delta-rs starts and is lost at the next one; it notes how
    many of the new rows were already in data files when that check ran."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.files_before = _data_files(uri)
        self.checks = 0
        self.rows_on_disk_at_loss: int | None = None

    def check(self) -> None:
        self.checks += 1
        if self.checks >= 2:
            self.rows_on_disk_at_loss = _rows_in_new_files(self.uri, self.files_before)
            raise LeaseLostError("lease lost (by the test) between the data files and the commit")

    def on_lost(self, cancel: Any) -> Any:
        return lambda: None


@pytest.mark.parametrize(
    "spec", [AppendSpec(source=None), OverwriteSpec(source=None)], ids=["append", "overwrite"]
)
def test_a_lease_lost_after_the_data_files_commits_nothing(tmp_path, spec) -> None:
    """The last check runs after every data file is written (only the commit call is left), and a loss
    there commits nothing. Before, the check ran when delta-rs pulled the last batch, before the files of
    the buffered rows were written."""
    import dataclasses

    uri = _table(tmp_path / "sales")
    before = DeltaTable(uri).version()
    fence = LosesAtSecondCheck(uri)
    spec = dataclasses.replace(spec, source=_new_rows())
    with pytest.raises(CommitFencedError):
        DeltaRsEngine().write(uri, spec, WriteContext(fence=fence))
    assert DeltaTable(uri).version() == before
    assert sorted(r["id"] for r in DeltaTable(uri).to_pyarrow_table().to_pylist()) == [1, 2, 3]
    assert fence.rows_on_disk_at_loss == ROWS


def test_a_staged_append_commits_the_rows_with_their_statistics(tmp_path) -> None:
    """With a fence that holds, the two-step write commits what one write_deltalake call would."""

    class Holds:
        def check(self) -> None:
            return None

        def on_lost(self, cancel: Any) -> Any:
            return lambda: None

    uri = _table(tmp_path / "sales")
    result = DeltaRsEngine().write(uri, AppendSpec(source=_new_rows()), WriteContext(fence=Holds()))
    table = DeltaTable(uri)
    assert result.version == table.version() == 1
    assert table.to_pyarrow_table().num_rows == 3 + ROWS
    assert table.history(1)[0]["operation"] == "WRITE"
    adds = pa.table(table.get_add_actions(flatten=True)).to_pydict()
    assert all(n is not None for n in adds["num_records"])  # statistics came along
    # the staged files live under the table root, where VACUUM sees them; the staging log is gone
    staged = [p for p in Path(uri).iterdir() if p.name.startswith("deltaguard-staged-")]
    assert staged and not [f for p in staged for f in (p / "_delta_log").glob("*") if f.is_file()]


def test_a_commit_that_lands_after_the_lease_was_lost_fails_loudly_and_flags_the_table(tmp_path) -> None:
    """DELETE has no split in deltalake 1.6.6: the writer "freezes" after its last check, its lease
    expires and another writer is granted the table, then the DELETE commits. The write fails with
    LateCommitError and the decision log has an unfenced_overrun entry for the table."""
    uri = _table(tmp_path / "sales")
    # the lease clock runs in the past, so every grant it logs precedes the commit's real timestamp
    clock = Clock(time.time() - 3600)
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}", clock=clock)
    keeper = leased_keeper(manager, uri, OperationKind.DELETE, "delete")
    real_check = keeper.check
    others: list[Any] = []

    def check_then_freeze() -> None:
        real_check()
        clock.now += 300  # frozen past the TTL: the lease expires
        others.append(
            manager.acquire(
                LeaseRequest(claims=[claim(uri, OperationKind.INSERT)], owner=Owner(task_id="other"))
            )
        )

    keeper.check = check_then_freeze  # type: ignore[method-assign]
    try:
        with pytest.raises(LateCommitError, match="was committed after lease"):
            DeltaRsEngine().write(uri, DeleteSpec(predicate="country = 'FR'"), WriteContext(fence=keeper))
        assert isinstance(others[0], Granted)
        assert DeltaTable(uri).version() == 1  # the DELETE is in the table: the error says so
        flagged = [d for d in manager.decisions(uri=uri) if d.kind == OVERRUN_KIND]
        assert len(flagged) == 1 and flagged[0].detail["committed_version"] == 1
        assert "other" in flagged[0].detail["granted_since"][0]
    finally:
        manager.store.close()


def test_a_commit_under_a_live_lease_passes_the_after_commit_check(tmp_path) -> None:
    uri = _table(tmp_path / "sales")
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}")
    keeper = leased_keeper(manager, uri, OperationKind.DELETE, "delete")
    try:
        result = DeltaRsEngine().write(
            uri, DeleteSpec(predicate="country = 'FR'"), WriteContext(fence=keeper)
        )
        assert result.version == 1
        assert OVERRUN_KIND not in [d.kind for d in manager.decisions(uri=uri)]
    finally:
        manager.store.close()


def _restamp_newest_commit(uri: str, stamp_ms: int) -> None:
    """Rewrite the newest log entry's ``commitInfo.timestamp``: the stamp delta-rs took when it built the
    commit, before the writer stopped; the entry itself is (re)written now, as a late write lands."""
    import json

    newest = max((Path(uri) / "_delta_log").glob("*.json"))
    actions = [json.loads(line) for line in newest.read_text().splitlines() if line.strip()]
    for action in actions:
        if "commitInfo" in action:
            action["commitInfo"]["timestamp"] = stamp_ms
    newest.write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_a_commit_stamped_before_a_grant_but_written_after_it_fails_loudly(tmp_path, monkeypatch) -> None:
    """The writer took its commit's timestamp, stopped, and its log entry landed after another writer
    was granted the table. The commit is placed by when the storage wrote the entry, so the late commit
    is found (LateCommitError, unfenced_overrun) although its commitInfo.timestamp precedes the grant."""
    uri = _table(tmp_path / "sales")
    clock = Clock(time.time() - 3600)  # lease decisions are stamped an hour before the storage's "now"
    manager = LeaseManager(f"sqlite:///{tmp_path / 'leases.db'}", clock=clock)
    keeper = leased_keeper(manager, uri, OperationKind.DELETE, "delete")
    real_check = keeper.check
    stamped_at: list[float] = []
    others: list[Any] = []

    def check_then_freeze() -> None:
        real_check()
        stamped_at.append(clock.now)  # delta-rs stamps the commit right after the last check
        clock.now += 300  # frozen past the TTL: the lease expires and the table is handed over
        others.append(
            manager.acquire(
                LeaseRequest(claims=[claim(uri, OperationKind.INSERT)], owner=Owner(task_id="other"))
            )
        )

    keeper.check = check_then_freeze  # type: ignore[method-assign]
    locate = DeltaRsEngine._locate_commit

    def restamped_locate(self: DeltaRsEngine, *args: Any) -> Any:
        _restamp_newest_commit(uri, int(stamped_at[-1] * 1000))
        return locate(self, *args)

    monkeypatch.setattr(DeltaRsEngine, "_locate_commit", restamped_locate)
    try:
        with pytest.raises(LateCommitError, match="was committed after lease"):
            DeltaRsEngine().write(uri, DeleteSpec(predicate="country = 'FR'"), WriteContext(fence=keeper))
        assert isinstance(others[0], Granted)
        # the commit's own stamp says it came before the grant: ordering by it would miss the late commit
        other_grant = manager.store.decisions(
            uri=uri, kinds=["grant"], owner_keys=[Owner(task_id="other").key]
        )
        assert DeltaTable(uri).history(1)[0]["timestamp"] / 1000 < other_grant[0].at
        flagged = [d for d in manager.decisions(uri=uri) if d.kind == OVERRUN_KIND]
        assert len(flagged) == 1 and flagged[0].detail["committed_version"] == 1
    finally:
        manager.store.close()


def test_the_log_entry_time_is_the_storages(tmp_path) -> None:
    """Local tables: the later of the entry's mtime and ctime (a writer cannot choose ctime); the same
    through a file: URI; unknown (None) for a version that does not exist."""
    import os

    from deltaguard.engines.fencing import log_entry_written_at

    uri = _table(tmp_path / "sales")
    entry = os.stat(Path(uri) / "_delta_log" / f"{0:020d}.json")
    expected = max(entry.st_mtime, entry.st_ctime)
    assert log_entry_written_at(uri, 0) == expected
    assert log_entry_written_at(Path(uri).as_uri(), 0) == expected
    assert log_entry_written_at(uri, 7) is None
