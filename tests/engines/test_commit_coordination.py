"""Which coordinator excludes an engine's commits to a location (Delta Lake's "Storage configuration")."""

from __future__ import annotations

from pathlib import Path

import pytest

from deltaguard.core.profiles import STORAGE_COORDINATION
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.fencing import deltars_coordination, scheme_of, spark_coordination


def no_conf(_key: str) -> str:
    return ""


@pytest.mark.parametrize(
    ("uri", "scheme"),
    [("/data/t", "file"), ("file:///data/t", "file"), ("S3A://b/t", "s3a"), ("C:/data/t", "file")],
)
def test_scheme_of(uri: str, scheme: str) -> None:
    assert scheme_of(uri) == scheme


@pytest.mark.parametrize(
    "uri", ["s3://bucket/t", "s3a://bucket/t", "/data/t", "file:///data/t", "wasbs://c@a/t"]
)
def test_spark_default_log_stores_exclude_one_driver(uri: str) -> None:
    assert spark_coordination(uri, databricks=False, conf=no_conf, driver="app-1") == "single-driver:app-1"


def test_spark_without_a_known_driver_shares_nothing() -> None:
    first = spark_coordination("s3://b/t", databricks=False, conf=no_conf, driver=None)
    second = spark_coordination("s3://b/t", databricks=False, conf=no_conf, driver=None)
    assert first != second


@pytest.mark.parametrize("uri", ["hdfs://nn/t", "gs://bucket/t", "abfss://c@a.dfs.core.windows.net/t"])
def test_spark_on_stores_that_refuse_existing_files(uri: str) -> None:
    assert spark_coordination(uri, databricks=False, conf=no_conf, driver="app-1") == STORAGE_COORDINATION


def test_spark_with_a_custom_log_store_on_hdfs_is_not_trusted() -> None:
    conf = {"spark.delta.logStore.hdfs.impl": "com.example.FastLogStore"}.get
    found = spark_coordination("hdfs://nn/t", databricks=False, conf=lambda k: conf(k, ""), driver="a")
    assert found == "single-driver:a"


def test_spark_dynamodb_log_store_names_its_table() -> None:
    settings = {
        "spark.delta.logStore.s3a.impl": "io.delta.storage.S3DynamoDBLogStore",
        "spark.io.delta.storage.S3DynamoDBLogStore.ddb.tableName": "locks",
        "spark.io.delta.storage.S3DynamoDBLogStore.ddb.region": "eu-west-1",
    }
    found = spark_coordination("s3a://b/t", databricks=False, conf=lambda k: settings.get(k, ""), driver="a")
    assert found == "dynamodb:eu-west-1/locks"


def test_databricks_on_s3_uses_its_commit_service() -> None:
    assert spark_coordination("s3://b/t", databricks=True, conf=no_conf, driver=None) == "databricks"
    assert spark_coordination("gs://b/t", databricks=True, conf=no_conf, driver=None) == STORAGE_COORDINATION


def test_deltars_uses_the_storage_unless_renames_are_unsafe() -> None:
    assert deltars_coordination("s3://b/t", {"AWS_REGION": "eu-west-1"}) == STORAGE_COORDINATION
    unsafe = {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
    assert deltars_coordination("s3://b/t", unsafe) != deltars_coordination("s3://b/t", unsafe)
    assert deltars_coordination("/data/t", unsafe) == STORAGE_COORDINATION


def test_deltars_engine_profile_for_a_local_table(tmp_path: Path) -> None:
    profile = DeltaRsEngine().table_profile(str(tmp_path / "t"))
    assert profile.commit_coordination == STORAGE_COORDINATION
    assert profile.name == DeltaRsEngine().profile().name
