"""May an admission decision use the file statistics a request carries? (ADR 0020, *Freshness*.)

The delta-rs statistics rule (:mod:`deltaguard.core.rules.deltars_stats`) judges two writes on the statistics
of one snapshot ``S``. Read against delta-rs' conflict checker
(``crates/core/src/kernel/transaction/conflict_checker.rs``), its argument holds for a pair made of the
requester ``R`` and a running write ``H`` when:

* ``R`` writes from exactly ``S`` (its read version is ``S``): a newer snapshot may hold files ``S`` does not
  show, which ``R`` would then rewrite, so its new files could span values the rule bounded away;
* ``H`` read a snapshot no newer than ``S``. A newer one may hold files added after ``S``; ``H`` rewrites the
  ones its predicate keeps, possibly together with files ``S`` does show, into one file whose range the
  statistics of ``S`` cannot bound (an ``id < 100`` UPDATE merging a day-1 file with a day-5 file appended
  later yields a file spanning days 1-5, which a stale ``day = 3`` UPDATE then meets: ``ConcurrentAppend``).
  An *older* snapshot is harmless: a file ``H`` rewrites was removed since only if some commit removed it,
  and then ``H`` fails on its own (``ConcurrentDeleteDelete`` for any removal, ``ConcurrentDeleteRead`` for a
  data-changing one); a file it rewrites that is still in ``S`` has the same statistics there (one ``add``
  action per path), so the rule's bounds cover every file ``H`` can commit; files added after ``H``'s
  snapshot are not in it, and counting them in its footprint on ``S`` only widens the footprint.

A holder whose read version is unknown (an older client, an engine that does not pin its snapshot) is
treated as newer. Waiting requests are not checked: they only order the queue, and each is judged again
against every granted lease, with its own statistics, before it is granted.
"""

from __future__ import annotations

from collections.abc import Iterable

from deltaguard.core.operations import Operation
from deltaguard.core.rules.deltars_stats import STATS_KINDS
from deltaguard.core.table_config import TableConfig


def stats_unusable(
    config: TableConfig, read_version: int | None, holders: Iterable[tuple[str, Operation, int | None]]
) -> str | None:
    """Why the decision must not use ``config.file_stats``, or ``None`` when it may (or there are none).

    :param config: the configuration the decision uses.
    :param read_version: the snapshot version the requester's write reads (``None``: not pinned).
    :param holders: every other granted write on the table: its name, operation and read version.
    """
    summary = config.file_stats
    if summary is None:
        return None
    version = summary.version
    if read_version is None or read_version != version:
        return (
            f"file statistics of version {version} were not used: the write does not read that snapshot "
            f"(its read version is {'not recorded' if read_version is None else read_version})"
        )
    for name, operation, held in holders:
        if operation.kind not in STATS_KINDS:
            continue  # the statistics rule never judges a pair with it
        if held is None:
            return (
                f"file statistics of version {version} were not used: running write {name} recorded no read "
                "version, so it may rewrite files they do not show"
            )
        if held > version:
            return (
                f"file statistics of version {version} were not used: running write {name} read version "
                f"{held}, newer than the statistics, so it may rewrite files they do not show"
            )
    return None
