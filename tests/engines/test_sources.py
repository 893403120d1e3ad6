"""Resolving write sources into Arrow."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.sources import materialize, resolve_source

DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})


def ids(data: pa.Table | pa.RecordBatchReader) -> list[int]:
    return sorted(materialize(data).column("id").to_pylist())


def test_arrow_table_and_reader_pass_through() -> None:
    assert resolve_source(DATA) is DATA
    reader = pa.RecordBatchReader.from_batches(DATA.schema, DATA.to_batches())
    assert resolve_source(reader) is reader


def test_pandas_without_index() -> None:
    frame = pd.DataFrame({"id": [1, 2, 3]}, index=[10, 20, 30])
    table = resolve_source(frame)
    assert isinstance(table, pa.Table)
    assert table.column_names == ["id"] and ids(table) == [1, 2, 3]


def test_parquet_file_and_directory(tmp_path: Path) -> None:
    pq.write_table(DATA, tmp_path / "one.parquet")
    (tmp_path / "dir").mkdir()
    pq.write_table(DATA.slice(0, 1), tmp_path / "dir" / "a.parquet")
    pq.write_table(DATA.slice(1), tmp_path / "dir" / "b.parquet")
    assert ids(resolve_source(str(tmp_path / "one.parquet"))) == [1, 2, 3]
    assert ids(resolve_source(str(tmp_path / "dir"))) == [1, 2, 3]
    assert ids(resolve_source(f"file://{tmp_path / 'one.parquet'}")) == [1, 2, 3]


def test_csv_file_and_directory(tmp_path: Path) -> None:
    pacsv.write_csv(DATA, tmp_path / "data.csv")
    (tmp_path / "csvs").mkdir()
    pacsv.write_csv(DATA, tmp_path / "csvs" / "part.csv")
    assert ids(resolve_source(str(tmp_path / "data.csv"))) == [1, 2, 3]
    assert ids(resolve_source(str(tmp_path / "csvs"))) == [1, 2, 3]


def test_delta_by_prefix_and_by_log_directory(tmp_path: Path) -> None:
    write_deltalake(str(tmp_path / "src"), DATA)
    assert ids(resolve_source(f"delta+{tmp_path / 'src'}")) == [1, 2, 3]
    assert ids(resolve_source(str(tmp_path / "src"))) == [1, 2, 3]


def test_callable_is_called_once_and_resolved() -> None:
    calls: list[int] = []

    def produce() -> pd.DataFrame:
        calls.append(1)
        return pd.DataFrame({"id": [7]})

    assert ids(resolve_source(produce)) == [7]
    assert calls == [1]


def test_to_arrow_object() -> None:
    class FakeSparkFrame:  # the one method the engine uses of a Spark DataFrame
        def toArrow(self) -> pa.Table:
            return DATA

    assert resolve_source(FakeSparkFrame()) is DATA


def test_arrow_c_stream_object() -> None:
    class Exporter:
        def __arrow_c_stream__(self, requested_schema: object = None) -> object:
            return DATA.__arrow_c_stream__(requested_schema)

    assert ids(resolve_source(Exporter())) == [1, 2, 3]


@pytest.mark.parametrize("bad", [None, 42, {"id": [1]}, [1, 2], "", "   "])
def test_unsupported_sources(bad: object) -> None:
    with pytest.raises(InvalidWriteError):
        resolve_source(bad)


def test_missing_path_and_missing_delta(tmp_path: Path) -> None:
    with pytest.raises(InvalidWriteError, match="does not exist"):
        resolve_source(str(tmp_path / "nope.parquet"))
    with pytest.raises(InvalidWriteError, match="does not exist"):
        resolve_source(f"delta+{tmp_path / 'nope'}")


def test_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(InvalidWriteError, match="cannot read"):
        resolve_source(str(tmp_path / "junk.parquet"))


def test_callable_with_arguments_and_callable_returning_callable() -> None:
    with pytest.raises(InvalidWriteError, match="no arguments"):
        resolve_source(lambda x: x)
    with pytest.raises(InvalidWriteError, match="not another callable"):
        resolve_source(lambda: lambda: DATA)
