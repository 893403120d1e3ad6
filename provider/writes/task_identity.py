"""Who writes: the application transaction and commit metadata of an Airflow task's Delta write.

Pure functions (no Airflow import) so the rules are tested without a scheduler.

The app-version rule
--------------------
Delta skips a write whose ``(appId, version)`` is not newer than the table's recorded version for that
app id. deltaguard uses ``appId = dag_id.task_id[.map_index]`` and, as version, **the start time of the DAG
run in epoch microseconds**:

* stable across retries of the same run (a retry after a crash that happened after the commit becomes a
  no-op instead of a second append);
* increasing across runs, *including backfills of older dates*: a version derived from the logical date
  would make a backfill of last week, created after today's run, look "older" and be silently skipped;
* clearing a run restarts it (Airflow resets the run's start date), so an explicit re-run writes again.

Without a run start date (a run not started yet is impossible for a running task, but a hand-built context
may lack it) the ``run_after`` time is used, then the logical date.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def app_id(dag_id: str, task_id: str, map_index: int | None = None) -> str:
    """``dag_id.task_id`` plus ``.map_index`` for a mapped task instance (``map_index >= 0``)."""
    base = f"{dag_id}.{task_id}"
    return f"{base}.{map_index}" if map_index is not None and map_index >= 0 else base


def epoch_micros(moment: dt.datetime) -> int:
    """Microseconds since the Unix epoch (a naive datetime is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def app_version(
    run_start: dt.datetime | None,
    run_after: dt.datetime | None = None,
    logical_date: dt.datetime | None = None,
) -> int:
    """The app-transaction version for a run: the first known of run start, run_after, logical date.

    :raises ValueError: if none is known (the write could not be made idempotent).
    """
    for moment in (run_start, run_after, logical_date):
        if moment is not None:
            return epoch_micros(moment)
    raise ValueError(
        "cannot derive an app-transaction version: the DAG run has no start, run_after or logical date"
    )


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
