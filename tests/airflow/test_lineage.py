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
