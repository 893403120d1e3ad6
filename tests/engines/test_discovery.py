"""Table discovery on real tables created here with deltalake."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, Field, Schema, TableFeatures, write_deltalake

from deltaguard.engines.discovery import read_domain_metadata, read_table_config
from deltaguard.engines.errors import TableAccessError

DATA = pa.table({"id": pa.array([1, 2], pa.int64()), "day": ["2024-01-01", "2024-01-02"]})


def _append_commit(uri: Path, version: int, actions: list[dict[str, object]]) -> None:
    """Write a hand-made commit: delta-rs 1.6.6 cannot set some things (clustering, foreign properties)."""
    path = uri / "_delta_log" / f"{version:020d}.json"
    path.write_text("".join(json.dumps(action) + "\n" for action in actions))


def test_partitioned_table_with_properties(tmp_path: Path) -> None:
    uri = tmp_path / "t"
    write_deltalake(
        str(uri),
        DATA,
        partition_by=["day"],
        configuration={"delta.isolationLevel": "WriteSerializable", "delta.appendOnly": "true"},
    )
    write_deltalake(str(uri), DATA, mode="append")
    config = read_table_config(str(uri))
    assert config.exists and config.uri == str(uri)
    assert config.partition_columns == ("day",)
    assert dict(config.properties) == {
        "delta.isolationLevel": "WriteSerializable",
        "delta.appendOnly": "true",
    }
    assert config.version == 1
    assert (config.min_reader_version, config.min_writer_version) == (1, 2)
    assert config.unknown == ()
    assert config.identity_columns == () and config.clustering_columns == ()


def test_file_uri_gives_the_same_configuration(tmp_path: Path) -> None:
    write_deltalake(str(tmp_path / "t"), DATA, partition_by=["day"])
    assert read_table_config(f"file://{tmp_path / 't'}") == read_table_config(str(tmp_path / "t"))


def test_deletion_vectors_feature(tmp_path: Path) -> None:
    uri = str(tmp_path / "dv")
    write_deltalake(uri, DATA, configuration={"delta.enableDeletionVectors": "true"})
    config = read_table_config(uri)
    assert config.deletion_vectors_enabled
    assert "deletionVectors" in config.reader_features and "deletionVectors" in config.writer_features
    assert config.min_reader_version == 3 and config.min_writer_version == 7
    assert config.unknown == ()


def test_identity_columns_from_schema_metadata(tmp_path: Path) -> None:
    uri = str(tmp_path / "ident")
    identity = {
        "delta.identity.start": 1,
        "delta.identity.step": 1,
        "delta.identity.allowExplicitInsert": False,
    }
    DeltaTable.create(
        uri, Schema([Field("id", "long", nullable=False, metadata=identity), Field("v", "string")])
    )
    DeltaTable(uri).alter.add_feature(TableFeatures.IdentityColumns, allow_protocol_versions_increase=True)
    config = read_table_config(uri)
    assert config.identity_columns == ("id",)
    assert config.has_identity_columns
    assert "identityColumns" in config.writer_features


def test_nonexistent_table(tmp_path: Path) -> None:
    config = read_table_config(str(tmp_path / "missing"))
    assert not config.exists
    assert config.uri == str(tmp_path / "missing")
    assert config.version is None


def test_empty_log_directory_is_no_table(tmp_path: Path) -> None:
    (tmp_path / "t" / "_delta_log").mkdir(parents=True)
    assert not read_table_config(str(tmp_path / "t")).exists


def test_corrupt_log_names_uri_and_cause(tmp_path: Path) -> None:
    uri = tmp_path / "t"
    write_deltalake(str(uri), DATA)
    (uri / "_delta_log" / f"{1:020d}.json").write_text("this is not json {{{\n")
    with pytest.raises(TableAccessError) as info:
        read_table_config(str(uri))
    message = str(info.value)
    assert str(uri) in message and "json" in message.lower()
    assert "0: <unknown>" not in message  # the Rust backtrace is cut off


def test_unknown_property_and_feature_are_listed_and_warned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uri = tmp_path / "t"
    write_deltalake(str(uri), DATA)
    metadata = next(
        json.loads(line)["metaData"]
        for line in (uri / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
        if "metaData" in line
    )
    metadata["configuration"] = {"delta.someFutureKnob": "on", "owner": "data-team", "comment": "x"}
    _append_commit(
        uri,
        1,
        [
            {"metaData": metadata},
            {
                "protocol": {
                    "minReaderVersion": 1,
                    "minWriterVersion": 7,
                    "writerFeatures": ["appendOnly", "quantumWrites"],
                }
            },
        ],
    )
    with caplog.at_level(logging.WARNING, logger="deltaguard.engines.discovery"):
        config = read_table_config(str(uri))
    assert config.unknown == ("property delta.someFutureKnob", "feature quantumWrites")
    assert config.properties["owner"] == "data-team"  # user properties are kept, and are not unknown
    assert "delta.someFutureKnob" in caplog.text and "quantumWrites" in caplog.text


def test_known_feature_properties_are_not_unknown(tmp_path: Path) -> None:
    uri = tmp_path / "t"
    write_deltalake(str(uri), DATA)
    metadata = next(
        json.loads(line)["metaData"]
        for line in (uri / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
        if "metaData" in line
    )
    metadata["configuration"] = {
        "delta.feature.deletionVectors": "supported",
        "delta.constraints.positive": "id > 0",
        "delta.feature.timeTravelToTheFuture": "supported",
    }
    _append_commit(uri, 1, [{"metaData": metadata}])
    assert read_table_config(str(uri)).unknown == ("property delta.feature.timeTravelToTheFuture",)


def _clustered_table(uri: Path, columns: list[list[str]]) -> None:
    write_deltalake(str(uri), pa.table({"id": [1], "region": ["eu"]}))
    _append_commit(
        uri,
        1,
        [
            {
                "protocol": {
                    "minReaderVersion": 1,
                    "minWriterVersion": 7,
                    "writerFeatures": ["domainMetadata", "clustering"],
                }
            },
            {
                "domainMetadata": {
                    "domain": "delta.clustering",
                    "configuration": json.dumps({"clusteringColumns": columns}),
                    "removed": False,
                }
            },
        ],
    )


def test_liquid_clustering_columns_from_domain_metadata(tmp_path: Path) -> None:
    uri = tmp_path / "clustered"
    _clustered_table(uri, [["region"], ["id"]])
    config = read_table_config(str(uri))
    assert config.clustering_columns == ("region", "id")
    assert config.has_liquid_clustering and config.unknown == ()


def test_clustering_replaced_and_removed_in_later_commits(tmp_path: Path) -> None:
    uri = tmp_path / "clustered"
    _clustered_table(uri, [["region"]])
    domain = {"domain": "delta.clustering", "configuration": json.dumps({"clusteringColumns": [["id"]]})}
    _append_commit(uri, 2, [{"domainMetadata": {**domain, "removed": False}}])
    assert read_table_config(str(uri)).clustering_columns == ("id",)
    assert read_domain_metadata(str(uri), 1)["delta.clustering"] == json.dumps(
        {"clusteringColumns": [["region"]]}
    )
    _append_commit(uri, 3, [{"domainMetadata": {**domain, "removed": True}}])
    assert read_table_config(str(uri)).clustering_columns == ()


def test_clustering_survives_a_checkpoint(tmp_path: Path) -> None:
    uri = tmp_path / "clustered"
    _clustered_table(uri, [["region"]])
    table = DeltaTable(str(uri))
    table.create_checkpoint()
    # Commits before the checkpoint are no longer needed: the checkpoint must carry the domain.
    (uri / "_delta_log" / f"{1:020d}.json").unlink()
    assert read_table_config(str(uri)).clustering_columns == ("region",)


def test_protocol_newer_than_known(tmp_path: Path) -> None:
    from deltaguard.engines.discovery import _unknown_protocol

    uri = tmp_path / "t"
    write_deltalake(str(uri), DATA)
    _append_commit(
        uri, 1, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 8, "writerFeatures": []}}]
    )
    # deltalake 1.6.6 refuses to load it: a clear access error, never a silent configuration
    with pytest.raises(TableAccessError, match=str(uri)):
        read_table_config(str(uri))
    # an engine that does load it gets a conservative configuration
    assert _unknown_protocol(3, 7) == ()
    assert _unknown_protocol(4, 8) == ("protocol reader version 4", "protocol writer version 8")
