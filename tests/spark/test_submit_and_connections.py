"""apache-spark provider connections: the spark-submit command SparkSubmitHook builds for the job module,
Spark Connect URLs, and the engine profile read from a connection (no cluster is started)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deltaguard.core.profiles import EngineName
from deltaguard.engines.errors import ConflictKind, DeltaConflictError, InvalidWriteError, SparkSetupError
from deltaguard.engines.spark import job as spark_job
from deltaguard.engines.spark.engine import SparkEngine
from deltaguard.engines.spark.jars import delta_artifacts
from deltaguard.engines.spark.session import connection_info, get_connection_info, submit_command, submit_hook
from deltaguard.engines.spark.setup import DELTA_EXTENSION, delta_maven_coordinate
from deltaguard.engines.spark.submit import SparkSubmitEngine, failure_from_submit_error
from deltaguard.engines.specs import AppendSpec, DeleteSpec, WriteContext


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


def _value_after(cmd: list[str], flag: str) -> list[str]:
    return [cmd[i + 1] for i, part in enumerate(cmd[:-1]) if part == flag]


def test_submit_command_runs_the_shipped_job_with_the_spec(
    standalone: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DELTAGUARD_DELTA_JARS", raising=False)
    spec = DeleteSpec(predicate="day = '2024-01-01'")
    args = spark_job.build_args("/data/orders", spec, WriteContext(app_id="d.t", app_version=3))
    cmd = submit_command(submit_hook(args, conn_id=standalone, packages=delta_maven_coordinate()))
    assert cmd[0] == "spark-submit"
    assert _value_after(cmd, "--master") == ["spark://10.1.2.3:7077"]
    assert _value_after(cmd, "--deploy-mode") == ["client"]
    assert _value_after(cmd, "--packages") == [delta_maven_coordinate()]
    assert f"spark.sql.extensions={DELTA_EXTENSION}" in _value_after(cmd, "--conf")
    application = cmd.index(str(Path(spark_job.__file__)))
    # everything after the application is the job's own arguments, and the job parses them back
    table, parsed, context, _ = spark_job.parse_job_args(cmd[application + 1 :])
    assert (table, parsed, context.app_version) == ("/data/orders", spec, 3)


def test_delta_jars_folder_becomes_jars(
    standalone: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    spark_jar, storage_jar = (
        Path(a.split(":")[1] + "-" + a.split(":")[2] + ".jar").name for a in delta_artifacts()
    )
    for name in (spark_jar, storage_jar, "README.txt"):
        (tmp_path / name).write_text("x")
    monkeypatch.setenv("DELTAGUARD_DELTA_JARS", str(tmp_path))
    cmd = submit_command(submit_hook(["--table-uri", "/t"], conn_id=standalone))
    (jars,) = _value_after(cmd, "--jars")
    assert sorted(Path(j).name for j in jars.split(",")) == sorted([spark_jar, storage_jar])
    assert not _value_after(cmd, "--packages")


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
    setup: str, standalone: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(
        "DELTAGUARD_DELTA_JARS", str(tmp_path / "nope") if setup == "missing" else str(tmp_path)
    )
    with pytest.raises(SparkSetupError, match="DELTAGUARD_DELTA_JARS"):
        submit_hook(["--table-uri", "/t"], conn_id=standalone)


def test_submit_engine_refuses_in_memory_sources_before_the_lease(standalone: str) -> None:
    import pyarrow as pa

    from deltaguard.core.table_config import TableConfig

    engine = SparkSubmitEngine(standalone)
    with pytest.raises(InvalidWriteError, match="URI string"):
        engine.validate("/t", AppendSpec(source=pa.table({"id": [1]})), TableConfig(uri="/t"))
    hook = engine.build_hook("/t", AppendSpec(source="/landing/x.parquet"), WriteContext(), "/tmp/r.json")
    assert "--result-file" in submit_command(hook)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            "Cannot execute: spark-submit ... Error code is: 4.\nLast spark-submit output:\n"
            "DELTAGUARD_CONFLICT ConcurrentDeleteRead the row was deleted",
            ConflictKind.CONCURRENT_DELETE_READ,
        ),
        (
            "Cannot execute: x. Error code is: 1.\nio.delta.exceptions.MetadataChangedException: changed",
            ConflictKind.METADATA_CHANGED,
        ),
        ("Cannot execute: x. Error code is: 3.\nDelta Lake's Spark jars are not on ...", SparkSetupError),
        ("Cannot execute: x. Error code is: 2.", InvalidWriteError),
        ("Cannot execute: x. Error code is: 1.\njava.lang.OutOfMemoryError", None),
    ],
)
def test_submit_failures_become_typed_errors(message: str, expected: object) -> None:
    error = failure_from_submit_error(message, "/t")
    if expected is None:
        assert error is None
    elif isinstance(expected, ConflictKind):
        assert isinstance(error, DeltaConflictError) and error.kind is expected
    else:
        assert isinstance(error, expected)  # type: ignore[arg-type]


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
    assert SparkSubmitEngine(conn_id).profile() == profile


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


@pytest.mark.spark
@pytest.mark.slow
def test_real_spark_submit_of_the_job_reports_missing_jars(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """spark-submit (pyspark's own, local[1]) runs the shipped job module; without Delta's jars the job exits
    3 and the engine raises SparkSetupError, with nothing written."""
    import os
    import sys

    # a Spark without Delta: no --jars here, and none picked up by the job's session in spark-submit
    monkeypatch.setenv("DELTAGUARD_DELTA_JARS", "none")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # the driver must import deltaguard
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
    conn_id = _conn(monkeypatch, "dg_local_submit", conn_type="spark", host="local[1]")
    engine = SparkSubmitEngine(
        conn_id,
        conf={"spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1", "spark.driver.memory": "512m"},
    )
    uri = str(tmp_path / "t")
    with pytest.raises(SparkSetupError, match="Delta Lake's Spark jars"):
        engine.write(uri, DeleteSpec(predicate="id = 1"), WriteContext(app_id="d.t", app_version=1))
    assert not Path(uri).exists()


@pytest.mark.slow
def test_real_spark_submit_of_the_job_writes_with_the_installed_jars(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """spark-submit with the install step's jars (as --jars) runs a real delta-spark DELETE, idempotently."""
    import os
    import sys

    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    monkeypatch.delenv("DELTAGUARD_DELTA_JARS", raising=False)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
    conn_id = _conn(monkeypatch, "dg_local_submit_delta", conn_type="spark", host="local[1]")
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"id": pa.array([1, 2], pa.int64())}))
    engine = SparkSubmitEngine(
        conn_id,
        conf={"spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1", "spark.driver.memory": "512m"},
    )
    result = engine.write(uri, DeleteSpec(predicate="id = 1"), WriteContext(app_id="d.t", app_version=1))
    assert result.operation == "DELETE" and result.version == 1
    table = DeltaTable(uri)
    assert table.to_pyarrow_table().column("id").to_pylist() == [2]
    assert "Delta-Lake/" in str(table.history(1)[0].get("engineInfo"))
