"""A lease store filled through the real :class:`LeaseManager`: a MERGE holds ``customers``, a second MERGE
and an OPTIMIZE wait behind it, an append to ``events`` ran and was released, and one lease has expired."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.manager import LeaseManager
from deltaguard.writes.prepared import app_id

CUSTOMERS = "file:///data/customers"
EVENTS = "file:///data/events"
STALE = "file:///data/stale_table"
RUN = "manual__2026-11-21"
PROFILE = EngineProfile(EngineName.DATABRICKS, "14.3")
CUSTOMERS_CONFIG = TableConfig(partition_columns=("country",), version=3)
# the columns' types as the engine reads them: row-level concurrency needs them (ADR 0036)
EVENTS_CONFIG = TableConfig(
    properties={"delta.enableDeletionVectors": "true"},
    version=1,
    column_types=(("id", "long"), ("kind", "string"), ("ts", "timestamp")),
)


class Clock:
    """Starts a minute in the past, so the scenario is also consistent for readers on the real clock."""

    def __init__(self, now: float | None = None) -> None:
        self.now = time.time() - 60 if now is None else now

    def __call__(self) -> float:
        return self.now


def owner(task_id: str, try_number: int = 1, dag_id: str = "daily_sales") -> Owner:
    return Owner(dag_id=dag_id, run_id=RUN, task_id=task_id, try_number=try_number)


def claim(uri: str, op: Operation, config: TableConfig, task_id: str | None = None) -> TableClaim:
    """A claim whose operation carries the task's app id as its label, as deltaguard's operators send it."""
    if task_id is not None:
        op = dataclasses.replace(op, label=app_id("daily_sales", task_id, None, RUN))
    return TableClaim(uri=uri, operation=op, profile=PROFILE, config=config)


MERGE = Operation(OperationKind.MERGE, merge_condition="t.id = s.id")
OPTIMIZE = Operation(OperationKind.OPTIMIZE)
APPEND = Operation(OperationKind.INSERT)


@dataclass
class Scenario:
    url: str
    clock: Clock
    manager: LeaseManager
    holder: Granted
    waiter: Waiting
    stale_lease: str


def build(tmp_path: Path, url: str | None = None) -> Scenario:
    url = url or f"sqlite:///{tmp_path / 'leases.db'}"
    clock = Clock()
    manager = LeaseManager(url, clock=clock)
    append = manager.acquire(
        LeaseRequest(
            (claim(EVENTS, APPEND, EVENTS_CONFIG, "append_events"),),
            owner("append_events"),
            request_id="r-append",
        )
    )
    assert isinstance(append, Granted)
    clock.now += 5
    manager.release("r-append", owner("append_events"))
    stale = manager.acquire(
        LeaseRequest(
            (claim(STALE, MERGE, CUSTOMERS_CONFIG),),
            owner("crashed_merge", dag_id="other_dag"),
            ttl_s=30,
            request_id="r-stale",
        )
    )
    assert isinstance(stale, Granted)
    holder = manager.acquire(
        LeaseRequest(
            (claim(CUSTOMERS, MERGE, CUSTOMERS_CONFIG, "merge_a"),), owner("merge_a"), request_id="r-merge-a"
        )
    )
    assert isinstance(holder, Granted)
    clock.now += 2
    waiter = manager.acquire(
        LeaseRequest(
            (claim(CUSTOMERS, MERGE, CUSTOMERS_CONFIG, "merge_b"),), owner("merge_b"), request_id="r-merge-b"
        )
    )
    assert isinstance(waiter, Waiting)
    clock.now += 1
    third = manager.acquire(
        LeaseRequest(
            (claim(CUSTOMERS, OPTIMIZE, CUSTOMERS_CONFIG, "optimize"),), owner("optimize"), request_id="r-opt"
        )
    )
    assert isinstance(third, Waiting)
    clock.now += 40  # the stale lease (ttl 30) has expired; nobody asked for its table since
    return Scenario(url, clock, manager, holder, waiter, "r-stale")


ORDERS = "file:///data/orders"


def add_queue_jump(manager: LeaseManager, clock: Clock, uri: str = ORDERS) -> None:
    """On ``uri``: a MERGE holds it (300 s expected); two MERGEs queue (60 s each); two later MERGEs of
    priority 50 (20 s each) rank ahead of the second, which moves from position 2 to 4 when it asks again."""

    def ask(task: str, priority: int, seconds: float) -> object:
        return manager.acquire(
            LeaseRequest(
                (claim(uri, MERGE, CUSTOMERS_CONFIG, task),),
                owner(task),
                request_id=f"r-{task}",
                priority=priority,
                expected_duration_s=seconds,
            )
        )

    assert isinstance(ask("orders_holder", 0, 300), Granted)
    clock.now += 1
    assert isinstance(ask("orders_first", 0, 60), Waiting)
    clock.now += 1
    second = ask("orders_second", 0, 60)
    assert isinstance(second, Waiting) and second.position == 2
    for task in ("orders_urgent_a", "orders_urgent_b"):
        clock.now += 1
        assert isinstance(ask(task, 50, 20), Waiting)
    clock.now += 1
    again = ask("orders_second", 0, 60)
    assert isinstance(again, Waiting) and again.position == 4
