"""The Airflow plugin: mounts the deltaguard UI at ``/deltaguard`` in the api-server and adds a menu entry.

Registered once, as the ``airflow.plugins`` entry point ``deltaguard`` (setup.cfg), which Airflow loads with
its default settings; see ``docs/deployment.md``.

Airflow loads entry-point plugins in every process, task processes included (for their macros and
listeners), so this module imports nothing heavy: the FastAPI app (FastAPI, the conflict model, the lease
store) is built on first access to :attr:`DeltaguardUiPlugin.fastapi_apps`, which only the api-server and
plugin listings read.
"""

from __future__ import annotations

import functools
from typing import Any

from airflow.plugins_manager import AirflowPlugin

URL_PREFIX = "/deltaguard"


@functools.cache
def _fastapi_apps() -> list[dict[str, Any]]:
    from deltaguard.plugins.app import create_app

    return [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Delta leases API"}]


#: The feature's one name: menu entry, tabs, page titles and extra links all say it.
FEATURE_NAME = "Delta leases"
#: Routes of the React app inside Airflow's UI (``/plugin/<route>`` under the page it is a tab of).
NAV_ROUTE = "delta-leases"
TASK_INSTANCE_ROUTE = "delta-leases-task"
DAG_RUN_ROUTE = "delta-leases-run"
DASHBOARD_ROUTE = "delta-leases-home"
DAG_ROUTE = "delta-leases-plan"
#: Relative to Airflow's ``<base href>``, so it also holds behind ``[api] base_url`` at a sub-path.
BUNDLE_URL = f"{URL_PREFIX.lstrip('/')}/static/delta-leases.js"


def _react_app(route: str, destination: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": FEATURE_NAME,
        "bundle_url": BUNDLE_URL,
        "destination": destination,
        "url_route": route,
        **extra,
    }


class DeltaguardUiPlugin(AirflowPlugin):
    """Delta leases: tables, queues, conflict matrices and per-task decisions, rendered by Airflow's UI.

    One React component (``ui_app/``, built into ``static/delta-leases.js``) is registered five times: the
    Browse menu entry, a tab on every DAG (its plan: ``deltaguard plan``'s report), a tab on every DAG run (who waits in this run, and for whom), a tab on every task
    instance (its decision), and a panel on Airflow's home page. Airflow renders it inside its own layout
    with its Chakra theme and colour mode; the component reads the JSON endpoints of the FastAPI app.
    """

    name = "deltaguard"
    react_apps = [
        _react_app(NAV_ROUTE, "nav", category="browse"),
        _react_app(DAG_ROUTE, "dag"),
        _react_app(DAG_RUN_ROUTE, "dag_run"),
        _react_app(TASK_INSTANCE_ROUTE, "task_instance"),
        _react_app(DASHBOARD_ROUTE, "dashboard"),
    ]

    # Airflow reads it from the plugin instance; AirflowPlugin declares it a plain (writeable) attribute
    @property
    def fastapi_apps(self) -> list[dict[str, Any]]:  # type: ignore[override]
        """The UI app, built once per process on first access."""
        return _fastapi_apps()
