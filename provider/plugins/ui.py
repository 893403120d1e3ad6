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

    return [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "deltaguard UI"}]


class DeltaguardUiPlugin(AirflowPlugin):
    """Delta leases: tables, queues, conflict matrices and per-task decisions."""

    name = "deltaguard"
    external_views = [
        {
            "name": "Delta leases",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "category": "browse",
            "url_route": "deltaguard",
        },
        {
            # A tab on every task instance (also while it waits; extra links only exist once it finished).
            "name": "deltaguard",
            "href": f"{URL_PREFIX}/decision?dag_id={{DAG_ID}}&run_id={{RUN_ID}}&task_id={{TASK_ID}}"
            "&map_index={MAP_INDEX}",
            "destination": "task_instance",
            "url_route": "deltaguard-decision",
        },
    ]

    @property  # type: ignore[override]
    def fastapi_apps(self) -> list[dict[str, Any]]:  # Airflow reads it from the plugin instance
        """The UI app, built once per process on first access."""
        return _fastapi_apps()
