"""The operators' Spark wiring: Spark connections for ``engine="spark"`` and ``def f(spark)`` sources.

* which ``spark``/``spark_connect`` connection a task uses: its arguments, else the ``delta`` connection's
  extras, else ``[deltaguard] spark_conn_id``/``spark_connect_conn_id`` (the pair taken whole);
* :func:`deltaguard.engines.base.build_engine` handing them to Spark engines only;
* real PySpark (local[2], one session for the module, a few rows): a bare one-argument source committed by
  delta-rs under ``dag.test()``; ``engine="spark"`` resolving a ``spark`` connection into its session and,
  without Delta's jars, failing with ``SparkSetupError`` before any lease.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from deltaguard.engines.spark.engine import SparkEngine
from tests.airflow.helpers import decision_rows, run_dag, task_state, write_dag, xcom_return
from tests.spark.conftest import SMALL_CONF

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

#: marks the ``spark`` connection's ``spark-conf``, so a test can tell the connection reached the session
MARKER_KEY = "spark.deltaguard.test.connection"


def _spark_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, marker: str) -> None:
    conf = {**SMALL_CONF, MARKER_KEY: marker}
    conn = {"conn_type": "spark", "host": "local[2]", "extra": {"spark-conf": conf}}
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))


def _delta_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, extra: dict[str, Any]) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "delta", "extra": extra}))


# -- which connection: arguments, delta connection extras, [deltaguard] options ---------------------------


def test_spark_connections_fall_back_level_by_level(monkeypatch: pytest.MonkeyPatch) -> None:
    from deltaguard.hooks.delta import DeltaTableHook

    monkeypatch.setenv("AIRFLOW__DELTAGUARD__SPARK_CONN_ID", "cfg_spark")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__SPARK_CONNECT_CONN_ID", "cfg_connect")
    _delta_connection(monkeypatch, "delta_sp", {"spark_conn_id": "conn_spark", "storage_options": {"a": 1}})
    _delta_connection(monkeypatch, "delta_plain", {"storage_options": {"a": 1}})

    with_extras = DeltaTableHook("delta_sp")
    # the task's own choice wins, and the pair is taken whole (no Spark Connect from further out)
    assert with_extras.spark_connections("task_spark", None) == ("task_spark", None)
    assert with_extras.spark_connections(None, "task_connect") == (None, "task_connect")
    # then the delta connection's extras, again whole; they are not storage options
    assert with_extras.spark_connections() == ("conn_spark", None)
    assert with_extras.storage_options == {"a": "1"}
    # then [deltaguard], read at call time
    assert DeltaTableHook("delta_plain").spark_connections() == ("cfg_spark", "cfg_connect")
    assert DeltaTableHook(None).spark_connections() == ("cfg_spark", "cfg_connect")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__SPARK_CONNECT_CONN_ID", "")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__SPARK_CONN_ID", "")
    assert DeltaTableHook(None).spark_connections() == (None, None)


def test_spark_connection_extras_must_be_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    from deltaguard.hooks.delta import DeltaTableHook

    _delta_connection(monkeypatch, "delta_bad", {"spark_conn_id": 7})
    with pytest.raises(ValueError, match="spark_conn_id"):
        DeltaTableHook("delta_bad").spark_connections()


def test_build_engine_hands_spark_connections_to_spark_engines_only() -> None:
    from deltaguard.engines.base import EngineSettings, build_engine

    settings = EngineSettings(storage_options={"timeout": "5"}, spark_conn_id="s", spark_connect_conn_id="c")
    spark = build_engine("spark", settings)
    assert (spark._conn_id, spark._connect_conn_id) == ("s", "c")  # type: ignore[attr-defined]
    assert spark._storage_options == {"timeout": "5"}  # type: ignore[attr-defined]
    deltars = build_engine("delta-rs", settings)
    assert deltars.name == "delta-rs"
    # an engine named spark with a conn_id (and its own default) but no Spark Connect
    submit = build_engine(f"{__name__}:_SubmitLikeEngine", settings)
    assert submit._conn_id == "s"  # type: ignore[attr-defined]
    default_submit = build_engine(f"{__name__}:_SubmitLikeEngine", EngineSettings())
    assert default_submit._conn_id == "spark_default"  # type: ignore[attr-defined]


class _SubmitLikeEngine(SparkEngine):
    """A user's Spark engine that takes a ``spark`` connection only (no Spark Connect)."""

    def __init__(self, conn_id: str = "spark_default", **hook_kwargs: object) -> None:
        self._conn_id = conn_id


class _InstrumentedSparkEngine(SparkEngine):
    """A user's engine that wraps the Spark engine and passes its arguments on."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


def test_build_engine_hands_the_connections_to_an_engine_that_passes_its_arguments_on() -> None:
    from deltaguard.engines.base import EngineSettings, build_engine

    settings = EngineSettings(storage_options={"timeout": "5"}, spark_conn_id="s", spark_connect_conn_id="c")
    wrapped = build_engine(f"{__name__}:_InstrumentedSparkEngine", settings)
    assert isinstance(wrapped, _InstrumentedSparkEngine)
    # not a local session in the worker: the task's Spark Connect server, as the plain engine gets it
    assert (wrapped._conn_id, wrapped._connect_conn_id) == ("s", "c")  # type: ignore[attr-defined]


def test_delta_rs_with_spark_settings_never_imports_spark() -> None:
    # a fresh interpreter, so no other test's imports count
    code = (
        "import sys\n"
        "from deltaguard.engines.base import EngineSettings, build_engine\n"
        "e = build_engine('delta-rs', EngineSettings(spark_conn_id='s', spark_connect_conn_id='c'))\n"
        "print(e.name, 'pyspark' in sys.modules, 'deltaguard.engines.spark.engine' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["delta-rs", "False", "False"]


def test_provider_info_declares_the_spark_options() -> None:
    from deltaguard.get_provider_info import get_provider_info

    info = get_provider_info()
    options = info["config"]["deltaguard"]["options"]
    assert options["spark_conn_id"]["default"] == "" and options["spark_connect_conn_id"]["default"] == ""
    fields = info["connection-types"][0]["conn-fields"]
    assert {"engine", "spark_conn_id", "spark_connect_conn_id"} <= set(fields)


# -- real PySpark -----------------------------------------------------------------------------------------

SOURCE_DAG_IMPORTS = """
from deltaguard.operators.dml import DeltaInsertOperator, DeltaMergeOperator


def orders(spark):
    # a PySpark transformation; the connection's conf (if any) lands in a column
    marker = spark.conf.get("spark.deltaguard.test.connection", "none")
    raw = spark.createDataFrame(
        [(1, "DE", 10), (2, "DE", -1), (3, "FR", 7)], "id long, country string, amount long"
    )
    return raw.where("amount > 0").selectExpr("id", "country", "amount", f"'{marker}' AS marker")


def corrections(spark):
    return spark.createDataFrame([(3, "FR", 70, "fix")], "id long, country string, amount long, marker string")
"""


def _active_spark() -> bool:
    context_class = getattr(sys.modules.get("pyspark"), "SparkContext", None)
    return context_class is not None and context_class._active_spark_context is not None


def test_parsing_a_dag_with_a_spark_source_starts_no_spark(airflow_db: Path, tmp_path: Path) -> None:
    """Runs before the module's session exists (file order); a leftover session elsewhere skips it."""
    if _active_spark():
        pytest.skip("a SparkContext from another module is still running")
    body = f"""
    DeltaInsertOperator(task_id="append", table={str(tmp_path / "t")!r}, source=orders)
    """
    dag = write_dag("spark_source_parse_dag", body, SOURCE_DAG_IMPORTS)
    assert dag.get_task("append").source.fn.__name__ == "orders"
    assert not _active_spark()


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One PySpark-only session for the module: what a worker without Delta's jars has."""
    pytest.importorskip("pyspark")
    from deltaguard.engines.spark.session import worker_session

    session = worker_session(
        master="local[2]", conf=SMALL_CONF, app_name="deltaguard-wiring", with_delta=False
    )
    yield session
    session.stop()


@pytest.mark.spark
def test_bare_spark_source_committed_by_delta_rs(
    spark: Any, airflow_db: Path, lease_store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``source=orders`` (``def orders(spark)``): built by PySpark, converted with toArrow(), committed by
    delta-rs; a second task's source is built on the session of its ``spark_conn_id`` connection."""
    _spark_connection(monkeypatch, "spark_wiring", marker="from-connection")
    table = str(tmp_path / "orders")
    body = f"""
    append = DeltaInsertOperator(task_id="append", table={table!r}, source=orders, partition_by=["country"])
    merge = DeltaMergeOperator(
        task_id="merge", table={table!r}, source=corrections, condition="t.id = s.id",
        spark_conn_id="spark_wiring",
    )
    again = DeltaInsertOperator(task_id="again", table={table!r}, source=orders, spark_conn_id="spark_wiring")
    append >> merge >> again
    """
    dag_run = run_dag("spark_source_delta_rs_dag", body, SOURCE_DAG_IMPORTS)
    for task_id in ("append", "merge", "again"):
        assert task_state(dag_run, task_id) == "success", task_id
    rows = sorted(DeltaTable(table).to_pyarrow_table().to_pylist(), key=lambda r: (r["id"], r["marker"]))
    assert rows == [
        {"id": 1, "country": "DE", "amount": 10, "marker": "from-connection"},
        {"id": 1, "country": "DE", "amount": 10, "marker": "none"},
        {"id": 3, "country": "FR", "amount": 70, "marker": "fix"},
        {"id": 3, "country": "FR", "amount": 7, "marker": "from-connection"},
    ]
    assert DeltaTable(table).metadata().partition_columns == ["country"]
    assert xcom_return(dag_run, "merge")["operation"] == "MERGE"
    assert decision_rows(lease_store_url) > 0  # the writes did go through the lease store


def _delete_operator(tmp_path: Path, store_url: str, **kwargs: Any) -> Any:
    from deltaguard.operators.dml import DeltaDeleteOperator

    return DeltaDeleteOperator(
        task_id="delete_one",
        table=str(tmp_path / "t"),
        predicate="id = 1",
        engine="spark",
        lease_store_url=store_url,
        **kwargs,
    )


@pytest.mark.spark
@pytest.mark.without_delta_jars  # run in a process of its own: tests/spark/test_without_delta_jars.py
@pytest.mark.parametrize("level", ["operator", "delta connection", "config"])
def test_engine_spark_uses_the_spark_connection_and_fails_before_any_lease(
    spark: Any, airflow_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, level: str
) -> None:
    from deltaguard.engines.errors import SparkSetupError
    from deltaguard.engines.spark.engine import SparkEngine
    from deltaguard.leases.manager import LeaseManager

    marker = f"via-{level}"
    _spark_connection(monkeypatch, "spark_wiring", marker=marker)
    kwargs: dict[str, Any] = {}
    if level == "operator":
        kwargs["spark_conn_id"] = "spark_wiring"
    elif level == "delta connection":
        _delta_connection(monkeypatch, "delta_wiring", {"spark_conn_id": "spark_wiring"})
        kwargs["delta_conn_id"] = "delta_wiring"
    else:
        monkeypatch.setenv("AIRFLOW__DELTAGUARD__SPARK_CONN_ID", "spark_wiring")
    store_url = f"sqlite:///{tmp_path / 'leases.db'}"
    LeaseManager(store_url).store.close()  # the store exists and works: it just must not be used
    operator = _delete_operator(tmp_path, store_url, **kwargs)
    created: list[Any] = []  # the engine releases its session when the try ends: keep what it built
    build = SparkEngine._create_session

    def recording(engine: SparkEngine) -> Any:
        created.append(build(engine))
        return created[-1]

    monkeypatch.setattr(SparkEngine, "_create_session", recording)

    with pytest.raises(SparkSetupError, match=r"spark\.jars\.packages="):
        operator.execute(context={})  # type: ignore[arg-type]

    engine = operator.resolved_engine
    assert isinstance(engine, SparkEngine)
    assert engine._conn_id == "spark_wiring" and engine._connect_conn_id is None
    assert engine._session is None  # released when the failed try ended
    assert len(created) == 1
    session = created[0]  # built from the connection before the jar check refused it
    assert session.conf.get(MARKER_KEY) == marker
    assert session.sparkContext.master == "local[2]"
    # the engine found the module's running session: it must not have switched its catalog to Delta's
    # (missing) one, which would break every later query of the session
    assert session.sql("SELECT abs(-2) AS v").collect()[0]["v"] == 2
    assert decision_rows(store_url) == 0
    assert not (tmp_path / "t").exists()
