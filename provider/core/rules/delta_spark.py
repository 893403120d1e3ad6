"""Open-source Delta Lake on Spark (delta-spark) conflict rules, measured.

Read from delta-spark's ``ConflictChecker`` (spark/src/main/scala/org/apache/spark/sql/delta/
ConflictChecker.scala) and ``DeltaConfigs.ISOLATION_LEVEL``, then measured against delta-spark 4.4.0 on
Spark 4.2.0 with forced interleavings (``python -m lab.conformance --engine delta-spark``; results in
benchmarks/results/conformance_deltaspark.json). Where a measured cell contradicts a ``no_conflict`` here,
the rule yields ``conflict``; no measured cell did. The rules re-state the checker's checks in terms of
which partitions an operation reads, removes and adds, in both commit orders: each check, what was measured
and how ``delta.isolationLevel`` is read are listed in ADR 0014 (*The checks the rules restate*). There is
no row-level concurrency and no three-way rule like the Databricks page's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from deltaguard.core.closed_world import table_property, version_caveat
from deltaguard.core.decision import DeltaException, PairVerdict
from deltaguard.core.facts import IsolationLevel, OpFacts, Role, TableContext, may_overlap
from deltaguard.core.meaning import engine_refutes
from deltaguard.core.operations import OperationKind
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.sql.predicates import partition_conjuncts
from deltaguard.core.table_config import TableConfig

SOURCE = "delta-spark ConflictChecker"
#: where the isolation-level measurements are
MEASURED = (
    "measured on delta-spark 4.4.0 with tables delta-rs wrote: python -m lab.conformance --engine delta-spark "
    "--slice isolation, benchmarks/results/conformance_deltaspark_isolation.json"
)
#: the levels ``IsolationLevel.fromString`` knows (it compares ignoring case, and trims nothing)
SPARK_LEVELS: tuple[str, ...] = ("Serializable", "WriteSerializable", "SnapshotIsolation")


@dataclass(frozen=True)
class SparkIsolation:
    """What a delta-spark writer makes of a table's ``delta.isolationLevel``.

    :param level: the level its data commits run under (``Serializable``, ``WriteSerializable``,
        ``SnapshotIsolation``), ``None`` when it cannot parse the value.
    :param problem: for an unparsable value, why every write fails (``None`` otherwise).
    """

    level: str | None
    problem: str | None = None


def read_isolation(raw: str | None) -> SparkIsolation:
    """Read ``delta.isolationLevel`` as delta-spark 4.4.0 does (``DeltaConfigs.ISOLATION_LEVEL.fromMetaData``).

    Absent means Serializable (the config's default). A value equal to a level ignoring case is that level
    (measured: ``Serializable``, ``WriteSerializable``, ``writeserializable`` and ``SnapshotIsolation`` commit
    and record that level in commitInfo). Anything else, spaces around a level included (``fromString``
    trims nothing), makes ``fromString`` throw ``DELTA_INVALID_ISOLATION_LEVEL`` when a write commits:
    measured with ``nonsense``, every write fails and plain reads work.

    :param raw: the property's value, ``None`` when absent.
    """
    if raw is None:
        return SparkIsolation("Serializable")
    for level in SPARK_LEVELS:
        if raw.lower() == level.lower():
            return SparkIsolation(level)
    return SparkIsolation(
        None,
        f"delta.isolationLevel = {raw!r} is no isolation level delta-spark knows, so it fails every write to "
        "this table (IsolationLevel.fromString raises DELTA_INVALID_ISOLATION_LEVEL at commit; "
        f"{MEASURED}); set it to Serializable or WriteSerializable, or unset it",
    )


def table_context(table: TableConfig, profile: EngineProfile) -> TableContext:
    """delta-spark: the table's isolation level as the writer reads it, no row-level concurrency.

    :param table: the table configuration.
    :param profile: a delta-spark profile.
    """
    reading = read_isolation(table_property(table, "delta.isolationLevel"))
    notes = [f"{profile.describe()}: no row-level concurrency in open-source delta-spark"]
    isolation = IsolationLevel.SERIALIZABLE
    caveat = version_caveat(profile)
    if caveat is not None:
        # The strictest delta-spark profile: the Serializable checks whatever level the table stores.
        pass
    elif reading.level == "WriteSerializable":
        isolation = IsolationLevel.WRITE_SERIALIZABLE
        notes.append(
            "delta-spark honours delta.isolationLevel = WriteSerializable stored in the table (Spark itself "
            f"refuses to set it): a blind INSERT does not fail a concurrent UPDATE or MERGE ({MEASURED})"
        )
    elif reading.level == "SnapshotIsolation":
        notes.append(
            "delta-spark commits under SnapshotIsolation here and skips the added-files check "
            f"({MEASURED}); deltaguard keeps the Serializable rules, whose conflicts are a superset and "
            "which keep pairs apart that would otherwise commit a write skew"
        )
    return TableContext(
        table=table,
        profile=profile,
        isolation=isolation,
        notes=tuple(notes),
        conservative=(reading.problem,) if reading.problem else (),
        caveats=(caveat,) if caveat else (),
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


#: readers measured to commit over a blind INSERT under WriteSerializable (DELETE as the ConflictChecker reads)
_WRITE_SERIALIZABLE_READERS = frozenset({OperationKind.UPDATE, OperationKind.MERGE, OperationKind.DELETE})


def _blind_append_skipped(winner: OpFacts, loser: OpFacts, ctx: TableContext) -> bool:
    """WriteSerializable: the loser's added-files check ignores a blind append's files.

    Measured: a blind INSERT winning against an UPDATE, a MERGE or a DELETE. The ConflictChecker reads so:
    its ``addedFilesToCheckForConflicts`` is ``changedDataAddedFiles`` (blind appends excluded) for every
    WriteSerializable transaction that changes no metadata, and a DELETE changes none (it only removes and
    re-adds files); the Databricks page agrees ("UPDATE, DELETE, MERGE INTO" vs INSERT cannot conflict in
    WriteSerializable). An insert-if-absent MERGE (an INSERT reading the target), OVERWRITE / REPLACE WHERE
    losers (whose session settings can widen what they write) and streaming appends keep the Serializable
    check. UPDATE, MERGE and DELETE change no metadata here (schema evolution is judged as a metadata change).
    """
    return (
        ctx.isolation is IsolationLevel.WRITE_SERIALIZABLE
        and winner.role is Role.APPEND
        and winner.kind is OperationKind.INSERT
        and loser.role is Role.READ_WRITE
        and loser.kind in _WRITE_SERIALIZABLE_READERS
    )


def _evidence(a: OpFacts, b: OpFacts) -> str:
    if OperationKind.DELETE in (a.kind, b.kind):
        return (
            "ConflictChecker.addedFilesToCheckForConflicts, measured for DELETE on delta-spark 4.4.0: "
            "benchmarks/results/conformance_deltaspark_write_serializable_delete.json"
        )
    return MEASURED


def _one_order(winner: OpFacts, loser: OpFacts, ctx: TableContext) -> set[DeltaException]:
    found: set[DeltaException] = set()
    if _adds(winner) and _checks_appends(loser) and not _blind_append_skipped(winner, loser, ctx):
        found.add(DeltaException.CONCURRENT_APPEND)
    if _removes(winner) and _reads(loser):
        found.add(DeltaException.CONCURRENT_DELETE_READ)
    if _removes(winner) and _removes(loser):
        found.add(DeltaException.CONCURRENT_DELETE_DELETE)
    return found


def _engine_refutes(a: OpFacts, b: OpFacts, ctx: TableContext) -> str | None:
    """Why the engine at hand does not confirm the partitions the model keeps apart (``None``: it does, or
    no engine is at hand and the hand-written reading decides alone, ADR 0037).

    Asked about what the ConflictChecker compares: a reader's top-level partition-only conjuncts (as
    :func:`~deltaguard.core.facts.may_overlap` reads them here), an append's rows and every write scope.
    """
    oracle = ctx.table.meaning
    if oracle is None:
        return None
    columns = ctx.table.partition_columns

    def checked(f: OpFacts) -> OpFacts:
        if f.role is Role.APPEND:
            return f
        return replace(f, scope=partition_conjuncts(f.scope, columns))

    # delta-spark keeps the files a predicate is TRUE on (DeltaLog.filterFileList filters a DataFrame)
    return engine_refutes(checked(a), checked(b), columns, oracle, unknown_selects=False)


def pair(a: OpFacts, b: OpFacts, ctx: TableContext) -> PairVerdict:
    """Whether the ConflictChecker could fail one of the two, in either commit order.

    :param a: one operation.
    :param b: the other operation.
    :param ctx: the table as delta-spark reads it.
    """
    from deltaguard.core.rules.common import ordered

    exceptions = _one_order(a, b, ctx) | _one_order(b, a, ctx)
    names = f"{a.kind.value} vs {b.kind.value}"
    if not exceptions and (_blind_append_skipped(a, b, ctx) or _blind_append_skipped(b, a, ctx)):
        return PairVerdict(
            conflict=False,
            reason=f"{SOURCE}: {names} cannot conflict under WriteSerializable: a blind append's files are not "
            f"checked against what the other reads, and the append reads nothing ({_evidence(a, b)})",
            rule="spark.write_serializable_blind_append",
        )
    if not exceptions:
        return PairVerdict(
            conflict=False,
            reason=f"{SOURCE}: {names} cannot conflict: neither reads or removes files the other touches "
            "(blind appends read nothing; OPTIMIZE commits without data change skip the added-files check)",
            rule="spark.no_shared_files",
        )
    table = ctx.table
    overlap = not table.is_partitioned or may_overlap(
        a, b, table.partition_columns, conjuncts_only=True, text=table.string_columns
    )
    if not overlap:
        refuted = _engine_refutes(a, b, ctx)
        if refuted is not None:
            return PairVerdict(
                conflict=True,
                exceptions=ordered(exceptions),
                reason=f"{SOURCE}: {names}: the model reads their partition predicates as disjoint, but the "
                f"engine's own evaluator does not confirm it: {refuted}",
                advice=(
                    "run these writes one after the other, or select partitions with = or IN of plain values",
                ),
                rule="spark.engine_unconfirmed",
            )
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
        reason=f"{SOURCE}: {names} can conflict ({ctx.isolation.value}; no row-level concurrency): {where}",
        advice=tuple(advice),
        rule="spark.partition_overlap",
    )
