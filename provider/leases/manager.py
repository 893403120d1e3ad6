"""The lease manager: conflict-aware admission of Delta writes over a lease store.

Every state change (acquire, check of a waiting request, heartbeat, release) is one store transaction over
the rows of exactly the tables involved: expired leases and abandoned queue entries on those tables are
reclaimed (and logged with their dead owner), the pure :func:`~deltaguard.core.admission.admit` decides, and
the grant (with per-table fencing tokens) or the queue entry is written, all atomically. A store may also
answer a decision on busy tables with a snapshot of their rows and commit the decision made from it only if
those rows are unchanged under the locks (ADR 0007); otherwise the locking transaction decides.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deltaguard.core.admission import (
    DEFAULT_AGEING_S,
    Closed,
    DecideFn,
    Granted,
    Holder,
    LeaseRequest,
    Owner,
    TableClaim,
    TableView,
    Waiting,
    admit,
    default_decide,
    queue_rank,
)
from deltaguard.core.operations import Operation
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig

# The lease errors are defined with every other error (deltaguard.exceptions) and re-exported here.
from deltaguard.exceptions import LeaseError as LeaseError
from deltaguard.exceptions import LeaseLostError as LeaseLostError
from deltaguard.exceptions import LeaseOwnershipError as LeaseOwnershipError
from deltaguard.exceptions import RequestClosedError as RequestClosedError
from deltaguard.leases import codec
from deltaguard.leases.open import open_store
from deltaguard.leases.store import (
    DecisionRow,
    IdleGrant,
    LeaseRow,
    LeaseStore,
    QueuedBehind,
    RequestRow,
    StoreError,
    StoreTxn,
    TableSnapshot,
    WaiterRow,
)
from deltaguard.leases.wait_texts import (
    WaitShape,
    wait_detail,
    wait_shape,
    waiting_from_json,
    waiting_to_json,
)

log = logging.getLogger("deltaguard.leases")

#: Loads a table's current configuration (e.g. from its Delta log).
ConfigLoader = Callable[[str], TableConfig]


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


#: how long decision-log entries and closed requests are kept unless the caller says (the default of
#: ``[deltaguard] decision_log_retention``, 30 days; the lease hook passes the configured value)
DEFAULT_RETENTION_S = 30 * 86400.0


class LeaseManager:
    """Grants, queues, renews and releases leases.

    :param store: a :class:`~deltaguard.leases.store.LeaseStore` or a store URL.
    :param decide: the conflict model (default: :func:`deltaguard.core.model.decide`).
    :param clock: seconds since the epoch; injectable for tests. All processes sharing a store must have
        synchronised clocks (expiry compares their timestamps).
    :param ageing_s: seconds of waiting worth one priority level.
    :param retention_s: how long decision-log entries and closed requests are kept.
    :param prune_every_s: how often (at most) an acquire prunes old entries.
    :param config_ttl_s: how long a loaded table configuration is reused without reloading.
    :param config_loader: loads a table's configuration when a request carries none (or the cached one is
        older than ``config_ttl_s``).
    """

    def __init__(
        self,
        store: LeaseStore | str,
        *,
        decide: DecideFn | None = None,
        clock: Callable[[], float] = time.time,
        ageing_s: float = DEFAULT_AGEING_S,
        retention_s: float = DEFAULT_RETENTION_S,
        prune_every_s: float = 60.0,
        config_ttl_s: float = 30.0,
        config_loader: ConfigLoader | None = None,
    ) -> None:
        self.store = open_store(store) if isinstance(store, str) else store
        self._decide = decide
        self.clock = clock
        self.ageing_s = ageing_s
        self.retention_s = retention_s
        self.prune_every_s = prune_every_s
        self.config_ttl_s = config_ttl_s
        self.config_loader = config_loader
        self._loaded: dict[str, tuple[TableConfig, float]] = {}  # uri -> (config, loaded_at)
        self._parsed: dict[tuple[str, str], TableConfig] = {}  # (uri, stored json) -> config
        self._lock = threading.Lock()
        self._last_prune = float("-inf")
        # request id -> (its tables, those whose metadata it changes, granted?), for requests answered here
        self._known_tables: dict[str, tuple[list[str], list[str], bool]] = {}
        # (operation text, configuration text, profile) -> operation texts of sole holders beside which this
        # manager's model granted that operation: the store may then grant beside them in one call (ADR 0009).
        # Values are replaced, never mutated, so readers need no lock.
        self._compatible: dict[tuple[str, str, EngineProfile], frozenset[str]] = {}
        # The same key -> the model's wait answer behind a sole holder, by the holder's operation text: the
        # store may then queue a one-table request behind it in one call (ADR 0010). Replaced, not mutated.
        self._conflicting: dict[tuple[str, str, EngineProfile], Mapping[str, WaitShape]] = {}

    @property
    def decide(self) -> DecideFn:
        if self._decide is None:
            self._decide = default_decide()
        return self._decide

    # --- the protocol --------------------------------------------------------------------------------

    def acquire(self, request: LeaseRequest) -> Granted | Waiting:
        """Grant the request now or queue it.

        Asking again with the same ``request_id`` keeps the queue place; once granted it returns the same
        lease (without renewing it).

        :raises RequestClosedError: the request id belongs to a lease that already ended.
        :raises LeaseLostError: the request was granted but its lease expired.
        :raises LeaseOwnershipError: the request id belongs to another owner.
        :raises StoreError: the store failed; nothing was granted.
        """
        result = self._evaluate(request)
        self._maybe_prune()
        return result

    def check(self, request_id: str) -> Granted | Waiting | Closed:
        """The request's status; a waiting request is re-evaluated (and its queue entry kept alive).

        Granted and closed requests cost one primary-key read; a waiting one costs one decision on its own
        tables only.
        """
        row = self.store.read_request(request_id)
        if row is None:
            return Closed(request_id, "unknown")
        if row.status == "granted":
            leases = self.store.read_lease(request_id)
            now = self.clock()
            if leases and all(lease.expires_at > now for lease in leases):
                return _granted(request_id, leases)
            return Closed(request_id, "expired", "the lease was not renewed before it expired")
        if row.status == "waiting":
            cached = self._still_blocked(row)
            if cached is not None:
                return cached
            try:
                # Its own queue entry keeps the tables busy: the one-step grant cannot apply.
                return self._evaluate(_request_from_payload(request_id, row.payload), fast=False)
            except RequestClosedError:
                pass
            row = self.store.read_request(request_id) or row
        status = row.status if row.status in ("released", "expired", "abandoned") else "unknown"
        return Closed(request_id, status)  # type: ignore[arg-type]

    def _still_blocked(self, row: RequestRow) -> Waiting | None:
        """The last wait answer if every blocker is still there and the queue entry is not due for
        renewal (half its wait ttl left); ``None`` when a full decision is needed.

        Sound: a blocker that still exists still conflicts (its operation did not change), so the full
        decision would also wait; it only costs an unlocked read instead of a locking transaction.
        """
        if not row.last_wait:
            return None
        now = self.clock()
        if now >= row.expires_at - (row.expires_at - row.updated_at) / 2:
            return None
        last = waiting_from_json(row.request_id, row.expires_at, row.last_wait)
        ids = {b.id for b in last.blockers}
        if not ids or self.store.alive(sorted(ids), now) != ids:
            return None
        return last

    def heartbeat(self, lease_id: str, owner: Owner) -> float:
        """Extend a lease by its ttl; return the new expiry.

        :raises LeaseLostError: the lease is gone or already expired (an expired lease is reclaimed now).
        :raises LeaseOwnershipError: the lease belongs to another owner.
        """
        rows = self.store.read_lease(lease_id)
        if not rows:
            raise LeaseLostError(f"lease {lease_id} does not exist (released, or expired and reclaimed)")
        now = self.clock()
        reclaimed: list[LeaseRow] = []

        def body(txn: StoreTxn) -> float | None:
            reclaimed.clear()
            current = txn.lease_rows(lease_id)
            if not current:
                return None
            if current[0].owner_key != owner.key:
                raise LeaseOwnershipError(
                    f"lease {lease_id} belongs to {_owner(current[0].owner_json).describe()}, not {owner.describe()}"
                )
            if min(r.expires_at for r in current) <= now:
                self._reclaim_leases(txn, current, now, reclaimed)
                return None
            expires = now + current[0].ttl_s
            txn.extend_lease(lease_id, expires)
            return expires

        expires = self._run([r.uri for r in rows], body)
        _warn_reclaimed(reclaimed, now)
        if expires is None:
            raise LeaseLostError(f"lease {lease_id} expired before this heartbeat; stop writing")
        return float(expires)

    def release(self, lease_id: str, owner: Owner) -> bool:
        """Release a lease (or withdraw a queued request). Idempotent: ``False`` when nothing was held.

        :raises LeaseOwnershipError: the lease belongs to another owner (the refusal is logged).
        """
        now = self.clock()
        with self._lock:
            known = self._known_tables.pop(lease_id, None)
        # A request's tables never change, so the ones this manager answered need no read.
        if known is not None:
            uris, reset, is_lease = known
        else:
            rows = self.store.read_lease(lease_id)
            uris = [r.uri for r in rows]
            reset = [r.uri for r in rows if _op(r.op_json).changes_metadata]
            is_lease = bool(rows)
        if uris and self.store.has_fast_paths:
            released = self.store.release_owned(lease_id, owner.key, uris, reset, now)
            if released:
                if reset and any(fencing is not None for _, fencing in released):
                    with self._lock:
                        for uri in reset:
                            self._loaded.pop(uri, None)
                return True
            # Not done in one step (another owner's, already ended, or no fast path): the general path
            # below tells these apart.
        if is_lease:
            rows_uris = uris
        elif known is not None:  # this manager saw it queued; another process may have granted it since
            rows_uris = [r.uri for r in self.store.read_lease(lease_id)]
        else:  # nothing read above: no lease
            rows_uris = []
        if not rows_uris:
            request = self.store.read_request(lease_id)
            if request is None:
                return False
            uris = list(json.loads(request.payload)["uris"])
            if request.owner_key != owner.key:
                self._run(uris, lambda txn: self._refuse(txn, lease_id, uris, owner, now))
                raise LeaseOwnershipError(f"request {lease_id} belongs to another owner")
            if request.status == "waiting":
                return bool(self._run(uris, lambda txn: self._withdraw(txn, request, now)))
            return False

        def body(txn: StoreTxn) -> bool | None:
            deleted = txn.release_lease(lease_id, owner.key)
            if not deleted:
                if txn.lease_rows(lease_id):
                    self._refuse(txn, lease_id, rows_uris, owner, now)
                    return None
                return False
            txn.set_request_status(lease_id, "released", now)
            tables = txn.tables()
            for r in deleted:
                if _op(r.op_json).changes_metadata:
                    # The table's configuration changed: force the next decision to use a fresh one.
                    txn.set_table(r.uri, tables[r.uri].fencing, None, None)
                    with self._lock:
                        self._loaded.pop(r.uri, None)
            txn.log(
                [
                    self._row(now, "release", lease_id, r.uri, r.owner_key, {"fencing": r.fencing})
                    for r in deleted
                ]
            )
            return True

        released = self._run(rows_uris, body, lease_id, owner.key)
        if released is None:
            raise LeaseOwnershipError(
                f"lease {lease_id} belongs to another owner; {owner.describe()} may not release it"
            )
        return bool(released)

    def _refuse(self, txn: StoreTxn, lease_id: str, uris: Sequence[str], owner: Owner, now: float) -> None:
        detail = {"reason": "release by another owner refused", "by": owner.describe()}
        txn.log([self._row(now, "refuse", lease_id, u, owner.key, detail) for u in uris])

    # --- read-only queries ---------------------------------------------------------------------------

    def leases(self, uri: str) -> list[LeaseInfo]:
        """Unexpired granted leases on a table."""
        now = self.clock()
        return [
            LeaseInfo(
                r.lease_id, r.uri, _owner(r.owner_json), _op(r.op_json), r.granted_at, r.expires_at, r.fencing
            )
            for r in self.store.list_leases(uri)
            if r.expires_at > now
        ]

    def waiters(self, uri: str) -> list[WaiterInfo]:
        """Unexpired queued requests on a table, in queue order."""
        now = self.clock()
        return [
            WaiterInfo(w.request_id, w.uri, _owner(w.owner_json), _op(w.op_json), w.rank, w.expires_at)
            for w in self.store.list_waiters(uri)
            if w.expires_at > now
        ]

    def decisions(
        self,
        *,
        owner: Owner | None = None,
        uri: str | None = None,
        since: float | None = None,
        limit: int = 100,
    ) -> list[DecisionInfo]:
        """Decision-log entries for an owner and/or a table, newest first."""
        rows = self.store.decisions(owner_key=owner.key if owner else None, uri=uri, since=since, limit=limit)
        return [
            DecisionInfo(r.at, r.kind, r.request_id, r.uri, r.owner_key, json.loads(r.detail)) for r in rows
        ]

    def prune(self) -> int:
        """Delete decision-log entries and closed requests older than the retention; return the count."""
        return self.store.prune(self.clock() - self.retention_s)

    # --- internals -----------------------------------------------------------------------------------

    def _run(
        self,
        uris: Sequence[str],
        body: Callable[[StoreTxn], Any],
        request_id: str | None = None,
        release_by: str | None = None,
    ) -> Any:
        """Run ``body`` in one store transaction; ``request_id``/``release_by`` are prefetch hints for stores
        that take them (``release_by``: the body's first call is ``release_lease(request_id, release_by)``)."""
        runner = getattr(self.store, "run", None)
        if runner is not None:
            if request_id is None:
                return runner(uris, body)
            return runner(uris, body, request_id=request_id, release_by=release_by)
        with self.store.transaction(uris) as txn:
            return body(txn)

    def _maybe_prune(self) -> None:
        now = self.clock()
        if now - self._last_prune >= self.prune_every_s:
            self._last_prune = now
            self.store.prune(now - self.retention_s)

    def _loaded_config(self, claim: TableClaim, now: float) -> TableConfig | None:
        """The claim's own configuration, or the loader's (cached for ``config_ttl_s``)."""
        with self._lock:
            cached = self._loaded.get(claim.uri)
        if claim.config is not None:
            if cached is None or _newer(claim.config, cached[0]):
                with self._lock:
                    self._loaded[claim.uri] = (claim.config, now)
                return claim.config
            return cached[0] if now - cached[1] < self.config_ttl_s else claim.config
        if self.config_loader is None:
            return cached[0] if cached else None
        if cached is None or now - cached[1] >= self.config_ttl_s:
            config = self.config_loader(claim.uri)
            with self._lock:
                self._loaded[claim.uri] = (config, now)
            return config
        return cached[0]

    def _stored_config(self, uri: str, text: str | None) -> TableConfig | None:
        if text is None:
            return None
        key = (uri, text)
        config = self._parsed.get(key)
        if config is None:
            config = codec.config_from_json(json.loads(text))
            if len(self._parsed) > 10_000:  # bounded memory for managers that see many tables
                self._parsed.clear()
            self._parsed[key] = config
        return config

    def _grant_if_idle(
        self,
        request: LeaseRequest,
        offered: dict[str, TableConfig | None],
        now: float,
        payload: str,
        op_texts: dict[str, str],
    ) -> Granted | Waiting | TableSnapshot | None:
        """The store's one-step grant when none of the tables has a holder or a queued request (or the
        store's one-step queue entry behind a holder whose wait answer the model gave before, ADR 0010).

        Then :func:`~deltaguard.core.admission.admit` grants without asking the model, so the store can
        check and grant in one call. Otherwise the store answers with a snapshot of the busy tables (to
        decide from without locking) or ``None``.

        :param payload: the request's stored text (:func:`_payload`).
        :param op_texts: each table's operation as stored JSON text, by URI.
        """
        uris = tuple(sorted(request.uris))
        claims = {c.uri: c for c in request.claims}
        owner = request.owner.describe()
        config_texts = tuple(_config_text(offered[u]) for u in uris)
        grant = IdleGrant(
            request_id=request.request_id,
            owner_key=request.owner.key,
            owner_json=request.owner.key,  # the key is the owner's compact, key-sorted JSON
            uris=uris,
            op_jsons=tuple(op_texts[u] for u in uris),
            config_versions=tuple(_version(offered[u]) for u in uris),
            config_jsons=config_texts,
            now=now,
            expires_at=now + request.ttl_s,
            ttl_s=request.ttl_s,
            rank=queue_rank(now, request.priority, self.ageing_s),
            payload=payload,
            # The store adds "fencing" (sorted first) with the new token.
            details=tuple(codec.dumps(_grant_detail(claims[u].operation, owner, 0.0)) for u in uris),
            compatible=tuple(
                tuple(self._compatible.get((op_texts[u], text, claims[u].profile), ())) if text else ()
                for u, text in zip(uris, config_texts, strict=True)
            ),
        )
        known: Mapping[str, WaitShape] | None = None
        expires_at = now + request.wait_ttl_s
        if len(uris) == 1 and config_texts[0]:
            known = self._conflicting.get((op_texts[uris[0]], config_texts[0], claims[uris[0]].profile))
            if known:
                grant = dataclasses.replace(
                    grant,
                    waits={holder: shape.pieces_for(uris[0]) for holder, shape in known.items()},
                    wait_expires_at=expires_at,
                )
        answer = self.store.grant_if_idle(grant)
        if isinstance(answer, dict):
            return Granted(request.request_id, request.request_id, answer, grant.expires_at)
        if isinstance(answer, QueuedBehind):
            assert known is not None  # the store queues only behind a holder it was sent
            shape = known[answer.op_json]
            return shape.waiting(
                request.request_id, answer.uri, answer.lease_id, _owner(answer.owner_json), expires_at
            )
        return answer

    def _evaluate(self, request: LeaseRequest, fast: bool = True) -> Granted | Waiting:
        """Decide on ``request``: first by the store's one-step grant (when it has one and ``fast``); on busy
        tables from the snapshot that attempt returned (committed only if the tables did not change since,
        ADR 0007); else by the general locking transaction."""
        now = self.clock()
        offered = {c.uri: self._loaded_config(c, now) for c in request.claims}
        # Stored texts, encoded once for the one-call attempt and the decision body alike.
        payload = _payload(request)
        op_texts = {c.uri: _op_text(c.operation) for c in request.claims}
        snapshot = None
        if fast and self.store.has_fast_paths:
            answer = self._grant_if_idle(request, offered, now, payload, op_texts)
            if isinstance(answer, Granted | Waiting):
                self._remember(request.request_id, request.uris, request.claims, isinstance(answer, Granted))
                return answer
            snapshot = answer
        claims = {c.uri: c for c in request.claims}
        decide = self.decide
        reclaimed: list[LeaseRow] = []  # logged once the decision committed (a body may run twice)

        def body(txn: StoreTxn) -> Granted | Waiting:
            reclaimed.clear()
            tables = txn.tables()
            all_leases, all_waiters = txn.holders()
            leases = self._reclaim_leases(txn, all_leases, now, reclaimed)
            waiters = self._reclaim_waiters(txn, all_waiters, now)
            # Oldest first, whichever order the store read them in: blockers and reasons list them so.
            leases.sort(key=lambda x: (x.granted_at, x.lease_id))
            waiters.sort(key=lambda w: (w.rank, w.request_id))
            existing = txn.request(request.request_id)
            rank = queue_rank(now, request.priority, self.ageing_s)
            enqueued_at = now
            if existing is not None:
                if existing.owner_key != request.owner.key:
                    raise LeaseOwnershipError(f"request {request.request_id} belongs to another owner")
                if existing.status == "granted":
                    mine = [lease for lease in leases if lease.lease_id == request.request_id]
                    if len(mine) == len(claims):
                        return _granted(request.request_id, mine)
                    raise LeaseLostError(f"lease {request.request_id} expired; stop writing and ask again")
                if existing.status in ("released", "expired"):
                    raise RequestClosedError(
                        f"request {request.request_id} is {existing.status}; use a new request id"
                    )
                if existing.status == "waiting" and existing.expires_at > now:
                    rank, enqueued_at = existing.rank, existing.enqueued_at
            # Configuration: the newest known version wins (the request's, or the store's shared copy).
            configs: dict[str, TableConfig] = {}
            config_texts: dict[str, str] = {}  # the text of each one used
            for uri in request.uris:
                stored_text = tables[uri].config_json
                stored = self._stored_config(uri, stored_text)
                mine_cfg = offered[uri]
                if mine_cfg is not None and (stored is None or _newer(mine_cfg, stored)):
                    config_texts[uri] = codec.dumps(codec.config_to_json(mine_cfg))
                    txn.set_table(uri, tables[uri].fencing, mine_cfg.version, config_texts[uri])
                    configs[uri] = mine_cfg
                elif stored is not None and stored_text is not None:
                    configs[uri] = stored
                    config_texts[uri] = stored_text
                else:
                    raise ValueError(
                        f"no table configuration known for {uri}: pass TableClaim.config or a config_loader"
                    )
            tables = txn.tables()
            views = [
                TableView(
                    uri=uri,
                    operation=claims[uri].operation,
                    config=configs[uri],
                    profile=claims[uri].profile,
                    granted=[_holder_lease(x) for x in leases if x.uri == uri],
                    waiting=[_holder_waiter(w) for w in waiters if w.uri == uri],
                )
                for uri in request.uris
            ]
            verdict = admit(request.request_id, rank, views, decide)
            key = request.owner.key  # also the owner's stored JSON text
            if verdict.granted:
                self._learn_compatible(request, op_texts, config_texts, leases, waiters)
                expires = now + request.ttl_s
                rows = []
                for uri in request.uris:
                    token = tables[uri].fencing + 1
                    txn.set_table(uri, token, tables[uri].config_version, tables[uri].config_json)
                    rows.append(
                        LeaseRow(
                            request.request_id,
                            uri,
                            key,
                            key,
                            op_texts[uri],
                            now,
                            expires,
                            token,
                            request.ttl_s,
                        )
                    )
                txn.insert_lease_rows(rows)
                if existing is not None:
                    txn.delete_waiter_rows(request.request_id)
                txn.put_request(
                    RequestRow(request.request_id, key, "granted", rank, enqueued_at, expires, payload, now)
                )
                txn.log(
                    [
                        self._row(
                            now,
                            "grant",
                            request.request_id,
                            r.uri,
                            key,
                            {
                                "fencing": r.fencing,
                                **_grant_detail(
                                    claims[r.uri].operation,
                                    request.owner.describe(),
                                    round(now - enqueued_at, 3),
                                ),
                            },
                        )
                        for r in rows
                    ]
                )
                return _granted(request.request_id, rows)
            expires = now + request.wait_ttl_s
            result = Waiting(
                request.request_id,
                verdict.position,
                verdict.blockers,
                verdict.reasons,
                verdict.advice,
                verdict.exceptions,
                expires,
            )
            if existing is None:
                self._learn_conflicting(request, op_texts, config_texts, leases, waiters, result)
            txn.put_waiter_rows(
                [
                    WaiterRow(
                        request.request_id,
                        uri,
                        key,
                        key,
                        op_texts[uri],
                        rank,
                        expires,
                    )
                    for uri in request.uris
                ]
            )
            last_wait = waiting_to_json(result)
            txn.put_request(
                RequestRow(
                    request.request_id, key, "waiting", rank, enqueued_at, expires, payload, now, last_wait
                )
            )
            before = (
                waiting_from_json("", 0.0, existing.last_wait) if existing and existing.last_wait else None
            )
            changed = before is None or {(b.table, b.id) for b in before.blockers} != {
                (b.table, b.id) for b in verdict.blockers
            }
            if existing is None or existing.status != "waiting" or changed:
                detail = wait_detail(result)
                txn.log(
                    [self._row(now, "wait", request.request_id, uri, key, detail) for uri in request.uris]
                )
            return result

        result: Granted | Waiting | None = None
        if snapshot is not None:
            try:
                result = self.store.run_on_snapshot(snapshot, body)
            except (StoreError, LeaseError, ValueError) as exc:
                # The tables changed since the snapshot, or the decision raised: decide again under the
                # locks, which is authoritative for the answer and for any error alike.
                log.debug("request %s: deciding again under the table locks (%s)", request.request_id, exc)
                result = None
        if result is None:
            result = self._run(request.uris, body, request.request_id)
        _warn_reclaimed(reclaimed, now)
        self._remember(request.request_id, request.uris, request.claims, isinstance(result, Granted))
        return result

    def _learn_compatible(
        self,
        request: LeaseRequest,
        op_texts: Mapping[str, str],
        config_texts: Mapping[str, str],
        leases: Sequence[LeaseRow],
        waiters: Sequence[WaiterRow],
    ) -> None:
        """Remember, per table, a sole live holder beside which the model just granted (no queued request):
        the verdict for exactly that pair under exactly that configuration, which the store may reuse to
        grant in one call (ADR 0009). Tables with more holders are not remembered: the model has rules over
        several running operations, so pairs do not add up."""
        for claim in request.claims:
            holder = _sole_holder(claim.uri, request.request_id, leases, waiters)
            if holder is None:
                continue
            memo_key = (op_texts[claim.uri], config_texts[claim.uri], claim.profile)
            known = self._compatible.get(memo_key, frozenset())
            if holder.op_json not in known:
                if len(self._compatible) > 10_000:  # bounded memory for managers that see many shapes
                    self._compatible.clear()
                self._compatible[memo_key] = known | {holder.op_json}

    def _learn_conflicting(
        self,
        request: LeaseRequest,
        op_texts: Mapping[str, str],
        config_texts: Mapping[str, str],
        leases: Sequence[LeaseRow],
        waiters: Sequence[WaiterRow],
        result: Waiting,
    ) -> None:
        """Remember the model's wait answer for a new one-table request behind the table's sole live
        holder, nothing queued: the verdict for exactly that pair under exactly that configuration, which
        the store may reuse to queue the same operation behind the same holder operation in one call
        (ADR 0010)."""
        if len(request.claims) != 1:
            return
        claim = request.claims[0]
        holder = _sole_holder(claim.uri, request.request_id, leases, waiters)
        if holder is None or [b.id for b in result.blockers] != [holder.lease_id]:
            return
        shape = wait_shape(result)
        if shape is None:
            return
        memo_key = (op_texts[claim.uri], config_texts[claim.uri], claim.profile)
        known = self._conflicting.get(memo_key, {})
        if known.get(holder.op_json) != shape:
            if len(self._conflicting) > 10_000:  # bounded memory, as for the compatible holders
                self._conflicting.clear()
            self._conflicting[memo_key] = {**known, holder.op_json: shape}

    def _remember(
        self, request_id: str, uris: Sequence[str], claims: Sequence[TableClaim], granted: bool
    ) -> None:
        """Keep a committed answer's tables (and those whose metadata it changes) so releasing the lease or
        withdrawing the queued request needs no read: a request's tables and operations never change."""
        reset = [c.uri for c in claims if c.operation.changes_metadata]
        with self._lock:
            if len(self._known_tables) > 10_000:  # bounded: a forgotten entry only costs a read
                self._known_tables.clear()
            self._known_tables[request_id] = (list(uris), reset, granted)

    def _reclaim_leases(
        self, txn: StoreTxn, rows: Sequence[LeaseRow], now: float, reclaimed: list[LeaseRow]
    ) -> list[LeaseRow]:
        """Delete expired lease rows (of the locked tables) and put them in the decision log with their dead
        owner; append them to ``reclaimed`` (for :func:`_warn_reclaimed` after commit); return the rest."""
        live, dead = [], []
        for row in rows:
            (dead if row.expires_at <= now else live).append(row)
        for row in dead:
            txn.delete_lease_rows(row.lease_id, [row.uri])
            txn.set_request_status(row.lease_id, "expired", now)
        reclaimed.extend(dead)
        txn.log(
            [
                self._row(
                    now,
                    "expiry",
                    r.lease_id,
                    r.uri,
                    r.owner_key,
                    {
                        "dead_owner": _owner(r.owner_json).to_json(),
                        "expired_at": r.expires_at,
                        "fencing": r.fencing,
                    },
                )
                for r in dead
            ]
        )
        return live

    def _reclaim_waiters(self, txn: StoreTxn, rows: Sequence[WaiterRow], now: float) -> list[WaiterRow]:
        live, dead = [], []
        for row in rows:
            (dead if row.expires_at <= now else live).append(row)
        for row in dead:
            txn.delete_waiter_rows(row.request_id, [row.uri])
            txn.set_request_status(row.request_id, "abandoned", now)
        txn.log(
            [
                self._row(now, "abandon", r.request_id, r.uri, r.owner_key, {"expired_at": r.expires_at})
                for r in dead
            ]
        )
        return live

    def _withdraw(self, txn: StoreTxn, request: RequestRow, now: float) -> bool:
        current = txn.request(request.request_id)
        if current is None or current.status != "waiting":
            return False
        txn.delete_waiter_rows(request.request_id)
        txn.set_request_status(request.request_id, "released", now)
        uris = json.loads(request.payload)["uris"]
        txn.log(
            [
                self._row(now, "release", request.request_id, u, request.owner_key, {"withdrawn": True})
                for u in uris
            ]
        )
        return True

    @staticmethod
    def _row(
        at: float, kind: str, request_id: str, uri: str, owner_key: str, detail: dict[str, Any]
    ) -> DecisionRow:
        return DecisionRow(at, kind, request_id, uri, owner_key, codec.dumps(detail))


def _warn_reclaimed(rows: Sequence[LeaseRow], now: float) -> None:
    """Warn about leases a committed decision reclaimed (not before: an uncommitted body may run again)."""
    for row in rows:
        log.warning(
            "reclaimed expired lease %s on %s held by %s (expired %.1fs ago)",
            row.lease_id,
            row.uri,
            _owner(row.owner_json).describe(),
            now - row.expires_at,
        )


def _sole_holder(
    uri: str, request_id: str, leases: Sequence[LeaseRow], waiters: Sequence[WaiterRow]
) -> LeaseRow | None:
    """The table's only live lease other than the request's own, if nothing is queued on it: the one
    situation whose verdict the manager remembers (ADR 0009, 0010)."""
    holders = [x for x in leases if x.uri == uri and x.lease_id != request_id]
    if len(holders) != 1 or any(w.uri == uri for w in waiters):
        return None
    return holders[0]


def _grant_detail(operation: Operation, owner: str, waited_s: float) -> dict[str, Any]:
    """A grant's log detail without its fencing token (both grant paths log this shape)."""
    return {"operation": operation.describe(), "owner": owner, "waited_s": waited_s}


def _version(config: TableConfig | None) -> int | None:
    return config.version if config is not None else None


def _op_text(operation: Operation) -> str:
    """An operation's stored JSON text.

    Not cached by operation: operations that compare equal may still differ in fields the text keeps (the
    label and SQL are not compared).
    """
    return codec.dumps(codec.operation_to_json(operation))


def _config_text(config: TableConfig | None) -> str | None:
    """A configuration's stored JSON text (not cached by value either: the URI is not compared)."""
    return codec.dumps(codec.config_to_json(config)) if config is not None else None


def _newer(offered: TableConfig, known: TableConfig) -> bool:
    """Whether ``offered`` was read at a later table version than ``known`` (unknown versions are not newer)."""
    return offered.version is not None and (known.version is None or offered.version > known.version)


# Stored owners and operations are immutable values, decoded once per distinct text: a decision reads every
# holder on its tables, and the same few texts come back again and again.
@functools.lru_cache(maxsize=4096)
def _owner(text: str) -> Owner:
    return Owner.from_json(json.loads(text))


@functools.lru_cache(maxsize=4096)
def _op(text: str) -> Operation:
    return codec.operation_from_json(json.loads(text))


def _holder_lease(row: LeaseRow) -> Holder:
    return Holder(row.lease_id, _owner(row.owner_json), _op(row.op_json), granted=True)


def _holder_waiter(row: WaiterRow) -> Holder:
    return Holder(row.request_id, _owner(row.owner_json), _op(row.op_json), granted=False, rank=row.rank)


def _granted(request_id: str, rows: Sequence[LeaseRow]) -> Granted:
    return Granted(request_id, request_id, {r.uri: r.fencing for r in rows}, min(r.expires_at for r in rows))


def _payload(request: LeaseRequest) -> str:
    return codec.dumps(
        {
            "uris": list(request.uris),
            "claims": [
                {
                    "uri": c.uri,
                    "operation": codec.operation_to_json(c.operation),
                    "profile": codec.profile_to_json(c.profile),
                    "config": codec.config_to_json(c.config) if c.config is not None else None,
                }
                for c in request.claims
            ],
            "owner": request.owner.to_json(),
            "ttl_s": request.ttl_s,
            "wait_ttl_s": request.wait_ttl_s,
            "priority": request.priority,
        }
    )


def _request_from_payload(request_id: str, text: str) -> LeaseRequest:
    data = json.loads(text)
    claims = tuple(
        TableClaim(
            uri=c["uri"],
            operation=codec.operation_from_json(c["operation"]),
            profile=_profile(c["profile"]),
            config=codec.config_from_json(c["config"]) if c.get("config") else None,
        )
        for c in data["claims"]
    )
    return LeaseRequest(
        claims=claims,
        owner=Owner.from_json(data["owner"]),
        ttl_s=float(data["ttl_s"]),
        priority=int(data["priority"]),
        request_id=request_id,
        wait_ttl_s=float(data["wait_ttl_s"]),
    )


def _profile(data: dict[str, Any]) -> EngineProfile:
    return codec.profile_from_json(data)
