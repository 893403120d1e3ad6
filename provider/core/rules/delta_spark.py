"""Open-source Delta Lake on Spark (delta-spark) conflict rules, measured.

Read from delta-spark's ``ConflictChecker`` (spark/src/main/scala/org/apache/spark/sql/delta/
ConflictChecker.scala) and ``DeltaConfigs.ISOLATION_LEVEL``, then measured against delta-spark 4.4.0 on
Spark 4.2.0 with forced interleavings (``deltaguard conformance --engine delta-spark``; table and method in
docs/adr/0014-delta-spark-profile.md, results in benchmarks/results/conformance_deltaspark.json). Where a
measured cell contradicts a ``no_conflict`` here, the rule yields ``conflict``; no measured cell did. The
model re-states the checks in terms of which partitions an operation reads, removes and adds, in both
commit orders:

* ``checkForAddedFilesThatShouldHaveBeenReadByCurrentTxn``: files the winner added (blind appends
  included under Serializable) that match the loser's *partition* read predicates raise
  ConcurrentAppendException; data-column predicates do not narrow this check, so on an unpartitioned
  table every reader conflicts with every added file. Measured: INSERT then a stale UPDATE of the same
  partition, of the unpartitioned table, and of other rows of the unpartitioned table (disjoint data
  predicates) all raise ConcurrentAppendException; of another partition, both commit.
* ``checkForDeletedFilesAgainstCurrentTxnReadFiles``: files the winner removed that the loser read (or
  any removed file when the loser read the whole table) raise ConcurrentDeleteReadException. OPTIMIZE's
  removes count too, so OPTIMIZE conflicts with overlapping DML whatever the deletion-vector setting.
* ``checkForDeletedFilesAgainstCurrentTxnDeletedFiles``: a file removed by both raises
  ConcurrentDeleteDeleteException.
* A commit without data changes (OPTIMIZE) downgrades to SnapshotIsolation and skips the added-files
  check, so OPTIMIZE vs a blind INSERT cannot conflict. Measured: a stale blind INSERT commits after an
  OPTIMIZE, on every layout. (The other order, OPTIMIZE as the stale write, cannot be forced: OPTIMIZE runs
  no user expression the harness could pause in; those orders are reported inconclusive.)
* Blind appends read nothing: measured, two INSERTs commit in both orders on every layout.
* ``delta.isolationLevel`` only accepts ``Serializable`` ("must be Serializable"; ``IsolationLevel.fromString``
  ignores case); there is no row-level concurrency.
"""

from __future__ import annotations

from deltaguard.core.decision import DeltaException, PairVerdict
from deltaguard.core.facts import IsolationLevel, OpFacts, Role, TableContext, may_overlap
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig

SOURCE = "delta-spark ConflictChecker"


def table_context(table: TableConfig, profile: EngineProfile) -> TableContext:
    """delta-spark: Serializable only, no row-level concurrency.

    :param table: the table configuration.
    :param profile: a delta-spark profile.
    """
    raw = table.get_property("delta.isolationLevel")
    conservative: tuple[str, ...] = ()
    if raw is not None and raw.strip().lower() != "serializable":
        conservative = (
            f"delta.isolationLevel = {raw!r}, but delta-spark only accepts Serializable "
            "(DeltaConfigs.ISOLATION_LEVEL: 'must be Serializable')",
        )
    return TableContext(
        table=table,
        profile=profile,
        isolation=IsolationLevel.SERIALIZABLE,
        notes=(f"{profile.describe()}: no row-level concurrency in open-source delta-spark",),
        conservative=conservative,
    )


def _removes(f: OpFacts) -> bool:
    return f.role in (Role.READ_WRITE, Role.REWRITE, Role.COMPACTION)


def _reads(f: OpFacts) -> bool:
    # OPTIMIZE reads the files it compacts (readFiles), even though it skips the added-files check.
    return f.role in (Role.READ_WRITE, Role.REWRITE, Role.COMPACTION)


def _checks_appends(f: OpFacts) -> bool:
    # Only commits that change data run under Serializable; OPTIMIZE downgrades to SnapshotIsolation.
    return f.role in (Role.READ_WRITE, Role.REWRITE)


def _adds(f: OpFacts) -> bool:
    return f.role in (Role.APPEND, Role.READ_WRITE, Role.REWRITE, Role.COMPACTION)


def _one_order(winner: OpFacts, loser: OpFacts) -> set[DeltaException]:
    found: set[DeltaException] = set()
    if _adds(winner) and _checks_appends(loser):
        found.add(DeltaException.CONCURRENT_APPEND)
    if _removes(winner) and _reads(loser):
        found.add(DeltaException.CONCURRENT_DELETE_READ)
    if _removes(winner) and _removes(loser):
        found.add(DeltaException.CONCURRENT_DELETE_DELETE)
    return found


def pair(a: OpFacts, b: OpFacts, ctx: TableContext) -> PairVerdict:
    """Whether the ConflictChecker could fail one of the two, in either commit order.

    :param a: one operation.
    :param b: the other operation.
    :param ctx: the table as delta-spark reads it.
    """
    from deltaguard.core.rules.common import ordered

    exceptions = _one_order(a, b) | _one_order(b, a)
    names = f"{a.kind.value} vs {b.kind.value}"
    if not exceptions:
        return PairVerdict(
            conflict=False,
            reason=f"{SOURCE}: {names} cannot conflict: neither reads or removes files the other touches "
            "(blind appends read nothing; OPTIMIZE commits without data change skip the added-files check)",
            rule="spark.no_shared_files",
        )
    table = ctx.table
    overlap = not table.is_partitioned or may_overlap(a, b, table.partition_columns, conjuncts_only=True)
    if not overlap:
        return PairVerdict(
            conflict=False,
            reason=f"{SOURCE}: {names} touch provably different partitions "
            f"({', '.join(table.partition_columns)}); its checks match files by partition predicates",
            rule="spark.disjoint_partitions",
        )
    where = (
        "the table is unpartitioned, so any added or removed file is in what the other read"
        if not table.is_partitioned
        else "their partition scopes may overlap (what one reads, with what the other writes outside what it "
        "reads; only top-level partition-only conjuncts narrow a read)"
    )
    advice = []
    for f in (a, b):
        if f.kind.value == "MERGE" and f.scope.is_everything and table.is_partitioned:
            advice.append(
                f"add `{f.op.target_alias}.{table.partition_columns[0]} = ...` to the MERGE condition of {f.name()}"
            )
    if table.is_partitioned:
        advice.append(
            f"restrict both operations to different partitions ({', '.join(table.partition_columns)})"
        )
    else:
        advice.append(
            "partition the table by the predicate column so the operations touch different partitions"
        )
    return PairVerdict(
        conflict=True,
        exceptions=ordered(exceptions),
        reason=f"{SOURCE}: {names} can conflict (Serializable; no row-level concurrency): {where}",
        advice=tuple(advice),
        rule="spark.partition_overlap",
    )
