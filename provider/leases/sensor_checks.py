"""What the deltaguard sensors look for, as plain functions shared by ``poke`` and the triggers.

A sensor's ``poke`` and its deferrable trigger call the very same function here, so they cannot disagree.
No Airflow import.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from deltaguard.core.operations import Operation
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig

if TYPE_CHECKING:
    from deltaguard.leases.keeper import LeaseTiming
    from deltaguard.leases.store import LeaseStore

#: commit-info key carrying the writer's app id (written by the deltaguard operators)
APP_ID_KEY = "deltaguard.app_id"


def table_version(table_uri: str, storage_options: Mapping[str, str] | None = None) -> int:
    """The table's current version, ``-1`` when it does not exist yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return int(DeltaTable(table_uri, storage_options=dict(storage_options or {}) or None).version())
    except TableNotFoundError:
        return -1


def commit_app_id(commit: Mapping[str, Any]) -> str | None:
    """The app id a commit was written under, from its commit info (``None`` if unknown)."""
    if commit.get(APP_ID_KEY):
        return str(commit[APP_ID_KEY])
    dag_id, task_id = commit.get("airflow.dag_id"), commit.get("airflow.task_id")
    if dag_id and task_id:
        map_index = commit.get("airflow.map_index")
        return f"{dag_id}.{task_id}" + (f".{map_index}" if map_index not in (None, "") else "")
    return None


def find_new_commit(
    table_uri: str,
    baseline_version: int,
    *,
    operations: Collection[str] = (),
    app_id: str | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """The earliest commit after ``baseline_version`` matching the filters, or ``None``.

    :param table_uri: the table.
    :param baseline_version: commits with a higher version count (``-1``: the table's creation counts).
    :param operations: Delta operation names to accept (``WRITE``, ``MERGE``, ``DELETE``, ``OPTIMIZE``, ...;
        case-insensitive); empty accepts all.
    :param app_id: accept only commits written under this app id (``dag_id/task_id[/map_index]@run_id``, :func:`deltaguard.writes.prepared.app_id`).
    :param storage_options: deltalake storage options.
    :return: ``{"version", "operation", "timestamp", "app_id"}`` of the matching commit.
    """
    _, commits = commits_after(
        table_uri, baseline_version, operations=operations, app_id=app_id, storage_options=storage_options
    )
    return commits[0] if commits else None


def commits_after(
    table_uri: str,
    baseline_version: int,
    *,
    operations: Collection[str] = (),
    app_id: str | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> tuple[int, list[dict[str, Any]]]:
    """Every commit after ``baseline_version`` matching the filters, oldest first, and the version read.

    The version read (``-1`` for a table that does not exist yet) is where the next call starts, so a
    commit the filters skip is not looked at again.

    :param table_uri: the table.
    :param baseline_version: commits with a higher version count (``-1``: the table's creation counts).
    :param operations: see :func:`find_new_commit`.
    :param app_id: see :func:`find_new_commit`.
    :param storage_options: deltalake storage options.
    :return: ``(current version, [{"version", "operation", "timestamp", "app_id"}, ...])``.
    """
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    from deltaguard.core.delta_history import HistoryMovedError, consistent_history

    try:
        table = DeltaTable(table_uri, storage_options=dict(storage_options or {}) or None)
    except TableNotFoundError:
        return max(baseline_version, -1), []
    if int(table.version()) <= baseline_version:
        return int(table.version()), []
    try:
        # history() numbers commits from the loaded version: read it only while no commit lands
        current, history = consistent_history(table, since=baseline_version)
    except HistoryMovedError:
        return baseline_version, []  # nothing reported now; the next call starts from the same place
    wanted = {o.upper() for o in operations}
    found: list[dict[str, Any]] = []
    newer = [c for c in history if int(c.get("version", -1)) > baseline_version]
    for commit in sorted(newer, key=lambda c: int(c.get("version", -1))):
        version = int(commit.get("version", -1))
        if version <= baseline_version:
            continue
        operation = str(commit.get("operation", ""))
        if wanted and operation.upper() not in wanted:
            continue
        writer = commit_app_id(commit)
        if app_id is not None and writer != app_id:
            continue
        found.append(
            {
                "version": version,
                "operation": operation,
                "timestamp": commit.get("timestamp"),
                "app_id": writer,
            }
        )
    return current, found


def admission_verdict(
    operation: Operation,
    running: Sequence[Operation],
    table_config: TableConfig,
    profile: EngineProfile,
) -> tuple[bool, str]:
    """Would ``operation`` be admitted next to ``running``? Returns ``(admitted, one-line reason)``."""
    from deltaguard.core.model import decide

    if not running:
        return True, "no write is running or queued on the table"
    decision = decide(operation, running, table_config, profile)
    if not decision.conflict:
        return True, f"compatible with the {len(running)} running or queued write(s)"
    blockers = ", ".join(running[i].describe() for i in decision.conflicts_with)
    reason = " ".join(decision.reasons)
    return False, f"conflicts with {blockers}: {reason}".rstrip(": ")


def admission_probe(
    store: str | LeaseStore,
    table_key: str,
    operation: Operation,
    table_config: TableConfig,
    profile: EngineProfile,
    *,
    include_waiting: bool = True,
    timing: LeaseTiming | None = None,
) -> tuple[bool, str]:
    """Read the leases (and queued requests) on a table and ask :func:`admission_verdict`. Takes nothing.

    :param store: the store URL (opened and closed here) or an open store (left open: the triggerer's
        shared handle).
    :param include_waiting: also respect queued requests (the lease manager's FIFO would).
    :param timing: for a store URL: its ``store_timeout`` bounds the opening and every call (ADR 0018);
        default :class:`~deltaguard.leases.keeper.LeaseTiming`'s.
    """
    from deltaguard.leases.keeper import LeaseTiming as Timing
    from deltaguard.leases.manager import LeaseManager
    from deltaguard.leases.open import open_bounded_store

    opened = (
        open_bounded_store(store, (timing or Timing()).store_timeout_s) if isinstance(store, str) else store
    )
    manager = LeaseManager(opened)
    try:
        running = [lease.operation for lease in manager.leases(table_key)]
        if include_waiting:
            running += [waiter.operation for waiter in manager.waiters(table_key)]
    finally:
        if isinstance(store, str):
            manager.store.close()
    return admission_verdict(operation, running, table_config, profile)
