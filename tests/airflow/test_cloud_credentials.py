"""A ``delta`` connection that names an ``aws`` connection writes to S3 with that connection's credentials.

The S3 endpoint is moto's server, a stand-in for Amazon S3 (no object store is reachable from the test
machines); delta-rs talks to it over HTTP exactly as it would to S3.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from moto import server as moto_server

from deltaguard.hooks.delta import DeltaTableHook

BUCKET = "lake"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id="k", aws_secret_access_key="s", region_name="us-east-1"
    ).create_bucket(Bucket=BUCKET)
    yield endpoint
    server.stop()


@pytest.fixture
def connections(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    aws = {
        "conn_type": "aws",
        "login": "AKIDEXAMPLE",
        "password": "secret-example",
        "extra": {"region_name": "eu-west-1", "endpoint_url": s3_endpoint},
    }
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_AWS", json.dumps(aws))
    delta = {"conn_type": "delta", "host": f"s3://{BUCKET}/warehouse", "extra": {"aws_conn_id": "lake_aws"}}
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps(delta))
    return "lake"


def test_storage_options_come_from_the_aws_connection(connections: str, s3_endpoint: str) -> None:
    options = DeltaTableHook(connections).storage_options
    assert options["AWS_ACCESS_KEY_ID"] == "AKIDEXAMPLE"
    assert options["AWS_SECRET_ACCESS_KEY"] == "secret-example"
    assert options["AWS_REGION"] == "eu-west-1"
    assert options["AWS_ENDPOINT_URL"] == s3_endpoint
    assert options["AWS_ALLOW_HTTP"] == "true"
    assert "aws_conn_id" not in options


def test_written_storage_options_win(connections: str, monkeypatch: pytest.MonkeyPatch) -> None:
    delta = {
        "conn_type": "delta",
        "host": f"s3://{BUCKET}/warehouse",
        "extra": {"aws_conn_id": "lake_aws", "storage_options": {"aws_region": "us-east-2"}},
    }
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps(delta))
    options = DeltaTableHook(connections).storage_options
    assert options["aws_region"] == "us-east-2"
    assert "AWS_REGION" not in options
    assert options["AWS_ACCESS_KEY_ID"] == "AKIDEXAMPLE"


def test_a_missing_aws_connection_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    delta = {"conn_type": "delta", "host": "s3://b/w", "extra": {"aws_conn_id": "nowhere"}}
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps(delta))
    with pytest.raises(Exception, match="nowhere"):
        _ = DeltaTableHook("lake").storage_options


def test_delta_rs_writes_and_reads_s3_through_the_connection(connections: str) -> None:
    hook = DeltaTableHook(connections)
    engine = hook.get_engine("delta-rs")
    uri = hook.table_uri("sales")
    rows = pa.table({"id": [1, 2, 3], "date": ["2026-11-01"] * 3})
    write_deltalake(uri, rows, storage_options=hook.storage_options)
    write_deltalake(uri, rows, mode="append", storage_options=hook.storage_options)
    table = DeltaTable(uri, storage_options=hook.storage_options)
    assert table.version() == 1
    assert table.to_pyarrow_table().num_rows == 6
    assert engine.table_config(uri).exists
