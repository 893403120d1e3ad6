"""Read-only queries of the lease store for the UI, plus the one write it allows: releasing a stale lease.

Airflow-free (tested without a scheduler). Every read goes through the public read methods of the
:class:`~deltaguard.leases.store.LeaseStore` interface (pages of tables and of the decision log, request
rows), each bounded by a ``limit``; the one write runs in the store's own transaction.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from deltaguard.core.admission import Owner
from deltaguard.leases import codec
from deltaguard.leases.store import (
    DecisionRow,
    LeaseRow,
    LeaseStore,
    RequestRow,
    StoreTxn,
    TableRow,
    WaiterRow,
)

#: Upper bound of any page the UI asks for (a request for more gets this many).
MAX_LIMIT = 500
#: How many tries of one task instance the decision page looks at.
MAX_TRIES = 50


class NotStaleError(RuntimeError):
    """The lease is still live: only expired leases may be released from the UI."""


class LeaseNotFoundError(LookupError):
    """No lease with that id (already released or reclaimed)."""


def clamp_limit(limit: int | None, default: int = 50) -> int:
    """A page size between 1 and :data:`MAX_LIMIT`."""
    if limit is None:
        return default
    return max(1, min(int(limit), MAX_LIMIT))


def owner_keys(dag_id: str, run_id: str, task_id: str, map_index: int, max_try: int) -> list[str]:
    """The lease-owner keys of tries ``0..max_try`` of one task instance (a retry is another owner)."""
    tries = range(0, max(0, min(max_try, MAX_TRIES)) + 1)
    return [
        Owner(dag_id=dag_id, run_id=run_id, task_id=task_id, map_index=map_index, try_number=t).key
        for t in tries
    ]


@dataclass(frozen=True)
class TablePage:
    """One page of the table list. ``next_after`` is the cursor of the following page (``None`` at the end)."""

    tables: list[TableRow]
    next_after: str | None


class UiReader:
    """The UI's reads over one lease store.

    :param store: the lease store.
    :param clock: seconds since the epoch (injectable for tests).
    """

    def __init__(self, store: LeaseStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    # --- tables --------------------------------------------------------------------------------------

    def tables(self, *, after: str | None = None, limit: int = 50) -> TablePage:
        """Tables the store has seen, by URI, ``limit`` at a time after the cursor ``after``."""
        size = clamp_limit(limit)
        rows = self.store.list_tables(after=after, limit=size + 1)
        more = len(rows) > size
        rows = rows[:size]
        return TablePage(rows, rows[-1].uri if more and rows else None)

    def table(self, uri: str) -> TableRow | None:
        return self.store.read_table(uri)

    def leases(self, uri: str) -> list[LeaseRow]:
        """Lease rows on the table, expired ones included (the UI marks them stale)."""
        return list(self.store.list_leases(uri))

    def waiters(self, uri: str) -> list[WaiterRow]:
        return list(self.store.list_waiters(uri))

    def request(self, request_id: str) -> RequestRow | None:
        return self.store.read_request(request_id)

    def requests(self, request_ids: Sequence[str]) -> dict[str, RequestRow]:
        """Request rows by id (at most :data:`MAX_LIMIT` ids)."""
        ids = sorted(set(request_ids))[:MAX_LIMIT]
        return {r.request_id: r for r in self.store.read_requests(ids)}

    # --- decision log --------------------------------------------------------------------------------

    def decisions(
        self,
        *,
        uri: str | None = None,
        owner_keys: Sequence[str] | None = None,
        before: float | None = None,
        limit: int = 50,
    ) -> list[DecisionRow]:
        """Decision-log entries, newest first, ``limit`` at a time strictly before ``before``."""
        return self.store.decisions(uri=uri, owner_keys=owner_keys, before=before, limit=clamp_limit(limit))

    def holds(self, uri: str, limit: int = 500) -> list[DecisionRow]:
        """The table's recent ``grant`` and ``release`` entries, newest first (durations of past holds)."""
        return self.store.decisions(uri=uri, kinds=("grant", "release"), limit=clamp_limit(limit))

    def overruns(self, uri: str, limit: int = 20) -> list[DecisionRow]:
        """The table's ``unfenced_overrun`` entries, newest first: writes that may have committed outside
        their lease (ADR 0021, ADR 0018)."""
        from deltaguard.leases.manager import OVERRUN_KIND

        return self.store.decisions(uri=uri, kinds=[OVERRUN_KIND], limit=clamp_limit(limit))

    # --- the one write -------------------------------------------------------------------------------

    def release_stale(self, lease_id: str, user: str) -> list[LeaseRow]:
        """Delete an *expired* lease's rows and log who did it; return the deleted rows.

        A live lease is never touched: its holder may be committing right now, and only the holder (or
        expiry) may end it. Expired leases are reclaimed anyway by the next decision on their tables; this
        lets an operator clean up a table nobody asks for.

        :param lease_id: the lease (= request) id.
        :param user: the authenticated user, recorded in the decision log.
        :raises LeaseNotFoundError: no such lease.
        :raises NotStaleError: the lease has not expired.
        """
        if not user:
            raise ValueError("releasing a lease needs the name of the user who asks")
        rows = self.store.read_lease(lease_id)
        if not rows:
            raise LeaseNotFoundError(f"lease {lease_id} does not exist (released, or expired and reclaimed)")
        now = self.clock()

        def body(txn: StoreTxn) -> list[LeaseRow]:
            current = txn.lease_rows(lease_id)
            if not current:
                raise LeaseNotFoundError(f"lease {lease_id} was released meanwhile")
            live = [r for r in current if r.expires_at > now]
            if live:
                raise NotStaleError(
                    f"lease {lease_id} is live for {min(r.expires_at for r in live) - now:.0f} s more; "
                    "only expired leases may be released here"
                )
            txn.delete_lease_rows(lease_id, [r.uri for r in current])
            txn.set_request_status(lease_id, "expired", now)
            tables = txn.tables()
            for r in current:
                if codec.operation_from_json(json.loads(r.op_json)).changes_metadata:
                    # Same as a normal release: the configuration may have changed, force a reload.
                    txn.set_table(r.uri, tables[r.uri].fencing, None, None)
            txn.log(
                [
                    DecisionRow(
                        now,
                        "release",
                        lease_id,
                        r.uri,
                        r.owner_key,
                        codec.dumps(
                            {
                                "stale": True,
                                "by": user,
                                "via": "deltaguard UI",
                                "expired_at": r.expires_at,
                                "fencing": r.fencing,
                                "owner": Owner.from_json(json.loads(r.owner_json)).describe(),
                            }
                        ),
                    )
                    for r in current
                ]
            )
            return current

        with self.store.transaction([r.uri for r in rows]) as txn:
            return body(txn)
