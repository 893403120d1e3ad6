"""The engine fence on delta-spark (ADR 0038): the application transaction a leased commit carries.

delta-spark refuses a commit with ``ConcurrentTransactionException`` when a commit that won since its
snapshot carries a ``txn`` whose app id the committing transaction read; a command reads exactly one app id,
the one it records (the writer options ``txnAppId``/``txnVersion`` or the session confs of the same names:
``WriteIntoDelta``, ``DeleteCommand``, ``UpdateCommand``, ``MergeIntoCommand``; OPTIMIZE and ALTER TABLE
record none; read in delta-spark 4.4.0 and measured by ``lab/spark_engine_fence``, ADR 0038).

So a commit carries one id, unlike delta-rs, and a per-task-instance idempotency pair
(``WriteContext.app_id``) takes that one place: only leased commits without one carry the fence. The id is
the first lease this lease replaced whose id no commit of the table carries yet, else the lease's own
(:func:`choose`): a lost lease and the successor that replaced it then carry the same id, and delta-spark
refuses the one that commits second from a snapshot older than the other's commit.

The same pair is an idempotency skip: delta-spark commits nothing, and raises nothing, when the snapshot
already holds a version at or above the write's for the app id. The version grows with the fencing token
(:meth:`deltaguard.leases.keeper.LeaseKeeper.fence_txn_version`), so a live writer is above every version a
lease it replaced could carry, and a skipped write is always found out (:func:`skipped_error`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from deltaguard.engines.specs import (
    AppendSpec,
    DeleteSpec,
    MergeSpec,
    OverwriteSpec,
    ReplaceWhereSpec,
    UpdateSpec,
    WriteSpec,
)
from deltaguard.exceptions import CommitFencedError, ConflictKind, DeltaConflictError

#: the ``userMetadata`` key of a fenced commit's unique id: without it the engine finds its commit by the
#: operation name, which a successor's commit can share
COMMIT_ID_KEY = "deltaguard.commit_id"
#: specs whose delta-spark command reads and records the write's app transaction (see the module text)
FENCED_SPECS = (AppendSpec, OverwriteSpec, ReplaceWhereSpec, DeleteSpec, UpdateSpec, MergeSpec)


@dataclass(frozen=True)
class FenceTxn:
    """The app transaction one leased commit carries as its fence."""

    app_id: str
    version: int


def choose(
    fence: Any,
    table_uri: str,
    spec: WriteSpec,
    recorded: Callable[[list[str]], Mapping[str, int | None] | None],
) -> FenceTxn | None:
    """The fence app transaction of a leased commit, ``None`` when it carries none.

    None for a spec whose command records no app transaction, a fence without fence ids (no lease, or a
    wrapped operator), a lease without a fencing token for the table, or a table whose log ``recorded``
    cannot read (a skipped write could then not be told from a write that changed nothing).

    :param fence: the write's commit fence (a :class:`~deltaguard.leases.keeper.LeaseKeeper`).
    :param table_uri: the table.
    :param spec: the write.
    :param recorded: app ids -> the version the table's log holds for each (``None``: none); ``None`` when
        the log cannot be read here.
    """
    if not isinstance(spec, FENCED_SPECS):
        return None
    ids_of = getattr(fence, "fence_app_ids", None)
    version_of = getattr(fence, "fence_txn_version", None)
    if ids_of is None or version_of is None:
        return None
    own, *replaced = ids_of()
    versions = recorded([own, *replaced])
    if versions is None:
        return None
    # A replaced id already in the log was carried by a commit that landed after the lost lease read its
    # snapshot: that lease's late commit meets it anyway, so the place goes to the next one, then the own.
    carried = next((app for app in replaced if versions.get(app) is None), own)
    version = version_of(table_uri)
    if version is None:
        return None
    return FenceTxn(carried, int(version))


def lost_reason(fence: Any) -> str | None:
    """Why the fence's lease is lost; ``None`` while it is held (or the fence cannot tell)."""
    still_held = getattr(fence, "still_held", None)
    if still_held is None:
        return None
    try:
        reason = still_held()
    except Exception as exc:  # the store cannot say: the lease is not certainly held
        return f"its state is unknown ({exc})"
    return None if reason is None else str(reason)


def refused_error(conflict: DeltaConflictError, fence: Any, table_uri: str) -> CommitFencedError | None:
    """A ``ConcurrentTransaction`` refusal of a writer whose lease is lost: delta-spark refused its late
    commit (nothing was committed). ``None`` while the lease is held (a writer that replaced the same lost
    lease committed first: a conflict, retried)."""
    if conflict.kind is not ConflictKind.CONCURRENT_TRANSACTION:
        return None
    reason = lost_reason(fence)
    if reason is None:
        return None
    return CommitFencedError(
        f"write to {table_uri} refused by Delta's conflict checker: its lease was lost ({reason}) and a "
        "writer that replaced it committed first; nothing was committed"
    )


def skipped_error(
    txn: FenceTxn, recorded_version: int | None, fence: Any, table_uri: str
) -> CommitFencedError | DeltaConflictError | None:
    """The error of a fenced write that committed nothing, when delta-spark skipped it; ``None`` when the
    log's version for the fence id is below the write's (a write that changed nothing, such as a DELETE
    matching no row, commits nothing either).

    A skip means a commit at or above this write's version carries its fence id: a successor of this lease
    (the lease is lost: :class:`CommitFencedError`), or a writer that replaced the same lost lease and
    committed between this write's read of the log and its transaction (a conflict, retried).
    """
    if recorded_version is None or recorded_version < txn.version:
        return None
    detail = (
        f"delta-spark skipped the write to {table_uri}: the table's log holds version {recorded_version} of "
        f"its fence app transaction {txn.app_id} (this write's: {txn.version}); nothing was committed"
    )
    reason = lost_reason(fence)
    if reason is not None:
        return CommitFencedError(
            f"{detail}; its lease was lost ({reason}) and a writer that replaced it committed"
        )
    return DeltaConflictError(ConflictKind.CONCURRENT_TRANSACTION, detail, table_uri, "spark")
