"""Keeping a granted lease alive during a write, and fencing the write's commit (ADR 0018).

:class:`LeaseKeeper` renews the lease every ``heartbeat_s`` in a background thread and is the writer's
commit fence (:class:`deltaguard.engines.fencing.CommitFence`): :meth:`LeaseKeeper.check` returns only when
the lease is certainly live for at least ``commit_margin_s`` more seconds, and callbacks registered with
:meth:`LeaseKeeper.on_lost` run as soon as the lease is known to be lost.

"Certainly live" is judged from the expiry the store last granted, on the local clock: nobody can reclaim
the lease before that instant (every process sharing a store must have synchronised clocks, as the manager
already requires). Every store call runs under a client-side deadline (``store_timeout_s``): a frozen store
(a stopped PostgreSQL backend keeps the TCP connection open, so neither keepalives nor server-side
timeouts end the call) can delay a renewal but never hang the keeper, and once the known expiry is near the
lease counts as lost whatever the store says later.

:class:`LeaseTiming` says how long a lease lives, how often it is renewed and how long a store call may take.
A store stall shorter than ``ttl_s - heartbeat_s - 2 * store_timeout_s - commit_margin_s`` never loses a
lease nor blocks a commit (derived in ADR 0018, "TTL, heartbeat interval, store timeout"); settings that
tolerate less than a quarter of the TTL, or that renew less than three times per TTL, are refused.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from deltaguard.core.admission import Owner
from deltaguard.leases.manager import LeaseError, LeaseLostError, LeaseManager
from deltaguard.leases.open import StoreCallTimeout, bounded_call
from deltaguard.leases.remote_work import FORCED_KIND
from deltaguard.leases.store import StoreReplacedError

log = logging.getLogger("deltaguard.leases")

__all__ = [
    "DEFAULT_CLOCK_SKEW_S",
    "LeaseKeeper",
    "LeaseTiming",
    "LeaseTimingError",
    "StoreCallTimeout",
    "bounded_call",
    "fence_app_id",
]


class LeaseTimingError(ValueError):
    """The lease settings cannot keep a lease alive through a short store stall."""


@dataclass(frozen=True)
class LeaseTiming:
    """Validated lease timing (seconds).

    :param ttl_s: how long a lease lives without renewal.
    :param heartbeat_s: the interval between renewals.
    :param store_timeout_s: the client-side limit on one store call (connect, statement, lock wait).
    :param commit_margin_s: the lease time that must remain when a commit is fenced (covers the commit).
    """

    ttl_s: float = 120.0
    heartbeat_s: float = 20.0
    store_timeout_s: float = 10.0
    commit_margin_s: float = 15.0

    def __post_init__(self) -> None:
        """Refuse a combination of settings that can lose a lease to a short stall.

        :raises LeaseTimingError: naming the settings and the rule they break.
        """
        stall = self.ttl_s - self.heartbeat_s - 2 * self.store_timeout_s - self.commit_margin_s
        values = {
            "lease_ttl": self.ttl_s,
            "heartbeat_interval": self.heartbeat_s,
            "store_timeout": self.store_timeout_s,
            "commit_margin": self.commit_margin_s,
        }
        for name, value in values.items():
            if not value > 0:
                raise LeaseTimingError(f"{name} must be a positive number of seconds, got {value}")
        if self.heartbeat_s * 3 > self.ttl_s:
            raise LeaseTimingError(
                f"heartbeat_interval={self.heartbeat_s:g} s renews less than three times per "
                f"lease_ttl={self.ttl_s:g} s; one slow renewal would lose the lease"
            )
        if stall < self.ttl_s / 4:
            raise LeaseTimingError(
                f"lease_ttl={self.ttl_s:g} s leaves {stall:g} s for a store stall after "
                f"heartbeat_interval={self.heartbeat_s:g} s, 2 x store_timeout={self.store_timeout_s:g} s and "
                f"commit_margin={self.commit_margin_s:g} s; it must leave at least a quarter of the TTL "
                f"(raise lease_ttl to at least "
                f"{4 / 3 * (self.heartbeat_s + 2 * self.store_timeout_s + self.commit_margin_s):.0f} s "
                f"or lower the others)"
            )


#: how far the storage's clock may lag the deciders' clocks when a commit is placed among grants
DEFAULT_CLOCK_SKEW_S = 1.0
#: a lease replaces the leases on its tables that ended this long before its grant (ADR 0038)
DEFAULT_REPLACED_HORIZON_S = 86400.0
#: the decision-log kinds that end a lease whose holder was not seen to finish
EXPIRY_KIND = "expiry"
#: a fence app transaction's version is the lease's fencing token on the table times this, plus the number
#: of the commit under the lease (ADR 0038, delta-spark)
FENCE_VERSION_STRIDE = 1_000_000


def fence_app_id(lease_id: str) -> str:
    """The application transaction id that fences the commits of ``lease_id`` in Delta's log (ADR 0038)."""
    return f"deltaguard.fence:{lease_id}"


class LeaseKeeper:
    """Renews one lease while a write runs and fences the write's commit.

    Use as a context manager around the engine call; pass the keeper as ``WriteContext.fence``.

    :param manager: the lease manager that granted the lease.
    :param lease_id: the lease.
    :param owner: its owner.
    :param expires_at: the expiry the grant returned.
    :param fencing: the per-table fencing tokens the grant returned; the check compares them with the
        store's rows of the lease.
    :param timing: TTL, heartbeat interval, store timeout and commit margin.
    :param clock: seconds since the epoch (the manager's clock by default).
    :param fenced: the engine checks this keeper before it commits (deltaguard's own writes); ``False``
        for wrapped work, whose commit deltaguard does not make and cannot stop (ADR 0021), so a lost
        lease is reported as a possible commit outside the lease, not as a refused one.
    :param replaced_horizon_s: leases on the same tables that ended (expiry, forced release) up to this
        many seconds before the grant count as replaced by it: its commits carry their fence app ids.
    :param clock_skew_s: how far the storage's clock (which times a commit's log entry) may lag the clocks
        that stamp lease decisions; :meth:`after_commit` counts grants up to that much after the entry as
        before it.
    """

    def __init__(
        self,
        manager: LeaseManager,
        lease_id: str,
        owner: Owner,
        *,
        expires_at: float,
        fencing: Mapping[str, int] | None = None,
        timing: LeaseTiming | None = None,
        clock: Callable[[], float] | None = None,
        fenced: bool = True,
        clock_skew_s: float = DEFAULT_CLOCK_SKEW_S,
        replaced_horizon_s: float = DEFAULT_REPLACED_HORIZON_S,
    ) -> None:
        if clock_skew_s < 0:
            raise ValueError("clock_skew_s must be >= 0")
        self.clock_skew_s = clock_skew_s
        self.manager = manager
        self.fenced = fenced
        self._committed = False
        self.lease_id = lease_id
        self.owner = owner
        self.timing = timing or LeaseTiming()
        self.clock = clock or manager.clock
        self.fencing = dict(fencing or {})
        self.known_expiry = expires_at
        #: the keeper is made right after the grant: leases that ended up to this instant may be replaced
        self.granted_at = self.clock()
        #: how far back ended leases count as replaced by this one (their holders may commit late)
        self.replaced_horizon_s = replaced_horizon_s
        self._fence_ids: list[str] | None = None
        self._fence_commits = 0
        #: the identity of the store that granted the lease; every renewal checks the store still has it
        self.store_id: str | None = getattr(manager.store, "store_id", None)
        #: why the store at the lease's location is not the one that granted it, once found
        self.store_replaced: str | None = None
        #: when the store last confirmed the lease (the grant, then each renewal)
        self.confirmed_at = self.clock()
        self.renewals = 0
        self.failed_renewals = 0
        self.lost_reason: str | None = None
        self._lost = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._cancels: list[Callable[[], None]] = []
        self._thread: threading.Thread | None = None

    # --- lifecycle -----------------------------------------------------------------------------------

    def __enter__(self) -> LeaseKeeper:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._beat, name=f"deltaguard-heartbeat-{self.lease_id}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            # a renewal in flight is bounded by the store timeout
            self._thread.join(timeout=self.timing.store_timeout_s + 1)

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    # --- the fence -----------------------------------------------------------------------------------

    def check(self) -> None:
        """Return if the lease is live for at least ``commit_margin_s``; raise otherwise.

        Renews the lease (bounded by the store timeout) and reads its rows to compare the fencing tokens;
        if the store does not answer, the expiry known from the last renewal decides.

        :raises LeaseLostError: the lease is lost, taken over, or too close to its expiry.
        """
        if self.lost:
            raise LeaseLostError(f"lease {self.lease_id} is lost: {self.lost_reason}")
        self._confirm()
        if self.lost:
            raise LeaseLostError(f"lease {self.lease_id} is lost: {self.lost_reason}")
        left = self.known_expiry - self.clock()
        if left < self.timing.commit_margin_s:
            raise LeaseLostError(
                f"lease {self.lease_id} has {left:.1f} s left, less than the commit margin of "
                f"{self.timing.commit_margin_s:g} s (the store has not confirmed a renewal)"
            )

    def still_held(self) -> str | None:
        """Whether the lease is still this owner's at this instant: ``None`` if so, else why not.

        Renews it once (bounded by the store timeout) and compares the fencing tokens; when the store does
        not answer, the known expiry decides (nobody can reclaim the lease before it). Used after work
        whose commit deltaguard does not fence, and after a commit, to learn whether it may have landed
        outside the lease.
        """
        if not self.lost:
            self._confirm()
        if not self.lost and self.clock() >= self.known_expiry:
            self._mark_lost("its known expiry passed without a confirmed renewal")
        return self.lost_reason if self.lost else None

    def _confirm(self) -> None:
        """Renew the lease (bounded by the store timeout) and compare its fencing tokens with the store's;
        different tokens mark it lost. A store that does not answer leaves the known expiry to decide."""
        self._renew()
        if self.lost or not self.fencing:
            return
        try:
            rows = bounded_call(self.manager.store.read_lease, self.timing.store_timeout_s, self.lease_id)
        except Exception as exc:
            log.warning("deltaguard: could not read lease %s for its fencing check: %s", self.lease_id, exc)
            return
        found = {r.uri: r.fencing for r in rows if r.owner_key == self.owner.key}
        if found != self.fencing:
            self._mark_lost(f"its fencing tokens changed (granted {self.fencing}, store has {found})")

    def after_commit(
        self, table_uri: str, version: int, committed_at: float | Callable[[], float | None] | None
    ) -> None:
        """Fail loudly if a commit may have landed after the lease was lost (ADR 0018).

        The fence's last check came before the commit; a writer that stopped in between (a frozen process)
        commits late. If the lease is still ours now, it was ours throughout (a lost lease never comes
        back). Otherwise the commit is flagged when another writer was granted a lease on the table between
        this lease's last confirmed renewal and the commit: an ``unfenced_overrun`` entry in the decision
        log, and :class:`~deltaguard.exceptions.LateCommitError`.

        :param table_uri: the table's lease key.
        :param version: the version the write committed.
        :param committed_at: when the storage wrote the commit's log entry (seconds since the epoch;
            :func:`deltaguard.engines.fencing.log_entry_written_at`), never the ``commitInfo``
            timestamp the writer chose before it may have stopped; ``None``: now, which is after it.
            Grants up to ``clock_skew_s`` after it count as before it. A callable is asked only when the
            lease is no longer held, so a commit under a live lease reads nothing from the storage.
        :raises LateCommitError: the commit may have landed while another writer held the table.
        """
        from deltaguard.exceptions import LateCommitError

        self._committed = True  # a loss found from here on is not "a write that will not commit"
        reason = self.still_held()
        if reason is None:
            return
        if callable(committed_at):
            try:
                committed_at = committed_at()
            except Exception as exc:  # unknown: "now" below, which is after the commit and only flags more
                log.warning(
                    "deltaguard: could not read when version %d of %s landed: %s", version, table_uri, exc
                )
                committed_at = None
        now = self.clock()
        # the storage's clock and the deciders' may differ by up to clock_skew_s: a grant stamped that much
        # after the log entry may still have preceded it (a grant is stamped when its store call starts,
        # before it takes effect, which only errs towards flagging)
        landed = committed_at if committed_at is not None else now  # a later time only flags more
        since = self.confirmed_at
        uris = sorted(self.fencing) or [table_uri]  # the store's keys of the lease's tables
        others: list[str] = []
        if self.store_replaced is not None:  # the store that could say who was granted since is gone
            others = [f"unknown (the lease store was replaced: {self.store_replaced})"]
        try:
            for uri in [] if others else uris:
                others += self.manager.grants_since(uri, since, self.owner, until=landed + self.clock_skew_s)
        except Exception as exc:  # no answer: assume the worst, the commit is already in the table
            others = [f"unknown (the decision log could not be read: {exc})"]
        if not others:
            log.warning(
                "deltaguard: lease %s was lost (%s) but nobody else was granted %s before version %d landed",
                self.lease_id,
                reason,
                table_uri,
                version,
            )
            return
        detail = {
            "reason": f"committed version {version} after its lease was lost ({reason})",
            "committed_version": version,
            "committed_at": landed,
            "granted_since": others,
        }
        try:
            self.manager.record_overrun(self.lease_id, self.owner, uris, detail)
        except Exception as exc:
            log.error("deltaguard: could not log the late commit to %s: %s", table_uri, exc)
        raise LateCommitError(
            f"version {version} of {table_uri} was committed after lease {self.lease_id} was lost "
            f"({reason}); {', '.join(others)} was granted the table before the commit landed. Check the "
            "table for lost or duplicated rows."
        )

    def fence_app_ids(self) -> list[str]:
        """The application transaction ids every commit under this lease carries (ADR 0038): its own
        (``deltaguard.fence:<lease id>``) and those of the leases on its tables that ended while their
        holders may still commit (reclaimed on expiry, or released by hand) before this lease was granted.

        Delta's conflict checker refuses a commit when a concurrent winning commit carries an app id the
        committing one carries (measured on delta-rs 1.6.6, ``tests/engines/test_deltars_engine_fence.py``):
        a holder that lost its lease and commits late is refused by the engine if its successor committed
        first, and its successor is refused if the late commit landed first while the successor's
        snapshot predates it. The lease's own id comes first. Looked up by engines with ``getattr``; read
        once per keeper.
        """
        if self._fence_ids is None:
            own = [fence_app_id(self.lease_id)]
            replaced: list[str] = []
            try:
                for uri in sorted(self.fencing):
                    rows = bounded_call(
                        self.manager.store.decisions,
                        self.timing.store_timeout_s,
                        uri=uri,
                        kinds=[EXPIRY_KIND, FORCED_KIND],
                        since=self.granted_at - self.replaced_horizon_s,
                        limit=1000,
                    )
                    # a lease of this task's own earlier try counts too: that try may commit late
                    replaced += [r.request_id for r in rows]
            except Exception as exc:  # the writer-side fences still hold; the engine fence is extra
                log.warning(
                    "deltaguard: lease %s: could not read the leases it replaced: %s", self.lease_id, exc
                )
            self._fence_ids = own + [fence_app_id(r) for r in sorted(set(replaced)) if r != self.lease_id]
        return list(self._fence_ids)

    def fence_txn_version(self, table_uri: str) -> int | None:
        """The version of the fence app transaction of this lease's next commit to ``table_uri``; ``None``
        when the lease holds no fencing token for it.

        delta-spark skips a write whose app transaction version is at or below the one its snapshot holds
        for the app id (an idempotent write), so the version must grow with every writer of the id: it is
        the lease's fencing token on the table (the store counts grants of a table up) times
        :data:`FENCE_VERSION_STRIDE`, plus the number of this commit under the lease. A successor's version
        is then above every version its replaced lease can carry, and a lease's own commits go up one by
        one. Looked up by engines with ``getattr`` (ADR 0038).

        :param table_uri: the table as the engine names it; matched against the lease's tables, and a lease
            of one table is that table's.
        """
        token = self.fencing.get(table_uri)
        if token is None and len(self.fencing) == 1:
            token = next(iter(self.fencing.values()))
        if token is None:
            return None
        with self._lock:
            self._fence_commits += 1
            count = self._fence_commits
        return int(token) * FENCE_VERSION_STRIDE + count

    def remote_work(self, handle: Mapping[str, str]) -> None:
        """Record on the lease a fence handle for work the engine is about to start on a server (a Spark
        Connect operation tag), so a lease whose holder stops renewing is not reclaimed until that work is
        confirmed stopped (ADR 0033). Called by engines through ``getattr`` before the work starts.

        :raises LeaseLostError: the lease is lost, or the handle could not be recorded (the work must not
            start: nobody could stop it if this holder froze).
        """
        if self.lost:
            raise LeaseLostError(f"lease {self.lease_id} is lost: {self.lost_reason}")
        try:
            bounded_call(
                self.manager.record_remote_work,
                self.timing.store_timeout_s,
                self.lease_id,
                self.owner,
                handle,
            )
        except LeaseError:
            raise
        except Exception as exc:
            raise LeaseLostError(
                f"lease {self.lease_id}: the fence handle of its server-side work could not be recorded: {exc}"
            ) from exc

    def remote_work_ended(self, handle: Mapping[str, str]) -> None:
        """Drop a handle again once the engine saw its work end; best effort (a handle left behind only
        makes a later reclaim of an expired lease ask the server first)."""
        try:
            bounded_call(
                lambda: self.manager.record_remote_work(self.lease_id, self.owner, handle, ended=True),
                self.timing.store_timeout_s,
            )
        except Exception as exc:
            log.warning("deltaguard: lease %s: could not drop a fence handle: %s", self.lease_id, exc)

    def on_lost(self, cancel: Callable[[], None]) -> Callable[[], None]:
        """Call ``cancel`` once the lease is lost (at once if it already is); return an unregister function."""
        with self._lock:
            if not self.lost:
                self._cancels.append(cancel)
                return lambda: self._unregister(cancel)
        _run_cancel(cancel)
        return lambda: None

    # --- internals -----------------------------------------------------------------------------------

    def _unregister(self, cancel: Callable[[], None]) -> None:
        with self._lock:
            if cancel in self._cancels:
                self._cancels.remove(cancel)

    def _beat(self) -> None:
        wait = self.timing.heartbeat_s
        while not self._stop.wait(wait):
            self._renew()
            if self.lost:
                return
            # after a failed renewal, try again sooner: the stall may be over
            wait = self.timing.heartbeat_s if self.failed_renewals == 0 else self.timing.store_timeout_s

    def _verified_heartbeat(self) -> float:
        """Renew the lease in the store that granted it.

        A store deleted and created anew (an SQLite file unlinked with its ``-wal`` and ``-shm``) grants
        the lease's tables to others while this process's open connections still renew the lease in the
        deleted file; so every renewal compares the store's identity, in the renewal's own first read of
        the lease (ADR 0018).

        :raises StoreReplacedError: the store at the manager's location is not the one that granted it.
        """
        return self.manager.heartbeat(self.lease_id, self.owner, store_id=self.store_id)

    def _renew(self) -> None:
        try:
            # the store's identity first, in the same bounded call: a frozen store costs one timeout
            expiry = bounded_call(self._verified_heartbeat, self.timing.store_timeout_s)
        except StoreReplacedError as exc:
            self.store_replaced = str(exc)
            self._mark_lost(f"the lease store was replaced: {exc}")
            return
        except LeaseError as exc:
            self._mark_lost(str(exc))
            return
        except Exception as exc:  # store failure or timeout: the known expiry still holds
            self.failed_renewals += 1
            log.warning("deltaguard: lease %s renewal failed: %s", self.lease_id, exc)
            if self.clock() >= self.known_expiry - self.timing.commit_margin_s:
                left = self.known_expiry - self.clock()
                when = f"is {left:.1f} s away" if left >= 0 else f"passed {-left:.1f} s ago"
                self._mark_lost(f"not renewed since the store stopped answering, and its expiry {when}")
            return
        with self._lock:
            self.confirmed_at = self.clock()
            self.known_expiry = max(self.known_expiry, expiry)
            self.renewals += 1
            self.failed_renewals = 0

    def _mark_lost(self, reason: str) -> None:
        with self._lock:
            if self.lost:
                return
            self.lost_reason = reason
            self._lost.set()
            cancels, self._cancels = self._cancels, []
        if self._committed:
            log.error(
                "deltaguard: lease %s is lost (%s), found after the write committed", self.lease_id, reason
            )
        elif self.fenced:
            log.error("deltaguard: lease %s is lost (%s); the write will not commit", self.lease_id, reason)
        else:
            log.error(
                "deltaguard: lease %s is lost (%s); deltaguard cannot stop the wrapped work, which may "
                "commit outside its lease while another writer holds the table",
                self.lease_id,
                reason,
            )
        for cancel in cancels:
            _run_cancel(cancel)


def _run_cancel(cancel: Callable[[], None]) -> None:
    try:
        cancel()
    except Exception as exc:  # a failing cancel must not stop the others; the fence still holds
        log.warning("deltaguard: cancelling the write after a lost lease failed: %s", exc)
