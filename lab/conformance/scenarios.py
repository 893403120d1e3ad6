"""The writes, table layouts and isolation spellings the conformance harness combines into cells.

Every probe write is built twice: as the engine-neutral :mod:`deltaguard.engines.specs` spec the engine
executes, and as the :class:`~deltaguard.core.operations.Operation` deltaguard would hand the conflict
model for that write (taken from ``spec.operation()`` wherever the spec describes it, so the harness
checks exactly what the lease manager will ask).

The initial table is tiny on purpose: ids 1-8, ``p`` in ``{'a', 'b'}`` (ids 1-4 are ``a``), ``v = id * 10``,
written in two commits so that every partition holds two files (OPTIMIZE then has something to do, and in
the unpartitioned layout every file mixes ``a`` and ``b`` rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import pyarrow as pa

from deltaguard.core.operations import Operation, OperationKind
from deltaguard.engines.specs import (
    AddColumnsSpec,
    AppendSpec,
    CreateSpec,
    DeleteSpec,
    MergeSpec,
    OptimizeSpec,
    OverwriteSpec,
    ReplaceWhereSpec,
    SetPropertiesSpec,
    UpdateSpec,
    WriteSpec,
)


class ProbeOp(StrEnum):
    """One kind of write the harness measures."""

    INSERT = "INSERT"
    INSERT_READING_TARGET = "INSERT_READING_TARGET"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    MERGE_TARGET_FILTER = "MERGE_TARGET_FILTER"
    MERGE_NO_TARGET_FILTER = "MERGE_NO_TARGET_FILTER"
    OPTIMIZE_COMPACT = "OPTIMIZE_COMPACT"
    OPTIMIZE_ZORDER = "OPTIMIZE_ZORDER"
    REPLACE_WHERE = "REPLACE_WHERE"
    OVERWRITE = "OVERWRITE"
    SET_TBLPROPERTIES = "SET_TBLPROPERTIES"
    ADD_COLUMNS = "ADD_COLUMNS"
    ADD_CONSTRAINT = "ADD_CONSTRAINT"
    CREATE_OR_REPLACE = "CREATE_OR_REPLACE"


class Layout(StrEnum):
    """How the table is laid out and which rows the two writes touch."""

    #: unpartitioned table, both writes on the same rows (``p = 'a'``)
    UNPARTITIONED = "unpartitioned"
    #: partitioned by ``p``, both writes in partition ``a``
    PARTITIONED_SAME = "partitioned_same_partition"
    #: partitioned by ``p``, the first write in ``a``, the second in ``b``
    PARTITIONED_DISJOINT = "partitioned_disjoint_partitions"
    #: unpartitioned table, the first write on ``p = 'a'`` rows, the second on ``p = 'b'`` rows
    UNPARTITIONED_DISJOINT = "unpartitioned_disjoint_predicates"

    @property
    def partitioned(self) -> bool:
        return self in (Layout.PARTITIONED_SAME, Layout.PARTITIONED_DISJOINT)

    def scopes(self) -> tuple[str, str]:
        """The ``p`` value the first and the second write work on."""
        disjoint = self in (Layout.PARTITIONED_DISJOINT, Layout.UNPARTITIONED_DISJOINT)
        return ("a", "b") if disjoint else ("a", "a")


#: ``delta.isolationLevel`` values the harness measures; ``None`` means the property is absent.
ISOLATION_SPELLINGS: tuple[str | None, ...] = (
    None,
    "Serializable",
    "WriteSerializable",
    "writeSerializable",
    "snapshotIsolation",
    "SnapshotIsolation",
)

#: ids of the initial rows per ``p`` value
SEED_IDS: dict[str, tuple[int, ...]] = {"a": (1, 2, 3, 4), "b": (5, 6, 7, 8)}
#: the two initial commits (each mixes ``a`` and ``b`` rows)
SEED_COMMITS: tuple[tuple[int, ...], ...] = ((1, 2, 5, 6), (3, 4, 7, 8))
#: the CHECK constraint ADD_CONSTRAINT adds; INSERT appends a row that violates it on purpose
CONSTRAINT_EXPRESSION = "v < 1000"
VIOLATING_VALUE = 5000
#: the new key both INSERT and INSERT_READING_TARGET add, in both roles: two "insert if absent" writes of the
#: same key must not both insert it (a serial execution inserts it once), which is the write skew a
#: weaker isolation level lets through
SHARED_NEW_ID = 300


@dataclass(frozen=True)
class AddConstraintSpec:
    """``ALTER TABLE ... ADD CONSTRAINT name CHECK (expression)``.

    The engine specs have no constraint write, so the harness executes this one itself (through the same
    stale table handle) and translates its failures with the engine's conflict parser.
    """

    name: str
    expression: str

    def operation(self) -> Operation:
        return Operation(OperationKind.ALTER_SCHEMA)


ProbeSpec = WriteSpec | AddConstraintSpec


@dataclass(frozen=True)
class ProbeWrite:
    """One write of one cell.

    :param probe: what kind of probe write it is.
    :param role: ``A`` or ``B`` (keeps the two writes' data apart, e.g. new ids 101 vs 201).
    :param spec: what the engine executes.
    :param operation: what deltaguard asks the conflict model about.
    """

    probe: ProbeOp
    role: str
    spec: ProbeSpec
    operation: Operation

    def spec_at(self, uri: str) -> ProbeSpec:
        """The spec to run on the table at ``uri`` (the same at every location: its data is in memory)."""
        return self.spec


def rows(
    ids: tuple[int, ...] | list[int], p: str, v: int | None = None, extra: dict[str, Any] | None = None
) -> pa.Table:
    """Rows ``(id, p, v)`` with ``v = id * 10`` unless ``v`` is given.

    :param ids: the ids.
    :param p: the ``p`` value of every row.
    :param v: one ``v`` for every row, or ``None`` for ``id * 10``.
    :param extra: additional constant columns (name -> int value).
    """
    columns: dict[str, pa.Array] = {
        "id": pa.array(list(ids), pa.int64()),
        "p": pa.array([p] * len(ids), pa.string()),
        "v": pa.array([v if v is not None else i * 10 for i in ids], pa.int64()),
    }
    for name, value in (extra or {}).items():
        columns[name] = pa.array([value] * len(ids), pa.int64())
    return pa.table(columns)


def seed_batches() -> list[pa.Table]:
    """The initial commits, each a table of rows spread over both ``p`` values."""
    return [
        pa.concat_tables([rows([i for i in commit if i in SEED_IDS[p]], p) for p in ("a", "b")])
        for commit in SEED_COMMITS
    ]


def seed_properties(isolation: str | None) -> dict[str, str]:
    """Table properties the initial table is created with."""
    return {} if isolation is None else {"delta.isolationLevel": isolation}


def build_write(probe: ProbeOp, layout: Layout, role: str) -> ProbeWrite:
    """The spec and model operation of one probe write.

    :param probe: the kind of write.
    :param layout: the table layout (decides the scope and whether partition filters exist).
    :param role: ``A`` (the first write of the pair, scope ``layout.scopes()[0]``) or ``B``.
    :raises ValueError: on an unknown role.
    """
    if role not in ("A", "B"):
        raise ValueError(f"role must be 'A' or 'B', not {role!r}")
    scope = layout.scopes()[0 if role == "A" else 1]
    base = 100 if role == "A" else 200  # new ids never collide between the two writes
    partitioned = layout.partitioned
    partition_by = ("p",) if partitioned else ()
    where = f"p = '{scope}'"
    spec: ProbeSpec
    operation: Operation | None = None
    if probe is ProbeOp.INSERT:
        spec = AppendSpec(
            source=rows([SHARED_NEW_ID], scope, VIOLATING_VALUE),
            partition_values={"p": scope} if partitioned else {},
        )
    elif probe is ProbeOp.INSERT_READING_TARGET:
        # "insert if absent": a MERGE with only a NOT MATCHED clause reads the target to find absent keys
        spec = MergeSpec(
            source=rows([SHARED_NEW_ID, SEED_IDS[scope][0]], scope),
            condition="t.id = s.id",
            not_matched_insert_all=True,
        )
        operation = Operation(OperationKind.INSERT, predicate=None, reads_target=True)
    elif probe is ProbeOp.UPDATE:
        spec = UpdateSpec(updates={"v": "v + 1"}, predicate=where)
    elif probe is ProbeOp.DELETE:
        spec = DeleteSpec(predicate=f"{where} AND id = {SEED_IDS[scope][1]}")
    elif probe in (ProbeOp.MERGE_TARGET_FILTER, ProbeOp.MERGE_NO_TARGET_FILTER):
        source = rows([SEED_IDS[scope][2], base + 3], scope, 7)
        if probe is ProbeOp.MERGE_NO_TARGET_FILTER:
            spec = MergeSpec(
                source=source, condition="t.id = s.id", matched_update_all=True, not_matched_insert_all=True
            )
        elif partitioned:
            # the engine adds the quoted target partition conjunct itself
            spec = MergeSpec(
                source=source,
                condition="t.id = s.id",
                target_partition_values={"p": scope},
                matched_update_all=True,
                not_matched_insert_all=True,
            )
        else:
            spec = MergeSpec(
                source=source,
                condition=f"t.id = s.id AND t.p = '{scope}'",
                matched_update_all=True,
                not_matched_insert_all=True,
            )
    elif probe in (ProbeOp.OPTIMIZE_COMPACT, ProbeOp.OPTIMIZE_ZORDER):
        spec = OptimizeSpec(
            zorder_by=("id",) if probe is ProbeOp.OPTIMIZE_ZORDER else (),
            partition_filters={"p": scope} if partitioned else {},
        )
    elif probe is ProbeOp.REPLACE_WHERE:
        spec = ReplaceWhereSpec(source=rows([base + 4], scope), predicate=where)
    elif probe is ProbeOp.OVERWRITE:
        spec = OverwriteSpec(
            source=pa.concat_tables([rows([base + 5], "a"), rows([base + 6], "b")]), partition_by=partition_by
        )
    elif probe is ProbeOp.SET_TBLPROPERTIES:
        spec = SetPropertiesSpec(properties={"delta.checkpointInterval": "11" if role == "A" else "12"})
    elif probe is ProbeOp.ADD_COLUMNS:
        spec = AddColumnsSpec(columns={f"c_{role.lower()}": "string"})
    elif probe is ProbeOp.ADD_CONSTRAINT:
        spec = AddConstraintSpec(name=f"chk_{role.lower()}", expression=CONSTRAINT_EXPRESSION)
    elif probe is ProbeOp.CREATE_OR_REPLACE:
        source = pa.concat_tables(
            [rows([base + 7], "a", extra={"w": 1}), rows([base + 8], "b", extra={"w": 2})]
        )
        spec = CreateSpec(source=source, partition_by=partition_by, replace=True)
    else:  # pragma: no cover - the enum is closed
        raise ValueError(f"unknown probe write {probe!r}")
    return ProbeWrite(probe=probe, role=role, spec=spec, operation=operation or spec.operation())
