"""Real PySpark (local[2], one session for the module), without Delta's jars (``DELTAGUARD_DELTA_JARS=none``;
run by ``test_without_delta_jars.py`` in a process of their own).

* Spark DataFrame sources (callables receiving a SparkSession) written by the delta-rs engine, end to end;
* the Spark engine refusing to run without Delta's jars: SparkSetupError with the guidance, before any write;
* the spark-submit job's exit code for that case; conflict mapping of a real Py4J error; sources as Spark
  DataFrames; session confs set and restored.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from tests.spark.conftest import SMALL_CONF

pyspark = pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.without_delta_jars]

from pyspark.sql import DataFrame, SparkSession  # noqa: E402

from deltaguard.core.profiles import EngineName  # noqa: E402
from deltaguard.core.table_config import TableConfig  # noqa: E402
from deltaguard.engines.deltars.engine import DeltaRsEngine  # noqa: E402
from deltaguard.engines.errors import ConflictKind, SparkSetupError  # noqa: E402
from deltaguard.engines.spark.engine import SparkEngine  # noqa: E402
from deltaguard.engines.spark.errors import conflict_kind  # noqa: E402
from deltaguard.engines.spark.ops import session_conf  # noqa: E402
from deltaguard.engines.spark.sources import SparkSource, is_spark_source, prepare_source, to_spark_dataframe  # noqa: E402
from deltaguard.engines.specs import AppendSpec, CreateSpec, DeleteSpec, MergeSpec, WriteContext  # noqa: E402


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """A PySpark-only session: exactly what a worker has when Delta's jars are missing."""
    from deltaguard.engines.spark.session import worker_session

    session = worker_session(
        master="local[2]", conf=SMALL_CONF, app_name="deltaguard-tests", with_delta=False
    )
    yield session
    session.stop()


def orders(spark: SparkSession) -> DataFrame:
    """A PySpark transformation: the kind of source a pipeline builds."""
    raw = spark.createDataFrame(
        [(1, "2024-01-01", 10.0), (2, "2024-01-01", -1.0), (3, "2024-01-02", 7.5)],
        "id long, day string, v double",
    )
    return raw.where("v > 0").withColumnRenamed("v", "amount")


def _table_rows(uri: str) -> list[dict[str, object]]:
    return sorted(DeltaTable(uri).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])  # type: ignore[arg-type, return-value]


# -- Spark DataFrame sources through the delta-rs engine ---------------------------------------------------


def test_spark_source_callable_is_recognised() -> None:
    def by_name(spark):  # type: ignore[no-untyped-def]
        return spark

    def by_annotation(s: SparkSession) -> DataFrame:
        return s  # type: ignore[return-value]

    assert is_spark_source(orders) and is_spark_source(by_name) and is_spark_source(by_annotation)
    assert is_spark_source(SparkSource(lambda s: s))
    assert not is_spark_source(lambda: 1)
    assert not is_spark_source(lambda x, y: 1)
    assert not is_spark_source("/data/x.parquet")


def test_pyspark_source_appended_by_delta_rs_end_to_end(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "orders")
    engine = DeltaRsEngine()
    source = prepare_source(orders, "delta-rs", session_factory=lambda: spark)
    result = engine.write(
        uri, AppendSpec(source=source, partition_by=("day",)), WriteContext(app_id="d.t", app_version=1)
    )
    assert result.version == 0 and not result.duplicate
    assert _table_rows(uri) == [
        {"id": 1, "day": "2024-01-01", "amount": 10.0},
        {"id": 3, "day": "2024-01-02", "amount": 7.5},
    ]
    assert DeltaTable(uri).metadata().partition_columns == ["day"]


def test_pyspark_source_merged_by_delta_rs(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "merged")
    engine = DeltaRsEngine()
    engine.write(
        uri,
        CreateSpec(source=pa.table({"id": [1, 2], "day": ["a", "a"], "amount": [0.0, 0.0]})),
        WriteContext(),
    )

    def changes(spark: SparkSession) -> DataFrame:
        return spark.createDataFrame([(2, "a", 5.0), (9, "b", 9.0)], "id long, day string, amount double")

    spec = MergeSpec(
        source=prepare_source(SparkSource(changes), "delta-rs", session_factory=lambda: spark),
        condition="t.id = s.id",
        matched_update_all=True,
        not_matched_insert_all=True,
    )
    engine.write(uri, spec, WriteContext())
    assert [(r["id"], r["amount"]) for r in _table_rows(uri)] == [(1, 0.0), (2, 5.0), (9, 9.0)]


def test_source_session_is_built_from_the_sources_own_settings(spark: SparkSession) -> None:
    # Without a session_factory the source builds a PySpark-only worker session; getOrCreate returns the
    # running one here, with the source's conf applied to it.
    seen: list[str] = []

    def build(s: SparkSession) -> DataFrame:
        seen.append(s.conf.get("spark.sql.shuffle.partitions"))
        return s.range(3)

    produce = prepare_source(SparkSource(build, conf={"spark.sql.shuffle.partitions": "3"}), "delta-rs")
    table = produce().toArrow()
    assert table.column("id").to_pylist() == [0, 1, 2] and seen == ["3"]
    spark.conf.set("spark.sql.shuffle.partitions", SMALL_CONF["spark.sql.shuffle.partitions"])


def test_spark_engine_keeps_spark_sources_for_itself() -> None:
    assert prepare_source(orders, "spark") is orders


def test_a_spark_source_must_return_a_dataframe(spark: SparkSession) -> None:
    from deltaguard.engines.errors import InvalidWriteError

    with pytest.raises(InvalidWriteError, match="pyspark DataFrame"):
        prepare_source(lambda spark: [1, 2], "delta-rs", session_factory=lambda: spark)()


# -- sources turned into Spark DataFrames (the Spark engine's side) -----------------------------------------


def test_every_source_kind_becomes_a_spark_dataframe(spark: SparkSession, tmp_path: Path) -> None:
    arrow = pa.table({"id": [1, 2], "day": ["a", "b"]})
    pq.write_table(arrow, tmp_path / "x.parquet")
    (tmp_path / "x.csv").write_text("id,day\n1,a\n2,b\n")
    DeltaRsEngine().write(str(tmp_path / "d"), CreateSpec(source=arrow), WriteContext())
    sources = [
        arrow,
        arrow.to_pandas(),
        pa.RecordBatchReader.from_batches(arrow.schema, arrow.to_batches()),
        str(tmp_path / "x.parquet"),
        str(tmp_path / "x.csv"),
        lambda: arrow,
        lambda spark: spark.createDataFrame(arrow),
        spark.createDataFrame(arrow),
    ]
    for source in sources:
        df = to_spark_dataframe(spark, source)
        assert sorted(tuple(r) for r in df.select("id", "day").collect()) == [(1, "a"), (2, "b")], source


# -- no Delta jars: a clear SparkSetupError before anything is written ---------------------------------------


def test_missing_jars_fail_before_any_write_with_guidance(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "never")
    engine = SparkEngine(spark)
    for attempt in (
        engine.check_setup,
        lambda: engine.table_config(uri),
        lambda: engine.validate(uri, DeleteSpec(predicate="id = 1"), TableConfig(uri=uri)),
        lambda: engine.write(uri, AppendSpec(source=orders), WriteContext(app_id="d.t", app_version=1)),
    ):
        with pytest.raises(SparkSetupError) as caught:
            attempt()
        message = str(caught.value)
        assert "io.delta:delta-spark_" in message and "spark.jars.packages=" in message
        assert "--packages" in message and "DELTAGUARD_DELTA_JARS" in message
        assert "JavaPackage" not in message and "Py4J" not in message
    assert not Path(uri).exists()


def test_missing_jars_from_a_session_factory_too(spark: SparkSession) -> None:
    calls: list[int] = []

    def factory() -> SparkSession:
        calls.append(1)
        return spark

    engine = SparkEngine(factory)
    with pytest.raises(SparkSetupError):
        engine.check_setup()
    with pytest.raises(SparkSetupError):
        engine.check_setup()
    assert calls == [1]  # the factory runs once; the check runs until it passes


def test_profile_reads_databricks_cluster_tags_from_the_session(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    engine = SparkEngine(spark)
    with pytest.raises(SparkSetupError):
        engine.check_setup()  # creates the session (and fails the jar check)
    assert engine.profile().name is EngineName.DELTA_SPARK
    keys = {
        "spark.databricks.clusterUsageTags.sparkVersion": "14.1.x-photon-scala2.12",
        "spark.databricks.clusterUsageTags.runtimeEngine": "PHOTON",
        "spark.databricks.delta.rowLevelConcurrencyPreview": "true",
    }
    with session_conf(spark, keys):
        profile = engine.profile()
    assert (profile.name, profile.version, profile.photon, profile.row_level_preview) == (
        EngineName.DATABRICKS,
        "14.1",
        True,
        True,
    )


# -- session confs and real Py4J errors ------------------------------------------------------------------------


def test_session_conf_sets_and_restores(spark: SparkSession) -> None:
    key_set, key_unset = (
        "spark.databricks.delta.write.txnAppId",
        "spark.databricks.delta.commitInfo.userMetadata",
    )
    spark.conf.set(key_unset, "before")
    with session_conf(spark, {key_set: "dag.task", key_unset: None}):
        assert spark.conf.get(key_set) == "dag.task"
        assert spark.conf.get(key_unset, None) is None
    assert spark.conf.get(key_set, None) is None
    assert spark.conf.get(key_unset) == "before"
    spark.conf.unset(key_unset)


def test_real_py4j_error_carrying_a_delta_exception_maps(spark: SparkSession) -> None:
    from py4j.protocol import Py4JJavaError

    jvm = spark._jvm  # type: ignore[attr-defined]
    text = "io.delta.exceptions.ConcurrentAppendException: Files were added to partition [day=1]"
    with pytest.raises(Py4JJavaError) as caught:
        # A real JVM exception whose text is a Delta exception's toString, as a wrapped cause shows it.
        jvm.java.util.Objects.requireNonNull(None, text)
    assert conflict_kind(caught.value) is ConflictKind.CONCURRENT_APPEND
    with pytest.raises(Py4JJavaError) as missing:
        jvm.java.lang.Class.forName("io.delta.exceptions.ConcurrentAppendException")
    assert conflict_kind(missing.value) is None  # ClassNotFoundException merely names the class


def test_operator_with_engine_spark_fails_before_any_lease(spark: SparkSession, tmp_path: Path) -> None:
    """The operator resolves the engine (by name, through the registry) and validates before leasing: the
    missing jars surface there, and the lease store is never opened."""
    from deltaguard.operators.dml import DeltaDeleteOperator

    store = tmp_path / "leases.db"
    operator = DeltaDeleteOperator(
        task_id="delete_one",
        table=str(tmp_path / "t"),
        predicate="id = 1",
        engine="spark",
        lease_store_url=f"sqlite:///{store}",
    )
    with pytest.raises(SparkSetupError, match=r"spark\.jars\.packages="):
        operator.execute(context={})  # type: ignore[arg-type]
    assert not store.exists() and not (tmp_path / "t").exists()


def test_databricks_sessions_are_trusted_to_have_delta(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Databricks ships Delta built in, with its own extension/catalog settings: no false SparkSetupError.
    from deltaguard.engines.spark.setup import check_delta_available

    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    with pytest.raises(SparkSetupError):
        check_delta_available(spark)
    with session_conf(spark, {"spark.databricks.clusterUsageTags.sparkVersion": "15.4.x-scala2.12"}):
        check_delta_available(spark)
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "15.4")
    check_delta_available(spark)


def test_a_spark_source_object_works_with_delta_rs_unprepared(spark: SparkSession, tmp_path: Path) -> None:
    """``@SparkSource`` makes a zero-argument source: delta-rs takes it as is (no prepare_source call)."""

    @SparkSource
    def recent_orders(spark: SparkSession) -> DataFrame:
        return orders(spark).where("day = '2024-01-02'")

    uri = str(tmp_path / "recent")
    DeltaRsEngine().write(uri, AppendSpec(source=recent_orders), WriteContext())
    assert _table_rows(uri) == [{"id": 3, "day": "2024-01-02", "amount": 7.5}]
    # the Spark engine's side builds it on the session it is given
    assert to_spark_dataframe(spark, recent_orders).count() == 1
