"""The Spark engine under ``schema.autoMerge.enabled=true`` (delta-spark 4.4.0, one local JVM): its own writes
leave the schema alone, a user's plain MERGE is refused before it runs, and a MERGE WITH SCHEMA EVOLUTION
(judged as a metadata change) evolves it (ADR 0035).

Run with ``nice -n 15 python -m pytest lab/schema_evolution`` (92 s at a load average of 4, 7 min at 15);
kept out of ``make test`` for its JVM.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from deltaguard.core.sql.classify import classify_sql
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.spark.engine import SparkEngine
from deltaguard.engines.spark.ops import SCHEMA_AUTO_MERGE_CONF
from deltaguard.engines.specs import AppendSpec, MergeSpec, SqlSpec, WriteContext
from tests.spark.conftest import SMALL_CONF

pytestmark = [pytest.mark.slow, pytest.mark.spark]

SOURCE = pa.table({"id": pa.array([1, 7], pa.int64()), "p": ["a", "a"], "extra": ["x", "y"]})


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    from deltaguard.engines.spark.session import worker_session

    spark_session = worker_session(
        master="local[2]", conf={**SMALL_CONF, SCHEMA_AUTO_MERGE_CONF: "true"}, app_name="deltaguard-tests"
    )
    yield spark_session
    spark_session.stop()


def _table(tmp_path: Path) -> str:
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["a", "b"]}), partition_by=["p"])
    return uri


def _columns(uri: str) -> list[str]:
    return [field.name for field in DeltaTable(uri).schema().fields]


def test_the_engines_merge_and_append_do_not_evolve_the_schema(spark: SparkSession, tmp_path: Path) -> None:
    uri = _table(tmp_path)
    engine = SparkEngine(spark)
    spec = MergeSpec(
        source=SOURCE,
        condition="t.id = s.id AND t.p = 'a'",
        matched_update_all=True,
        not_matched_insert_all=True,
    )
    engine.write(uri, spec, WriteContext())
    assert _columns(uri) == ["id", "p"]  # the source's extra column is not added
    assert sorted(r["id"] for r in DeltaTable(uri).to_pyarrow_table().to_pylist()) == [1, 2, 7]
    with pytest.raises(Exception, match=r"DELTA_METADATA_MISMATCH|metadata mismatch"):
        engine.write(uri, AppendSpec(source=SOURCE), WriteContext())
    assert _columns(uri) == ["id", "p"]


def test_user_sql_is_refused_unless_judged_as_evolving(spark: SparkSession, tmp_path: Path) -> None:
    uri = _table(tmp_path)
    engine = SparkEngine(spark)
    spark.createDataFrame(SOURCE.to_pylist()).createOrReplaceGlobalTempView("changes")
    merge = (
        f"MERGE INTO delta.`{uri}` t USING global_temp.changes s ON t.id = s.id AND t.p = 'a' "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    version = DeltaTable(uri).version()
    with pytest.raises(InvalidWriteError, match=r"schema\.autoMerge"):
        engine.write(uri, SqlSpec(sql=merge, classified=classify_sql(merge).operation), WriteContext())
    assert DeltaTable(uri).version() == version
    evolving = merge.replace("MERGE INTO", "MERGE WITH SCHEMA EVOLUTION INTO")
    engine.write(uri, SqlSpec(sql=evolving, classified=classify_sql(evolving).operation), WriteContext())
    assert _columns(uri) == ["id", "p", "extra"]
