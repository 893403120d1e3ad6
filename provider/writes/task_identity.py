"""Who writes: the application transaction and commit metadata of an Airflow task's Delta write.

Pure functions (no Airflow import) so the rules are tested without a scheduler.

The app-transaction rule (ADR 0018)
-----------------------------------
Delta skips a write whose ``(appId, version)`` is not newer than the version the table records for that
app id. deltaguard writes with

* ``appId = dag_id.task_id[.map_index]@run_id``: one app id per task instance of one DAG run, so two runs
  (parallel runs, a backfill beside the schedule, runs committing in either order) never share an app id
  and can never suppress each other; an app id longer than :data:`MAX_APP_ID` characters keeps a readable
  prefix and ends in a hash of the whole;
* ``version = the DAG run's clear_number``: Airflow increments it each time the run is cleared (and
  re-queued), never on a retry. Retries of one run share ``(appId, version)``, so a retry after a write
  that committed is a no-op; clearing the run raises the version, so an explicit re-run writes again.

Airflow 3.3's ``clear_task_instances`` increments ``clear_number`` on every clear, whatever the run's
state (earlier versions did so only for finished runs, where clearing one task of a running run counted
as a retry here; ``app_version`` overrides). The count is per run: a task that committed and awaits its
retry while another task of the run is cleared writes again on that retry. What the rule leaves in the Delta log: one ``txn`` action per app id, i.e. per task instance
and run, kept in every snapshot until ``delta.setTransactionRetentionDuration`` expires it (unset: for
ever).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

#: The longest app id written as is; longer ones are shortened (prefix plus hash).
MAX_APP_ID = 200


def app_id(dag_id: str, task_id: str, map_index: int | None = None, run_id: str | None = None) -> str:
    """``dag_id.task_id[.map_index][@run_id]``, shortened to a prefix and a hash beyond :data:`MAX_APP_ID`.

    :param map_index: a mapped task instance's index (``>= 0``); ``None`` or ``-1`` for an unmapped task.
    :param run_id: the DAG run; without it (a write outside a run) the app id is per task only.
    """
    base = f"{dag_id}.{task_id}"
    if map_index is not None and map_index >= 0:
        base = f"{base}.{map_index}"
    if run_id:
        base = f"{base}@{run_id}"
    if len(base) <= MAX_APP_ID:
        return base
    digest = hashlib.sha256(base.encode()).hexdigest()[:24]
    return f"{base[: MAX_APP_ID - len(digest) - 1]}#{digest}"


def task_app_id(dag_id: str, task_id: str, context: Mapping[str, Any]) -> str:
    """:func:`app_id` of the task instance a task context describes.

    A mapped task instance writes under its own app id, so its siblings are not "duplicates".

    :param context: the task context (``ti``, ``dag_run`` or ``run_id``).
    """
    ti = context.get("ti")
    dag_run = context.get("dag_run")
    map_index = getattr(ti, "map_index", None)
    run_id = getattr(dag_run, "run_id", None) or getattr(ti, "run_id", None) or context.get("run_id")
    return app_id(
        dag_id, task_id, map_index if isinstance(map_index, int) else None, str(run_id) if run_id else None
    )


def app_version(clear_number: int | None) -> int:
    """The app-transaction version of a run: how often it was cleared (``0`` when never, or unknown).

    :raises ValueError: for a negative clear number.
    """
    if clear_number is None:
        return 0
    if isinstance(clear_number, bool) or not isinstance(clear_number, int) or clear_number < 0:
        raise ValueError(f"a DAG run's clear_number must be an integer >= 0, got {clear_number!r}")
    return clear_number


def commit_metadata(
    *,
    dag_id: str,
    run_id: str,
    task_id: str,
    try_number: int | None,
    map_index: int | None = None,
    lease_id: str | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The key/values recorded in the Delta commit (``commitInfo``), all strings.

    Keys are prefixed ``airflow.`` (the ``deltaguard.`` prefix is reserved for the engines' own keys, such
    as ``deltaguard.app_id``); the lease id is recorded as ``lease_id``.
    """
    meta = {
        "airflow.dag_id": dag_id,
        "airflow.run_id": run_id,
        "airflow.task_id": task_id,
        "airflow.try_number": "" if try_number is None else str(try_number),
    }
    if map_index is not None and map_index >= 0:
        meta["airflow.map_index"] = str(map_index)
    if lease_id:
        meta["lease_id"] = lease_id
    for key, value in (extra or {}).items():
        meta[str(key)] = str(value)
    return meta
