"""The Plan view of a DAG: the report of ``deltaguard plan`` for the DAG's file, as the command makes it.

The api-server does not keep parsed DAGs, only serialized ones, whose tasks are no longer deltaguard's
operators; so the view parses the DAG's file as ``deltaguard plan FILE --dag-id DAG`` does
(:func:`deltaguard.planning.discover.load_dags`), with the command's defaults and the UI's lease store for
recorded durations and configurations, and answers :func:`deltaguard.planning.report.plan_json`. A report
is kept until the file changes or :data:`TTL_S` passes (the recorded durations move slowly), so the page's
polling does not parse the file again every few seconds.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: seconds a report is kept for an unchanged DAG file
TTL_S = 60.0

_cache: dict[tuple[str, str], tuple[float, float, dict[str, Any]]] = {}
_lock = threading.Lock()


class PlanUnavailableError(LookupError):
    """The DAG is unknown to Airflow, or its file cannot be planned (the message says which)."""


def dag_file(dag_id: str) -> Path:
    """The file Airflow parsed ``dag_id`` from (its metadata database's ``fileloc``).

    :raises PlanUnavailableError: Airflow knows no such DAG, or its file is not on this machine.
    """
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session

    with create_session() as session:
        model = session.get(DagModel, dag_id)
        fileloc = model.fileloc if model is not None else None
    if not fileloc:
        raise PlanUnavailableError(f"Airflow knows no DAG {dag_id!r}")
    path = Path(fileloc)
    if not path.is_file():
        raise PlanUnavailableError(
            f"the file of DAG {dag_id!r} ({path}) is not readable by the api-server: "
            f"run `deltaguard plan {path.name} --dag-id {dag_id}` where the DAG files are"
        )
    return path


def plan_report(
    dag_id: str,
    store_url: str | None,
    *,
    locate: Callable[[str], Path] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """``deltaguard plan``'s JSON report of one DAG.

    :param dag_id: the DAG.
    :param store_url: the lease store to read recorded durations and configurations from.
    :param locate: finds the DAG's file (Airflow's metadata database by default).
    :raises PlanUnavailableError: the DAG or its file is unknown, or the planner refuses the file.
    """
    path = (locate or dag_file)(dag_id)
    mtime = path.stat().st_mtime
    key = (str(path), dag_id)
    now = clock()
    with _lock:
        found = _cache.get(key)
    if found is not None and found[0] == mtime and now - found[1] < TTL_S:
        return found[2]
    report = _plan(path, dag_id, store_url)
    with _lock:
        _cache[key] = (mtime, now, report)
    return report


def _plan(path: Path, dag_id: str, store_url: str | None) -> dict[str, Any]:
    from deltaguard.planning.discover import PlanInputError, load_dags, plan_dag
    from deltaguard.planning.report import plan_json

    try:
        # a DAG file's prints and Airflow's parse logs go to standard error, as with the command
        with contextlib.redirect_stdout(sys.stderr):
            (dag,) = load_dags(path, dag_id)
            # the api-server reads no table: the configurations the lease manager recorded, else stated
            # assumptions (no storage credentials, no Delta log read per page view)
            plan = plan_dag(dag, {}, read_tables=False, store_url=store_url)
    except PlanInputError as exc:
        raise PlanUnavailableError(str(exc)) from None
    except ValueError as exc:  # an unparsable predicate or MERGE condition in the DAG
        raise PlanUnavailableError(f"cannot plan: {' '.join(str(exc).split())}") from None
    return plan_json(plan)
