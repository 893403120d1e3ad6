"""A lost answer to the log entry that creates a table never leaves the write in the log twice.

moto's S3 server behind the dropping proxy of ``benchmarks.bench_dropped_response`` stores the table's
first log entry and closes the connection without an answer. delta-rs (1.6.6) sends the PUT again, gets
412 (``If-None-Match: *``), finds version 0 taken and, with commit retries left, commits the same actions
again as version 1: the rows are not doubled (one file per path) but the log holds the write twice. A
deltaguard write that creates its table commits without retries and finds its own commit in the log.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks import bench_dropped_response as probe

pytest.importorskip("moto")


@pytest.fixture
def s3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Any, dict[str, str], dict[str, str]]]:
    home = tmp_path / "airflow_home"
    home.mkdir()
    monkeypatch.setenv("AIRFLOW_HOME", str(home))
    monkeypatch.setenv("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", f"sqlite:///{tmp_path / 'leases.db'}")
    import boto3

    with contextlib.ExitStack() as stack:
        endpoint, proxy = stack.enter_context(probe._s3_behind_proxy(tmp_path))
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=probe.KEYS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=probe.KEYS["AWS_SECRET_ACCESS_KEY"],
            region_name=probe.KEYS["AWS_REGION"],
        ).create_bucket(Bucket=probe.BUCKET)
        moto_options = {**probe.KEYS, "AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true"}
        proxy_options = {**moto_options, "AWS_ENDPOINT_URL": proxy.url}
        monkeypatch.setenv(
            "AIRFLOW_CONN_LAKE",
            json.dumps(
                {
                    "conn_type": "delta",
                    "host": f"s3://{probe.BUCKET}/{probe.BASE}",
                    "extra": {"storage_options": proxy_options},
                }
            ),
        )
        yield proxy, moto_options, proxy_options


def test_a_write_that_creates_its_table_commits_once_when_the_answer_is_lost(s3) -> None:
    proxy, moto_options, proxy_options = s3
    run = probe.one_run("create", 0, "leased", proxy, moto_options, proxy_options)
    assert run["dropped"], run
    assert run["tries"] == ["succeeded"], run
    assert run["commits"] == [0], run
    assert run["duplicated_rows"] == 0 and run["missing_rows"] == 0, run


def test_delta_rs_alone_writes_the_creation_twice(s3) -> None:
    """What the engine does without deltaguard (measured): the reason the write above has no retries."""
    proxy, moto_options, proxy_options = s3
    run = probe.one_run("create", 0, "raw", proxy, moto_options, proxy_options)
    assert run["dropped"], run
    assert run["commits"] == [0, 1], run
    assert run["files_added_by_more_than_one_commit"] >= 1, run
