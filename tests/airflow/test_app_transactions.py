"""App transactions across runs, on real delta-rs tables: runs never suppress each other, a retry is a
no-op, a cleared task instance writes again (the rule in ``deltaguard.writes.prepared``; the clears
on a real metadata DB are in ``test_app_identity.py``)."""

from __future__ import annotations

import datetime as dt
import time
from types import SimpleNamespace

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties, Transaction

from tests.airflow.helpers import rows, sales_table

EARLY = dt.datetime(2026, 3, 1, 1, tzinfo=dt.UTC)
LATE = dt.datetime(2026, 3, 1, 2, tzinfo=dt.UTC)


def _context(run_id: str, started: dt.datetime, *, try_number: int = 1, max_tries: int = 0) -> dict:
    """The task has no retries, so ``max_tries`` is the try number at its last clear (0: never)."""
    ti = SimpleNamespace(
        dag_id="daily",
        task_id="load",
        run_id=run_id,
        try_number=try_number,
        map_index=-1,
        max_tries=max_tries,
    )
    dag_run = SimpleNamespace(
        run_id=run_id, start_date=started, run_after=started, logical_date=started, clear_number=0
    )
    return {"ti": ti, "dag_run": dag_run}


def _append(table: str, row_id: int) -> object:
    from deltaguard.operators.dml import DeltaInsertOperator

    return DeltaInsertOperator(
        task_id="load",
        table=table,
        source=lambda: pa.table({"id": [row_id], "country": ["DE"], "amount": [row_id]}),
    )


@pytest.mark.parametrize("first", ["early", "late"])
def test_two_runs_both_write_in_either_commit_order(tmp_path, lease_store_url, first: str) -> None:
    """The earlier-started run committing second used to be skipped as a duplicate of the later one."""
    table = sales_table(str(tmp_path / "sales"))
    runs = {"early": ("backfill__2026-02-01", EARLY, 100), "late": ("scheduled__2026-03-01", LATE, 200)}
    order = [first, "late" if first == "early" else "early"]
    results = []
    for name in order:
        run_id, started, row_id = runs[name]
        results.append(_append(table, row_id).execute(_context(run_id, started)))
    assert [r["duplicate"] for r in results] == [False, False]
    assert sorted(r["id"] for r in rows(table)) == [1, 2, 3, 100, 200]


def test_a_retry_is_a_no_op_and_a_clear_writes_again(tmp_path, lease_store_url) -> None:
    table = sales_table(str(tmp_path / "sales"))
    first = _append(table, 7).execute(_context("manual__1", EARLY))
    retry = _append(table, 7).execute(_context("manual__1", EARLY, try_number=2))
    assert (first["duplicate"], retry["duplicate"]) == (False, True)
    assert retry["version"] == first["version"]
    cleared = _append(table, 7).execute(_context("manual__1", LATE, try_number=3, max_tries=2))
    assert cleared["duplicate"] is False and cleared["app_version"] == 2
    assert [r["id"] for r in rows(table)].count(7) == 2  # the explicit clear wrote again
    again = _append(table, 7).execute(_context("manual__1", LATE, try_number=4, max_tries=2))
    assert again["duplicate"] is True  # and a retry of the cleared run is a no-op again
    txns = DeltaTable(table).transaction_version(first["app_id"])
    assert txns == 2  # one txn entry per app id, at the highest version written


def test_delta_rs_expires_app_transactions_after_their_retention(tmp_path) -> None:
    """Measured: delta-rs 1.6.6 honours ``delta.setTransactionRetentionDuration``; a retry later than the
    retention would write again, so the retention must outlast any retry or clear of a run."""
    path = str(tmp_path / "t")
    data = pa.table({"id": [1]})
    write_deltalake(path, data, configuration={"delta.setTransactionRetentionDuration": "interval 1 seconds"})
    txn = Transaction("daily.load@r1", 0, int(time.time() * 1000))
    write_deltalake(path, data, mode="append", commit_properties=CommitProperties(app_transactions=[txn]))
    assert DeltaTable(path).transaction_version("daily.load@r1") == 0
    time.sleep(1.5)
    write_deltalake(path, data, mode="append")
    assert DeltaTable(path).transaction_version("daily.load@r1") is None
