"""The plugin in api-servers set up as in production: behind a reverse proxy at a sub-path, and with
providers discovered eagerly.

Each test builds its own real Airflow api-server app (``create_app``), so the settings it needs are in
place when Airflow reads them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ui.airflow_app import build_app, prepare_environment, token
from tests.ui.scenario import CUSTOMERS, RUN, Scenario

pytestmark = pytest.mark.timeout(600)

PROXY_PATH = "/airflow"


@pytest.fixture
def saved_environment() -> Iterator[None]:
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def proxied_client(scenario: Scenario, saved_environment: None, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The api-server with ``[api] base_url = http://proxy.example/airflow``.

    Airflow derives its root path from ``base_url`` once, when ``airflow.api_fastapi.app`` is imported;
    this process imported it with the default, so the derived value is set as a fresh api-server would
    compute it.
    """
    from fastapi.testclient import TestClient

    prepare_environment(scenario.url)  # before Airflow is imported, so it reads this home's settings
    import airflow.api_fastapi.app as api_app

    monkeypatch.setenv("AIRFLOW__API__BASE_URL", f"http://proxy.example{PROXY_PATH}")
    monkeypatch.setattr(api_app, "API_BASE_URL", f"http://proxy.example{PROXY_PATH}/")
    monkeypatch.setattr(api_app, "API_ROOT_PATH", f"{PROXY_PATH}/")
    app = build_app(scenario.url)
    with TestClient(app, base_url="http://proxy.example") as client:
        yield client


def test_the_api_and_its_description_work_behind_a_proxy_sub_path(proxied_client: Any) -> None:
    headers = {"Authorization": f"Bearer {token(proxied_client, 'viewer', PROXY_PATH)}"}
    for route in (
        "/deltaguard/api/tables",
        f"/deltaguard/api/table?uri={CUSTOMERS}",
        f"/deltaguard/api/decision?dag_id=daily_sales&run_id={RUN}&task_id=merge_b",
        "/deltaguard/static/delta-leases.js",
        "/deltaguard/openapi.json",
    ):
        answer = proxied_client.get(f"{PROXY_PATH}{route}", headers=headers)
        assert answer.status_code == 200, (route, answer.text[:300])
    docs = proxied_client.get(f"{PROXY_PATH}/deltaguard/docs", headers=headers).text
    assert (
        f"'{PROXY_PATH}/deltaguard/openapi.json'" in docs or f'"{PROXY_PATH}/deltaguard/openapi.json"' in docs
    )


def test_eager_provider_discovery_loads_the_plugin_once(tmp_path: Path, saved_environment: None) -> None:
    """With ``[core] lazy_discover_providers = False`` Airflow also reads provider info's ``plugins``: the
    plugin must still be registered once, with no plugin import error."""
    from fastapi.testclient import TestClient

    app = build_app(f"sqlite:///{tmp_path / 'leases.db'}", eager_providers=True)
    with TestClient(app) as client:
        headers = {"Authorization": f"Bearer {token(client, 'admin')}"}
        plugins = client.get("/api/v2/plugins", headers=headers).json()["plugins"]
        errors = client.get("/api/v2/plugins/importErrors", headers=headers).json()["import_errors"]
    assert [p["name"] for p in plugins].count("deltaguard") == 1
    assert not [e for e in errors if "deltaguard" in str(e)], errors


def test_task_processes_load_the_plugin_without_building_the_ui(tmp_path: Path) -> None:
    """Airflow loads entry-point plugins in every task process (for macros and listeners): there the
    plugin must not import FastAPI, the conflict model or the UI app."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from airflow.sdk import plugins_manager\n"
        "plugins_manager.integrate_macros_plugins()\n"
        "names = [p.name for p in plugins_manager._get_plugins()[0]]\n"
        "print(names.count('deltaguard'), 'deltaguard.plugins.ui' in sys.modules,\n"
        "      sorted(m for m in ('fastapi', 'sqlglot', 'deltaguard.plugins.app') if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(AIRFLOW_HOME=str(tmp_path), AIRFLOW__CORE__LOAD_EXAMPLES="False")
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "1 True []"
