"""delta-rs 1.6.6 on generated partition columns and zone-less timestamps, measured on real tables."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, Field, Schema, write_deltalake
from deltalake.exceptions import DeltaError
from deltalake.schema import PrimitiveType

from deltaguard.core.profiles import DELTA_RS_TIME_ZONE
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.discovery import read_table_config


def generated_table(path: Path) -> str:
    schema = Schema(
        [
            Field("ts", PrimitiveType("timestamp"), nullable=True),
            Field("x", PrimitiveType("long"), nullable=True),
            Field(
                "d",
                PrimitiveType("date"),
                nullable=True,
                metadata={"delta.generationExpression": "CAST(ts AS DATE)"},
            ),
        ]
    )
    DeltaTable.create(str(path), schema, partition_by=["d"])
    rows = pa.table(
        {
            "ts": pa.array([dt.datetime(2024, 1, 1, 1)], pa.timestamp("us", tz="UTC")),
            "x": pa.array([1], pa.int64()),
        }
    )
    write_deltalake(str(path), rows, mode="append")  # delta-rs computes d itself
    return str(path)


def test_discovery_reads_generated_and_timestamp_columns(tmp_path: Path) -> None:
    config = read_table_config(generated_table(tmp_path / "t"))
    assert config.generated_columns == (("d", "CAST(ts AS DATE)"),)
    assert config.timestamp_columns == ("ts",)
    assert not config.unknown


def test_deltars_refuses_to_move_a_row_by_its_generation_source(tmp_path: Path) -> None:
    # Measured: delta-rs 1.6.6 does not recompute d on UPDATE and fails its check; nothing commits, so the
    # model's "the row may move anywhere" is only conservative there.
    uri = generated_table(tmp_path / "t")
    with pytest.raises(DeltaError, match="failed validation"):
        DeltaTable(uri).update(
            updates={"ts": "TIMESTAMP '2024-02-01 12:00:00'"}, predicate="d = '2024-01-01'"
        )
    assert DeltaTable(uri).version() == 1


def test_deltars_reads_zone_less_timestamp_text_as_utc(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    rows = pa.table({"ts": pa.array([dt.datetime(2024, 1, 1, 1)], pa.timestamp("us", tz="UTC")), "x": [1]})
    write_deltalake(uri, rows, partition_by=["ts"])
    DeltaTable(uri).delete("ts = '2024-01-01 02:00:00'")  # 02:00 would be 01:00Z in Paris: not this row
    assert DeltaTable(uri).to_pyarrow_table().num_rows == 1
    DeltaTable(uri).delete("ts = '2024-01-01 01:00:00'")
    assert DeltaTable(uri).to_pyarrow_table().num_rows == 0
    assert DELTA_RS_TIME_ZONE == "UTC"
    assert DeltaRsEngine().table_profile(uri).session_time_zone == "UTC"
