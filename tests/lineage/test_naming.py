"""How table locations are named for OpenLineage and as Airflow assets (pure rules, and Airflow's own
normalisation and the providers' OpenLineage converters where installed)."""

from __future__ import annotations

import pytest

from deltaguard.lineage.record import DatasetName, canonical_uri, dataset_name, source_location

SPELLINGS_OF_ONE_LOCAL_TABLE = [
    "/data/sales",
    "/data/sales/",
    "/data//sales",
    "file:/data/sales",
    "file:///data/sales",
    "file://localhost/data/sales/",
]


@pytest.mark.parametrize("spelling", SPELLINGS_OF_ONE_LOCAL_TABLE)
def test_every_spelling_of_a_local_table_is_one_asset_and_one_dataset(spelling: str) -> None:
    assert canonical_uri(spelling) == "file:///data/sales"
    assert dataset_name(spelling) == DatasetName("file", "/data/sales")


@pytest.mark.parametrize(
    ("location", "uri", "namespace", "name"),
    [
        ("s3://Lake/wh/sales/", "s3://lake/wh/sales", "s3://lake", "wh/sales"),
        ("s3a://lake/wh/Sales", "s3://lake/wh/Sales", "s3://lake", "wh/Sales"),
        ("gs://lake/wh/sales", "gs://lake/wh/sales", "gs://lake", "wh/sales"),
        ("gcs://lake/wh/sales", "gs://lake/wh/sales", "gs://lake", "wh/sales"),
        (
            "abfss://box@acct.dfs.core.windows.net/wh/sales",
            "abfss://box@acct.dfs.core.windows.net/wh/sales",
            "abfss://box@acct.dfs.core.windows.net",
            "wh/sales",
        ),
        ("hdfs://nn:8020/wh/sales", "hdfs://nn:8020/wh/sales", "hdfs://nn:8020", "wh/sales"),
        ("/data/with space", "file:///data/with%20space", "file", "/data/with space"),
    ],
)
def test_object_stores_follow_the_openlineage_naming_spec(
    location: str, uri: str, namespace: str, name: str
) -> None:
    assert canonical_uri(location) == uri
    assert dataset_name(location) == DatasetName(namespace, name)


def test_azure_short_form_takes_the_account_from_the_storage_options() -> None:
    options = {"azure_storage_account_name": "Acct"}
    assert canonical_uri("az://box/wh/sales", options) == "abfss://box@acct.dfs.core.windows.net/wh/sales"
    assert dataset_name("az://box/wh/sales", options).namespace == "abfss://box@acct.dfs.core.windows.net"
    # without the account nothing is guessed: the location stays as written
    assert canonical_uri("az://box/wh/sales") == "az://box/wh/sales"


@pytest.mark.parametrize("bad", ["sales/daily", "s3:///no-bucket"])
def test_a_location_that_names_no_table_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        canonical_uri(bad)


def test_sources_name_an_input_only_when_they_are_a_location() -> None:
    assert source_location("delta+s3://lake/raw/orders") == "s3://lake/raw/orders"
    assert source_location("/data/in.parquet") == "/data/in.parquet"
    assert source_location(lambda: None) is None
    assert source_location("") is None
    assert source_location("relative.parquet") is None


@pytest.mark.parametrize("location", ["/data/sales", "s3://lake/wh/sales", "gs://lake/wh/sales"])
def test_asset_uri_is_already_normalised_by_airflow(location: str) -> None:
    """Airflow normalises asset URIs when an Asset is made; ours must come out unchanged, or the asset a
    downstream DAG schedules on and the one a write emits would differ."""
    from airflow.sdk import Asset

    uri = canonical_uri(location)
    assert Asset(uri=uri).uri == uri


def test_file_dataset_matches_the_common_io_converter() -> None:
    """Airflow's common.io provider converts ``file://`` assets to OpenLineage datasets; a write's dataset
    must be the same node as that asset's."""
    pytest.importorskip("airflow.providers.openlineage")
    from airflow.providers.common.io.assets.file import convert_asset_to_openlineage
    from airflow.sdk import Asset

    uri = canonical_uri("/data/sales/")
    theirs = convert_asset_to_openlineage(Asset(uri=uri), None)
    assert (theirs.namespace, theirs.name) == (dataset_name(uri).namespace, dataset_name(uri).name)
