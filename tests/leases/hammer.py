"""Worker processes for the multi-process lease tests (importable by spawned children)."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases import codec
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.store import SnapshotChanged

PROFILE = EngineProfile(EngineName.DELTA_SPARK, "4.0")
CONFIG = TableConfig(partition_columns=("date",), version=1)
TABLES = ("t0", "t1", "t2")

#: A mix of compatible and conflicting writes (per the model on a table partitioned by date).
MIX = (
    Operation(OperationKind.INSERT),
    Operation(OperationKind.INSERT),
    Operation(OperationKind.INSERT),
    Operation(OperationKind.INSERT),
    Operation(OperationKind.MERGE, merge_condition="t.id = s.id AND t.date = '2024-01-01'"),
    Operation(OperationKind.MERGE, merge_condition="t.id = s.id AND t.date = '2024-01-02'"),
    Operation(OperationKind.MERGE, merge_condition="t.id = s.id"),
    Operation(OperationKind.DELETE, predicate="date = '2024-01-03'"),
    Operation(OperationKind.OPTIMIZE),
    Operation(OperationKind.SET_TBLPROPERTIES),
)


def hammer(
    url: str,
    worker: int,
    requests: int,
    seed: int,
    out: str,
    start: Any = None,
    inserts_only: bool = False,
    deadline_s: float = 90.0,
) -> None:
    """Acquire, hold briefly and release ``requests`` leases; write one JSON record per held table.

    :param start: a barrier all workers pass together, so they really run at the same time.
    :param inserts_only: only blind INSERTs (all compatible), holding each lease longer.
    """
    rng = random.Random(seed)
    manager = LeaseManager(url)
    manager.decide  # import the model before the start line  # noqa: B018
    snapshots = _count_snapshot_decisions(manager)
    if start is not None:
        start.wait(120)
    owner = Owner(dag_id="hammer", task_id=f"w{worker}")
    records, ungranted = [], 0
    for i in range(requests):
        tables = rng.sample(TABLES, 2 if rng.random() < 0.2 else 1)
        mix = MIX[:1] if inserts_only else MIX
        claims = tuple(TableClaim(t, rng.choice(mix), PROFILE, CONFIG) for t in tables)
        request = LeaseRequest(claims, owner, ttl_s=30, wait_ttl_s=30, request_id=f"w{worker}-{i}")
        result: object = manager.acquire(request)
        give_up = time.monotonic() + deadline_s
        while isinstance(result, Waiting) and time.monotonic() < give_up:
            time.sleep(0.01)
            result = manager.check(request.request_id)
        if not isinstance(result, Granted):
            ungranted += 1
            continue
        start = time.monotonic()  # after the grant: inside the true holding interval
        time.sleep(0.1 if inserts_only else rng.uniform(0.005, 0.025))
        end = time.monotonic()  # before the release: still inside it
        for claim in claims:
            records.append(
                {
                    "request": request.request_id,
                    "uri": claim.uri,
                    "op": codec.operation_to_json(claim.operation),
                    "fencing": result.fencing[claim.uri],
                    "start": start,
                    "end": end,
                }
            )
        assert manager.release(result.lease_id, owner)
    Path(out).write_text(json.dumps({"records": records, "ungranted": ungranted, "snapshots": snapshots}))
    manager.store.close()


def _count_snapshot_decisions(manager: LeaseManager) -> dict[str, int]:
    """Count the decisions made from a snapshot (ADR 0007) that committed, and those whose tables changed
    before the commit (then decided again under the locks), so a test can see the optimistic path ran."""
    counts = {"committed": 0, "changed": 0}
    real = manager.store.run_on_snapshot

    def counting(snapshot: Any, body: Any) -> Any:
        try:
            result = real(snapshot, body)
        except SnapshotChanged:
            counts["changed"] += 1
            raise
        counts["committed"] += 1
        return result

    manager.store.run_on_snapshot = counting  # type: ignore[method-assign]
    return counts


def crash_holding(url: str, ttl_s: float) -> None:
    """Take a lease on every table and die without releasing it (a killed worker)."""
    manager = LeaseManager(url)
    claims = tuple(
        TableClaim(t, Operation(OperationKind.MERGE, merge_condition="t.id = s.id"), PROFILE, CONFIG)
        for t in TABLES
    )
    result = manager.acquire(
        LeaseRequest(claims, Owner(dag_id="hammer", task_id="crasher"), ttl_s=ttl_s, request_id="crasher")
    )
    assert isinstance(result, Granted)
    os._exit(0)
