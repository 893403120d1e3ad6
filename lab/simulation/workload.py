"""Seeded, reproducible benchmark workloads and their lower bound (pure: no Airflow, no Delta I/O).

A :class:`Workload` is a set of tables (partitioned or not, deletion vectors or not, an isolation level) and
a list of writes against them (appends, partition-scoped MERGE/UPDATE/DELETE, whole-table MERGE, OPTIMIZE
with and without Z-order, an occasional ADD COLUMNS), each with a duration: the time the write's transaction
stays open between reading its snapshot and committing. :func:`generate` draws one from a seed, so the
real-scheduler benchmark and the simulation replay exactly the same workload.

Every table has the columns ``p`` (string; the partition column when partitioned), ``k`` (bigint key) and
``v`` (bigint value); partition values are ``p0``, ``p1``, ...

:func:`lower_bound` is what no schedule can beat: the largest of the longest chain of pairwise-conflicting
writes on one table (they must run one after another), the total work divided by the worker slots, and the
longest single write.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from deltaguard.core.chains import heaviest_clique
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.sql.literals import merge_condition_with_partitions
from deltaguard.core.table_config import TableConfig

#: Write kinds the generator draws from, with the :class:`OperationKind` each becomes.
KINDS: dict[str, OperationKind] = {
    "append": OperationKind.INSERT,
    "merge": OperationKind.MERGE,  # partition-scoped on a partitioned table
    "update": OperationKind.UPDATE,
    "delete": OperationKind.DELETE,
    "merge_all": OperationKind.MERGE,  # reads the whole table
    "optimize": OperationKind.OPTIMIZE,
    "optimize_zorder": OperationKind.OPTIMIZE,
    "add_column": OperationKind.ADD_COLUMNS,
}
#: Kinds that name one partition (on partitioned tables; on unpartitioned ones the value is a row filter).
PARTITION_SCOPED = frozenset({"append", "merge", "update", "delete", "optimize"})
ISOLATION_LEVELS = ("WriteSerializable", "Serializable")
DEFAULT_MIX: dict[str, float] = {
    "append": 0.30,
    "merge": 0.35,
    "update": 0.10,
    "delete": 0.07,
    "merge_all": 0.05,
    "optimize": 0.05,
    "optimize_zorder": 0.04,
    "add_column": 0.04,
}
#: Per-role mixes used when no global mix is given: tables play the roles in turn, as in a warehouse where a
#: fact table is upserted per partition, an event log is appended to and a dimension is corrected in place.
ROLE_MIXES: dict[str, dict[str, float]] = {
    "fact": {"merge": 0.70, "update": 0.10, "delete": 0.05, "optimize": 0.10, "optimize_zorder": 0.05},
    "log": {"append": 0.85, "optimize": 0.10, "add_column": 0.05},
    "dimension": {"update": 0.30, "delete": 0.20, "merge_all": 0.25, "append": 0.15, "add_column": 0.10},
}
ROLES = ("fact", "log", "fact", "dimension")
#: How many writes a table of each role receives, relative to the others (when tables play roles).
ROLE_WEIGHTS: dict[str, float] = {"fact": 3.0, "log": 2.0, "dimension": 1.0}
MERGE_CONDITION = "t.p = s.p AND t.k = s.k"
#: Keys every partition holds before the workload runs (``0 .. SEED_KEYS-1``).
SEED_KEYS = 6


@dataclass(frozen=True)
class BenchTable:
    """One table of a workload.

    :param name: short name (also the directory name of its copy).
    :param partitioned: partitioned by ``p``.
    :param deletion_vectors: ``delta.enableDeletionVectors``.
    :param isolation: ``delta.isolationLevel``.
    :param partitions: how many partition values (``p0`` ...) the writes use.
    """

    name: str
    partitioned: bool = True
    deletion_vectors: bool = False
    isolation: str = "WriteSerializable"
    partitions: int = 4

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"table name must be an identifier, got {self.name!r}")
        if self.isolation not in ISOLATION_LEVELS:
            raise ValueError(f"isolation must be one of {ISOLATION_LEVELS}, got {self.isolation!r}")
        if self.partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {self.partitions}")

    @property
    def properties(self) -> dict[str, str]:
        props = {"delta.isolationLevel": self.isolation}
        if self.deletion_vectors:
            props["delta.enableDeletionVectors"] = "true"
        return props

    def config(self, uri: str | None = None) -> TableConfig:
        """The configuration the conflict model sees (before any schema change)."""
        return TableConfig(
            partition_columns=("p",) if self.partitioned else (),
            properties=self.properties,
            uri=uri,
        )


@dataclass(frozen=True)
class BenchWrite:
    """One write of a workload.

    :param id: unique id, also the Airflow task id (``w000``, ``w001``, ...).
    :param table: the table's name.
    :param kind: one of :data:`KINDS`.
    :param partition: the partition value it is scoped to (``None``: whole table).
    :param duration_s: seconds its transaction stays open (snapshot read at start, commit at the end).
    :param index: its position in the workload (makes its rows unique).
    """

    id: str
    table: str
    kind: str
    partition: str | None
    duration_s: float
    index: int

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown write kind {self.kind!r}; choose one of {sorted(KINDS)}")
        if not self.duration_s >= 0:
            raise ValueError(f"duration_s must be >= 0, got {self.duration_s}")


@dataclass(frozen=True)
class Workload:
    """Tables and writes, reproducible from ``seed``."""

    tables: tuple[BenchTable, ...]
    writes: tuple[BenchWrite, ...]
    seed: int = 0
    params: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        names = [t.name for t in self.tables]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate table names: {sorted(names)}")
        ids = [w.id for w in self.writes]
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate write ids")
        unknown = {w.table for w in self.writes} - set(names)
        if unknown:
            raise ValueError(f"writes name unknown tables: {sorted(unknown)}")

    def table(self, name: str) -> BenchTable:
        for table in self.tables:
            if table.name == name:
                return table
        raise KeyError(name)

    def write(self, write_id: str) -> BenchWrite:
        for write in self.writes:
            if write.id == write_id:
                return write
        raise KeyError(write_id)

    def by_table(self) -> dict[str, list[BenchWrite]]:
        grouped: dict[str, list[BenchWrite]] = {t.name: [] for t in self.tables}
        for write in self.writes:
            grouped[write.table].append(write)
        return grouped

    @property
    def total_work_s(self) -> float:
        return sum(w.duration_s for w in self.writes)

    def to_json(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "params": dict(self.params),
            "tables": [asdict(t) for t in self.tables],
            "writes": [asdict(w) for w in self.writes],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Workload:
        return cls(
            tables=tuple(BenchTable(**t) for t in data["tables"]),
            writes=tuple(BenchWrite(**w) for w in data["writes"]),
            seed=int(data.get("seed", 0)),
            params=dict(data.get("params", {})),
        )


def _check_mix(mix: Mapping[str, float]) -> dict[str, float]:
    unknown = set(mix) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown write kinds in mix: {sorted(unknown)}")
    if any(weight < 0 for weight in mix.values()) or sum(mix.values()) <= 0:
        raise ValueError("mix weights must be >= 0 and not all zero")
    return {k: float(v) for k, v in mix.items() if v > 0}


def generate(
    seed: int,
    *,
    tables: int = 3,
    writes: int = 15,
    mix: Mapping[str, float] | None = None,
    partitions: int = 4,
    partitioned_share: float = 1.0,
    deletion_vectors_share: float = 0.0,
    serializable_share: float = 0.0,
    overlap: float = 0.2,
    duration: tuple[float, float] = (30.0, 45.0),
) -> Workload:
    """Draw a workload.

    :param seed: the random seed (same seed and parameters, same workload).
    :param tables: number of tables.
    :param writes: number of writes, split over the tables (evenly with a global ``mix``, else by
        :data:`ROLE_WEIGHTS`), then shuffled.
    :param mix: relative weights of the write kinds for every table; ``None`` (default): each table plays
        a role of :data:`ROLES` in turn (fact, log, fact, dimension, ...) with that role's
        :data:`ROLE_MIXES`; ``"uniform"`` is not accepted, pass :data:`DEFAULT_MIX` for one mix everywhere.
    :param partitions: partition values per table.
    :param partitioned_share: probability that a table is partitioned (the first always is when > 0).
    :param deletion_vectors_share: probability that a table has deletion vectors enabled.
    :param serializable_share: probability that a table's isolation level is ``Serializable``.
    :param overlap: probability that a partition-scoped write reuses a partition another write on its
        table already uses (0: every write gets a fresh partition while there are any).
    :param duration: ``(low, high)`` seconds, drawn uniformly.
    :raises ValueError: on out-of-range parameters.
    """
    if tables < 1 or writes < 0:
        raise ValueError(f"need tables >= 1 and writes >= 0, got {tables} and {writes}")
    for name, share in (
        ("partitioned_share", partitioned_share),
        ("deletion_vectors_share", deletion_vectors_share),
        ("serializable_share", serializable_share),
        ("overlap", overlap),
    ):
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"{name} must be within [0, 1], got {share}")
    low, high = duration
    if not 0 <= low <= high:
        raise ValueError(f"duration must be (low, high) with 0 <= low <= high, got {duration}")
    table_mixes = [
        _check_mix(mix) if mix is not None else ROLE_MIXES[ROLES[i % len(ROLES)]] for i in range(tables)
    ]
    rng = random.Random(seed)
    table_list = tuple(
        BenchTable(
            name=f"t{i}",
            partitioned=(i == 0 and partitioned_share > 0) or rng.random() < partitioned_share,
            deletion_vectors=rng.random() < deletion_vectors_share,
            isolation="Serializable" if rng.random() < serializable_share else "WriteSerializable",
            partitions=partitions,
        )
        for i in range(tables)
    )
    used: dict[str, list[str]] = {t.name: [] for t in table_list}
    shares = [1.0 if mix is not None else ROLE_WEIGHTS[ROLES[i % len(ROLES)]] for i in range(tables)]
    order = _allocate(writes, shares)
    rng.shuffle(order)
    out: list[BenchWrite] = []
    for index, table_index in enumerate(order):
        table_name = table_list[table_index].name
        weights = table_mixes[table_index]
        kinds = sorted(weights)
        kind = rng.choices(kinds, weights=[weights[k] for k in kinds])[0]
        partition = None
        if kind in PARTITION_SCOPED:
            taken = used[table_name]
            fresh = [f"p{j}" for j in range(partitions) if f"p{j}" not in taken]
            if taken and (not fresh or rng.random() < overlap):
                partition = rng.choice(taken)
            else:
                partition = fresh[0]
                taken.append(partition)
        out.append(
            BenchWrite(
                id=f"w{index:03d}",
                table=table_name,
                kind=kind,
                partition=partition,
                duration_s=round(rng.uniform(low, high), 1),
                index=index,
            )
        )
    params = {
        "tables": tables,
        "writes": writes,
        "mix": dict(mix) if mix is not None else "roles",
        "partitions": partitions,
        "partitioned_share": partitioned_share,
        "deletion_vectors_share": deletion_vectors_share,
        "serializable_share": serializable_share,
        "overlap": overlap,
        "duration": [low, high],
    }
    return Workload(tables=table_list, writes=tuple(out), seed=seed, params=params)


def _allocate(count: int, shares: Sequence[float]) -> list[int]:
    """``count`` table indexes split in proportion to ``shares`` (largest remainder, deterministic)."""
    total = sum(shares)
    exact = [count * share / total for share in shares]
    counts = [int(x) for x in exact]
    by_remainder = sorted(range(len(shares)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in by_remainder[: count - sum(counts)]:
        counts[i] += 1
    return [i for i, n in enumerate(counts) for _ in range(n)]


# -- what the conflict model is told ------------------------------------------------------------------


def partition_predicate(table: BenchTable, partition: str) -> str:
    return f"p = '{partition}'"


def operation(write: BenchWrite, table: BenchTable) -> Operation:
    """The :class:`Operation` a write is for the conflict model (matches the delta-rs spec it runs as)."""
    kind = KINDS[write.kind]
    label = write.id
    part = write.partition
    if write.kind == "append":
        # only a partition column narrows an append; on an unpartitioned table p is ordinary data
        predicate = partition_predicate(table, part) if part and table.partitioned else None
        return Operation(kind, predicate=predicate, label=label)
    if write.kind in ("merge", "merge_all"):
        condition = _merge_condition(part if write.kind == "merge" else None)
        return Operation(kind, merge_condition=condition, label=label)
    if write.kind == "update":
        return Operation(kind, predicate=partition_predicate(table, part) if part else None, label=label)
    if write.kind == "delete":
        return Operation(kind, predicate=delete_predicate(write), label=label)
    if write.kind == "optimize":
        predicate = partition_predicate(table, part) if part and table.partitioned else None
        return Operation(kind, predicate=predicate, label=label)
    if write.kind == "optimize_zorder":
        return Operation(kind, zorder_by=("k",), label=label)
    return Operation(kind, label=label)


@functools.lru_cache(maxsize=4096)
def _merge_condition(partition: str | None) -> str:
    # rendering through sqlglot costs about a millisecond; the simulation asks for millions
    values = {"p": partition} if partition else {}
    return str(merge_condition_with_partitions(MERGE_CONDITION, values, "t"))


def delete_predicate(write: BenchWrite) -> str:
    """Deletes one seeded row of its partition (which one depends on the write)."""
    return f"p = '{write.partition}' AND k = {write.index % SEED_KEYS}"


# -- lower bound --------------------------------------------------------------------------------------

ConflictFn = Callable[[BenchWrite, BenchWrite], bool]


def model_conflicts(workload: Workload, profile: EngineProfile) -> ConflictFn:
    """Pairwise conflicts by the real conflict model (:func:`deltaguard.core.model.pair_verdict`).

    Verdicts depend only on the two kinds, whether their partitions (and delete keys) are equal, and the
    table's configuration, so they are memoised on that signature (a million-write workload then needs a few hundred model calls).
    """
    from deltaguard.core.model import pair_verdict

    tables = {t.name: t for t in workload.tables}
    cache: dict[tuple[Any, ...], bool] = {}

    def conflicts(a: BenchWrite, b: BenchWrite) -> bool:
        if a.table != b.table:
            return False
        table = tables[a.table]
        same = a.partition is not None and a.partition == b.partition
        # two deletes of one partition differ by their key filter, so whether the keys match matters too
        same_key = a.index % SEED_KEYS == b.index % SEED_KEYS if a.kind == b.kind == "delete" else None
        signature = (table.partitioned, table.deletion_vectors, table.isolation)
        key = (signature, a.kind, b.kind, a.partition is None, b.partition is None, same, same_key)
        found = cache.get(key)
        if found is None:
            found = pair_verdict(operation(a, table), operation(b, table), table.config(), profile).conflict
            cache[key] = found
        return found

    return conflicts


@dataclass(frozen=True)
class LowerBound:
    """What no schedule can beat, and why.

    :param value_s: the bound: the largest of the terms below.
    :param chain_s: the heaviest set of pairwise-conflicting writes on one table (they must run one
        after another), by total duration.
    :param chain_table: the table of that chain.
    :param chain_writes: its writes.
    :param work_s: total work divided by the worker slots.
    :param longest_s: the longest single write.
    :param exact: the chain is a maximum-weight clique (``False``: the best one found within the search
        budget, still a valid bound).
    """

    value_s: float
    chain_s: float
    chain_table: str | None
    chain_writes: tuple[str, ...]
    work_s: float
    longest_s: float
    exact: bool = True

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def heaviest_conflict_chain(
    writes: Sequence[BenchWrite], conflicts: ConflictFn, budget: int = 50_000, exact_up_to: int = 40
) -> tuple[float, tuple[str, ...], bool]:
    """The maximum-weight set of pairwise-conflicting writes (:func:`deltaguard.core.chains.heaviest_clique`
    over their durations).

    :return: (total duration, write ids, exact).
    """
    weight, chosen, exact = heaviest_clique(
        [w.duration_s for w in writes],
        lambda i, j: conflicts(writes[i], writes[j]),
        budget=budget,
        exact_up_to=exact_up_to,
    )
    return weight, tuple(sorted(writes[i].id for i in chosen)), exact


def lower_bound(workload: Workload, slots: int, conflicts: ConflictFn) -> LowerBound:
    """The makespan no schedule of ``workload`` on ``slots`` worker slots can beat.

    :param workload: the writes.
    :param slots: worker slots (Airflow's parallelism).
    :param conflicts: whether two writes conflict (e.g. :func:`model_conflicts`).
    :raises ValueError: when ``slots`` < 1.
    """
    if slots < 1:
        raise ValueError(f"slots must be >= 1, got {slots}")
    chain_s, chain_table, exact = 0.0, None, True
    chain_ids: tuple[str, ...] = ()
    for name, writes in workload.by_table().items():
        weight, ids, table_exact = heaviest_conflict_chain(writes, conflicts)
        exact = exact and table_exact
        if weight > chain_s:
            chain_s, chain_table, chain_ids = weight, name, ids
    work_s = workload.total_work_s / slots
    longest_s = max((w.duration_s for w in workload.writes), default=0.0)
    return LowerBound(
        value_s=max(chain_s, work_s, longest_s),
        chain_s=chain_s,
        chain_table=chain_table,
        chain_writes=chain_ids,
        work_s=work_s,
        longest_s=longest_s,
        exact=exact,
    )
