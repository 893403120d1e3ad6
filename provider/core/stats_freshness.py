"""May an admission decision use the file statistics a request carries? (ADR 0020, *Freshness*.)

The delta-rs statistics rule (:mod:`deltaguard.core.rules.deltars_stats`) judges two writes on the statistics
of one snapshot ``S``. Its argument holds for a requester ``R`` and a running write ``H`` when ``R`` writes
from exactly ``S`` and ``H`` read a snapshot no newer than ``S`` (why, read against delta-rs'
``conflict_checker.rs`` and measured: ADR 0020, *Freshness*). A holder whose read version is unknown is
treated as newer. Waiting requests are not checked: each is judged again against every granted lease, with
its own statistics, before it is granted.
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
