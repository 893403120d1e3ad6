"""The serial order a run's commits are equivalent to, read from the Delta log with each commit's ``readVersion``.

The Delta-log order (:func:`benchmarks.harness.run_analysis.delta_log_order`) is the wrong oracle for
delta-spark under ``WriteSerializable``: a conflict check there ignores what *blind appends* added (Databricks
page "Isolation levels and write conflicts": "WriteSerializable ... allows blind appends"), so an UPDATE or
MERGE that read version ``r`` may commit at ``r + 2`` after a blind append at ``r + 1`` without a conflict. It
never saw the appended rows: the serial execution it matches is UPDATE-then-append, not the log's
append-then-UPDATE. Measured on a local delta-spark 4.4.0 table (an UPDATE of partition ``p0`` held 8 s in its
job while an append to ``p0`` committed: the UPDATE committed at version 4 with ``readVersion`` 2 after the
append's version 3, no exception, and the appended rows kept their values).

The rule (:func:`serial_positions`): a blind append takes effect at its own version; any other commit takes
effect right after the version it read (``readVersion + 0.5``), because everything committed in between
either commutes with it (Delta checked it) or was a blind append it did not see. Ties keep version order. A
commit without a ``readVersion`` (the engine did not record one) stays at its version.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from benchmarks.harness.run_analysis import LogOrder, table_history


@dataclass(frozen=True)
class LoggedCommit:
    """What the serial order needs of one commit of a benchmark write.

    :param version: the committed version.
    :param write: the benchmark write it belongs to.
    :param read_version: the snapshot it read (``None``: not recorded).
    :param blind_append: Delta's ``isBlindAppend``.
    """

    version: int
    write: str
    read_version: int | None
    blind_append: bool


def serial_positions(commits: Iterable[LoggedCommit]) -> list[LoggedCommit]:
    """``commits`` (one table) in the order a serial execution of them gives the same table."""

    def position(commit: LoggedCommit) -> tuple[float, int]:
        if commit.blind_append or commit.read_version is None:
            return float(commit.version), commit.version
        return commit.read_version + 0.5, commit.version

    return sorted(commits, key=position)


def delta_serial_order(
    tables: Mapping[str, str],
    write_tables: Mapping[str, str],
    no_ops: Mapping[str, int],
    key: str,
) -> LogOrder:
    """Like :func:`~benchmarks.harness.run_analysis.delta_log_order` (same checks: duplicates, misplaced
    writes, no-op writes right after the version they read), but each table's writes in
    :func:`serial_positions` order.

    :param tables: table name -> URI.
    :param write_tables: write id -> the table name it writes (the plan).
    :param no_ops: write id -> the version it read, for writes that ran and committed nothing.
    :param key: the commit-metadata key naming a commit's write.
    """
    order: list[str] = []
    committed: dict[str, tuple[str, int]] = {}
    duplicates: set[str] = set()
    misplaced: set[str] = set()
    for name, uri in tables.items():
        logged: list[LoggedCommit] = []
        for commit in table_history(uri):
            write = commit.info.get(key)
            if not write:
                continue
            write = str(write)
            if write in committed:
                duplicates.add(write)
                continue
            if write_tables.get(write) != name:
                misplaced.add(write)
            committed[write] = (name, commit.version)
            logged.append(
                LoggedCommit(
                    commit.version, write, commit.read_version, bool(commit.info.get("isBlindAppend"))
                )
            )
        logged += [
            # a write that committed nothing read ``version``: it sits right after it, like a reader
            LoggedCommit(version, write, version, False)
            for write, version in no_ops.items()
            if write_tables.get(write) == name
        ]
        order.extend(c.write for c in serial_positions(logged))
    return LogOrder(tuple(order), committed, tuple(sorted(duplicates)), tuple(sorted(misplaced)))


def reordered(log_order: Sequence[str], serial: Sequence[str]) -> list[str]:
    """The writes whose place differs between the log order and the serial order (for the report)."""
    return [a for a, b in zip(log_order, serial, strict=False) if a != b]
