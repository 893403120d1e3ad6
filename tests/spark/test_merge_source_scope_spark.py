"""A Spark DataFrame MERGE source through the delta-rs engine: its key values are read in Spark
(``select distinct ... limit``) and narrow the claim and the executed condition (ADR 0019)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import DataFrame, SparkSession

from deltaguard.core.merge_scope import ScopeLimits
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.merge_scope import scoped_merge
from deltaguard.engines.sources import source_key_summaries
from deltaguard.engines.spark.sources import SparkSource, prepare_source
from deltaguard.engines.specs import MergeSpec, WriteContext
from tests.spark.conftest import SMALL_CONF


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    from deltaguard.engines.spark.session import worker_session

    spark_session = worker_session(
        master="local[2]", conf=SMALL_CONF, app_name="deltaguard-tests", with_delta=False
    )
    yield spark_session
    spark_session.stop()


def test_a_spark_source_narrows_the_merge_to_its_dates(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "sales")
    write_deltalake(
        uri,
        pa.table({"id": pa.array([1, 2], pa.int64()), "date": ["2024-01-01", "2024-01-02"], "v": [0, 0]}),
        partition_by=["date"],
    )

    def changes(spark: SparkSession) -> DataFrame:
        return spark.createDataFrame(
            [(1, "2024-01-01", 5), (7, "2024-01-01", 7), (8, None, 8)], "id long, date string, v long"
        )

    source = prepare_source(SparkSource(changes), "delta-rs", session_factory=lambda: spark)
    engine = DeltaRsEngine()
    summaries = source_key_summaries(source, ["date"], ScopeLimits(max_in_values=1, max_range_values=5))
    assert summaries["date"].values == ("2024-01-01",) and summaries["date"].has_null
    spec, _ = scoped_merge(
        MergeSpec(
            source=source,
            condition="t.id = s.id AND t.date = s.date",
            matched_update_all=True,
            not_matched_insert_all=True,
        ),
        engine.table_config(uri),
        engine,
        limits=ScopeLimits(),
    )
    assert spec.scope_conjunct() == "t.date IN ('2024-01-01')"
    assert spec.operation().inserts == "(date IN ('2024-01-01') OR date IS NULL)"
    result = engine.write(uri, spec, WriteContext())
    assert result.metrics["num_target_files_skipped_during_scan"] == 1  # 2024-01-02 was never read
    rows = sorted(DeltaTable(uri).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["date"], r["v"]) for r in rows] == [
        (1, "2024-01-01", 5),
        (2, "2024-01-02", 0),
        (7, "2024-01-01", 7),
        (8, None, 8),
    ]
