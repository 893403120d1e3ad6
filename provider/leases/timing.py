"""How long a lease lives, how often it is renewed, how long a store call may take (ADR 0018).

The holder of a lease may commit only while the lease is certainly live. It knows the expiry the store
granted or last renewed; nobody can reclaim the lease before that instant. Renewals run every
``heartbeat_s``; each store call is abandoned after ``store_timeout_s`` (the store may be frozen), and a
failed renewal is retried after at most ``heartbeat_s``. So after a successful renewal at ``t0`` (expiry
``t0 + ttl_s``) a store stall of ``S`` seconds ends, at the latest, with a successful renewal at
``t0 + heartbeat_s + S + 2 * store_timeout_s`` (one attempt may hang until the stall ends and time out, the
next one succeeds within a timeout). A commit additionally needs ``commit_margin_s`` of lease left when it
is fenced. Hence:

    tolerated stall = ttl_s - heartbeat_s - 2 * store_timeout_s - commit_margin_s

A stall shorter than that never loses a lease nor blocks a commit. :func:`validate` refuses settings that
tolerate less than a quarter of the TTL, or that renew less than three times per TTL.
"""

from __future__ import annotations

from dataclasses import dataclass


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
        validate(self)

    @property
    def tolerated_stall_s(self) -> float:
        """The longest store stall that neither loses the lease nor refuses a commit."""
        return self.ttl_s - self.heartbeat_s - 2 * self.store_timeout_s - self.commit_margin_s


def validate(timing: LeaseTiming) -> None:
    """Refuse a combination of settings that can lose a lease to a short stall.

    :raises LeaseTimingError: naming the settings and the rule they break.
    """
    values = {
        "lease_ttl": timing.ttl_s,
        "heartbeat_interval": timing.heartbeat_s,
        "store_timeout": timing.store_timeout_s,
        "commit_margin": timing.commit_margin_s,
    }
    for name, value in values.items():
        if not value > 0:
            raise LeaseTimingError(f"{name} must be a positive number of seconds, got {value}")
    if timing.heartbeat_s * 3 > timing.ttl_s:
        raise LeaseTimingError(
            f"heartbeat_interval={timing.heartbeat_s:g} s renews less than three times per "
            f"lease_ttl={timing.ttl_s:g} s; one slow renewal would lose the lease"
        )
    if timing.tolerated_stall_s < timing.ttl_s / 4:
        raise LeaseTimingError(
            f"lease_ttl={timing.ttl_s:g} s leaves {timing.tolerated_stall_s:g} s for a store stall after "
            f"heartbeat_interval={timing.heartbeat_s:g} s, 2 x store_timeout={timing.store_timeout_s:g} s and "
            f"commit_margin={timing.commit_margin_s:g} s; it must leave at least a quarter of the TTL "
            f"(raise lease_ttl to at least "
            f"{4 / 3 * (timing.heartbeat_s + 2 * timing.store_timeout_s + timing.commit_margin_s):.0f} s "
            f"or lower the others)"
        )


def store_options(url: str, timing: LeaseTiming) -> dict[str, float]:
    """The store constructor's timeouts for ``url``, all bounded by ``timing.store_timeout_s``.

    SQLite: the busy timeout (how long a decision waits for another process's write lock, e.g. one held
    by a stopped process). PostgreSQL: connect, lock-wait and statement timeouts, and TCP keepalives.
    """
    scheme = url.split(":", 1)[0].lower()
    limit = timing.store_timeout_s
    if scheme == "sqlite":
        return {"busy_timeout_s": limit}
    if scheme.startswith("postgres"):
        return {
            "connect_timeout_s": limit,
            "lock_timeout_s": limit,
            "statement_timeout_s": limit,
            "keepalive_s": limit,
        }
    return {}
