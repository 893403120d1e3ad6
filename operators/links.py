"""Extra links on deltaguard tasks: the task's decision and its table, in Airflow's own UI (Delta leases).

Both open pages of Airflow's UI under ``[api] base_url`` where the plugin's React app renders (docs/ui.md):
the task instance's **Delta leases** tab and the **Delta leases** Browse view of the table, never a page
outside Airflow nor a storage URI such as ``s3://...`` that a browser cannot open.
Airflow 3 computes a link in the worker when the task finishes and stores it in XCom, so ``get_link`` sees
the operator with its templates rendered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote, urlencode

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey


def _table_uri(operator: BaseOperator) -> str | None:
    table = getattr(operator, "table", None)
    if not table:
        return None
    try:
        from deltaguard.hooks.delta import DeltaTableHook

        return DeltaTableHook(getattr(operator, "delta_conn_id", None)).table_uri(str(table))
    except Exception:  # a link must not fail the task; the name as written is the best guess left
        return str(table)


def ui_base_url() -> str:
    """``[api] base_url`` read now (the public URL or path Airflow is served under), ``""`` when unset: the
    links are then host-relative (``/deltaguard/...``), which a browser resolves against the Airflow page."""
    from airflow.sdk import conf

    return str(conf.get("api", "base_url", fallback="") or "").rstrip("/")


def table_url(base_url: str, table_uri: str) -> str:
    """The Delta leases view of one table inside Airflow (its leases, queue, matrix, recent writes).

    :param base_url: ``[api] base_url``.
    :param table_uri: the table as the operator resolved it; the view is keyed by the lease store's table
        key (:func:`deltaguard.writes.table_uri.table_key`), so every spelling of one table opens one view.
    """
    from deltaguard.writes.table_uri import table_key

    return f"{base_url.rstrip('/')}/plugin/delta-leases?{urlencode({'table': table_key(table_uri)})}"


def decision_url(base_url: str, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The task instance's Delta leases tab in Airflow's UI (what deltaguard decided for it)."""
    path = f"dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}/tasks/{quote(task_id, safe='')}"
    if map_index >= 0:
        path += f"/mapped/{map_index}"
    return f"{base_url.rstrip('/')}/{path}/plugin/delta-leases-task"


class DeltaTableLink(BaseOperatorLink):
    """Link to the written table's page in the deltaguard UI."""

    name = "Delta leases: table"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        uri = _table_uri(operator)
        return table_url(ui_base_url(), uri) if uri else ""


#: the former name (it linked to the ``_delta_log`` folder); serialized DAGs may still name it
DeltaTableHistoryLink = DeltaTableLink


class DeltaDecisionLink(BaseOperatorLink):
    """Link to the admission decision: granted or waited, behind whom, which rule (the deltaguard UI)."""

    name = "Delta leases"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        return decision_url(ui_base_url(), ti_key.dag_id, ti_key.run_id, ti_key.task_id, ti_key.map_index)
