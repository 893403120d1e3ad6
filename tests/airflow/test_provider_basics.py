"""Provider info, configuration, table URIs, the hook and the app-transaction rules."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from deltaguard import config
from deltaguard.engines.base import canonical_engine_name, engine_class
from deltaguard.writes.prepared import MAX_APP_ID, app_id, app_version, commit_metadata
from deltaguard.writes.table_uri import TableUriError, check_table_uri, resolve_table_uri, table_key


def test_provider_info_lists_what_exists() -> None:
    info = importlib.import_module("deltaguard.get_provider_info").get_provider_info()
    assert info["package-name"] == "airflow-provider-deltaguard"
    assert set(info["config"]["deltaguard"]["options"]) >= {
        "lease_store_url",
        "default_engine",
        "lease_ttl",
        "heartbeat_interval",
        "poll_interval",
        "decision_log_retention",
    }
    assert [c["connection-type"] for c in info["connection-types"]] == ["delta"]
    modules = [
        m
        for key in ("operators", "sensors", "hooks", "triggers")
        for e in info[key]
        for m in e["python-modules"]
    ]
    for module in modules:
        importlib.import_module(module)  # every listed module really exists
    for path in info["extra-links"] + [c["hook-class-name"] for c in info["connection-types"]]:
        module, _, name = path.rpartition(".")
        assert hasattr(importlib.import_module(module), name), path


def test_provider_info_import_reads_no_config() -> None:
    # A fresh interpreter: importing the entry point must not import Airflow (hence cannot read its config).
    code = "import sys, deltaguard.get_provider_info as m; m.get_provider_info(); print('airflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_config_read_at_call_time(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", raising=False)
    assert config.lease_store_url().startswith("sqlite:///")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__POLL_INTERVAL", "0.25")
    assert config.poll_interval() == 0.25
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__POLL_INTERVAL", "-1")
    with pytest.raises(ValueError, match="poll_interval must be positive"):
        config.poll_interval()
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_TTL", "30")
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__HEARTBEAT_INTERVAL", "25")
    assert config.heartbeat_interval() == 10  # capped at a third of the TTL
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__DEFAULT_ENGINE", "spark")
    assert config.default_engine() == "spark"


def test_default_deferrable_obeys_explicit_airflow_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", raising=False)
    assert config.default_deferrable() is True
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "false")
    assert config.default_deferrable() is False


def test_table_uris() -> None:
    assert resolve_table_uri("sales/daily", "s3://bucket/wh/") == "s3://bucket/wh/sales/daily"
    assert resolve_table_uri("/abs/t", "s3://bucket/wh") == "/abs/t"
    assert resolve_table_uri("file:///x/t", None) == "file:///x/t"
    with pytest.raises(TableUriError, match="unknown table URI scheme 'ftp'"):
        check_table_uri("ftp://host/t")
    with pytest.raises(TableUriError, match="relative"):
        resolve_table_uri("t", None)
    with pytest.raises(TableUriError, match=r"\.\."):
        resolve_table_uri("../other", "s3://b/wh")
    assert table_key("file:///data/t/") == table_key("/data/t")


def test_engine_registry() -> None:
    assert canonical_engine_name("DeltaLake") == "delta-rs"
    assert canonical_engine_name("delta-spark") == "spark"
    with pytest.raises(ValueError, match="unknown engine"):
        canonical_engine_name("duckdb")
    with pytest.raises(ValueError, match="DeltaEngine"):
        engine_class("deltaguard.config:OPTIONS")


def test_hook_reads_connection(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from deltaguard.hooks.delta import DeltaTableHook

    conn = {
        "conn_type": "delta",
        "host": f"file://{tmp_path}",
        "extra": {"storage_options": {"timeout": 30}, "x": 1},
    }
    monkeypatch.setenv("AIRFLOW_CONN_DELTA_T", json.dumps(conn))
    hook = DeltaTableHook("delta_t")
    assert hook.base_uri == f"file://{tmp_path}"
    assert hook.storage_options == {"timeout": "30", "x": "1"}
    assert hook.table_uri("sales") == f"file://{tmp_path}/sales"
    assert DeltaTableHook(None).table_uri("/abs/t") == "/abs/t"


def test_app_transaction_rules() -> None:
    assert app_id("d", "t") == "d/t"
    assert app_id("d", "t", -1, "r1") == "d/t@r1"
    assert app_id("d", "t", 3, "r1") == "d/t/3@r1"
    long_run = "backfill__" + "x" * 300
    shortened = app_id("d", "t", 0, long_run)
    assert len(shortened) == MAX_APP_ID and shortened.startswith("d/t/0@backfill__")
    assert shortened != app_id("d", "t", 0, long_run + "y")  # the hash covers the whole id
    # the try number at the task instance's last clear: max_tries - retries
    assert app_version(None, 2) == 0 and app_version(2, 2) == 0 and app_version(5, 2) == 3
    assert app_version(1, 3) == 0  # retries raised after the task instance was made
    with pytest.raises(ValueError):
        app_version("3", 1)  # type: ignore[arg-type]
    meta = commit_metadata(dag_id="d", run_id="r", task_id="t", try_number=2, map_index=1, lease_id="L")
    assert meta["airflow.try_number"] == "2" and meta["lease_id"] == "L" and meta["airflow.map_index"] == "1"
