"""Build lease requests for Airflow task instances (pure: no Airflow import)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from deltaguard.core.admission import LeaseRequest, Owner, TableClaim
from deltaguard.core.operations import Operation
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig

#: a queued request survives this many poll intervals without being asked about (and at least 2 minutes)
WAIT_TTL_POLLS = 10
MIN_WAIT_TTL_S = 120.0


def task_owner(
    dag_id: str, run_id: str, task_id: str, map_index: int | None = None, try_number: int | None = None
) -> Owner:
    """The lease owner for one try of one task instance (a retry is a different owner)."""
    return Owner(
        dag_id=dag_id,
        run_id=run_id,
        task_id=task_id,
        map_index=map_index if isinstance(map_index, int) else -1,
        try_number=int(try_number or 0),
    )


def new_request_id() -> str:
    return uuid.uuid4().hex


def task_request_id(owner: Owner) -> str:
    """A request id derived from the task-instance try, so a resumed task finds its request again.

    Airflow passes the id along when it resumes a deferred task, but the id must not depend on that:
    ``dag.test()`` drops the resume kwargs, and a lost id would leave a lease granted by the trigger held
    until its TTL. A retry (new try number) gets a new id.
    """
    return uuid.uuid5(uuid.NAMESPACE_URL, "deltaguard:" + owner.key).hex


def lease_request(
    *,
    table_key: str,
    operation: Operation,
    profile: EngineProfile,
    table_config: TableConfig | None,
    owner: Owner,
    ttl_s: float,
    poll_interval_s: float,
    priority: int = 0,
    request_id: str | None = None,
    expected_duration_s: float | None = None,
    read_version: int | None = None,
) -> LeaseRequest:
    """One-table lease request; asking again with the same ``request_id`` keeps the queue place.

    :param table_key: the canonical table key (:func:`deltaguard.writes.table_uri.table_key`).
    :param operation: what the task writes, labelled with its app id.
    :param profile: the engine profile the write commits with.
    :param table_config: the configuration the task read (lets the manager skip reading the table).
    :param owner: the task instance try.
    :param ttl_s: lease time-to-live (renewed by heartbeats).
    :param poll_interval_s: how often the waiter asks again; the queue entry outlives several polls.
    :param priority: queue priority.
    :param request_id: the id of an earlier request of this task, or ``None`` for the try's own id
        (:func:`task_request_id`).
    :param expected_duration_s: how long the write is expected to hold the lease (``None``: unknown, so
        it never backfills ahead of an earlier conflicting request).
    :param read_version: the table version the write reads and commits from, when it pins one (its file
        statistics in ``table_config`` may then decide, ADR 0020).
    """
    return claims_request(
        claims=(
            TableClaim(
                uri=table_key,
                operation=operation,
                profile=profile,
                config=table_config,
                read_version=read_version,
            ),
        ),
        owner=owner,
        ttl_s=ttl_s,
        poll_interval_s=poll_interval_s,
        priority=priority,
        request_id=request_id,
        expected_duration_s=expected_duration_s,
    )


def claims_request(
    *,
    claims: Sequence[TableClaim],
    owner: Owner,
    ttl_s: float,
    poll_interval_s: float,
    priority: int = 0,
    request_id: str | None = None,
    expected_duration_s: float | None = None,
) -> LeaseRequest:
    """A lease request for one or more tables, granted all together or not at all.

    :param claims: the tables with their operations (keys as :func:`deltaguard.writes.table_uri.table_key`).
    :param owner: the task instance try.
    :param ttl_s: lease time-to-live (renewed by heartbeats).
    :param poll_interval_s: how often the waiter asks again; the queue entry outlives several polls.
    :param priority: queue priority.
    :param request_id: the id of an earlier request of this task, or ``None`` for the try's own id.
    :param expected_duration_s: how long the write is expected to hold the lease (``None``: unknown).
    """
    return LeaseRequest(
        claims=tuple(claims),
        owner=owner,
        ttl_s=ttl_s,
        priority=priority,
        request_id=request_id or task_request_id(owner),
        wait_ttl_s=max(MIN_WAIT_TTL_S, WAIT_TTL_POLLS * poll_interval_s),
        expected_duration_s=expected_duration_s,
    )
