"""Leases held by hand for the engine's fence tests: a settable clock, a delta-rs claim and a keeper."""

from __future__ import annotations

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.keeper import LeaseKeeper
from deltaguard.leases.manager import LeaseManager


class Clock:
    """The lease manager's clock, moved by the test (a writer "frozen" past its TTL)."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def claim(uri: str, kind: OperationKind) -> TableClaim:
    """A delta-rs claim of ``kind`` on ``uri`` (table configuration unknown: judged strictly)."""
    return TableClaim(uri, Operation(kind), EngineProfile(EngineName.DELTA_RS, "1.6.6"), TableConfig())


def leased_keeper(manager: LeaseManager, uri: str, kind: OperationKind, name: str) -> LeaseKeeper:
    """Acquire ``kind`` on ``uri`` as task ``name`` (granted at once, else the test fails) and keep it on
    the manager's clock."""
    owner = Owner(task_id=name)
    grant = manager.acquire(LeaseRequest(claims=[claim(uri, kind)], owner=owner, ttl_s=120))
    assert isinstance(grant, Granted), grant
    return LeaseKeeper(
        manager,
        grant.lease_id,
        owner,
        expires_at=grant.expires_at,
        fencing=grant.fencing,
        clock=manager.clock,
    )
