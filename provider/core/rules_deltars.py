"""delta-rs (the ``deltalake`` Python package) conflict rules.

Until the delta-rs profile is measured and proven by the conformance harness, the model may only declare
two blind INSERTs compatible; every other pair conflicts (the conservative rule of issue 2).

Interface (the same for every engine rule module, see :mod:`deltaguard.core.facts`):

``table_context(table, profile) -> TableContext``
    how delta-rs reads the table (isolation level, no row-level concurrency).
``pair(a, b, ctx) -> PairVerdict``
    ``a`` and ``b`` are :class:`~deltaguard.core.facts.OpFacts` (``a.op`` is the
    :class:`~deltaguard.core.operations.Operation`, ``a.role``, ``a.scope`` the parsed predicate); the
    verdict must be symmetric (same answer whatever the order). It is called only after the shared rules
    (identity columns, metadata changes, table creation, streaming checkpoints, conservative
    configuration) found nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deltaguard.core.decision import DeltaException, PairVerdict

if TYPE_CHECKING:
    from deltaguard.core.facts import OpFacts, TableContext
    from deltaguard.core.profiles import EngineProfile
    from deltaguard.core.table_config import TableConfig

_ALL_EXCEPTIONS = (
    DeltaException.CONCURRENT_APPEND,
    DeltaException.CONCURRENT_DELETE_READ,
    DeltaException.CONCURRENT_DELETE_DELETE,
)


def table_context(table: TableConfig, profile: EngineProfile) -> TableContext:
    """delta-rs: Serializable by default, no row-level concurrency.

    :param table: the table configuration.
    :param profile: the delta-rs profile.
    """
    from deltaguard.core.facts import IsolationLevel, TableContext

    return TableContext(table=table, profile=profile, isolation=IsolationLevel.SERIALIZABLE)


def pair(a: OpFacts, b: OpFacts, ctx: TableContext) -> PairVerdict:
    """Two blind INSERTs are compatible; everything else conflicts until measured.

    :param a: one operation's facts.
    :param b: the other operation's facts.
    :param ctx: the table as delta-rs reads it.
    """
    if a.op.is_blind_append and b.op.is_blind_append:
        return PairVerdict(
            conflict=False,
            reason=f"{ctx.profile.describe()}: two blind INSERTs only add files and read nothing, so neither "
            "can invalidate the other (issue 2: the only pair delta-rs may declare compatible before probing)",
            rule="deltars.blind_appends",
        )
    return PairVerdict(
        conflict=True,
        exceptions=_ALL_EXCEPTIONS,
        reason=f"{ctx.profile.describe()}: {a.kind.value} x {b.kind.value} is not proven compatible for delta-rs; "
        "until the conformance harness measures it, every pair except two blind INSERTs conflicts (conservative)",
        advice=("run these writes one after the other, or express the concurrent write as a blind append",),
        rule="deltars.unproven",
    )
