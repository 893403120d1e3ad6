"""Where a write's duration estimate comes from: the operator's ``expected_duration``, else the decision
log (ADR 0024). The estimate travels in the stored request, where the lease manager reads it."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from deltaguard.leases.manager import LeaseManager
from deltaguard.writes.table_uri import table_key
from tests.airflow.helpers import sales_table, task_context


def _stored_estimate(url: str, request_id: str) -> float | None:
    manager = LeaseManager(url)
    try:
        row = manager.store.read_request(request_id)
        assert row is not None
        return json.loads(row.payload).get("expected_duration_s")
    finally:
        manager.store.close()


def _rows() -> pa.Table:
    return pa.table({"id": [9], "country": ["FR"], "amount": [90]})


def test_stated_estimate_then_learned_one(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.dml import DeltaInsertOperator

    table = sales_table(str(tmp_path / "sales"))
    first = DeltaInsertOperator(
        task_id="append", table=table, source=_rows, expected_duration=dt.timedelta(minutes=7)
    ).execute(task_context("append"))
    assert _stored_estimate(lease_store_url, first["lease_id"]) == 420.0

    manager = LeaseManager(lease_store_url)
    try:
        log = {
            d.kind: d.at for d in manager.decisions(uri=table_key(table)) if d.request_id == first["lease_id"]
        }
    finally:
        manager.store.close()
    held = log["release"] - log["grant"]

    # The same task without a stated estimate: the median of its holds so far (one, the first run's).
    second = DeltaInsertOperator(task_id="append", table=table, source=_rows).execute(task_context("append"))
    assert second["lease_id"] != first["lease_id"]
    assert _stored_estimate(lease_store_url, second["lease_id"]) == pytest.approx(held)

    # Another task has no history on the table: no estimate, FIFO.
    other = DeltaInsertOperator(task_id="other", table=table, source=_rows).execute(task_context("other"))
    assert _stored_estimate(lease_store_url, other["lease_id"]) is None


@pytest.mark.parametrize("bad", [-1, float("inf"), float("nan")])
def test_bad_estimate_is_refused_at_construction(bad: float) -> None:
    from deltaguard.operators.dml import DeltaInsertOperator

    with pytest.raises(ValueError, match="expected_duration"):
        DeltaInsertOperator(task_id="append", table="/data/t", source=_rows, expected_duration=bad)
