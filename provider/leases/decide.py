"""One admission decision on a request, under the locks of its tables (or from a snapshot of them).

The rule itself is pure (:func:`deltaguard.core.admission.admit`); this module reads the rows it needs from
a store transaction, reclaims expired leases and abandoned queue entries, applies the answer (lease rows
with new fencing tokens, or queue rows) and logs it. :func:`grant_if_idle` prepares the store's one-call
grant or queue entry for the common cases (ADR 0007, 0009, 0010).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deltaguard.core.admission import (
    DEFAULT_MAX_OVERTAKE_S,
    Admission,
    Blocker,
    DecideFn,
    Granted,
    LeaseRequest,
    Owner,
    TableView,
    Waiting,
    admit,
    queue_rank,
)
from deltaguard.core.operations import Operation
from deltaguard.core.oracle import Unconfirmed, questions_unasked
from deltaguard.core.slots import free_slots, slot_open
from deltaguard.core.table_config import TableConfig
from deltaguard.exceptions import LeaseLostError, LeaseOwnershipError, RequestClosedError
from deltaguard.leases import codec
from deltaguard.leases.codec import owner_from_text
from deltaguard.leases.memo import DecisionMemo, newer
from deltaguard.leases.remote_work import FenceRound, handles_in
from deltaguard.leases.store import (
    DecisionRow,
    IdleGrant,
    LeaseRow,
    LeaseStore,
    QueuedBehind,
    RequestRow,
    StoreTxn,
    TableSnapshot,
    WaiterRow,
)
from deltaguard.leases.views import granted, lease_holder, plain_holders, waiter_holder
from deltaguard.leases.wait_texts import WaitShape, wait_detail, waiting_from_json, waiting_to_json

log = logging.getLogger("deltaguard.leases")

#: the order a decision reads a table's leases (oldest first) and queue (earliest rank first) in
_LEASE_ORDER = operator.attrgetter("granted_at", "lease_id")
_QUEUE_ORDER = operator.attrgetter("rank", "request_id")
_EXPIRES = operator.attrgetter("expires_at")


@dataclass(frozen=True)
class Ask:
    """One request being decided, with what was prepared for it before any lock.

    :param request: the request.
    :param now: the decision's time.
    :param offered: the configuration the manager knows per table (offered or loaded), or ``None``.
    :param payload: the request's stored text (:func:`deltaguard.leases.codec.request_payload`).
    :param op_texts: each table's operation as stored JSON text, by URI.
    :param ageing_s: seconds of waiting worth one priority level.
    :param max_overtake_s: a queued request that has waited longer is never backfilled past (ADR 0017).
    """

    request: LeaseRequest
    now: float
    offered: Mapping[str, TableConfig | None]
    payload: str
    op_texts: Mapping[str, str]
    ageing_s: float
    max_overtake_s: float = DEFAULT_MAX_OVERTAKE_S


def decide_locked(
    txn: StoreTxn,
    ask: Ask,
    memo: DecisionMemo,
    decide: DecideFn,
    reclaimed: list[LeaseRow],
    *,
    renew: bool = True,
    fences: FenceRound | None = None,
    slots: int | None = None,
) -> Granted | Waiting:
    """Decide ``ask`` in ``txn`` and write the answer. May run twice (a retried transaction, or a snapshot
    decision redone under the locks), so ``reclaimed`` is cleared first and only warned about after commit.

    :param renew: whether a request that still waits gets a fresh queue-entry life (``wait_ttl_s`` from
        now). Its own check renews it; a decision made for it by someone else (the re-admission of a
        table's queue after a release, :mod:`~deltaguard.leases.readmit`) keeps its expiry, so a waiter
        nobody asks for any more is still abandoned on time.
    :param fences: which expired leases with fence handles were confirmed stopped; the ones not confirmed
        stay held and are added to its ``pending`` (ADR 0033).
    :param slots: the slot gate (:mod:`deltaguard.core.slots`): the worker slots leased writes run in. A
        request the conflict model admits while as many leases are held waits behind them instead
        (``None``: no gate).

    :raises LeaseOwnershipError: the request id belongs to another owner.
    :raises LeaseLostError: the request was granted but its lease expired.
    :raises RequestClosedError: the request already ended.
    :raises ValueError: no configuration is known for a table.
    """
    request, now, offered, payload, op_texts = ask.request, ask.now, ask.offered, ask.payload, ask.op_texts
    claims = {c.uri: c for c in request.claims}
    reclaimed.clear()
    all_leases, all_waiters = txn.holders()
    fences = fences if fences is not None else FenceRound()
    leases = reclaim_leases(txn, all_leases, now, reclaimed, fences)
    waiters = reclaim_waiters(txn, all_waiters, now)
    # Oldest first, whichever order the store read them in: blockers and reasons list them so.
    leases.sort(key=_LEASE_ORDER)
    waiters.sort(key=_QUEUE_ORDER)
    existing = txn.request(request.request_id)
    if existing is not None and existing.owner_key == request.owner.key and existing.status == "granted":
        mine = [lease for lease in leases if lease.lease_id == request.request_id]
        if len(mine) == len(claims):
            return granted(request.request_id, mine)
        raise LeaseLostError(f"lease {request.request_id} expired; stop writing and ask again")
    rank, enqueued_at = queue_place(existing, ask)
    configs, config_texts = resolve_configs(txn, request, offered, memo)
    views = _views(txn, request, configs, leases, waiters)
    verdict = admit(
        request.request_id,
        rank,
        views,
        decide,
        now=now,
        expected_duration_s=request.expected_duration_s,
        max_overtake_s=ask.max_overtake_s,
    )
    key = request.owner.key  # also the owner's stored JSON text
    # A verdict reached with statistics also rests on the holders' read versions, which the remembered
    # key (operation and configuration texts) does not capture: it is not remembered either way.
    with_stats = any(c.file_stats is not None for c in configs.values())
    full = slots_full(txn, slots, now, request.request_id) if verdict.granted else None
    gated = full is not None
    if full is not None:
        verdict = slot_wait(full)
    if verdict.granted:
        if not with_stats and not questions_unasked():
            memo.learn_compatible(request, op_texts, config_texts, leases, waiters)
        return write_grant(txn, ask, rank, enqueued_at, queued=existing is not None)
    expires = now + request.wait_ttl_s
    if not renew and existing is not None and existing.status == "waiting":
        expires = existing.expires_at
    # A lease kept past its expiry because its holder's server-side work is not confirmed stopped says so.
    kept = [text for b in verdict.blockers if (text := fences.reason(b.id, b.owner.describe())) is not None]
    result = Waiting(
        request.request_id,
        verdict.position,
        verdict.blockers,
        tuple(dict.fromkeys([*kept, *verdict.reasons])),
        verdict.advice,
        verdict.exceptions,
        expires,
    )
    # a slot wait is no conflict to remember, nor one resting on a question no engine was asked
    if existing is None and not with_stats and not gated and not questions_unasked():
        memo.learn_conflicting(request, op_texts, config_texts, leases, waiters, result)
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
        RequestRow(request.request_id, key, "waiting", rank, enqueued_at, expires, payload, now, last_wait)
    )
    before = waiting_from_json("", 0.0, existing.last_wait) if existing and existing.last_wait else None
    if existing is None or existing.status != "waiting" or new_blockers(before, verdict.blockers):
        detail = wait_detail(result)
        txn.log([log_row(now, "wait", request.request_id, uri, key, detail) for uri in request.uris])
    return result


def held_leases(txn: StoreTxn, slots: int | None, now: float) -> list[LeaseRow] | None:
    """Every live lease the slot gate counts, read in ``txn`` (``None``: no gate)."""
    if slots is None:
        return None
    return txn.live_leases(now)


def slots_left(txn: StoreTxn, slots: int | None, now: float) -> int | None:
    """How many more leases the slot gate allows now (:func:`deltaguard.core.slots.free_slots`)."""
    held = held_leases(txn, slots, now)
    return None if held is None else free_slots(slots, len({row.lease_id for row in held}))


def slots_full(txn: StoreTxn, slots: int | None, now: float, mine: str) -> list[LeaseRow] | None:
    """The leases filling the worker slots when the gate is closed for ``mine``'s grant, else ``None``."""
    held = held_leases(txn, slots, now)
    if held is None:
        return None
    held = [row for row in held if row.lease_id != mine]
    return None if slot_open(slots, len({row.lease_id for row in held})) else held


def slot_wait(holders: Sequence[LeaseRow]) -> Admission:
    """The wait of a request the conflict model admits while the worker slots are full: behind every lease
    that fills them (any one's release frees a slot, and wakes a trigger watching them)."""
    blockers: dict[str, Blocker] = {}
    for row in sorted(holders, key=_LEASE_ORDER):
        if row.lease_id not in blockers:
            holder = lease_holder(row)
            blockers[row.lease_id] = Blocker(
                row.uri, row.lease_id, holder.owner, "slot", holder.operation.describe()
            )
    reason = f"all worker slots are taken by the {len(blockers)} writes holding leases (slot gate)"
    return Admission(False, 1, tuple(blockers.values()), (reason,))


def queue_place(existing: RequestRow | None, ask: Ask) -> tuple[float, float]:
    """The request's queue rank and first enqueue time: a live queue entry keeps its own, anything else
    queues now.

    :param existing: the request's status row (``None``: new), not ``granted`` (its caller answers that).
    :raises LeaseOwnershipError: the request id belongs to another owner.
    :raises RequestClosedError: the request already ended.
    """
    request, now = ask.request, ask.now
    rank = queue_rank(now, request.priority, ask.ageing_s)
    if existing is None:
        return rank, now
    if existing.owner_key != request.owner.key:
        raise LeaseOwnershipError(f"request {request.request_id} belongs to another owner")
    if existing.status in ("released", "expired"):
        raise RequestClosedError(f"request {request.request_id} is {existing.status}; use a new request id")
    if existing.status == "waiting" and existing.expires_at > now:
        return existing.rank, existing.enqueued_at
    return rank, now


def resolve_configs(
    txn: StoreTxn,
    request: LeaseRequest,
    offered: Mapping[str, TableConfig | None],
    memo: DecisionMemo,
) -> tuple[dict[str, TableConfig], dict[str, str]]:
    """Each table's configuration for a decision, and the text of each one used: the newest known version
    wins (the request's, stored as the table's shared copy when newer, or the store's).

    :raises ValueError: no configuration is known for a table.
    """
    tables = txn.tables()
    configs: dict[str, TableConfig] = {}
    config_texts: dict[str, str] = {}
    for uri in request.uris:
        stored_text = tables[uri].config_json
        stored = memo.stored_config(uri, stored_text)
        mine_cfg = offered[uri]
        if mine_cfg is not None and (stored is None or newer(mine_cfg, stored)):
            config_texts[uri] = codec.dumps(codec.config_to_json(mine_cfg))
            txn.set_table(uri, tables[uri].fencing, mine_cfg.version, config_texts[uri])
            configs[uri] = mine_cfg
        elif stored is not None and stored_text is not None:
            # The stored text carries no file statistics and no engine evaluator (ADR 0037): the request's
            # own copy of the same snapshot may.
            same = (
                mine_cfg is not None
                and (mine_cfg.file_stats is not None or _evaluated(mine_cfg))
                and mine_cfg.version == stored.version
            )
            configs[uri] = mine_cfg if same and mine_cfg is not None else stored
            config_texts[uri] = stored_text
        else:
            raise ValueError(
                f"no table configuration known for {uri}: pass TableClaim.config or a config_loader"
            )
    return configs, config_texts


def _evaluated(config: TableConfig) -> bool:
    """Whether ``config`` carries an engine's evaluator that can answer (not a stand-in that refuses)."""
    return config.meaning is not None and not isinstance(config.meaning, Unconfirmed)


def write_grant(txn: StoreTxn, ask: Ask, rank: float, enqueued_at: float, *, queued: bool) -> Granted:
    """Write the grant of ``ask``: a lease row per table with the table's next fencing token, its status
    row, the grant's log entries (and, when ``queued``, drop its queue rows)."""
    request, now = ask.request, ask.now
    claims = {c.uri: c for c in request.claims}
    key = request.owner.key  # also the owner's stored JSON text
    tables = txn.tables()
    expires = now + request.ttl_s
    rows = []
    for uri in request.uris:
        token = tables[uri].fencing + 1
        txn.set_table(uri, token, tables[uri].config_version, tables[uri].config_json)
        rows.append(
            LeaseRow(request.request_id, uri, key, key, ask.op_texts[uri], now, expires, token, request.ttl_s)
        )
    txn.insert_lease_rows(rows)
    if queued:
        txn.delete_waiter_rows(request.request_id)
    txn.put_request(
        RequestRow(request.request_id, key, "granted", rank, enqueued_at, expires, ask.payload, now)
    )
    txn.log(
        [
            log_row(
                now,
                "grant",
                request.request_id,
                r.uri,
                key,
                {
                    "fencing": r.fencing,
                    **_grant_detail(
                        claims[r.uri].operation, request.owner.describe(), round(now - enqueued_at, 3)
                    ),
                },
            )
            for r in rows
        ]
    )
    return granted(request.request_id, rows)


def grant_admitted(
    txn: StoreTxn,
    ask: Ask,
    memo: DecisionMemo,
    leases: Sequence[LeaseRow],
    waiters: Sequence[WaiterRow],
) -> Granted:
    """Grant a queued request whose admission is known to grant, with exactly the writes (and what the
    manager learns) of :func:`decide_locked`'s grant, without asking the admission rule again.

    For the re-admission of a table's queue (:mod:`~deltaguard.leases.readmit`), which proves such a grant
    for a run of waiters at once. ``leases`` and ``waiters`` are the table's live rows as a decision would
    read them now (only looked at, for the sole-holder memory).

    :raises LeaseOwnershipError: the request id belongs to another owner.
    :raises RequestClosedError: the request already ended.
    :raises ValueError: no configuration is known for a table.
    """
    request = ask.request
    existing = txn.request(request.request_id)
    rank, enqueued_at = queue_place(existing, ask)
    configs, config_texts = resolve_configs(txn, request, ask.offered, memo)
    if not any(c.file_stats is not None for c in configs.values()) and not questions_unasked():
        memo.learn_compatible(request, ask.op_texts, config_texts, leases, waiters)
    return write_grant(txn, ask, rank, enqueued_at, queued=existing is not None)


def _views(
    txn: StoreTxn,
    request: LeaseRequest,
    configs: Mapping[str, TableConfig],
    leases: Sequence[LeaseRow],
    waiters: Sequence[WaiterRow],
) -> list[TableView]:
    """What the admission rule sees of the request's tables.

    Holders carry their duration estimates and start times only when the request has an estimate of its
    own and someone else is queued on its tables: only then can backfilling change the answer (ADR 0017).
    Otherwise the rule is FIFO among conflicting requests, as it always was, and nothing more is read.
    """
    durations: dict[str, float | None] = {}
    enqueued: dict[str, float] = {}
    pinned: dict[str, Mapping[str, int]] = {}  # lease id -> its read version per table
    ids: set[str] = set()
    estimates = request.expected_duration_s is not None and any(
        w.request_id != request.request_id for w in waiters
    )
    if estimates:
        ids = {x.lease_id for x in leases} | {w.request_id for w in waiters}
    # File statistics may decide only against leases whose read versions are known (ADR 0020).
    stats = any(c.file_stats is not None for c in configs.values())
    if stats:
        ids |= {x.lease_id for x in leases}
    ids.discard(request.request_id)
    if ids:
        for row in txn.requests(sorted(ids)):
            if estimates:
                durations[row.request_id] = codec.payload_duration(row.payload)
                enqueued[row.request_id] = row.enqueued_at
            if stats:
                pinned[row.request_id] = codec.payload_read_versions(row.payload)
    claims = {c.uri: c for c in request.claims}
    if not ids:  # no estimates, no read versions: every holder is its row's plain holder
        kept = getattr(txn, "kept_holders", None)  # a view kept across decisions (readmit.CrowdTxn)
        found = (
            kept(request.uris[0], leases, waiters) if kept is not None and len(request.uris) == 1 else None
        )
        return [
            TableView(
                uri=uri,
                operation=claims[uri].operation,
                config=configs[uri],
                profile=claims[uri].profile,
                granted=found[0]
                if found
                else plain_holders([x for x in leases if x.uri == uri], lease_holder),
                waiting=found[1]
                if found
                else plain_holders([w for w in waiters if w.uri == uri], waiter_holder),
                read_version=claims[uri].read_version,
            )
            for uri in request.uris
        ]
    return [
        TableView(
            uri=uri,
            operation=claims[uri].operation,
            config=configs[uri],
            profile=claims[uri].profile,
            granted=[
                lease_holder(x, durations.get(x.lease_id), pinned.get(x.lease_id, {}).get(uri))
                for x in leases
                if x.uri == uri
            ],
            waiting=[
                waiter_holder(w, enqueued.get(w.request_id), durations.get(w.request_id))
                for w in waiters
                if w.uri == uri
            ],
            read_version=claims[uri].read_version,
        )
        for uri in request.uris
    ]


def new_blockers(before: Waiting | None, blockers: Sequence[Blocker]) -> bool:
    """Whether a wait is worth a decision-log entry: it has a blocker its last answer did not have.

    A poll of an unchanged wait, or one whose blockers only left (a holder released, a request ahead was
    granted: the same id, now a lease), changes nothing a reader of the log needs; the current answer is
    the request row's ``last_wait``, rewritten in place on every poll. Logging every such poll made a busy
    table's log grow by one ~3 KB entry per waiter per grant ahead of it.
    """
    if before is None:
        return True
    known = {(b.table, b.id) for b in before.blockers}
    return any((b.table, b.id) not in known for b in blockers)


def grant_if_idle(
    store: LeaseStore, memo: DecisionMemo, ask: Ask
) -> Granted | Waiting | TableSnapshot | None:
    """The store's one-step grant when none of the tables has a holder or a queued request (or the
    store's one-step queue entry behind a holder whose wait answer the model gave before, ADR 0010).

    Then :func:`~deltaguard.core.admission.admit` grants without asking the model, so the store can
    check and grant in one call. Otherwise the store answers with a snapshot of the busy tables (to
    decide from without locking) or ``None``.
    """
    request, now, offered, payload, op_texts = ask.request, ask.now, ask.offered, ask.payload, ask.op_texts
    uris = tuple(sorted(request.uris))
    claims = {c.uri: c for c in request.claims}
    owner = request.owner.describe()
    config_texts = tuple(codec.config_text(offered[u]) for u in uris)
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
        rank=queue_rank(now, request.priority, ask.ageing_s),
        payload=payload,
        # The store adds "fencing" (sorted first) with the new token.
        details=tuple(codec.dumps(_grant_detail(claims[u].operation, owner, 0.0)) for u in uris),
        compatible=tuple(
            tuple(memo.compatible.get((op_texts[u], text, claims[u].profile), ())) if text else ()
            for u, text in zip(uris, config_texts, strict=True)
        ),
    )
    known: Mapping[str, WaitShape] | None = None
    expires_at = now + request.wait_ttl_s
    offered_stats = any(getattr(offered[u], "file_stats", None) is not None for u in uris)
    # A wait remembered without statistics may not be the answer with them: decide those in full.
    if len(uris) == 1 and config_texts[0] and not offered_stats:
        known = memo.conflicting.get((op_texts[uris[0]], config_texts[0], claims[uris[0]].profile))
        if known:
            grant = dataclasses.replace(
                grant,
                waits={holder: shape.pieces_for(uris[0]) for holder, shape in known.items()},
                wait_expires_at=expires_at,
            )
    answer = store.grant_if_idle(grant)
    if isinstance(answer, dict):
        return Granted(request.request_id, request.request_id, answer, grant.expires_at)
    if isinstance(answer, QueuedBehind):
        assert known is not None  # the store queues only behind a holder it was sent
        shape = known[answer.op_json]
        return shape.waiting(
            request.request_id, answer.uri, answer.lease_id, owner_from_text(answer.owner_json), expires_at
        )
    return answer


def reclaim_leases(
    txn: StoreTxn,
    rows: Sequence[LeaseRow],
    now: float,
    reclaimed: list[LeaseRow],
    fences: FenceRound | None = None,
) -> list[LeaseRow]:
    """Delete expired lease rows (of the locked tables) and put them in the decision log with their dead
    owner; append them to ``reclaimed`` (for :func:`warn_reclaimed` after commit); return the rest.

    An expired lease whose request carries fence handles (server-side work, ADR 0033) is reclaimed only
    when ``fences`` confirmed that work stopped; otherwise it stays held (returned with the live ones) and
    is put in ``fences.pending`` for the caller to fence after the transaction. Its payload is read only
    when some lease expired, so a decision without expired leases reads nothing more.
    """
    if min(map(_EXPIRES, rows), default=math.inf) > now:  # the common case, without a Python step per row
        return list(rows)
    dead = [row for row in rows if row.expires_at <= now]
    live = [row for row in rows if row.expires_at > now]
    if dead:
        fences = fences if fences is not None else FenceRound()
        payloads = {r.request_id: r.payload for r in txn.requests(sorted({r.lease_id for r in dead}))}
        kept: set[str] = set()
        for lease_id in {r.lease_id for r in dead}:
            if lease_id in fences.confirmed:
                continue
            try:
                handles = handles_in(payloads.get(lease_id) or "{}")
            except ValueError:  # unreadable handles: the work is unknown, so it counts as running
                handles = [{"kind": "unknown", "endpoint": "?", "tag": "?"}]
            if handles:
                kept.add(lease_id)
                owner = next(r.owner_json for r in dead if r.lease_id == lease_id)
                fences.pending[lease_id] = (owner, handles)
        live += [r for r in dead if r.lease_id in kept]
        dead = [r for r in dead if r.lease_id not in kept]
    for row in dead:
        txn.delete_lease_rows(row.lease_id, [row.uri])
        txn.set_request_status(row.lease_id, "expired", now)
    reclaimed.extend(dead)
    txn.log(
        [
            log_row(
                now,
                "expiry",
                r.lease_id,
                r.uri,
                r.owner_key,
                {
                    "dead_owner": owner_from_text(r.owner_json).to_json(),
                    "expired_at": r.expires_at,
                    "fencing": r.fencing,
                    # why the table may be handed over: a fence confirmed the recorded server-side work
                    # ended, or none was outstanding (never recorded, or dropped by a holder that saw it
                    # end) (ADR 0033)
                    "server_work": (fences or FenceRound()).server_work(r.lease_id),
                },
            )
            for r in dead
        ]
    )
    return live


def reclaim_waiters(txn: StoreTxn, rows: Sequence[WaiterRow], now: float) -> list[WaiterRow]:
    """Delete expired queue rows (requests nobody asked about within their wait ttl), log them as
    abandoned, and return the rest."""
    if min(map(_EXPIRES, rows), default=math.inf) > now:  # the common case, without a Python step per row
        return list(rows)
    dead = [row for row in rows if row.expires_at <= now]
    live = [row for row in rows if row.expires_at > now]
    for row in dead:
        txn.delete_waiter_rows(row.request_id, [row.uri])
        txn.set_request_status(row.request_id, "abandoned", now)
    txn.log(
        [
            log_row(now, "abandon", r.request_id, r.uri, r.owner_key, {"expired_at": r.expires_at})
            for r in dead
        ]
    )
    return live


def withdraw(txn: StoreTxn, request: RequestRow, now: float) -> bool:
    current = txn.request(request.request_id)
    if current is None or current.status != "waiting":
        return False
    txn.delete_waiter_rows(request.request_id)
    txn.set_request_status(request.request_id, "released", now)
    uris = json.loads(request.payload)["uris"]
    txn.log(
        [log_row(now, "release", request.request_id, u, request.owner_key, {"withdrawn": True}) for u in uris]
    )
    return True


def log_row(
    at: float, kind: str, request_id: str, uri: str, owner_key: str, detail: dict[str, Any]
) -> DecisionRow:
    return DecisionRow(at, kind, request_id, uri, owner_key, codec.dumps(detail))


def warn_reclaimed(rows: Sequence[LeaseRow], now: float) -> None:
    """Warn about leases a committed decision reclaimed (not before: an uncommitted body may run again)."""
    for row in rows:
        log.warning(
            "reclaimed expired lease %s on %s held by %s (expired %.1fs ago)",
            row.lease_id,
            row.uri,
            owner_from_text(row.owner_json).describe(),
            now - row.expires_at,
        )


def refuse(txn: StoreTxn, lease_id: str, uris: Sequence[str], owner: Owner, now: float) -> None:
    detail = {"reason": "release by another owner refused", "by": owner.describe()}
    txn.log([log_row(now, "refuse", lease_id, u, owner.key, detail) for u in uris])


def _grant_detail(operation: Operation, owner: str, waited_s: float) -> dict[str, Any]:
    """A grant's log detail without its fencing token (both grant paths log this shape)."""
    return {"operation": operation.describe(), "owner": owner, "waited_s": waited_s}


def _version(config: TableConfig | None) -> int | None:
    return config.version if config is not None else None
