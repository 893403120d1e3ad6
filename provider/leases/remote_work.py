"""Fence handles: a holder's work that runs on a server outside the holder's process (ADR 0033).

A Spark Connect write keeps running on the Connect server when the Airflow worker that started it is frozen
or killed; the holder's own fence (``on_lost``, ADR 0018) never runs then. So the holder records a *fence
handle* for that work on its lease, and an expired lease that carries one is not reclaimed until a
:class:`RemoteWorkFence` has stopped the work and confirmed it ended.

Handles live in the request's stored payload (``dg_requests.payload``, key ``remote_work``: a list of
JSON objects), so no schema change is needed. A handle is a flat mapping of strings; ``kind`` says which
fence understands it (``spark_connect``), ``endpoint`` where the work runs (never credentials), ``tag``
the work's own mark. The rest is the kind's.

This module stays below the engines: a fence is given to the lease manager by the layer that builds it
(:func:`deltaguard.engines.fencing.default_remote_fence`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

#: the payload key holding a request's fence handles
PAYLOAD_KEY = "remote_work"
#: the decision-log kinds of a fence that confirmed the work stopped / could not confirm it
FENCED_KIND = "remote_fenced"
UNFENCED_KIND = "remote_unfenced"
#: the decision-log kind of a release whose server-side work was not seen ended: the lease is expired instead
#: of freed, so the table is handed over only once a fence confirmed that work stopped
RELEASE_AWAITING_FENCE_KIND = "release_awaiting_fence"
#: the decision-log kind of a lease handed over because the server itself ended the holder's work (it
#: closed the session and interrupted its operations) and that end was not observed for the grace after
#: which it is taken as ended (ADR 0033): a hand-over of its own, never logged as ``remote_fenced``
INTERRUPTED_KIND = "remote_interrupted"
#: the decision-log kind of a lease released by hand (``deltaguard leases release --force``)
FORCED_KIND = "force_release"
#: what an ``expiry`` entry says let the table go (``server_work``)
SERVER_WORK_FENCED = "fenced"
SERVER_WORK_INTERRUPTED = "interrupted by its server, end not observed"
SERVER_WORK_NONE = "none outstanding"

Handle = Mapping[str, str]


def interrupted_by_server(exc: BaseException) -> bool:
    """Whether a fence's exception says the server itself ended the holder's work without the fence seeing
    the end: the session the work ran in no longer exists on the server that ran it (released or expired
    there, which interrupts every operation of the session), so nothing of it can be asked about any more.

    Not a confirmation: the lease manager keeps the lease held for its ``interrupted_grace_s`` from the
    first such answer, then hands it over logged as ``remote_interrupted`` (ADR 0033). The engines import
    nothing of the leases, so a fence marks its exception with a true ``interrupted_by_server`` attribute
    (:class:`~deltaguard.engines.spark.connect_fence.SessionClosedByServer`).
    """
    return bool(getattr(exc, "interrupted_by_server", False))


class RemoteWorkFence(Protocol):
    """Stops a holder's server-side work and confirms it ended."""

    def fence(self, handle: Handle) -> str:
        """Stop the work ``handle`` names and return once it has certainly ended, with how that was known.

        :raises Exception: the server ended the work itself (closed its session) and its end cannot be
            observed any more, marked by a true ``interrupted_by_server`` attribute
            (:func:`interrupted_by_server`); the lease is handed over after a grace, logged as such.
            Any other: the end could not be confirmed (server unreachable, an error, a timeout); the
            lease stays held.
        """
        ...


def handles_in(payload: str) -> list[dict[str, str]]:
    """The fence handles a stored request payload carries (none: an empty list).

    :raises ValueError: the payload holds handles that cannot be read (a caller must then keep the lease:
        unknown work counts as running).
    """
    data = json.loads(payload)
    raw = data.get(PAYLOAD_KEY) if isinstance(data, dict) else None
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(h, dict) for h in raw):
        raise ValueError(f"unreadable {PAYLOAD_KEY} in a stored request: {raw!r}")
    return [{str(k): str(v) for k, v in h.items()} for h in raw]


def with_handle(payload: str, handle: Handle) -> str:
    """``payload`` with ``handle`` added (replacing one with the same ``tag``)."""
    data = json.loads(payload)
    kept = [h for h in data.get(PAYLOAD_KEY) or [] if h.get("tag") != handle.get("tag")]
    data[PAYLOAD_KEY] = [*kept, dict(handle)]
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def without_handle(payload: str, tag: str) -> str:
    """``payload`` without the handle whose ``tag`` is ``tag`` (the work ended under its holder's eyes)."""
    data = json.loads(payload)
    kept = [h for h in data.get(PAYLOAD_KEY) or [] if h.get("tag") != tag]
    if kept:
        data[PAYLOAD_KEY] = kept
    else:
        data.pop(PAYLOAD_KEY, None)
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def describe_work(handle: Handle) -> str:
    """``Spark Connect work`` for a ``spark_connect`` handle, else the kind's name."""
    kind = handle.get("kind", "remote")
    return "Spark Connect work" if kind == "spark_connect" else f"{kind} work"


def blocked_reason(owner: str, handle: Handle, error: str) -> str:
    """The wait text of a table held by work not confirmed stopped."""
    return (
        f"{describe_work(handle)} of {owner} could not be confirmed stopped on "
        f"{handle.get('endpoint', '?')}: {error}"
    )


class FenceMemory:
    """What the lease managers of one process know about fences: leases confirmed stopped, the last
    failure per lease, and when each was last tried (so managers sharing it, like the triggerer's one per
    trigger, call a server at most once per retry interval per lease). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.confirmed: set[str] = set()
        #: the confirmed leases whose work was ended by its server, not seen ended (``remote_interrupted``)
        self.interrupted: set[str] = set()
        self.failures: dict[str, str] = {}
        self._tried: dict[str, float] = {}
        #: lease id -> when a fence first answered that its server ended the work (:func:`interrupted_by_server`)
        self._interrupted_since: dict[str, float] = {}
        self._last_sweep: float | None = None

    def round(self) -> FenceRound:
        with self._lock:
            return FenceRound(
                confirmed=frozenset(self.confirmed),
                failures=dict(self.failures),
                interrupted=frozenset(self.interrupted),
            )

    def interrupted_since(self, lease_id: str, now: float) -> float:
        """When a fence first answered that ``lease_id``'s server ended its work (``now`` if this is the first)."""
        with self._lock:
            return self._interrupted_since.setdefault(lease_id, now)

    def awaiting(self) -> list[str]:
        """Leases a fence of this process tried and could not confirm yet (to try again unasked)."""
        with self._lock:
            return sorted(set(self.failures) - self.confirmed)

    def claim_sweep(self, now: float, every_s: float) -> bool:
        """Whether the caller may sweep the store's expired leases now (then the sweep is marked at ``now``);
        the first sweep of a process waits ``every_s`` too, so short-lived processes (one task) do not sweep."""
        with self._lock:
            if self._last_sweep is None:
                self._last_sweep = now
            if now - self._last_sweep < every_s:
                return False
            self._last_sweep = now
            return True

    def claim(self, lease_id: str, now: float, retry_s: float) -> bool:
        """Whether the caller may fence ``lease_id`` now (then it is marked tried at ``now``)."""
        with self._lock:
            if lease_id in self.confirmed or now - self._tried.get(lease_id, float("-inf")) < retry_s:
                return False
            self._tried[lease_id] = now
            return True

    def confirm(self, lease_id: str, *, interrupted: bool = False) -> None:
        with self._lock:
            self.confirmed.add(lease_id)
            if interrupted:
                self.interrupted.add(lease_id)
            self.failures.pop(lease_id, None)

    def forget(self, lease_id: str) -> None:
        """Drop what is known of a lease that ended (its rows are gone)."""
        with self._lock:
            self.failures.pop(lease_id, None)
            self._interrupted_since.pop(lease_id, None)

    def fail(self, lease_id: str, error: str) -> None:
        with self._lock:
            self.failures[lease_id] = error


@dataclass
class FenceRound:
    """What one decision learns about expired leases with fence handles (one per decision call).

    :param confirmed: lease ids whose work a fence confirmed ended (they may be reclaimed), or whose server
        ended it and the grace passed (``interrupted``).
    :param failures: the last reason, per lease id, why its work could not be confirmed stopped.
    :param pending: filled by the decision: expired leases kept held, with their handles and owner text,
        for the manager to fence after the transaction.
    """

    confirmed: frozenset[str] = frozenset()
    failures: Mapping[str, str] = field(default_factory=dict)
    interrupted: frozenset[str] = frozenset()
    pending: dict[str, tuple[str, Sequence[Handle]]] = field(default_factory=dict)

    def server_work(self, lease_id: str) -> str:
        """What the ``expiry`` of a reclaimed lease says let its table go."""
        if lease_id in self.interrupted:
            return SERVER_WORK_INTERRUPTED
        return SERVER_WORK_FENCED if lease_id in self.confirmed else SERVER_WORK_NONE

    def reason(self, lease_id: str, owner: str) -> str | None:
        """The wait reason for a kept lease (``None``: not kept by this round)."""
        found = self.pending.get(lease_id)
        if found is None:
            return None
        _, handles = found
        error = self.failures.get(lease_id, "not fenced yet")
        handle = handles[0] if handles else {}
        return blocked_reason(owner, handle, error)
