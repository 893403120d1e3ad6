"""A small client for the Airflow 3 REST API (``/api/v2``), used by the harness from outside Airflow.

Only the standard library is used, so the harness can drive a stack without importing Airflow in the
calling process.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from typing import Any


class AirflowApiError(RuntimeError):
    """An Airflow REST call failed; carries the HTTP status (``0`` when the server was unreachable)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status


@dataclass(frozen=True)
class TaskInstanceRecord:
    """One task instance of a DAG run as the scheduler recorded it.

    :param task_id: the task.
    :param map_index: ``-1`` for an unmapped task.
    :param state: final (or current) state, e.g. ``success``.
    :param try_number: the attempt number; ``1`` means the task never retried.
    :param start_date: when the (latest) attempt started, timezone-aware.
    :param end_date: when it ended.
    :param pool: the pool the task ran in.
    :param pool_slots: slots it occupied.
    """

    task_id: str
    map_index: int
    state: str | None
    try_number: int
    start_date: datetime | None
    end_date: datetime | None
    pool: str | None = None
    pool_slots: int = 1


def parse_timestamp(value: str | None) -> datetime | None:
    """Parse an API timestamp (ISO 8601, ``Z`` suffix allowed)."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class AirflowApi:
    """Calls ``/api/v2`` of one api-server with a JWT obtained from the simple auth manager.

    :param base_url: e.g. ``http://127.0.0.1:8080``.
    :param username: simple-auth-manager user.
    :param password: its password.
    :param timeout: seconds per HTTP request.
    """

    def __init__(self, base_url: str, username: str, password: str, timeout: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.username = username
        self.password = password
        self.timeout = timeout
        self._token: str | None = None

    # -- transport -------------------------------------------------------------------------------

    def _raw(self, method: str, path: str, body: Any = None, auth: bool = True) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base_url + path, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if auth:
            request.add_header("Authorization", f"Bearer {self.token()}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:500]
            raise AirflowApiError(exc.code, f"{method} {path}: {detail}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise AirflowApiError(0, f"{method} {path}: {exc}") from exc
        return json.loads(payload) if payload else None

    def token(self) -> str:
        """A JWT for the configured user (fetched once, reused)."""
        if self._token is None:
            answer = self._raw(
                "POST", "/auth/token", {"username": self.username, "password": self.password}, auth=False
            )
            self._token = str(answer["access_token"])
        return self._token

    def get(self, path: str) -> Any:
        return self._raw("GET", path)

    # -- health ----------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """``/api/v2/monitor/health`` (needs no token)."""
        return dict(self._raw("GET", "/api/v2/monitor/health", auth=False))

    # -- DAGs and runs ---------------------------------------------------------------------------

    def dag(self, dag_id: str) -> dict[str, Any] | None:
        """The DAG as the API knows it, or ``None`` while the dag-processor has not parsed it yet."""
        try:
            return dict(self.get(f"/api/v2/dags/{urllib.parse.quote(dag_id)}"))
        except AirflowApiError as exc:
            if exc.status == 404:
                return None
            raise

    def import_errors(self) -> list[dict[str, Any]]:
        return list(self.get("/api/v2/importErrors?limit=100")["import_errors"])

    def downstream(self, dag_id: str) -> dict[str, list[str]]:
        """Each task's direct downstream task ids."""
        answer = self.get(f"/api/v2/dags/{_q(dag_id)}/tasks")
        return {t["task_id"]: list(t.get("downstream_task_ids") or ()) for t in answer["tasks"]}

    def set_paused(self, dag_id: str, paused: bool) -> None:
        self._raw("PATCH", f"/api/v2/dags/{urllib.parse.quote(dag_id)}", {"is_paused": paused})

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None, run_id: str | None = None) -> str:
        """Create a DAG run now; returns its run id."""
        body: dict[str, Any] = {"logical_date": None, "conf": conf or {}}
        if run_id:
            body["dag_run_id"] = run_id
        answer = self._raw("POST", f"/api/v2/dags/{urllib.parse.quote(dag_id)}/dagRuns", body)
        return str(answer["dag_run_id"])

    def dag_run(self, dag_id: str, run_id: str) -> dict[str, Any]:
        return dict(self.get(f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}"))

    def task_instances(self, dag_id: str, run_id: str) -> list[TaskInstanceRecord]:
        answer = self.get(f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances?limit=1000")
        return [
            TaskInstanceRecord(
                task_id=ti["task_id"],
                map_index=int(ti.get("map_index", -1)),
                state=ti.get("state"),
                try_number=int(ti.get("try_number") or 0),
                start_date=parse_timestamp(ti.get("start_date")),
                end_date=parse_timestamp(ti.get("end_date")),
                pool=ti.get("pool"),
                pool_slots=int(ti.get("pool_slots") or 1),
            )
            for ti in answer["task_instances"]
        ]

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        """A task's XCom value (deserialized by the server), or ``None`` when there is none."""
        path = (
            f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{_q(task_id)}"
            f"/xcomEntries/{_q(key)}?deserialize=true&stringify=false"
        )
        try:
            return self.get(path).get("value")
        except AirflowApiError as exc:
            if exc.status == 404:
                return None
            raise

    # -- pools -----------------------------------------------------------------------------------

    def set_pool(self, name: str, slots: int, description: str = "", include_deferred: bool = False) -> None:
        """Create or update a pool."""
        body = {
            "name": name,
            "slots": slots,
            "description": description,
            "include_deferred": include_deferred,
        }
        try:
            self._raw("POST", "/api/v2/pools", body)
        except AirflowApiError as exc:
            if exc.status != 409:
                raise
            self._raw("PATCH", f"/api/v2/pools/{_q(name)}", body)

    def set_pool_slots(self, name: str, slots: int) -> None:
        """Resize an existing pool (``default_pool`` included, whose other fields cannot change)."""
        self._raw("PATCH", f"/api/v2/pools/{_q(name)}?update_mask=slots", {"slots": slots})

    def pool_slots(self, name: str) -> int:
        """A pool's size."""
        return int(self._raw("GET", f"/api/v2/pools/{_q(name)}")["slots"])

    def wait(self, what: str, check: Any, timeout: float, interval: float = 1.0) -> Any:
        """Call ``check()`` until it returns a truthy value; raise ``TimeoutError`` naming ``what``."""
        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            try:
                result = check()
            except AirflowApiError as exc:
                last_error, result = exc, None
            if result:
                return result
            time.sleep(interval)
        raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what} (last error: {last_error})")


def _q(value: str) -> str:
    return urllib.parse.quote(value, safe="")
