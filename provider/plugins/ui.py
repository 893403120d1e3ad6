"""The Airflow plugin: mounts the deltaguard UI at ``/deltaguard`` in the api-server and adds a menu entry.

Registered once, as the ``airflow.plugins`` entry point ``deltaguard`` (setup.cfg), which Airflow loads with
its default settings; see ``docs/deployment.md``.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from deltaguard.plugins.app import create_app

URL_PREFIX = "/deltaguard"


class DeltaguardUiPlugin(AirflowPlugin):
    """Delta leases: tables, queues, conflict matrices and per-task decisions."""

    name = "deltaguard"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "deltaguard UI"}]
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
