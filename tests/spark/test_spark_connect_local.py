"""Spark Connect for real: a local Connect server (PySpark's ``remote("local")``), reached again through a
``spark_connect`` Airflow connection. Slow to start here (~100 s on the shared machine), so opt-in:
``DELTAGUARD_SPARK_CONNECT_TESTS=1``."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

if not os.environ.get("DELTAGUARD_SPARK_CONNECT_TESTS"):
    pytest.skip(
        "set DELTAGUARD_SPARK_CONNECT_TESTS=1 to start a local Spark Connect server", allow_module_level=True
    )
if os.environ.get("DELTAGUARD_DELTA_JARS"):
    pytest.skip(
        "checks the server WITHOUT Delta's jars; unset DELTAGUARD_DELTA_JARS", allow_module_level=True
    )

PORT = 15002  # spark.connect.grpc.binding.port's default, which remote("local") binds


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    session = SparkSession.builder.remote("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    yield session
    session.stop()


@pytest.fixture
def connect_conn(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(
        "AIRFLOW_CONN_DG_CONNECT",
        json.dumps({"conn_type": "spark_connect", "host": "localhost", "port": PORT}),
    )
    return "dg_connect"


def test_connect_session_from_the_connection(server: Any, connect_conn: str) -> None:
    from deltaguard.engines.spark.session import connect_session

    session = connect_session(connect_conn, conf={"spark.sql.shuffle.partitions": "2"})
    assert type(session).__module__.startswith("pyspark.sql.connect")
    assert session.range(4).count() == 4
    assert session.conf.get("spark.sql.shuffle.partitions") == "2"


def test_connect_server_without_delta_is_a_setup_error(server: Any, connect_conn: str) -> None:
    from deltaguard.engines.errors import SparkSetupError
    from deltaguard.engines.spark.engine import SparkEngine

    with pytest.raises(SparkSetupError, match="Spark Connect server"):
        SparkEngine(connect_conn_id=connect_conn).check_setup()


def test_connect_dataframe_source_through_delta_rs(server: Any, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    from deltaguard.engines.deltars.engine import DeltaRsEngine
    from deltaguard.engines.spark.sources import prepare_source
    from deltaguard.engines.specs import AppendSpec, WriteContext

    def doubled(spark: Any) -> Any:
        return spark.range(3).selectExpr("id", "id * 2 AS twice")

    uri = str(tmp_path / "t")
    DeltaRsEngine().write(
        uri, AppendSpec(source=prepare_source(doubled, "delta-rs", lambda: server)), WriteContext()
    )
    assert sorted(DeltaTable(uri).to_pyarrow_table().column("twice").to_pylist()) == [0, 2, 4]
