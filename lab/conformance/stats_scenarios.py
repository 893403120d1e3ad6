"""Layouts and writes where delta-rs decides conflicts with per-file statistics (ADR 0020).

The table is unpartitioned: ``id`` (long), ``day`` (date), ``v`` (long), one file per day
(:data:`DAYS`, ids ``2k+1`` and ``2k+2`` on day ``k``), so every file's ``day`` range is one day. The first
write of a cell works on :data:`DAYS` [0]; the second on the same day, the next day or the last day.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from enum import StrEnum

import pyarrow as pa

from deltaguard.core.operations import Operation
from deltaguard.engines.specs import (
    AppendSpec,
    DeleteSpec,
    MergeSpec,
    OptimizeSpec,
    ReplaceWhereSpec,
    UpdateSpec,
    WriteSpec,
)

DAYS: tuple[str, ...] = ("2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04")


class StatsLayout(StrEnum):
    """How the table's files are laid out and which statistics they carry."""

    #: one file per day, statistics on every column
    PER_DAY = "per_day_files"
    #: per-day files plus one file holding rows of the first and the third day (its range spans the second)
    SPANNING = "spanning_file"
    #: per-day files written with ``delta.dataSkippingNumIndexedCols = 0`` (no statistics at all)
    NO_STATS = "no_stats"
    #: per-day files with only the first column (``id``) indexed
    ID_ONLY = "id_only_stats"
    #: per-day files plus a first-day file that also holds a row whose ``day`` is null
    NULL_DAY = "null_day_row"

    def properties(self) -> dict[str, str]:
        if self is StatsLayout.NO_STATS:
            return {"delta.dataSkippingNumIndexedCols": "0"}
        if self is StatsLayout.ID_ONLY:
            return {"delta.dataSkippingNumIndexedCols": "1"}
        return {}

    def batches(self) -> list[pa.Table]:
        """The initial commits, one file each."""
        found = [rows([2 * k + 1, 2 * k + 2], day) for k, day in enumerate(DAYS)]
        if self is StatsLayout.SPANNING:
            found.append(pa.concat_tables([rows([9], DAYS[0]), rows([10], DAYS[2])]))
        if self is StatsLayout.NULL_DAY:
            found.append(pa.concat_tables([rows([11], DAYS[0]), rows([12], None)]))
        return found


class StatsOp(StrEnum):
    """One kind of write of the statistics cells."""

    UPDATE = "UPDATE"
    UPDATE_MOVE = "UPDATE_MOVE"
    UPDATE_IDS = "UPDATE_IDS"
    DELETE = "DELETE"
    MERGE_UPDATE = "MERGE_UPDATE"
    MERGE_INSERT_INSIDE = "MERGE_INSERT_INSIDE"
    MERGE_INSERT_OUTSIDE = "MERGE_INSERT_OUTSIDE"
    REPLACE_WHERE = "REPLACE_WHERE"
    APPEND = "APPEND"
    APPEND_ANY = "APPEND_ANY"
    OPTIMIZE = "OPTIMIZE"


class Scopes(StrEnum):
    """Which day the second write works on (the first always works on the first day)."""

    SAME = "same_day"
    NEXT = "next_day"
    FAR = "far_day"

    def days(self) -> tuple[str, str]:
        return DAYS[0], {Scopes.SAME: DAYS[0], Scopes.NEXT: DAYS[1], Scopes.FAR: DAYS[3]}[self]


def rows(ids: list[int], day: str | None, v: int | None = None) -> pa.Table:
    """Rows ``(id, day, v)`` with ``v = id * 10`` unless ``v`` is given."""
    value = None if day is None else datetime.date.fromisoformat(day)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "day": pa.array([value] * len(ids), pa.date32()),
            "v": pa.array([v if v is not None else i * 10 for i in ids], pa.int64()),
        }
    )


@dataclass(frozen=True)
class StatsWrite:
    """One write of one cell: what the engine executes and what deltaguard asks the model about."""

    op: StatsOp
    role: str
    spec: WriteSpec
    operation: Operation


def build(op: StatsOp, day: str, role: str) -> StatsWrite:
    """The write ``op`` on ``day``; ``role`` (``A``/``B``) keeps new ids apart.

    :param op: the kind of write.
    :param day: the day it works on.
    :param role: ``A`` or ``B``.
    """
    k = DAYS.index(day)
    first, second = 2 * k + 1, 2 * k + 2
    new = (100 if role == "A" else 200) + k
    where = f"day = '{day}'"
    elsewhere = DAYS[3] if day != DAYS[3] else DAYS[0]
    spec: WriteSpec
    if op is StatsOp.UPDATE:
        spec = UpdateSpec(updates={"v": "v + 1"}, predicate=where)
    elif op is StatsOp.UPDATE_MOVE:
        # moves the day's rows to another day: the rewritten file lands outside the predicate's range
        target = DAYS[(k + 1) % len(DAYS)]
        spec = UpdateSpec(updates={"day": f"'{target}'"}, predicate=where)
    elif op is StatsOp.UPDATE_IDS:
        spec = UpdateSpec(updates={"v": "v + 1"}, predicate=f"id >= {first} AND id <= {second}")
    elif op is StatsOp.DELETE:
        spec = DeleteSpec(predicate=f"{where} AND id = {second}")
    elif op is StatsOp.MERGE_UPDATE:
        spec = MergeSpec(
            source=rows([first], day, 7),
            condition=f"t.id = s.id AND t.day = '{day}'",
            matched_update={"v": "s.v"},
        )
    elif op in (StatsOp.MERGE_INSERT_INSIDE, StatsOp.MERGE_INSERT_OUTSIDE):
        inserted = rows([new], day if op is StatsOp.MERGE_INSERT_INSIDE else elsewhere, 7)
        spec = MergeSpec(
            source=pa.concat_tables([rows([first], day, 7), inserted]),
            condition=f"t.id = s.id AND t.day = '{day}'",
            matched_update={"v": "s.v"},
            not_matched_insert_all=True,
        )
    elif op is StatsOp.REPLACE_WHERE:
        spec = ReplaceWhereSpec(source=rows([new], day), predicate=where)
    elif op is StatsOp.APPEND:
        spec = AppendSpec(source=rows([new], day))
    elif op is StatsOp.APPEND_ANY:
        spec = AppendSpec(source=pa.concat_tables([rows([new + 10 * i], d) for i, d in enumerate(DAYS)]))
    elif op is StatsOp.OPTIMIZE:
        spec = OptimizeSpec()
    else:  # pragma: no cover - the enum is closed
        raise ValueError(f"unknown write {op!r}")
    return StatsWrite(op=op, role=role, spec=spec, operation=spec.operation())


@dataclass(frozen=True)
class StatsCell:
    """One unordered pair of writes on one layout and pair of days."""

    a: StatsOp
    b: StatsOp
    layout: StatsLayout
    scopes: Scopes

    @property
    def key(self) -> str:
        return f"{self.a.value} x {self.b.value} | {self.layout.value} | {self.scopes.value}"


#: a few cells covering every statistics fact, for every test run
REPRESENTATIVE: tuple[tuple[StatsOp, StatsOp, StatsLayout, Scopes], ...] = (
    (StatsOp.UPDATE, StatsOp.UPDATE, StatsLayout.PER_DAY, Scopes.NEXT),
    (StatsOp.UPDATE, StatsOp.UPDATE, StatsLayout.PER_DAY, Scopes.SAME),
    (StatsOp.DELETE, StatsOp.MERGE_UPDATE, StatsLayout.PER_DAY, Scopes.FAR),
    (StatsOp.REPLACE_WHERE, StatsOp.UPDATE_IDS, StatsLayout.PER_DAY, Scopes.NEXT),
    (StatsOp.UPDATE_MOVE, StatsOp.UPDATE, StatsLayout.PER_DAY, Scopes.NEXT),
    (StatsOp.MERGE_INSERT_OUTSIDE, StatsOp.UPDATE, StatsLayout.PER_DAY, Scopes.FAR),
    (StatsOp.MERGE_INSERT_INSIDE, StatsOp.UPDATE, StatsLayout.PER_DAY, Scopes.NEXT),
    (StatsOp.APPEND, StatsOp.UPDATE, StatsLayout.PER_DAY, Scopes.FAR),
    (StatsOp.UPDATE, StatsOp.UPDATE, StatsLayout.SPANNING, Scopes.NEXT),
    (StatsOp.UPDATE, StatsOp.DELETE, StatsLayout.NO_STATS, Scopes.FAR),
    (StatsOp.UPDATE, StatsOp.UPDATE, StatsLayout.ID_ONLY, Scopes.FAR),
    (StatsOp.UPDATE, StatsOp.UPDATE, StatsLayout.NULL_DAY, Scopes.FAR),
)


def generate(slice_name: str) -> list[StatsCell]:
    """The cells of a slice: ``representative`` (:data:`REPRESENTATIVE`) or ``full`` (every layout x every
    pair of days x every pair of writes: unordered on the same day, ordered -- which write takes the first
    day -- on different days).

    :param slice_name: ``representative`` or ``full``.
    :raises ValueError: on another name.
    """
    if slice_name == "representative":
        return [StatsCell(*spec) for spec in REPRESENTATIVE]
    if slice_name != "full":
        raise ValueError(f"unknown slice {slice_name!r}")
    ops = list(StatsOp)
    return [
        StatsCell(a, b, layout, scopes)
        for layout in StatsLayout
        for scopes in Scopes
        for i, a in enumerate(ops)
        for b in (ops[i:] if scopes is Scopes.SAME else ops)
    ]
