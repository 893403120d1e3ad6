"""The lease manager an operator's tool opens (``deltaguard leases``): over the store a URL names, through
:func:`deltaguard.leases.open.open_store`, with no fence for server-side work unless one is given, so looking
at leases or releasing one by hand never reaches a Spark Connect server (ADR 0033); ``leases sweep`` gives
the engines' fence.

Task code and the triggerer get their manager from the lease hook (:mod:`deltaguard.hooks.lease`).
"""

from __future__ import annotations

from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.remote_work import RemoteWorkFence


def open_manager(url: str, remote_fence: RemoteWorkFence | None = None) -> LeaseManager:
    """A lease manager over the store at ``url`` (created or migrated on open); close it with
    ``manager.store.close()``.

    :param remote_fence: the fence of holders' server-side work (``deltaguard leases sweep`` gives one).
    :raises ValueError: for an unsupported or malformed URL.
    :raises StoreUnavailableError: when the store cannot be reached.
    """
    return LeaseManager(url, remote_fence=remote_fence)
