"""Extra links on deltaguard tasks: the table's history and the admission decision.

Airflow 3 computes a link in the worker when the task finishes and stores it in XCom, so ``get_link`` sees
the operator with its templates rendered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
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
    except Exception:
        return str(table)


def history_url(table_uri: str) -> str:
    """Where a person can read the table's commit history: its ``_delta_log`` folder."""
    uri = table_uri.rstrip("/")
    if uri.startswith("/"):
        uri = "file://" + quote(uri)
    return f"{uri}/_delta_log/"


def decision_url(base_url: str, dag_id: str, run_id: str, task_id: str, map_index: int = -1) -> str:
    """The deltaguard UI's Decision page of one task instance (the plugin serves it at ``/deltaguard``)."""
    query = urlencode({"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index})
    return f"{base_url.rstrip('/')}/deltaguard/decision?{query}"


class DeltaTableHistoryLink(BaseOperatorLink):
    """Link to the written table's Delta log."""

    name = "Delta table history"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        uri = _table_uri(operator)
        return history_url(uri) if uri else ""


class DeltaDecisionLink(BaseOperatorLink):
    """Link to the admission decision: granted or waited, behind whom, which rule (the deltaguard UI)."""

    name = "deltaguard decision"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        from airflow.sdk import conf

        base_url: Any = conf.get("api", "base_url", fallback="/") or "/"
        return decision_url(str(base_url), ti_key.dag_id, ti_key.run_id, ti_key.task_id, ti_key.map_index)
