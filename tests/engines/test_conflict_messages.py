"""The message -> ConflictKind parser, on the real message texts delta-rs (and delta-spark) produce."""

from __future__ import annotations

import pytest

from deltaguard.engines.conflict_messages import parse_conflict_kind
from deltaguard.engines.errors import ConflictKind

_HELP_READ = (
    "\nHelp: This transaction's query must be rerun to include the new data. Also, if you don't care to "
    "require this check to pass in the future, the isolation level can be set to Snapshot Isolation."
)

# Texts of delta-rs' CommitConflictError / TransactionError (crates/core/src/kernel/transaction), wrapped
# the way deltalake 1.6.6 raises them ("Failed to commit transaction: ...").
CASES = [
    (
        "Failed to commit transaction: Commit failed: a concurrent transactions added new data." + _HELP_READ,
        ConflictKind.CONCURRENT_APPEND,
    ),
    (
        "Failed to commit transaction: Commit failed: a concurrent transaction deleted data this operation read.\n"
        "Help: This transaction's query must be rerun to exclude the removed data.",
        ConflictKind.CONCURRENT_DELETE_READ,
    ),
    (
        "Failed to commit transaction: Commit failed: a concurrent transaction deleted the same data your "
        "transaction deletes.\nHelp: you should retry this write operation.",
        ConflictKind.CONCURRENT_DELETE_DELETE,
    ),
    ("Failed to commit transaction: Metadata changed since last commit.", ConflictKind.METADATA_CHANGED),
    (
        "Failed to commit transaction: Protocol changed since last commit: required read/write 3/7, current "
        "read/write 1/2",
        ConflictKind.PROTOCOL_CHANGED,
    ),
    (
        "Failed to commit transaction: Protocol changed since last commit: protocol changed",
        ConflictKind.PROTOCOL_CHANGED,
    ),
    ("Failed to commit transaction: Concurrent transaction failed.", ConflictKind.CONCURRENT_TRANSACTION),
    # TransactionError::MaxCommitAttempts(n) renders only the number
    ("Failed to commit transaction: 0", ConflictKind.RETRIES_EXHAUSTED),
    ("Failed to commit transaction: 15", ConflictKind.RETRIES_EXHAUSTED),
    ("exceeded maximum commit attempts", ConflictKind.RETRIES_EXHAUSTED),
    # delta-spark exception classes / error classes
    (
        "io.delta.exceptions.ConcurrentAppendException: [DELTA_CONCURRENT_APPEND] Files were added to the root "
        "of the table by a concurrent update.",
        ConflictKind.CONCURRENT_APPEND,
    ),
    (
        "io.delta.exceptions.ConcurrentDeleteReadException: This transaction attempted to read one or more files "
        "that were deleted",
        ConflictKind.CONCURRENT_DELETE_READ,
    ),
    (
        "io.delta.exceptions.ConcurrentDeleteDeleteException: [DELTA_CONCURRENT_DELETE_DELETE] ...",
        ConflictKind.CONCURRENT_DELETE_DELETE,
    ),
    (
        "io.delta.exceptions.MetadataChangedException: [DELTA_METADATA_CHANGED] The metadata of the Delta table "
        "has been changed by a concurrent update.",
        ConflictKind.METADATA_CHANGED,
    ),
    (
        "io.delta.exceptions.ProtocolChangedException: [DELTA_PROTOCOL_CHANGED] ...",
        ConflictKind.PROTOCOL_CHANGED,
    ),
    (
        "io.delta.exceptions.ConcurrentTransactionException: [DELTA_CONCURRENT_TRANSACTION] ...",
        ConflictKind.CONCURRENT_TRANSACTION,
    ),
    # not a known conflict text
    ("Failed to commit transaction: something new happened", ConflictKind.UNKNOWN),
    ("", ConflictKind.UNKNOWN),
]


@pytest.mark.parametrize(("message", "kind"), CASES, ids=[f"{i}-{k.value}" for i, (_, k) in enumerate(CASES)])
def test_parse_conflict_kind(message: str, kind: ConflictKind) -> None:
    assert parse_conflict_kind(message) is kind


def test_every_kind_is_reachable() -> None:
    assert {kind for _, kind in CASES} == set(ConflictKind)


def test_number_inside_a_message_is_not_retries_exhausted() -> None:
    # "required read/write 3/7" ends in a digit but is a protocol change, not MaxCommitAttempts.
    assert parse_conflict_kind("Failed to commit transaction: Protocol changed since last commit: 3/7") is (
        ConflictKind.PROTOCOL_CHANGED
    )
