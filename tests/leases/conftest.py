"""Fixtures for the lease tests: an injectable clock, stores on SQLite and on a throwaway PostgreSQL."""

from __future__ import annotations

import dataclasses
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from deltaguard.core import EngineName, EngineProfile, Operation, OperationKind, TableConfig
from deltaguard.core.admission import DecideFn, Granted, LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.open import open_store
from deltaguard.leases.store import LeaseStore

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # make `tests.pg` importable (importlib mode)

PROFILE = EngineProfile(EngineName.DELTA_SPARK, "4.0")
CONFIG = TableConfig(partition_columns=("date",), version=1)


class FakeClock:
    """A settable clock: tests move time explicitly."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def op(kind: str, condition: str | None = None) -> Operation:
    """A MERGE takes ``condition`` as its ON condition; other kinds as their predicate."""
    k = OperationKind(kind)
    if k is OperationKind.MERGE:
        return Operation(k, merge_condition=condition or "t.id = s.id")
    return Operation(k, predicate=condition)


def request(
    owner: str,
    *tables: tuple[str, Operation],
    ttl_s: float = 60.0,
    priority: int = 0,
    wait_ttl_s: float = 60.0,
    config: TableConfig = CONFIG,
) -> LeaseRequest:
    return LeaseRequest(
        claims=tuple(TableClaim(uri, o, PROFILE, config) for uri, o in tables),
        owner=Owner(dag_id="dag", task_id=owner),
        ttl_s=ttl_s,
        priority=priority,
        wait_ttl_s=wait_ttl_s,
        request_id=f"{owner}-{uuid.uuid4().hex[:8]}",
    )


#: delta-rs and a table partitioned by an INT ``k``, for decisions its evaluator (ADR 0037) judges
RS = EngineProfile(EngineName.DELTA_RS, "1.6.6")
INTS = TableConfig(partition_columns=("k",), column_types=(("k", "integer"), ("v", "long")), version=1)
INTS_URI = "file:///tables/ints"


def int_delete_request(
    who: str,
    predicate: str,
    *,
    uri: str = INTS_URI,
    dag_id: str = "dag",
    evaluator: Callable[[Any], Any] | None = None,
) -> LeaseRequest:
    """A DELETE of ``predicate`` on the INT-partitioned table, with a new delta-rs evaluator (no kept answer),
    as the writer's own process reads the table; ``evaluator`` may wrap that evaluator."""
    from deltaguard.engines.sources import attach_oracle

    config = attach_oracle(INTS)
    assert config.meaning is not None
    if evaluator is not None:
        config = dataclasses.replace(config, meaning=evaluator(config.meaning))
    claim = TableClaim(uri, Operation(OperationKind.DELETE, predicate=predicate), RS, config)
    return LeaseRequest(
        claims=(claim,),
        owner=Owner(dag_id=dag_id, task_id=who),
        ttl_s=600.0,
        wait_ttl_s=600.0,
        request_id=f"{who}-{uuid.uuid4().hex[:8]}",
    )


def ask_int_delete(manager: LeaseManager, who: str, predicate: str) -> Granted | Waiting:
    """Ask for :func:`int_delete_request`'s DELETE."""
    return manager.acquire(int_delete_request(who, predicate))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def counting_model() -> tuple[list[str], DecideFn]:
    """The conflict model, and the list of candidate kinds it is asked about (to count model calls)."""
    from deltaguard.core import model  # imported when needed, as the manager does

    asked: list[str] = []

    def decide(candidate: Any, running: Any, table: Any, profile: Any) -> Any:
        asked.append(candidate.kind.value)
        return model.decide(candidate, running, table, profile)

    return asked, decide


def general_path_only(manager: LeaseManager, monkeypatch: pytest.MonkeyPatch) -> None:
    """Switch off the store's one-call fast paths, so every decision takes the general (locking) path."""
    monkeypatch.setattr(manager.store, "grant_if_idle", lambda grant: None)
    monkeypatch.setattr(manager.store, "release_owned", lambda *args: None)


def fresh_pg_database(server_url: str) -> str:
    """A new empty database on the throwaway server; returns its URL."""
    name = f"dg_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return server_url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture
def pg_url(pg_server: str) -> str:
    return fresh_pg_database(pg_server)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'leases.db'}"
    return fresh_pg_database(request.getfixturevalue("pg_server"))


@pytest.fixture
def store(store_url: str) -> Iterator[LeaseStore]:
    with open_store(store_url) as s:
        yield s
