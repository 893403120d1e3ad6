"""Read-only views of stored rows: what callers see of leases, queued requests and decisions, and what the
pure admission rule (:mod:`deltaguard.core.admission`) sees of the holders on a table."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from deltaguard.core.admission import Granted, Holder, Owner
from deltaguard.core.operations import Operation
from deltaguard.leases.codec import op_from_text, owner_from_text
from deltaguard.leases.store import DecisionRow, LeaseRow, WaiterRow


@dataclass(frozen=True)
class LeaseInfo:
    """A granted lease on one table (read-only view for the UI and triggers)."""

    lease_id: str
    uri: str
    owner: Owner
    operation: Operation
    granted_at: float
    expires_at: float
    fencing: int


@dataclass(frozen=True)
class WaiterInfo:
    """A queued request on one table (read-only view)."""

    request_id: str
    uri: str
    owner: Owner
    operation: Operation
    rank: float
    expires_at: float


@dataclass(frozen=True)
class DecisionInfo:
    """A decision-log entry (read-only view); ``detail`` holds reasons, blockers, fencing tokens."""

    at: float
    kind: str
    request_id: str
    uri: str
    owner_key: str
    detail: dict[str, Any]


def lease_info(row: LeaseRow) -> LeaseInfo:
    return LeaseInfo(
        row.lease_id,
        row.uri,
        owner_from_text(row.owner_json),
        op_from_text(row.op_json),
        row.granted_at,
        row.expires_at,
        row.fencing,
    )


def waiter_info(row: WaiterRow) -> WaiterInfo:
    return WaiterInfo(
        row.request_id,
        row.uri,
        owner_from_text(row.owner_json),
        op_from_text(row.op_json),
        row.rank,
        row.expires_at,
    )


def decision_info(row: DecisionRow) -> DecisionInfo:
    return DecisionInfo(row.at, row.kind, row.request_id, row.uri, row.owner_key, json.loads(row.detail))


_Row = TypeVar("_Row", LeaseRow, WaiterRow)

#: holders of rows by the rows' identity (the row is kept with it, so its id is not reused meanwhile)
_PLAIN: dict[int, tuple[LeaseRow | WaiterRow, Holder]] = {}


def _plain(row: LeaseRow | WaiterRow, build: Callable[[], Holder]) -> Holder:
    """The holder of ``row`` without estimates, found by the row's identity: the re-admission of a queue
    (ADR 0031) asks for the same row objects once per waiter, and hashing a whole row to find it in the
    memo below cost more than the rest of building a waiter's view of the table."""
    found = _PLAIN.get(id(row))
    if found is not None and found[0] is row:
        return found[1]
    holder = build()
    if len(_PLAIN) > 16384:
        _PLAIN.clear()
    _PLAIN[id(row)] = (row, holder)
    return holder


def plain_holders(rows: Sequence[_Row], holder: Callable[[_Row], Holder]) -> list[Holder]:
    """``[holder(row) for row in rows]`` for holders without estimates or read versions, each found by the
    row's identity without a call when known (a decision in a queue of 1,000 asks for 1,000 of them)."""
    known = _PLAIN.get
    found: list[Holder] = []
    for row in rows:
        entry = known(id(row))
        found.append(entry[1] if entry is not None and entry[0] is row else holder(row))
    return found


def lease_holder(
    row: LeaseRow, expected_duration_s: float | None = None, read_version: int | None = None
) -> Holder:
    """A lease row as the admission rule sees it (:func:`_lease_holder`), found by identity when plain."""
    if expected_duration_s is None and read_version is None:
        return _plain(row, lambda: _lease_holder(row))
    return _lease_holder(row, expected_duration_s, read_version)


def waiter_holder(
    row: WaiterRow, enqueued_at: float | None = None, expected_duration_s: float | None = None
) -> Holder:
    """A queue row as the admission rule sees it (:func:`_waiter_holder`), found by identity when plain."""
    if enqueued_at is None and expected_duration_s is None:
        return _plain(row, lambda: _waiter_holder(row))
    return _waiter_holder(row, enqueued_at, expected_duration_s)


# Rows are immutable and a decision turns every lease and queue row of its tables into a holder: memoised,
# so a queue of 1,000 decided one after another (ADR 0031) does not build 1,000 holders per decision.
@functools.lru_cache(maxsize=16384)
def _lease_holder(
    row: LeaseRow, expected_duration_s: float | None = None, read_version: int | None = None
) -> Holder:
    """A lease row as the admission rule sees it.

    :param expected_duration_s: the holder's duration estimate, when the decision uses estimates (its
        grant time is then the row's ``granted_at``).
    :param read_version: the table version its write reads, when the decision may use file statistics.
    """
    return Holder(
        row.lease_id,
        owner_from_text(row.owner_json),
        op_from_text(row.op_json),
        granted=True,
        since=row.granted_at if expected_duration_s is not None else None,
        expected_duration_s=expected_duration_s,
        read_version=read_version,
    )


@functools.lru_cache(maxsize=16384)
def _waiter_holder(
    row: WaiterRow, enqueued_at: float | None = None, expected_duration_s: float | None = None
) -> Holder:
    """A queue row as the admission rule sees it.

    :param enqueued_at: when the request first queued (from its status row), when the decision uses
        estimates; ``None`` never lets a later request backfill past it.
    :param expected_duration_s: its duration estimate (``None``: unknown).
    """
    return Holder(
        row.request_id,
        owner_from_text(row.owner_json),
        op_from_text(row.op_json),
        granted=False,
        rank=row.rank,
        since=enqueued_at,
        expected_duration_s=expected_duration_s,
    )


def granted(request_id: str, rows: Sequence[LeaseRow]) -> Granted:
    """The answer for a request whose lease rows are ``rows``."""
    return Granted(request_id, request_id, {r.uri: r.fencing for r in rows}, min(r.expires_at for r in rows))
