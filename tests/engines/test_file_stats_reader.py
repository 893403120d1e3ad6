"""Reading per-file statistics from real delta-rs tables into the core's plain summary (ADR 0020)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltaguard.core.file_stats import ColumnStats
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.discovery import indexed_columns, read_table_config
from deltaguard.engines.specs import ReplaceWhereSpec
from deltaguard.exceptions import InvalidWriteError


def frame(ids: list[int], day: str, s: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "day": pa.array([datetime.date.fromisoformat(day)] * len(ids), pa.date32()),
            "s": pa.array([s] * len(ids), pa.string()),
            "f": pa.array([1.5] * len(ids), pa.float64()),
        }
    )


def test_reads_min_max_and_nulls_per_file_at_the_configuration_version(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, frame([1, 2], "2024-01-01", "x"))
    write_deltalake(uri, frame([3, 4], "2024-01-02", "y" * 40), mode="append")
    config = read_table_config(uri, file_stats=True)
    summary = config.file_stats
    assert summary is not None and summary.version == config.version == 1
    assert summary.types == {"id": "long", "day": "date", "s": "string", "f": "double"}
    assert summary.indexed == {"id", "day", "s", "f"}
    by_day = {f.by_column["day"].min: f.by_column for f in summary.files}
    assert by_day["2024-01-01"]["id"] == ColumnStats(1, 2, 0)
    assert by_day["2024-01-01"]["s"] == ColumnStats("x", "x", 0)
    # a 40-character string may be truncated by a writer: not trusted, nulls still counted
    assert by_day["2024-01-02"]["s"] == ColumnStats(None, None, 0)
    assert "f" not in by_day["2024-01-01"]  # double: not a supported type
    assert read_table_config(uri).file_stats is None  # only on request


def test_no_statistics_and_indexed_columns_follow_the_table_properties(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(
        uri, frame([1], "2024-01-01", "x"), configuration={"delta.dataSkippingNumIndexedCols": "0"}
    )
    summary = read_table_config(uri, file_stats=True).file_stats
    assert summary is not None and summary.indexed == frozenset()
    (only,) = summary.files
    assert all(not stats.bounded for _, stats in only.columns)


def test_indexed_columns() -> None:
    types = [("a", "long"), ("b", "complex"), ("c", "long")]
    assert indexed_columns(types, {}) == {"a"}  # leaves of a nested column are not counted
    assert indexed_columns(types, {"delta.dataSkippingNumIndexedCols": "1"}) == {"a"}
    assert indexed_columns([("a", "long"), ("c", "date")], {"delta.dataSkippingNumIndexedCols": "-1"}) == {
        "a",
        "c",
    }
    assert indexed_columns(types, {"delta.dataSkippingStatsColumns": "c, `a`"}) == {"a", "c"}
    assert indexed_columns(types, {"delta.dataSkippingNumIndexedCols": "x"}) == frozenset()


@pytest.mark.parametrize("value", ["3_3", " 33", "33 ", "+33", "33", "99999999999", "\u0663\u0663"])
def test_indexed_columns_read_the_count_as_delta_rs_does(tmp_path: Path, value: str) -> None:
    """Only columns the engine really records statistics for may count as indexed: a column counted but not
    recorded would let the statistics rule separate writes the engine then finds in conflict. Python's
    ``int()`` reads ``'3_3'`` and ``' 33'`` as 33, delta-rs cannot parse them and records its default 32."""
    uri = str(tmp_path / "t")
    columns = {f"c{i:02d}": pa.array([i], pa.int64()) for i in range(34)}
    write_deltalake(uri, pa.table(columns), configuration={"delta.dataSkippingNumIndexedCols": value})
    summary = read_table_config(uri, file_stats=True).file_stats
    assert summary is not None
    recorded = {
        name.removeprefix("min.")
        for name in pa.table(DeltaTable(uri).get_add_actions(flatten=True)).column_names
        if name.startswith("min.")
    }
    assert summary.indexed <= recorded


def test_replace_where_refuses_new_rows_outside_its_predicate(tmp_path: Path) -> None:
    """The statistics rule bounds a REPLACE WHERE's new rows by its predicate (ADR 0020): the engine enforces it."""
    uri = str(tmp_path / "t")
    write_deltalake(uri, frame([1, 2], "2024-01-01", "x"))
    with pytest.raises(InvalidWriteError, match="failed validation"):
        DeltaRsEngine().write(
            uri, ReplaceWhereSpec(source=frame([50], "2024-01-03", "x"), predicate="day = '2024-01-01'")
        )
    assert read_table_config(uri).version == 0  # nothing committed
