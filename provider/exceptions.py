"""Every error deltaguard raises, under one base class :class:`DeltaGuardError`.

::

    DeltaGuardError
    ├── InvalidWriteError (ValueError)    bad task input, raised before any lease is taken
    │   ├── TableUriError                 a table URI deltaguard cannot write to
    │   └── UnsupportedWriteError         the chosen engine has no runner for this kind of write
    ├── TableAccessError                  the table's log cannot be read or written
    ├── SparkSetupError                   Spark cannot run Delta writes as configured
    ├── DeltaConflictError                a commit failed on a concurrent transaction
    ├── EnginePanicError                  the engine crashed inside a write (a delta-rs panic)
    ├── LeaseError (RuntimeError)         the lease protocol refused a call
    │   ├── LeaseLostError                the lease expired; stop writing
    │   ├── LeaseOwnershipError           the lease belongs to another owner
    │   └── RequestClosedError            the request id was used for a lease that ended
    ├── StoreError (RuntimeError)         the lease store failed; nothing was granted (fail closed)
    │   ├── StoreUnavailableError         the store cannot be reached or opened
    │   └── SnapshotChanged               an optimistic decision was not committed
    └── LeaseWaitTimeout (TimeoutError)   waited longer than ``lease_wait_timeout``

The conflict model's own input errors (:class:`~deltaguard.core.sql.predicates.PredicateError`,
:class:`~deltaguard.core.sql.classify.SqlClassificationError`,
:class:`~deltaguard.core.check_request.RequestError`) are ``ValueError`` s of the pure core, which imports
nothing above it; the operators turn them, like every :class:`InvalidWriteError`, into Airflow's
``AirflowFailException`` so a retry is not spent on input that cannot succeed.

The classes keep their older import paths too (:mod:`deltaguard.engines.errors`,
:mod:`deltaguard.leases.manager`, :mod:`deltaguard.leases.store`, :mod:`deltaguard.writes.table_uri`).
"""

from __future__ import annotations

from enum import StrEnum


class DeltaGuardError(Exception):
    """Base class of every deltaguard error."""


# ------------------------------------------------------------------------------------------------ input
class InvalidWriteError(DeltaGuardError, ValueError):
    """The write is malformed (bad predicate, missing MERGE condition, unknown partition column, ...).

    Raised before anything is written or any lease is taken.
    """


class TableUriError(InvalidWriteError):
    """A table URI deltaguard cannot write to (unknown scheme, empty name, ...)."""


class UnsupportedWriteError(InvalidWriteError):
    """The chosen engine has no runner for this kind of write (raised before anything is written).

    :param engine: the engine's name.
    :param spec_type: the spec class it cannot run (or the type of what was passed as a spec).
    """

    def __init__(self, message: str, *, engine: str, spec_type: type) -> None:
        super().__init__(message)
        self.engine = engine
        self.spec_type = spec_type


# ----------------------------------------------------------------------------------------------- engines
class ConflictKind(StrEnum):
    CONCURRENT_APPEND = "ConcurrentAppend"
    CONCURRENT_DELETE_READ = "ConcurrentDeleteRead"
    CONCURRENT_DELETE_DELETE = "ConcurrentDeleteDelete"
    METADATA_CHANGED = "MetadataChanged"
    PROTOCOL_CHANGED = "ProtocolChanged"
    CONCURRENT_TRANSACTION = "ConcurrentTransaction"
    RETRIES_EXHAUSTED = "RetriesExhausted"
    UNKNOWN = "Unknown"


class TableAccessError(DeltaGuardError):
    """The table's log cannot be read or written (names the URI and the cause)."""


class SparkSetupError(DeltaGuardError):
    """Spark cannot run Delta writes as configured (for example Delta's jars are missing)."""


class DeltaConflictError(DeltaGuardError):
    """A commit failed because of a concurrent transaction.

    :param kind: the conflict kind parsed from the engine's message.
    :param message: the engine's original message, kept whole.
    :param table_uri: the table.
    :param engine: the engine that raised it.
    """

    def __init__(
        self, kind: ConflictKind, message: str, table_uri: str | None = None, engine: str = ""
    ) -> None:
        super().__init__(f"{kind.value} conflict on {table_uri or 'table'} ({engine}): {message}")
        self.kind = kind
        self.original_message = message
        self.table_uri = table_uri
        self.engine = engine


class EnginePanicError(DeltaGuardError):
    """The engine crashed inside a write (a Rust panic in delta-rs, which reaches Python as a
    ``BaseException``) and its commit is not in the table.

    :param message: what the engine said, whole.
    :param table_uri: the table.
    :param engine: the engine that crashed.
    """

    def __init__(self, message: str, table_uri: str | None = None, engine: str = "") -> None:
        super().__init__(
            f"{engine} crashed writing {table_uri or 'the table'} and committed nothing: {message}"
        )
        self.original_message = message
        self.table_uri = table_uri
        self.engine = engine


class CommitFencedError(DeltaGuardError):
    """The write was stopped before its commit because the writer's lease is no longer certainly live.

    Nothing was committed (files the engine had already written are unreferenced and removed by VACUUM).
    """


class LateCommitError(DeltaGuardError):
    """A write committed although its lease was lost before the commit landed (ADR 0018).

    The commit is in the table: the writer stopped (a frozen process, a long pause) after its last lease
    check, and another writer may have been admitted in between. The table is flagged in the decision log
    (``unfenced_overrun``) and in the UI; check it for lost or duplicated rows.
    """


class WrappedLeaseLostError(DeltaGuardError):
    """Work wrapped with ``with_delta_lease`` ended after its lease was lost (ADR 0021).

    deltaguard does not make the wrapped work's commit and cannot stop it: the work may have committed
    outside its lease while another writer held the table. The table is flagged in the decision log
    (``unfenced_overrun``) and in the UI.
    """


# ------------------------------------------------------------------------------------------------ leases
class LeaseError(DeltaGuardError, RuntimeError):
    """Base class of lease-protocol errors (not store failures)."""


class LeaseLostError(LeaseError):
    """The lease expired (and may have been reclaimed); the holder must stop writing."""


class LeaseOwnershipError(LeaseError):
    """The lease or request belongs to another owner."""


class RequestClosedError(LeaseError):
    """The request id was already used for a lease that ended; ask with a new request id."""


class StoreError(DeltaGuardError, RuntimeError):
    """A lease store failed; no lease was granted (fail closed)."""


class StoreUnavailableError(StoreError):
    """The lease store cannot be reached or opened. The message names the store (without password)."""


class StoreReplacedError(StoreError):
    """The store at the handle's location is no longer the store the handle opened (its file was deleted
    or replaced, its database re-created): nothing granted in the old one holds in the new one."""


class SnapshotChanged(StoreError):
    """A decision made from a :class:`~deltaguard.leases.store.TableSnapshot` was not committed: the tables
    changed since the snapshot was read, or the decision needed a read the snapshot cannot answer. Nothing
    was written; decide again under the table locks."""


class LeaseWaitTimeout(DeltaGuardError, TimeoutError):
    """The task waited longer than ``lease_wait_timeout`` for its lease."""
