"""Admission decisions: may a write request start now, given what is granted and queued on its tables?

This module is pure: the lease stores hand it the granted leases and waiting requests on the tables a
request names; it asks the conflict model and answers granted or waiting (with position, blockers and the
model's reasons). The policy is FIFO among conflicting requests with reservations and backfilling (ADR 0017,
where the rules, the starvation bound and its proof are):

* a request is granted only if, on every table it names, it is compatible with every granted lease (this
  alone carries soundness: backfilling only changes the *order* of compatible-with-running writes);
* and, for every *earlier* waiting request it conflicts with, either it waits (FIFO), or it *backfills*: it
  is expected to end before that request's *reservation* (when its blockers are expected to end), which has
  waited at most ``max_overtake_s``; an unknown duration is infinite, so without estimates the policy is
  exactly FIFO among conflicting requests;
* a request compatible with everything ahead of it is not held back;
* all-or-nothing across tables.

"Earlier" is the queue rank ``enqueued_at - priority * ageing_s``; the order of two queued requests never
changes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import operator
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from deltaguard.core.decision import Decision, DeltaException
from deltaguard.core.operations import METADATA_CHANGES, Operation
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.stats_freshness import stats_unusable
from deltaguard.core.table_config import TableConfig

_T = TypeVar("_T")

#: The conflict model's signature (``deltaguard.core.model.decide``).
DecideFn = Callable[[Operation, Sequence[Operation], TableConfig, EngineProfile], Decision]

#: Priorities are bounded so the ageing guarantee (bounded overtaking) holds.
MIN_PRIORITY = -100
MAX_PRIORITY = 100

#: Default seconds of waiting worth one priority level.
DEFAULT_AGEING_S = 60.0

#: Default longest wait of a queued request during which later conflicting requests may backfill past it.
DEFAULT_MAX_OVERTAKE_S = 600.0

METADATA_REASON = (
    "a metadata change (properties, protocol, schema) is exclusive: it makes every concurrent write fail"
)


def default_decide() -> DecideFn:
    """The real conflict model, imported lazily so this module does not depend on it at import time."""
    from deltaguard.core import model

    decide: DecideFn = model.decide
    return decide


@dataclass(frozen=True)
class Owner:
    """Who holds or waits for a lease. Generic; for Airflow the fields are the task instance's identity.

    :param dag_id: Airflow DAG id (or any grouping name).
    :param run_id: Airflow run id.
    :param task_id: Airflow task id (or any worker name).
    :param map_index: Airflow map index (``-1`` when not mapped).
    :param try_number: Airflow try number; a retry is a different owner.
    :param name: a free-form owner name for non-Airflow callers.
    """

    dag_id: str = ""
    run_id: str = ""
    task_id: str = ""
    map_index: int = -1
    try_number: int = 0
    name: str = ""

    def __post_init__(self) -> None:
        if not (self.dag_id or self.task_id or self.name):
            raise ValueError("an owner needs at least a name, a dag_id or a task_id")

    @functools.cached_property
    def key(self) -> str:
        """A canonical string identity (owners are compared by it); also the owner's stored JSON text.

        Computed once per owner: every decision and release compares and stores it.
        """
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    def to_json(self) -> dict[str, Any]:
        return {
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "task_id": self.task_id,
            "map_index": self.map_index,
            "try_number": self.try_number,
            "name": self.name,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Owner:
        return cls(
            dag_id=str(data.get("dag_id", "")),
            run_id=str(data.get("run_id", "")),
            task_id=str(data.get("task_id", "")),
            map_index=int(data.get("map_index", -1)),
            try_number=int(data.get("try_number", 0)),
            name=str(data.get("name", "")),
        )

    def describe(self) -> str:
        """Short human name: ``dag.task[map]`` (or the free-form name)."""
        if self.name:
            return self.name
        text = ".".join(part for part in (self.dag_id, self.task_id) if part)
        return f"{text}[{self.map_index}]" if self.map_index >= 0 else text


@dataclass(frozen=True)
class TableClaim:
    """One table a request writes.

    :param uri: the table's URI (the lock key; use one canonical spelling per table).
    :param operation: the write.
    :param profile: the engine that commits it.
    :param config: the table's configuration as the requester read it (may be omitted when the lease
        manager has a configuration loader or already knows the table).
    :param read_version: the table version the write reads and commits from, when it pins one (``None``:
        not pinned). File statistics in ``config`` are used only when they are of this version (ADR 0020).
    """

    uri: str
    operation: Operation
    profile: EngineProfile
    config: TableConfig | None = None
    read_version: int | None = None

    def __post_init__(self) -> None:
        if not self.uri or not self.uri.strip():
            raise ValueError("a table claim needs a non-empty uri")


@dataclass(frozen=True)
class LeaseRequest:
    """A request to start a write on one or more tables (all-or-nothing).

    :param claims: the tables, each with its operation.
    :param owner: who asks.
    :param ttl_s: the lease's time-to-live; heartbeats extend it.
    :param priority: between :data:`MIN_PRIORITY` and :data:`MAX_PRIORITY` (default 0).
    :param request_id: a stable id; asking again with the same id keeps the queue place (and returns the
        same lease once granted). The lease id equals the request id.
    :param wait_ttl_s: how long a queued request stays queued without asking again.
    :param expected_duration_s: how long the write is expected to hold its lease (an estimate; ``None``:
        unknown, so the request never backfills past an earlier conflicting one).
    """

    claims: tuple[TableClaim, ...]
    owner: Owner
    ttl_s: float = 300.0
    priority: int = 0
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    wait_ttl_s: float = 120.0
    expected_duration_s: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "claims", tuple(self.claims))
        if not self.claims:
            raise ValueError("a lease request must name at least one table")
        uris = [c.uri for c in self.claims]
        if len(set(uris)) != len(uris):
            raise ValueError(f"a lease request names a table twice: {sorted(uris)}")
        if not self.ttl_s > 0 or not self.wait_ttl_s > 0:
            raise ValueError(f"ttl_s and wait_ttl_s must be positive, got {self.ttl_s} and {self.wait_ttl_s}")
        if not self.request_id:
            raise ValueError("request_id must be non-empty")
        check_priority(self.priority)
        check_expected_duration(self.expected_duration_s)

    @property
    def uris(self) -> tuple[str, ...]:
        return tuple(sorted(c.uri for c in self.claims))


@dataclass(frozen=True)
class Holder:
    """A granted lease or a waiting request on one table.

    :param id: the lease id / request id.
    :param owner: who holds or waits.
    :param operation: what it writes on this table.
    :param granted: ``True`` for a lease, ``False`` for a queued request.
    :param rank: queue rank (waiting requests only; lower is earlier).
    :param since: when the lease was granted, or when the request was first enqueued (seconds; ``None``:
        unknown, which disables backfilling that depends on it).
    :param expected_duration_s: how long the write is expected to hold its lease once granted (an
        estimate; ``None``: unknown, i.e. infinite).
    :param read_version: the table version its write reads (``None``: unknown or not pinned).
    """

    id: str
    owner: Owner
    operation: Operation
    granted: bool
    rank: float = 0.0
    since: float | None = None
    expected_duration_s: float | None = None
    read_version: int | None = None


@dataclass(frozen=True)
class TableView:
    """One table a request names, with everything admitted or queued on it.

    :param uri: the table.
    :param operation: the candidate's operation on it.
    :param config: the table's current configuration.
    :param profile: the engine that commits the candidate's write.
    :param granted: unexpired granted leases on the table.
    :param waiting: unexpired queued requests on the table (the candidate itself may be among them).
    :param read_version: the table version the candidate's write reads (``None``: not pinned).
    """

    uri: str
    operation: Operation
    config: TableConfig
    profile: EngineProfile
    granted: Sequence[Holder] = ()
    waiting: Sequence[Holder] = ()
    read_version: int | None = None


@dataclass(frozen=True)
class Blocker:
    """Something the request must wait for.

    :param table: the table on which it blocks.
    :param id: the lease id or request id.
    :param owner: its owner.
    :param kind: ``lease`` (granted), ``waiting`` (an earlier queued request) or ``slot`` (a lease filling
        a worker slot while the slot gate is closed, :mod:`deltaguard.core.slots`: no conflict, only
        capacity).
    :param operation: its operation's description.
    """

    table: str
    id: str
    owner: Owner
    kind: Literal["lease", "waiting", "slot"]
    operation: str


@dataclass(frozen=True)
class Admission:
    """The pure verdict for one request.

    :param granted: whether it may start now.
    :param position: 1 + the number of queued requests ranked ahead of it on its tables (0 when granted).
    :param blockers: what it waits for.
    :param reasons: the conflict model's reasons.
    :param advice: the conflict model's advice.
    :param exceptions: exceptions the conflicts could raise.
    """

    granted: bool
    position: int = 0
    blockers: tuple[Blocker, ...] = ()
    reasons: tuple[str, ...] = ()
    advice: tuple[str, ...] = ()
    exceptions: tuple[DeltaException, ...] = ()


@dataclass(frozen=True)
class Granted:
    """A granted lease.

    :param request_id: the request (equal to the lease id).
    :param lease_id: the lease.
    :param fencing: per table, a token that increases with every grant on that table; writers can pass it
        along so a stale holder (whose lease expired) is recognisable.
    :param expires_at: when the lease expires unless renewed by a heartbeat.
    """

    request_id: str
    lease_id: str
    fencing: Mapping[str, int]
    expires_at: float
    status: Literal["granted"] = "granted"


@dataclass(frozen=True)
class Waiting:
    """A queued request.

    :param request_id: the request.
    :param position: its queue position (see :class:`Admission`).
    :param blockers: what it waits for.
    :param reasons: the conflict model's reasons.
    :param advice: the conflict model's advice.
    :param exceptions: exceptions the conflicts could raise.
    :param expires_at: when the queue entry is dropped unless the request polls again.
    """

    request_id: str
    position: int
    blockers: tuple[Blocker, ...]
    reasons: tuple[str, ...]
    advice: tuple[str, ...]
    exceptions: tuple[DeltaException, ...]
    expires_at: float
    status: Literal["waiting"] = "waiting"


@dataclass(frozen=True)
class Closed:
    """A request that no longer waits or holds a lease.

    :param status: ``released``, ``expired`` (its lease was reclaimed), ``abandoned`` (its queue entry
        expired) or ``unknown``.
    """

    request_id: str
    status: Literal["released", "expired", "abandoned", "unknown"]
    detail: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


def queue_rank(enqueued_at: float, priority: int, ageing_s: float = DEFAULT_AGEING_S) -> float:
    """The queue rank of a request (lower is earlier): its arrival time moved earlier by its priority.

    :param enqueued_at: when the request first arrived (seconds).
    :param priority: between :data:`MIN_PRIORITY` and :data:`MAX_PRIORITY`.
    :param ageing_s: seconds of waiting worth one priority level (must be positive).
    """
    check_priority(priority)
    if ageing_s <= 0:
        raise ValueError(f"ageing_s must be positive, got {ageing_s}")
    return enqueued_at - priority * ageing_s


def check_priority(priority: int) -> None:
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"priority must be an int, got {priority!r}")
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise ValueError(f"priority must be between {MIN_PRIORITY} and {MAX_PRIORITY}, got {priority}")


def check_expected_duration(seconds: float | None) -> None:
    if seconds is not None and not (isinstance(seconds, int | float) and 0 <= seconds < math.inf):
        raise ValueError(f"expected_duration_s must be a finite number >= 0 or None, got {seconds!r}")


def admit(
    request_id: str,
    rank: float,
    tables: Sequence[TableView],
    decide: DecideFn,
    *,
    now: float | None = None,
    expected_duration_s: float | None = None,
    max_overtake_s: float = DEFAULT_MAX_OVERTAKE_S,
    backfill_slack: float = 0.0,
) -> Admission:
    """Decide whether a request may start now (the policy and its wait bound: see the module docstring).

    :param request_id: the request's id (it is skipped when found among the waiting requests).
    :param rank: its queue rank (:func:`queue_rank`).
    :param tables: every table it names, with granted leases and queued requests.
    :param decide: the conflict model.
    :param now: the current time, on the clock of the holders' ``since`` (``None``: no backfilling).
    :param expected_duration_s: the request's expected duration (``None``: unknown, no backfilling).
    :param max_overtake_s: a queued request that has waited longer than this is never backfilled past.
    :param backfill_slack: how much of its own estimate a backfilling request may run past the reservation
        of a request it passes, between 0 (default: it must end by the reservation) and 1 (it need only
        start before it). Passing a request that is about to start anyway, with writes of about the same
        length whose estimates are off by up to 30 %, is a coin toss at 0; a slack lets writes that arrive
        together run together instead of in rounds. The wait bound does not depend on it.
    :raises ValueError: when the request names no table or a table twice, or on a slack outside [0, 1].
    """
    if not tables:
        raise ValueError("a request must name at least one table")
    uris = [t.uri for t in tables]
    if len(set(uris)) != len(uris):
        raise ValueError(f"a request names a table twice: {sorted(uris)}")
    check_expected_duration(expected_duration_s)
    if not 0.0 <= backfill_slack <= 1.0:
        raise ValueError(f"backfill_slack must be within [0, 1], got {backfill_slack!r}")
    # The latest end that still counts as ending by a reservation: the slack is taken off the request's end.
    expected_end = (
        None
        if now is None or expected_duration_s is None
        else now + (1.0 - backfill_slack) * expected_duration_s
    )
    blockers: list[Blocker] = []
    reasons: list[str] = []
    advice: list[str] = []
    exceptions: list[DeltaException] = []
    ahead_ids: set[str] = set()
    for view in sorted(tables, key=lambda t: t.uri):
        view, stats_note = fresh_stats_view(view, request_id)
        # who is ahead: a lower rank, ties broken by id so every process orders the queue the same way
        # (inline: a decision in a long queue asks it of every waiter); the request is not ahead of itself
        earlier = [
            w
            for w in view.waiting
            if (w.rank < rank or (w.rank == rank and w.id < request_id)) and w.id != request_id
        ]
        ahead_ids.update(w.id for w in earlier)
        leases = [h for h in view.granted if h.id != request_id]
        running: list[Holder] = leases + earlier
        if not running:
            continue
        decision, hit, meta_only = _conflicts(view.operation, running, view, decide)
        if hit and expected_end is not None and now is not None and min(hit) >= len(leases):
            # Blocked only by earlier waiting requests: backfill if it ends before each one's reservation.
            schedule = _Reservations(view, request_id, decide)
            if all(_may_overtake(running[i], now, expected_end, max_overtake_s, schedule) for i in hit):
                continue
        if not hit:
            continue
        if meta_only:
            reasons.append(METADATA_REASON)
            exceptions.append(DeltaException.METADATA_CHANGED)
        for i in sorted(hit):
            h = running[i]
            blockers.append(
                Blocker(view.uri, h.id, h.owner, "lease" if h.granted else "waiting", h.operation.describe())
            )
        # The model also explains compatible pairs; only the conflicts explain a wait.
        reasons.extend(r for r in decision.reasons if not r.startswith("compatible"))
        if stats_note:
            reasons.append(stats_note)
        advice.extend(decision.advice)
        exceptions.extend(decision.exceptions)
    if not blockers:
        return Admission(granted=True)
    return Admission(
        granted=False,
        position=len(ahead_ids) + 1,
        blockers=tuple(blockers),
        reasons=_unique(reasons),
        advice=_unique(advice),
        exceptions=_unique(exceptions),
    )


def fresh_stats_view(view: TableView, request_id: str) -> tuple[TableView, str | None]:
    """``view`` without its file statistics when they may not decide (and why), else ``view`` unchanged.

    Soundness of the statistics rule needs statistics of the very snapshot the candidate writes from, and
    no newer than any granted write's snapshot (:mod:`deltaguard.core.stats_freshness`).
    """
    why = stats_unusable(
        view.config,
        view.read_version,
        ((h.owner.describe(), h.operation, h.read_version) for h in view.granted if h.id != request_id),
    )
    if why is None:
        return view, None
    return dataclasses.replace(view, config=dataclasses.replace(view.config, file_stats=None)), why


_KIND = operator.attrgetter("operation.kind")
_EVOLVES = operator.attrgetter("operation.evolves_schema")


def _conflicts(
    candidate: Operation, running: Sequence[Holder], view: TableView, decide: DecideFn
) -> tuple[Decision, set[int], bool]:
    """The indices of ``running`` the candidate conflicts with, the model's decision, and whether the
    metadata rule added conflicts the model did not name."""
    decision = decide(candidate, [h.operation for h in running], view.config, view.profile)
    hit = set(decision.conflicts_with) if decision.conflict else set()
    if decision.conflict and not hit:
        # A conflict of the combination without named members: every running operation takes part.
        hit = set(range(len(running)))
    # Defence in depth: metadata changes are exclusive whatever the model says.
    if candidate.changes_metadata:
        meta = set(range(len(running)))
    elif METADATA_CHANGES.isdisjoint(map(_KIND, running)) and not any(map(_EVOLVES, running)):
        meta = set()  # without a Python step per holder
    else:
        meta = {i for i, h in enumerate(running) if h.operation.changes_metadata}
    meta_only = bool(meta - hit)
    return decision, hit | meta, meta_only


def _may_overtake(
    waiter: Holder, now: float, expected_end: float, max_overtake_s: float, schedule: _Reservations
) -> bool:
    """Whether a request expected to end at ``expected_end`` may be granted ahead of ``waiter``."""
    if waiter.since is None or now - waiter.since > max_overtake_s:
        return False
    reserved = schedule.reservation(waiter)
    # An infinite reservation (a blocker without an estimate) is no licence: nothing backfills past it.
    return math.isfinite(reserved) and expected_end <= reserved


class _Reservations:
    """Reservations of the waiting requests on one table (see the module docstring), computed lazily.

    The earlier waiting requests' conflicts are asked of the model with the candidate's engine profile (a
    holder does not carry its own); a wrong answer there only moves a reservation, never a grant.
    """

    def __init__(self, view: TableView, request_id: str, decide: DecideFn) -> None:
        self._view = view
        self._decide = decide
        self._leases = [h for h in view.granted if h.id != request_id]
        self._queue = sorted((w for w in view.waiting if w.id != request_id), key=lambda w: (w.rank, w.id))
        self._known: dict[str, float] = {}

    def reservation(self, waiter: Holder) -> float:
        found = self._known.get(waiter.id)
        if found is not None:
            return found
        position = next(i for i, w in enumerate(self._queue) if w.id == waiter.id)
        ahead = self._queue[:position]
        running = self._leases + ahead
        ends: list[float] = []
        if running:
            _, hit, _ = _conflicts(waiter.operation, running, self._view, self._decide)
            for i in hit:
                h = running[i]
                if h.granted:
                    ends.append(_end(h.since, h.expected_duration_s))
                else:
                    ends.append(_end(self.reservation(h), h.expected_duration_s))
        # Blocked on no table we see here (it waits elsewhere): it may start any moment, so no backfilling.
        value = max(ends, default=-math.inf)
        self._known[waiter.id] = value
        return value


def expected_start(view: TableView, request_id: str, decide: DecideFn | None = None) -> float:
    """When the queued request ``request_id`` on ``view`` is expected to start there: its reservation.

    ``-inf`` when nothing it conflicts with holds or precedes it on this table, ``inf`` when a write it
    waits for has no estimate; a time in the past means a write ahead of it ran past its estimate.

    :param view: the table with its granted leases and queue (the request among ``view.waiting``).
    :param request_id: the queued request.
    :raises KeyError: ``request_id`` is not queued on the table.
    """
    waiter = next((w for w in view.waiting if w.id == request_id), None)
    if waiter is None:
        raise KeyError(f"request {request_id} is not queued on {view.uri}")
    return _Reservations(view, "", decide or default_decide()).reservation(waiter)


def _end(start: float | None, duration: float | None) -> float:
    return math.inf if start is None or duration is None else start + duration


def _unique(items: Sequence[_T]) -> tuple[_T, ...]:
    return tuple(dict.fromkeys(items))


def explain(result: Granted | Waiting | Closed, table_names: Mapping[str, str] | None = None) -> str:
    """One human line for task logs, e.g.
    ``waiting (position 2) behind daily_sales.merge_de on sales: MERGE ... can raise ...; advice: ...``.

    :param result: an acquire/check answer.
    :param table_names: optional short names for table URIs.
    """
    names = table_names or {}
    if isinstance(result, Granted):
        tokens = ", ".join(f"{names.get(u, u)}#{t}" for u, t in sorted(result.fencing.items()))
        return f"granted lease {result.lease_id} on {tokens}"
    if isinstance(result, Closed):
        return f"request {result.request_id} is {result.status}" + (
            f": {result.detail}" if result.detail else ""
        )
    who = "; ".join(
        dict.fromkeys(
            f"{b.owner.describe()} ({b.operation}{', queued' if b.kind == 'waiting' else ''}) on "
            f"{names.get(b.table, b.table)}"
            for b in result.blockers
        )
    )
    line = f"waiting (position {result.position}) behind {who}"
    if result.reasons:
        line += ": " + " ".join(result.reasons)
    if result.exceptions:
        line += f" [{', '.join(e.value for e in result.exceptions)}]"
    if result.advice:
        line += "; advice: " + " ".join(result.advice)
    return line
