"""Refuse an SQLite lease store when tasks may run on more than one machine.

An SQLite store is a file on the machine that opens it. Under a distributed executor (Celery, Kubernetes,
Edge, ECS, ...) every worker would open its own file: each write would be admitted against an empty store
and nothing would be guarded. The check runs when a deltaguard write starts, before any lease request, and
reads ``[core] executor`` at that moment.
"""

from __future__ import annotations

import re

from deltaguard.exceptions import DeltaGuardError

#: executors that run every task on the scheduler's machine, where one SQLite file is shared
LOCAL_EXECUTORS = frozenset({"LocalExecutor", "SequentialExecutor", "DebugExecutor"})


class DistributedSqliteStoreError(DeltaGuardError, RuntimeError):
    """An SQLite lease store was configured together with an executor that runs tasks elsewhere."""


def distributed_executors(setting: str) -> list[str]:
    """The executors in ``setting`` that are not known to run tasks on the scheduler's machine.

    The value is a comma-separated list; an entry may carry an alias (``alias:module.Class``) and, for
    multi-team deployments, a team (``=team:...`` / ``team=...``), and may be a short name or a path. An
    executor deltaguard does not know is counted as distributed: a store that may not be shared has to be
    refused rather than assumed shared.

    :param setting: the ``[core] executor`` value.
    """
    remote = []
    for entry in re.split(r"[,;]", setting):
        text = entry.split("=")[-1].split(":")[-1].strip()  # drop team and alias prefixes
        if text and text.rsplit(".", 1)[-1] not in LOCAL_EXECUTORS:
            remote.append(text.rsplit(".", 1)[-1])
    return remote


def refuse_sqlite_under_distributed_executor(store_url: str) -> None:
    """Raise :class:`DistributedSqliteStoreError` for an SQLite store under a distributed executor.

    :param store_url: the lease store URL about to be used.
    """
    if not store_url.strip().lower().startswith("sqlite"):
        return
    from airflow.sdk import conf

    setting = str(conf.get("core", "executor", fallback="LocalExecutor") or "LocalExecutor")
    remote = distributed_executors(setting)
    if remote:
        raise DistributedSqliteStoreError(
            f"deltaguard refuses to write: the lease store is an SQLite file, but [core] executor = "
            f"{setting!r} runs tasks on other machines ({', '.join(remote)}), where each worker would open "
            "its own file and no write would be guarded. Set [deltaguard] lease_store_conn_id (or "
            "lease_store_url) to a PostgreSQL database every worker and the triggerer reach; see "
            "docs/deployment.md."
        )
