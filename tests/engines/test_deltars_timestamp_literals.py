"""Timestamp literals in the writes deltaguard runs on delta-rs 1.6.6: what the model reads in Spark SQL must
run on DataFusion, whose own ``CAST('…' AS TIMESTAMP)`` is a nanosecond value delta-rs refuses to compare
with a Delta timestamp column (measured: "Invalid comparison operation: Timestamp(µs, "UTC") >= Timestamp(ns)")."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

from deltaguard.core.sql.literals import DATAFUSION, RenderError, render_sql
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.specs import AppendSpec, DeleteSpec, MergeSpec, UpdateSpec
from tests.engines.helpers import table_rows

UTC = dt.UTC


@pytest.fixture
def stamped(tmp_path: Path) -> str:
    """A table with a zoned ``TIMESTAMP`` column ``ts``, a ``TIMESTAMP_NTZ`` column ``n`` and a timestamp
    partition column ``at``."""
    uri = str(tmp_path / "stamped")
    moments = [dt.datetime(2024, 1, 1, h) for h in (0, 6, 12)]
    data = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "ts": pa.array([m.replace(tzinfo=UTC) for m in moments], pa.timestamp("us", tz="UTC")),
            "n": pa.array(moments, pa.timestamp("us")),
            "at": pa.array([m.replace(tzinfo=UTC) for m in moments], pa.timestamp("us", tz="UTC")),
            "v": pa.array([0, 0, 0], pa.int64()),
        }
    )
    DeltaRsEngine().write(uri, AppendSpec(data, partition_by=("at",)))
    return uri


@pytest.mark.parametrize(
    ("predicate", "ids"),
    [
        ("ts >= TIMESTAMP '2024-01-01 06:00:00'", {2, 3}),
        ("ts = TIMESTAMP '2024-01-01'", {1}),
        ("ts >= CAST('2024-01-01 06:00:00' AS TIMESTAMP)", {2, 3}),
        ("ts <= TIMESTAMP '2024-01-01 07:00:00+02:00'", {1}),  # 05:00 UTC, not 07:00
        ("n >= TIMESTAMP_NTZ '2024-01-01 12:00:00'", {3}),
        ("ts BETWEEN TIMESTAMP '2024-01-01 05:59:59.999999' AND TIMESTAMP '2024-01-01 06:00:00.000001'", {2}),
    ],
)
def test_a_timestamp_literal_runs_on_delta_rs_as_spark_reads_it(
    stamped: str, predicate: str, ids: set[int]
) -> None:
    result = DeltaRsEngine().write(stamped, UpdateSpec({"v": "1"}, predicate))
    assert result.committed
    assert {r["id"] for r in table_rows(stamped) if r["v"] == 1} == ids


def test_a_delete_on_a_timestamp_partition_runs(stamped: str) -> None:
    DeltaRsEngine().write(stamped, DeleteSpec("at = TIMESTAMP '2024-01-01 12:00:00'"))
    assert sorted(r["id"] for r in table_rows(stamped)) == [1, 2]


@pytest.mark.parametrize(
    "value",
    [
        dt.datetime(2024, 1, 1, 6, tzinfo=UTC),
        dt.datetime(2024, 1, 1, 8, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    ],
)
def test_a_merge_scoped_to_a_timestamp_partition_runs(stamped: str, value: dt.datetime) -> None:
    source = pa.table({"id": pa.array([2], pa.int64()), "v": pa.array([7], pa.int64())})
    result = DeltaRsEngine().write(
        stamped,
        MergeSpec(source, "t.id = s.id", target_partition_values={"at": value}, matched_update={"v": "s.v"}),
    )
    assert result.metrics["num_target_rows_updated"] == 1
    assert {r["id"]: r["v"] for r in table_rows(stamped)} == {1: 0, 2: 7, 3: 0}


def test_a_malformed_timestamp_string_is_refused_before_it_runs() -> None:
    # Spark reads CAST('garbage' AS TIMESTAMP) as NULL; DataFusion would fail or read it otherwise
    with pytest.raises(RenderError):
        render_sql("ts = CAST('garbage' AS TIMESTAMP)", DATAFUSION)
