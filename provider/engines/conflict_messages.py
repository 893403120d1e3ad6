"""Parse an engine's conflict message into a :class:`~deltaguard.engines.errors.ConflictKind`.

delta-rs raises one exception type (``CommitFailedError``) for every conflict; only the message says which
conflict it was. The texts below are delta-rs' ``CommitConflictError`` / ``TransactionError`` messages
(``crates/core/src/kernel/transaction``), as raised by deltalake 1.6.6. delta-spark's exception class
names (``ConcurrentAppendException``, ...) and error classes (``DELTA_CONCURRENT_APPEND``, ...) are
recognised too, so the Spark engine can share the parser.
"""

from __future__ import annotations

import re

from deltaguard.engines.errors import ConflictKind

#: (pattern, kind), tried in order; the first match wins. Patterns are case-insensitive.
#: Specific patterns come before general ones ("ConcurrentDeleteRead" before "ConcurrentDelete...").
_PATTERNS: tuple[tuple[re.Pattern[str], ConflictKind], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), kind)
    for pattern, kind in (
        # delta-rs CommitConflictError texts
        (r"concurrent transactions? added new data", ConflictKind.CONCURRENT_APPEND),
        (r"concurrent transaction deleted data this operation read", ConflictKind.CONCURRENT_DELETE_READ),
        (r"deleted the same data your transaction deletes", ConflictKind.CONCURRENT_DELETE_DELETE),
        (r"metadata changed since last commit", ConflictKind.METADATA_CHANGED),
        (r"protocol changed since last commit", ConflictKind.PROTOCOL_CHANGED),
        (r"concurrent transaction failed", ConflictKind.CONCURRENT_TRANSACTION),
        # delta-rs TransactionError::MaxCommitAttempts renders as "Failed to commit transaction: <n>"
        (r"failed to commit transaction:\s*\d+\s*$", ConflictKind.RETRIES_EXHAUSTED),
        (r"(exceeded )?max(imum)? commit (attempts|retries)", ConflictKind.RETRIES_EXHAUSTED),
        # delta-spark / Databricks exception classes and error classes
        (r"ConcurrentAppendException|DELTA_CONCURRENT_APPEND", ConflictKind.CONCURRENT_APPEND),
        (r"ConcurrentDeleteReadException|DELTA_CONCURRENT_DELETE_READ", ConflictKind.CONCURRENT_DELETE_READ),
        (
            r"ConcurrentDeleteDeleteException|DELTA_CONCURRENT_DELETE_DELETE",
            ConflictKind.CONCURRENT_DELETE_DELETE,
        ),
        (r"MetadataChangedException|DELTA_METADATA_CHANGED", ConflictKind.METADATA_CHANGED),
        (r"ProtocolChangedException|DELTA_PROTOCOL_CHANGED", ConflictKind.PROTOCOL_CHANGED),
        (r"ConcurrentTransactionException|DELTA_CONCURRENT_TRANSACTION", ConflictKind.CONCURRENT_TRANSACTION),
    )
)


def parse_conflict_kind(message: str) -> ConflictKind:
    """The conflict kind a commit-failure message describes.

    :param message: the engine's message, whole (``str(exc)``).
    :returns: the kind, or :attr:`ConflictKind.UNKNOWN` when no known text matches.
    """
    text = message.strip()
    for pattern, kind in _PATTERNS:
        if pattern.search(text):
            return kind
    return ConflictKind.UNKNOWN
