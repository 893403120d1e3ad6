"""Rules every engine shares, applied before the engine's own pair rules.

They come from Delta's transaction protocol itself, not from one engine's conflict resolution: commits
that are not mutually exclusive, identity columns, metadata and protocol changes, writers racing to create a table, streaming writes sharing a
checkpoint, and table configurations the model does not understand (read through
:mod:`deltaguard.core.closed_world`, ADR 0036).
"""

from __future__ import annotations

from deltaguard.core.closed_world import table_unknowns
from deltaguard.core.decision import DeltaException, PairVerdict
from deltaguard.core.facts import OpFacts, Role, TableContext
from deltaguard.core.locations import table_identity
from deltaguard.core.operations import OperationKind
from deltaguard.core.profiles import SINGLE_DRIVER_COORDINATION, EngineProfile

#: every data-file conflict exception, for verdicts that cannot say which one
DATA_EXCEPTIONS: tuple[DeltaException, ...] = (
    DeltaException.CONCURRENT_APPEND,
    DeltaException.CONCURRENT_DELETE_READ,
    DeltaException.CONCURRENT_DELETE_DELETE,
)

_ORDER = tuple(DeltaException)


def ordered(exceptions: set[DeltaException] | tuple[DeltaException, ...]) -> tuple[DeltaException, ...]:
    """Exceptions in a stable order (the order :class:`DeltaException` declares them)."""
    return tuple(e for e in _ORDER if e in exceptions)


def _metadata_exceptions(a: OpFacts, b: OpFacts) -> tuple[DeltaException, ...]:
    found: set[DeltaException] = set()
    kinds = {a.kind, b.kind}
    for facts in (a, b):
        if facts.role is not Role.METADATA:
            continue
        if facts.kind is OperationKind.REORG_UPGRADE:
            found.add(DeltaException.PROTOCOL_CHANGED)
        elif facts.kind is OperationKind.SET_TBLPROPERTIES:
            # Enabling a feature through a property (delta.enableDeletionVectors = true) also upgrades the
            # protocol, so both exceptions are possible.
            found.update({DeltaException.METADATA_CHANGED, DeltaException.PROTOCOL_CHANGED})
        else:
            found.add(DeltaException.METADATA_CHANGED)
    if kinds == {OperationKind.CREATE_OR_REPLACE}:
        found.add(DeltaException.PROTOCOL_CHANGED)
    return ordered(found)


def commit_coordination_pair(first: EngineProfile, second: EngineProfile) -> PairVerdict | None:
    """A conflict when the two writers' commits are not excluded from each other, else ``None``.

    Delta Lake's "Storage configuration" page: the log store must guarantee mutual exclusion ("only one
    writer must be able to create (or rename) a file at the final destination"); without it two commits of
    the same version both succeed and the later one replaces the earlier. No conflict check can see that,
    so writes whose commits different coordinators guard run one at a time, whatever they touch.

    :param first: the engine (and its coordinator) committing one write.
    :param second: the engine committing the other.
    """
    if first.commit_coordination == second.commit_coordination:
        return None
    single = [p for p in (first, second) if p.commit_coordination.startswith(SINGLE_DRIVER_COORDINATION)]
    if single:
        return PairVerdict(
            conflict=True,
            exceptions=(),
            reason=f"Storage configuration (Delta Lake): {single[0].describe()} commits to this location "
            "through a log store that excludes concurrent commits only inside one driver (S3SingleDriverLogStore "
            "on S3, HDFSLogStore's rename on local files), and the other write commits elsewhere; two "
            "drivers committing at once can overwrite each other's commit and lose data",
            advice=(
                "send the writes through one driver (one Spark Connect server), or configure a log store "
                "that excludes every writer (S3DynamoDBLogStore for delta-spark on S3)",
            ),
            rule="common.single_driver_commits",
        )
    return PairVerdict(
        conflict=True,
        exceptions=(),
        reason="Storage configuration (Delta Lake): the two writers coordinate their commits differently "
        f"({first.describe()}: {first.commit_coordination}; {second.describe()}: "
        f"{second.commit_coordination}), so neither excludes the other's commit of the same version",
        advice=("write the table through one engine and one commit coordinator",),
        rule="common.mixed_commit_coordination",
    )


def unknown_settings_pair(first: EngineProfile, second: EngineProfile) -> PairVerdict | None:
    """A conflict when either writer's session has settings the model does not understand, else ``None``.

    Closed world (ADR 0036): such a setting may change which rows a condition selects or how a commit is
    checked, so nothing separates a write committed under it.

    :param first: the engine (and its session) committing one write.
    :param second: the engine committing the other.
    """
    unknown = tuple(dict.fromkeys((*first.session_unknown_settings, *second.session_unknown_settings)))
    if not unknown:
        return None
    return PairVerdict(
        conflict=True,
        exceptions=(),
        reason="the session that commits sets what the conflict model does not know the effect of "
        f"({', '.join(unknown[:5])}{', ...' if len(unknown) > 5 else ''}), so nothing separates its writes",
        advice=("unset these settings in the Spark session or connection that runs the writes",),
        rule="common.unknown_session_settings",
    )


def shared_pair(a: OpFacts, b: OpFacts, ctx: TableContext) -> PairVerdict | None:
    """The verdict of the shared rules, or ``None`` when none applies and the engine rules decide.

    :param a: one operation's facts.
    :param b: the other operation's facts.
    :param ctx: the table as the engine reads it.
    """
    table = ctx.table
    if table.has_identity_columns:
        columns = ", ".join(table.identity_columns)
        return PairVerdict(
            conflict=True,
            exceptions=(DeltaException.METADATA_CHANGED, DeltaException.CONCURRENT_APPEND),
            reason=f"Isolation levels and write conflicts, Note: tables with identity columns ({columns}) do not support concurrent "
            "transactions (every write advances the identity high-water mark in the table metadata)",
            advice=(
                "run writes to this table one at a time, or generate the key in the job instead of an "
                "identity column",
            ),
            rule="common.identity_columns",
        )
    if not table.exists:
        return PairVerdict(
            conflict=True,
            exceptions=(DeltaException.PROTOCOL_CHANGED,),
            reason="Isolation levels and write conflicts, ProtocolChangedException: the table does not exist yet, so both writes create it "
            "(multiple writers creating a table or writing to an empty path at the same time)",
            advice=("create the table first with a single writer, then run the writes",),
            rule="common.table_creation",
        )
    if a.role is Role.METADATA or b.role is Role.METADATA:
        changer = a if a.role is Role.METADATA else b
        if changer.op.evolves_schema:
            # A data write whose commit also changes the schema (measured, ADR 0035).
            what = f"{changer.kind.value} with schema evolution, which adds columns to the table schema as it commits"
            alone = f"the schema-evolving {changer.kind.value}"
        else:
            what = f"{changer.kind.value}: table protocol, properties or schema"
            alone = f"the {changer.kind.value}"
        return PairVerdict(
            conflict=True,
            exceptions=_metadata_exceptions(a, b),
            reason=f"Isolation levels and write conflicts, Important: metadata changes ({what}) cause all "
            "concurrent write operations to fail",
            advice=(f"run {alone} alone, when no other write on the table is running",),
            rule="common.metadata_change",
        )
    if a.kind is OperationKind.STREAMING_WRITE and b.kind is OperationKind.STREAMING_WRITE:
        first, second = a.op.checkpoint_location, b.op.checkpoint_location
        same = first is not None and second is not None and table_identity(first) == table_identity(second)
        if first is None or second is None or same:
            # An unknown checkpoint may be the same one: conservative.
            where = f"the same checkpoint location ({first}, {second})" if same else "a checkpoint location"
            known = "" if first is not None and second is not None else " that is not known to differ"
            return PairVerdict(
                conflict=True,
                exceptions=(DeltaException.CONCURRENT_TRANSACTION,),
                reason=f"Isolation levels and write conflicts, ConcurrentTransactionException: two streaming queries use {where}{known}",
                advice=("give each streaming query its own checkpoint location (and declare it)",),
                rule="common.same_checkpoint",
            )
    problems = tuple(dict.fromkeys(ctx.conservative + table_unknowns(table)))
    if problems:
        return PairVerdict(
            conflict=True,
            exceptions=DATA_EXCEPTIONS,
            reason=f"{ctx.profile.describe()}: the table configuration is not fully understood ("
            + "; ".join(problems)
            + "), so every pair is treated as conflicting (conservative default)",
            advice=("fix or remove the settings listed above, or run the writes one at a time",),
            rule="common.conservative",
        )
    return None
