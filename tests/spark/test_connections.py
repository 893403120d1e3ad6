"""apache-spark provider connections: Delta's jars, Spark Connect URLs, and the engine profile read from a
connection (no cluster is started)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltaguard.core.profiles import EngineName
from deltaguard.engines.errors import SparkSetupError
from deltaguard.engines.spark.engine import SparkEngine
from deltaguard.engines.spark.jars import delta_artifacts
from deltaguard.engines.spark.session import connection_info, get_connection_info
from deltaguard.engines.spark.setup import with_delta_jars


def _conn(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: object) -> str:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))
    return conn_id


@pytest.fixture
def standalone(monkeypatch: pytest.MonkeyPatch) -> str:
    return _conn(
        monkeypatch,
        "dg_standalone",
        conn_type="spark",
        host="spark://10.1.2.3",
        port=7077,
        extra={"deploy-mode": "client", "spark-conf": {"spark.executor.memory": "1g"}},
    )


def test_delta_jars_folder_becomes_jars(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spark_jar, storage_jar = (
        Path(a.split(":")[1] + "-" + a.split(":")[2] + ".jar").name for a in delta_artifacts()
    )
    for name in (spark_jar, storage_jar, "README.txt"):
        (tmp_path / name).write_text("x")
    monkeypatch.setenv("DELTAGUARD_DELTA_JARS", str(tmp_path))
    jars = with_delta_jars({})["spark.jars"]
    assert sorted(Path(j).name for j in jars.split(",")) == sorted([spark_jar, storage_jar])


@pytest.mark.parametrize(
    ("jar", "problem"),
    [
        ("delta-spark_2.13-4.0.0.jar", "built for Spark 4.0"),
        ("delta-spark_3.5_2.13-4.4.0.jar", "built for Spark 3.5"),
        ("delta-spark_4.2_2.12-4.4.0.jar", "built for Scala 2.12"),
    ],
)
def test_jars_for_another_spark_line_are_refused_before_any_session(
    jar: str, problem: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from deltaguard.engines.spark.setup import delta_session_conf

    (tmp_path / jar).write_text("x")
    monkeypatch.setenv("DELTAGUARD_DELTA_JARS", str(tmp_path))
    monkeypatch.setattr(
        "deltaguard.engines.spark.jars.installed_version", {"pyspark": "4.2.0", "delta-spark": "4.4.0"}.get
    )
    with pytest.raises(SparkSetupError, match=problem):
        delta_session_conf({})


def test_the_install_step_names_the_artifacts_of_the_installed_wheels() -> None:
    from importlib import metadata

    spark_line = ".".join(metadata.version("pyspark").split(".")[:2])
    delta = metadata.version("delta-spark")
    assert delta_artifacts() == [
        f"io.delta:delta-spark_{spark_line}_2.13:{delta}",
        f"io.delta:delta-storage:{delta}",
    ]
    assert delta_artifacts("4.0.0", "4.0.1")[0] == "io.delta:delta-spark_2.13:4.0.0"


@pytest.mark.parametrize("setup", ["missing", "empty"])
def test_bad_delta_jars_folder_is_a_setup_error(
    setup: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(
        "DELTAGUARD_DELTA_JARS", str(tmp_path / "nope") if setup == "missing" else str(tmp_path)
    )
    with pytest.raises(SparkSetupError, match="DELTAGUARD_DELTA_JARS"):
        with_delta_jars({})


@pytest.mark.parametrize(
    ("fields", "master"),
    [
        ({"conn_type": "spark", "host": "local[2]"}, "local[2]"),
        ({"conn_type": "spark", "host": "k8s://https://k8s.example:6443"}, "k8s://https://k8s.example:6443"),
        ({"conn_type": "spark", "host": "yarn"}, "yarn"),
        ({"conn_type": "spark", "host": "spark://m1", "port": 7077}, "spark://m1:7077"),
    ],
)
def test_master_resolution_matches_the_provider(
    fields: dict[str, object], master: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    conn_id = _conn(monkeypatch, "dg_master", **fields)
    assert get_connection_info(conn_id).master == master
    if not master.startswith("k8s://"):  # the provider needs the cncf.kubernetes provider for k8s masters
        assert SparkSubmitHook(conn_id=conn_id)._connection["master"] == master


def test_connection_without_host_is_a_setup_error() -> None:
    class Conn:
        conn_id, conn_type, host, port, extra_dejson = "c", "spark", "", None, {}

    with pytest.raises(SparkSetupError, match="no host"):
        connection_info(Conn())


def test_spark_connect_url_comes_from_the_provider_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    conn_id = _conn(
        monkeypatch,
        "dg_connect",
        conn_type="spark_connect",
        host="sc://spark.example",
        port=15002,
        login="etl",
        extra={"use_ssl": True},
    )
    assert (
        SparkConnectHook(conn_id).get_connection_url() == "sc://spark.example:15002/;user_id=etl;use_ssl=True"
    )


def test_databricks_profile_from_connection_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    conn_id = _conn(
        monkeypatch,
        "dg_dbx",
        conn_type="spark",
        host="yarn",
        extra={"databricks-runtime": "14.3.x-scala2.12", "photon": "true"},
    )
    profile = SparkEngine(conn_id=conn_id).profile()
    assert (profile.name, profile.version, profile.photon) == (EngineName.DATABRICKS, "14.3", True)


def test_delta_spark_profile_for_open_source_spark(standalone: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import version

    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    profile = SparkEngine(conn_id=standalone).profile()
    assert (profile.name, profile.version) == (EngineName.DELTA_SPARK, version("delta-spark"))
    assert SparkEngine(delta_version="3.2.0").profile().version == "3.2.0"


def test_databricks_driver_environment_gives_the_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "15.4")
    profile = SparkEngine(photon=False).profile()
    assert (profile.name, profile.version, profile.photon) == (EngineName.DATABRICKS, "15.4", False)
