"""One table, one identity: every spelling the stores accept for one object gives one lease key."""

from __future__ import annotations

import dataclasses

import pytest

from deltaguard.core import pair_verdict
from deltaguard.core.check_request import RequestError, parse_request
from deltaguard.core.locations import table_identity
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import STORAGE_COORDINATION, EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("s3://b/t", "s3a://b/t"),
        ("s3://b/t", "s3n://B/t/"),
        ("gs://b/t", "gcs://b/t"),
        ("abfs://c@a.dfs.core.windows.net/t", "abfss://c@a.dfs.core.windows.net/t/"),
        ("az://c/t", "azure://c/t"),
        ("s3://b/my t", "s3a://b/my%20t"),
        ("/data/t", "file:///data/t/"),
        ("/data/my t", "file:///data/my%20t"),
    ],
)
def test_spellings_of_one_object_are_one_table(first: str, second: str) -> None:
    assert table_identity(first) == table_identity(second)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("s3://b/t", "gs://b/t"),  # different stores
        ("s3://b/t", "s3://b/T"),  # keys are case-sensitive
        ("s3://b/t", "s3://b/t2"),
        ("abfs://c@a.dfs.core.windows.net/t", "abfs://c@other.dfs.core.windows.net/t"),
    ],
)
def test_different_objects_stay_apart(first: str, second: str) -> None:
    assert table_identity(first) != table_identity(second)


def test_identity_is_idempotent() -> None:
    for text in ("s3a://B/x/%41", "/a/./b//c/", "gcs://b/t", "Db.Tbl"):
        once = table_identity(text)
        assert table_identity(once) == once


def test_a_check_document_may_not_name_one_table_twice_as_two() -> None:
    # Two statements on s3:// and s3a:// spellings describe one table: accepted as one document.
    document = {
        "engine": {"name": "delta-spark", "version": "4.4.0"},
        "running": [{"sql": "DELETE FROM delta.`s3a://b/t` WHERE d = '2024-01-01'"}],
        "candidate": {"sql": "DELETE FROM delta.`s3://b/t` WHERE d = '2024-01-02'"},
    }
    parse_request(document)
    document["candidate"] = {"sql": "DELETE FROM delta.`s3://b/u` WHERE d = '2024-01-02'"}
    with pytest.raises(RequestError):
        parse_request(document)


def test_streams_on_aliased_checkpoints_share_one_checkpoint() -> None:
    a = Operation(OperationKind.STREAMING_WRITE, checkpoint_location="s3a://b/chk")
    b = Operation(OperationKind.STREAMING_WRITE, checkpoint_location="s3://b/chk/")
    verdict = pair_verdict(a, b, TableConfig(), EngineProfile(EngineName.DELTA_SPARK, "4.4.0"))
    assert verdict.conflict


def test_s3a_spark_and_s3_deltars_meet_under_one_key() -> None:
    # The commit-coordination rule only runs between holders of one key: with one identity, a delta-spark
    # write through s3a:// (single-driver log store) meets a delta-rs write through s3:// and conflicts.
    from deltaguard.engines.fencing import deltars_coordination, spark_coordination

    spark_uri, rs_uri = "s3a://b/t", "s3://b/t"
    assert table_identity(spark_uri) == table_identity(rs_uri)
    spark = EngineProfile(
        EngineName.DELTA_SPARK,
        "4.4.0",
        commit_coordination=spark_coordination(
            spark_uri, databricks=False, conf=lambda _k: "", driver="app-1"
        ),
    )
    rs = EngineProfile(EngineName.DELTA_RS, "1.6.6", commit_coordination=deltars_coordination(rs_uri, None))
    assert rs.commit_coordination == STORAGE_COORDINATION
    append = Operation(OperationKind.INSERT)
    verdict = pair_verdict(
        dataclasses.replace(append, engine=spark),
        dataclasses.replace(append, engine=rs),
        TableConfig(),
        spark,
    )
    assert verdict.conflict
    assert verdict.rule.startswith("common.") and "commit" in verdict.rule
