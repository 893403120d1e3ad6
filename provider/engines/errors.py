"""Typed errors every engine raises, whatever the engine's own exception types."""

from __future__ import annotations

from enum import StrEnum


class ConflictKind(StrEnum):
    CONCURRENT_APPEND = "ConcurrentAppend"
    CONCURRENT_DELETE_READ = "ConcurrentDeleteRead"
    CONCURRENT_DELETE_DELETE = "ConcurrentDeleteDelete"
    METADATA_CHANGED = "MetadataChanged"
    PROTOCOL_CHANGED = "ProtocolChanged"
    CONCURRENT_TRANSACTION = "ConcurrentTransaction"
    RETRIES_EXHAUSTED = "RetriesExhausted"
    UNKNOWN = "Unknown"


class DeltaGuardError(Exception):
    """Base class of every deltaguard error."""


class InvalidWriteError(DeltaGuardError, ValueError):
    """The write is malformed (bad predicate, missing MERGE condition, unknown partition column, ...).

    Raised before anything is written or any lease is taken.
    """


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
