"""Lineage of real writes on real delta-rs tables: the OpenLineage facets an operator returns, the asset
event it attaches its version and operation to, and hook-level lineage."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from tests.airflow.helpers import sales_table

pytest.importorskip("airflow.providers.openlineage")

START = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def _context(task_id: str) -> dict[str, Any]:
    from airflow.sdk.execution_time.context import OutletEventAccessors

    ti = SimpleNamespace(dag_id="lineage", task_id=task_id, run_id="r1", try_number=1, map_index=-1)
    dag_run = SimpleNamespace(
        run_id="r1", start_date=START, run_after=START, logical_date=START, clear_number=0
    )
    return {"ti": ti, "dag_run": dag_run, "outlet_events": OutletEventAccessors()}


def _facets(op: Any) -> Any:
    lineage = op.get_openlineage_facets_on_complete(task_instance=None)
    assert lineage is not None
    return lineage


def test_merge_from_a_parquet_file_reports_table_version_operation_and_source(
    tmp_path, lease_store_url
) -> None:
    from airflow.sdk import Asset

    from deltaguard.operators.dml import DeltaMergeOperator

    table = sales_table(str(tmp_path / "sales"))
    source = tmp_path / "updates.parquet"
    pq.write_table(pa.table({"id": [2, 4], "country": ["DE", "DE"], "amount": [21, 40]}), source)
    op = DeltaMergeOperator(task_id="merge", table=table, source=str(source), condition="t.id = s.id")
    context = _context("merge")
    result = op.execute(context)

    version = DeltaTable(table).version()  # the table's own answer, not the operator's
    assert result["version"] == version == 1
    lineage = _facets(op)
    (output,) = lineage.outputs
    assert (output.namespace, output.name) == ("file", table)
    assert output.facets["version"].datasetVersion == str(version)
    assert output.facets["storage"].storageLayer == "delta"
    assert "lifecycleStateChange" not in output.facets  # rows changed, the table did not
    assert [(i.namespace, i.name) for i in lineage.inputs] == [("file", str(source))]
    run = lineage.run_facets["deltaguardWrite"]
    assert (run.operation, run.version, run.committed, run.duplicate) == ("MERGE", 1, True, False)
    assert run.tableUri == f"file://{table}" and run.appId == result["app_id"]

    # the asset: a static outlet, and the event carries the version and operation
    asset = Asset(uri=f"file://{table}")
    assert asset in op.outlets
    extra = context["outlet_events"][asset].extra
    assert (extra["version"], extra["operation"], extra["committed"]) == (1, "MERGE", True)


def test_overwrite_and_alter_report_their_lifecycle_change(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.dml import DeltaInsertOperator
    from deltaguard.operators.maintenance import DeltaAlterTableOperator

    table = sales_table(str(tmp_path / "sales"))
    overwrite = DeltaInsertOperator(
        task_id="overwrite",
        table=table,
        mode="overwrite",
        source=lambda: pa.table({"id": [9], "country": ["FR"], "amount": [90]}),
    )
    overwrite.execute(_context("overwrite"))
    out = _facets(overwrite).outputs[0]
    assert out.facets["lifecycleStateChange"].lifecycleStateChange.value == "OVERWRITE"
    assert out.facets["version"].datasetVersion == str(DeltaTable(table).version())
    assert _facets(overwrite).inputs == []  # a callable source has no location to name

    alter = DeltaAlterTableOperator(
        task_id="alter", table=table, set_properties={"delta.appendOnly": "false"}
    )
    alter.execute(_context("alter"))
    out = _facets(alter).outputs[0]
    assert out.facets["lifecycleStateChange"].lifecycleStateChange.value == "ALTER"
    assert _facets(alter).run_facets["deltaguardWrite"].operation == "SET TBLPROPERTIES"


def test_adding_columns_on_delta_rs_is_an_alter_with_the_new_schema(tmp_path, lease_store_url) -> None:
    """delta-rs names the commit ``ADD COLUMN`` (delta-spark ``ADD COLUMNS``): both are an ALTER."""
    from deltaguard.operators.maintenance import DeltaAlterTableOperator

    table = sales_table(str(tmp_path / "sales"))
    alter = DeltaAlterTableOperator(task_id="alter", table=table, add_columns={"note": "string"})
    alter.execute(_context("alter"))
    lineage = _facets(alter)
    out = lineage.outputs[0]
    assert lineage.run_facets["deltaguardWrite"].operation == "ADD COLUMN"
    assert out.facets["lifecycleStateChange"].lifecycleStateChange.value == "ALTER"
    columns = [(f.name, f.type) for f in out.facets["schema"].fields]
    assert columns == [(f.name, str(f.type.type)) for f in DeltaTable(table).schema().fields]
    assert columns[-1] == ("note", "string")
    stats = out.outputFacets["outputStatistics"]
    assert (stats.fileCount, stats.rowCount, stats.size) == (0, 0, 0)  # the new shape added no file


def test_a_write_reports_its_schema_and_the_rows_bytes_and_files_it_added(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.dml import DeltaInsertOperator

    table = sales_table(str(tmp_path / "sales"))
    before = {a["path"] for a in pa.table(DeltaTable(table).get_add_actions()).to_pylist()}
    op = DeltaInsertOperator(
        task_id="append",
        table=table,
        source=lambda: pa.table({"id": [7, 8, 9], "country": ["DE", "DE", "FR"], "amount": [1, 2, 3]}),
    )
    op.execute(_context("append"))
    out = _facets(op).outputs[0]
    added = [a for a in pa.table(DeltaTable(table).get_add_actions()).to_pylist() if a["path"] not in before]
    stats = out.outputFacets["outputStatistics"]
    assert (stats.rowCount, stats.fileCount) == (3, len(added))
    assert stats.size == sum(a["size_bytes"] for a in added)
    assert [f.name for f in out.facets["schema"].fields] == ["id", "country", "amount"]


def test_the_custom_facet_names_its_schema_by_url_and_the_schema_ships(tmp_path) -> None:
    import json
    from importlib import resources
    from urllib.parse import urlsplit

    from deltaguard.lineage.openlineage import FACET_SCHEMA_URL, DeltaguardWriteRunFacet

    parts = urlsplit(FACET_SCHEMA_URL)
    assert parts.scheme == "https" and parts.netloc and parts.fragment == "/$defs/DeltaguardWriteRunFacet"
    # a JSON document at a release's tag, not a repository's HTML page or a moving branch
    from deltaguard import __version__

    assert parts.netloc == "raw.githubusercontent.com" and parts.path.endswith(".json")
    assert f"/{__version__}/" in parts.path and "/blob/" not in parts.path and "/main/" not in parts.path
    shipped = json.loads(
        resources.files("deltaguard.lineage").joinpath("DeltaguardWriteRunFacet.json").read_text()
    )
    assert FACET_SCHEMA_URL.startswith(shipped["$id"])
    fields = shipped["$defs"]["DeltaguardWriteRunFacet"]["allOf"][1]["properties"]
    assert set(fields) == {f.name for f in DeltaguardWriteRunFacet.__attrs_attrs__} - {
        "_producer",
        "_schemaURL",
    }


def _wrapped_append(table: str) -> Callable[[], None]:
    from deltalake import write_deltalake

    return lambda: write_deltalake(
        table, pa.table({"id": [5, 6], "country": ["DE", "DE"], "amount": [5, 6]}), mode="append"
    )


def test_a_wrapped_write_emits_its_asset_event_and_lineage_read_from_the_table(
    tmp_path, lease_store_url
) -> None:
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import Asset

    from deltaguard.operators.leased import with_delta_lease

    table = sales_table(str(tmp_path / "sales"))
    wrapper = with_delta_lease(
        PythonOperator(task_id="load", python_callable=_wrapped_append(table)),
        tables=table,
        operation="INSERT",
    )
    asset = Asset(uri=f"file://{table}")
    assert asset in wrapper.outlets
    context = _context("load")
    wrapper.execute(context)
    version = DeltaTable(table).version()
    extra = context["outlet_events"][asset].extra
    assert (extra["version"], extra["operation"], extra["committed"]) == (version, "WRITE", True)
    lineage = _facets(wrapper)
    (out,) = lineage.outputs
    assert out.facets["version"].datasetVersion == str(version)
    assert [f.name for f in out.facets["schema"].fields] == ["id", "country", "amount"]
    assert out.outputFacets["outputStatistics"].rowCount == 2
    assert lineage.run_facets["deltaguardWrite"].operation == "WRITE"


def test_a_taskflow_write_with_a_templated_table_emits_through_its_alias(tmp_path, lease_store_url) -> None:
    from airflow.sdk import DAG, Asset, AssetAlias

    from deltaguard.decorators.delta_write import delta_write_task

    table = sales_table(str(tmp_path / "sales"))
    with DAG(dag_id="tf", schedule=None, start_date=START):
        write = _wrapped_append(table)

        def write_rows() -> None:
            write()

        out = delta_write_task(write_rows, tables="{{ params.t }}", operation="INSERT")()
    op = out.operator
    (alias,) = [o for o in op.outlets if isinstance(o, AssetAlias)]
    op.delta_tables = table  # what rendering the template gives
    context = _context("write")
    op.execute(context)
    events = context["outlet_events"][alias].asset_alias_events
    assert [(e.dest_asset_key.uri, e.extra["version"], e.extra["committed"]) for e in events] == [
        (Asset(uri=f"file://{table}").uri, DeltaTable(table).version(), True)
    ]
    (dataset,) = _facets(op).outputs
    assert dataset.outputFacets["outputStatistics"].rowCount == 2


def test_wrapped_work_that_wrote_nothing_says_so(tmp_path, lease_store_url) -> None:
    from airflow.providers.standard.operators.python import PythonOperator

    from deltaguard.operators.leased import with_delta_lease

    table = sales_table(str(tmp_path / "sales"))
    wrapper = with_delta_lease(
        PythonOperator(task_id="noop", python_callable=lambda: None), tables=table, operation="INSERT"
    )
    wrapper.execute(_context("noop"))
    (out,) = _facets(wrapper).outputs
    assert out.facets["version"].datasetVersion == str(DeltaTable(table).version())
    assert "outputStatistics" not in out.outputFacets and "lifecycleStateChange" not in out.facets
    assert _facets(wrapper).run_facets["deltaguardWrite"].committed is False


def test_creating_a_table_is_a_create(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.dml import DeltaInsertOperator

    table = str(tmp_path / "new")
    op = DeltaInsertOperator(
        task_id="create", table=table, source=lambda: pa.table({"id": [1]}), partition_by=()
    )
    op.execute(_context("create"))
    out = _facets(op).outputs[0]
    assert out.facets["version"].datasetVersion == "0"
    assert out.facets["lifecycleStateChange"].lifecycleStateChange.value == "CREATE"


def test_a_templated_table_emits_through_an_alias_resolved_to_the_table(tmp_path, lease_store_url) -> None:
    from airflow.sdk import Asset, AssetAlias

    from deltaguard.operators.dml import DeltaDeleteOperator

    table = sales_table(str(tmp_path / "sales"))
    op = DeltaDeleteOperator(task_id="delete", table="{{ params.table }}", predicate="country = 'FR'")
    (alias,) = [o for o in op.outlets if isinstance(o, AssetAlias)]
    op.table = table  # what rendering the template gives
    context = _context("delete")
    op.execute(context)
    events = context["outlet_events"][alias].asset_alias_events
    assert [(e.dest_asset_key.uri, e.extra["operation"], e.extra["version"]) for e in events] == [
        (Asset(uri=f"file://{table}").uri, "DELETE", DeltaTable(table).version())
    ]


def test_no_asset_when_asked_for_none(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.dml import DeltaDeleteOperator

    table = sales_table(str(tmp_path / "sales"))
    op = DeltaDeleteOperator(task_id="delete", table=table, predicate="id = 1", emit_asset=False)
    assert op.outlets == []
    context = _context("delete")
    op.execute(context)
    assert len(context["outlet_events"]) == 0
    assert _facets(op).outputs[0].name == table  # OpenLineage still reports the write


def test_hook_lineage_collector_sees_the_table_and_the_source(tmp_path, lease_store_url, monkeypatch) -> None:
    """Airflow hands out a collecting (not a no-op) collector once a hook lineage reader is registered,
    as the OpenLineage plugin does when enabled; this test registers none, so it installs the real
    collector class itself."""
    import airflow.sdk.lineage as sdk_lineage

    from deltaguard.operators.dml import DeltaInsertOperator

    real = sdk_lineage.HookLineageCollector()
    monkeypatch.setattr(sdk_lineage, "get_hook_lineage_collector", lambda: real)

    table = sales_table(str(tmp_path / "sales"))
    source = tmp_path / "more.parquet"
    pq.write_table(pa.table({"id": [5], "country": ["DE"], "amount": [50]}), source)
    DeltaInsertOperator(task_id="append", table=table, source=str(source)).execute(_context("append"))
    collected = real.collected_assets
    assert [(a.asset.uri, a.asset.extra["version"]) for a in collected.outputs] == [(f"file://{table}", 1)]
    assert f"file://{source}" in [a.asset.uri for a in collected.inputs]


def _site_without_openlineage(root: Path) -> Path:
    """A copy of this interpreter's site-packages made of symlinks, leaving out OpenLineage's client and
    Airflow provider (their modules and their distribution metadata), as on a machine without them."""
    import sysconfig

    site = Path(sysconfig.get_paths()["purelib"])
    left_out = ("openlineage", "apache_airflow_providers_openlineage")

    def mirror(source: Path, target: Path, skip: Callable[[str], bool]) -> None:
        target.mkdir(parents=True)
        for entry in source.iterdir():
            if not skip(entry.name):
                (target / entry.name).symlink_to(entry)

    copy = root / "site-packages"
    mirror(site, copy, lambda n: n.startswith(left_out) or n == "airflow")
    mirror(site / "airflow", copy / "airflow", lambda n: n == "providers")
    mirror(site / "airflow" / "providers", copy / "airflow" / "providers", lambda n: n == "openlineage")
    return copy


def test_operators_import_and_write_without_the_openlineage_provider(tmp_path) -> None:
    """A child interpreter whose site-packages lack the OpenLineage provider and client."""
    table = sales_table(str(tmp_path / "sales"))
    site = _site_without_openlineage(tmp_path / "site")
    script = textwrap.dedent(
        f"""
        import site, sys, datetime as dt
        site.addsitedir({str(site)!r})
        from types import SimpleNamespace
        import importlib.util
        assert importlib.util.find_spec("openlineage") is None
        from airflow.providers_manager import ProvidersManager
        assert "apache-airflow-providers-openlineage" not in ProvidersManager().providers
        from deltaguard.operators.dml import DeltaDeleteOperator
        start = dt.datetime(2026, 3, 1, tzinfo=dt.timezone.utc)
        ctx = {{"ti": SimpleNamespace(dag_id="d", task_id="t", run_id="r", try_number=1, map_index=-1),
               "dag_run": SimpleNamespace(run_id="r", start_date=start, run_after=start, logical_date=start,
                                          clear_number=0)}}
        op = DeltaDeleteOperator(task_id="t", table={table!r}, predicate="id = 1")
        result = op.execute(ctx)
        print("version", result["version"], "outlets", [a.uri for a in op.outlets])
        """
    )
    env = {**os.environ, "AIRFLOW__DELTAGUARD__LEASE_STORE_URL": f"sqlite:///{tmp_path / 'leases.db'}"}
    done = subprocess.run(
        [sys.executable, "-S", "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"version 1 outlets ['file://{table}']" in done.stdout
    assert DeltaTable(table).version() == 1


def _asset_events(uri: str) -> list[dict[str, Any]]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = (
            session.query(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .filter(AssetModel.uri == uri)
        )
        return [dict(row.extra or {}) for row in rows]


@pytest.mark.usefixtures("airflow_db")
def test_only_writes_that_committed_emit_asset_events(tmp_path, lease_store_url) -> None:
    """A real ``dag.test()`` run: a DELETE and an UPDATE matching no row and an OPTIMIZE with nothing to
    compact commit nothing and emit no asset event; the DELETE that removed a row emits one."""
    from airflow.sdk import Asset

    from tests.airflow.helpers import run_dag, task_state

    table = sales_table(str(tmp_path / "sales"))
    before = DeltaTable(table).version()
    body = f"""
    noop_delete = DeltaDeleteOperator(task_id="noop_delete", table={table!r}, predicate="id = 99")
    noop_update = DeltaUpdateOperator(task_id="noop_update", table={table!r}, updates={{"amount": "0"}}, predicate="id = 99")
    noop_optimize = DeltaOptimizeOperator(task_id="noop_optimize", table={table!r}, partition_filters={{"country": "FR"}})
    delete = DeltaDeleteOperator(task_id="delete", table={table!r}, predicate="id = 1")
    noop_delete >> noop_update >> noop_optimize >> delete
    """
    imports = (
        "from deltaguard.operators.dml import DeltaDeleteOperator, DeltaUpdateOperator\n"
        "from deltaguard.operators.maintenance import DeltaOptimizeOperator"
    )
    dag_run = run_dag("noop_asset_events", body, imports)
    for task in ("noop_delete", "noop_update", "noop_optimize", "delete"):
        assert task_state(dag_run, task) == "success", task
    assert DeltaTable(table).version() == before + 1  # only the real DELETE committed
    events = _asset_events(Asset(uri=f"file://{table}").uri)
    assert [(e["operation"], e["version"], e["committed"]) for e in events] == [("DELETE", before + 1, True)]


def test_the_custom_facet_is_produced_by_deltaguard_at_its_version(tmp_path, lease_store_url) -> None:
    """OpenLineage's ``_producer`` names the code that made the facet: deltaguard, not the provider."""
    from deltaguard import SOURCE_URL, __version__
    from deltaguard.operators.dml import DeltaDeleteOperator

    table = sales_table(str(tmp_path / "sales"))
    op = DeltaDeleteOperator(task_id="delete", table=table, predicate="id = 1")
    op.execute(_context("delete"))
    facet = _facets(op).run_facets["deltaguardWrite"]
    assert facet._producer == f"{SOURCE_URL}/tree/{__version__}"
