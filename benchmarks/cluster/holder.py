"""A writer outside Airflow that holds a table's lease through the run's lease store, so Airflow's writers defer.

The short run has one pipeline run; its four ``customers`` writes overlap only for about a second each, so
a task was seldom deferred when ``restart_triggerer`` looked for one (it fired in 1 of 9 short runs). This
holder stands for another system writing ``customers`` through the same lease store (a job outside Airflow
overwriting the table): it takes an exclusive lease on the table before the pipeline starts and keeps it
until the triggerer fault was injected (or skipped), so the pipeline's ``customers`` writes queue behind it
and wait deferred in a triggerer, as they would behind any long conflicting write. It commits nothing; the
audit checks that no write of the table committed while it held the lease (:func:`audit.held_overlaps`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: who the holder is in the decision log
OWNER_NAME = "cluster run: overwrite of the table from outside Airflow"


@dataclass
class ExternalHolder:
    """Hold an exclusive (``OVERWRITE``) lease on ``uri`` until ``until()`` is true or ``cap_s`` passed.

    :param store_url: the run's lease store.
    :param uri: the table.
    :param until: polled every second: release once it returns true.
    :param cap_s: the longest hold (a fault that never comes must not stall the run).
    :param ttl_s: the lease's time-to-live; renewed every third of it.
    """

    store_url: str
    uri: str
    until: Callable[[], bool]
    cap_s: float = 240.0
    ttl_s: float = 90.0
    granted_at: float | None = None
    released_at: float | None = None
    lease_id: str | None = None
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _granted: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self, timeout: float = 60.0) -> None:
        """Start holding; return once the lease is granted (raise when it is not within ``timeout``)."""
        self._thread = threading.Thread(target=self._run, name="external-holder", daemon=True)
        self._thread.start()
        if not self._granted.wait(timeout) or self.lease_id is None:
            self.stop()
            raise RuntimeError(f"the external holder was not granted {self.uri}: {self.errors}")

    def stop(self, timeout: float = 60.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def held(self) -> tuple[float, float] | None:
        """``(granted, released)`` wall-clock times, once both are known."""
        if self.granted_at is None or self.released_at is None:
            return None
        return (self.granted_at, self.released_at)

    def _request(self) -> Any:
        from importlib.metadata import version

        from deltaguard.core.admission import LeaseRequest, Owner, TableClaim
        from deltaguard.core.operations import Operation, OperationKind
        from deltaguard.core.profiles import EngineName, EngineProfile
        from deltaguard.engines.deltars.engine import DeltaRsEngine

        profile = EngineProfile(EngineName.DELTA_RS, version("deltalake"))
        claim = TableClaim(
            self.uri, Operation(OperationKind.OVERWRITE), profile, DeltaRsEngine().table_config(self.uri)
        )
        return LeaseRequest((claim,), Owner(name=OWNER_NAME), ttl_s=self.ttl_s)

    def _run(self) -> None:
        from deltaguard.core.admission import Granted, Owner
        from deltaguard.leases.manager import LeaseManager
        from deltaguard.leases.open import open_store

        store = open_store(self.store_url)
        manager = LeaseManager(store)
        try:
            request = self._request()
            answer = manager.acquire(request)
            if not isinstance(answer, Granted):
                self.errors.append(f"not granted at once: {answer}")
                manager.release(request.request_id, request.owner)
                return
            self.lease_id, self.granted_at = request.request_id, time.time()
            self._granted.set()
            began = renewed = time.monotonic()
            while not self._stop.wait(1.0) and time.monotonic() - began < self.cap_s:
                if self.until():
                    break
                if time.monotonic() - renewed > self.ttl_s / 3:
                    manager.heartbeat(request.request_id, request.owner)
                    renewed = time.monotonic()
            manager.release(request.request_id, Owner(name=OWNER_NAME))
            self.released_at = time.time()
        except Exception as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self._granted.set()
            store.close()
