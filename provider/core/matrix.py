"""The operation x operation conflict matrix of one engine and table, like the Databricks page's tables.

Each cell is :func:`~deltaguard.core.model.pair_verdict` of two representative operations (whole-table
predicates unless the caller gives others), rendered as text or JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from deltaguard.core.decision import DeltaException, PairVerdict
from deltaguard.core.model import pair_verdict, table_context
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig

#: short labels for exceptions in text cells
ABBREVIATIONS: dict[DeltaException, str] = {
    DeltaException.CONCURRENT_APPEND: "CA",
    DeltaException.CONCURRENT_DELETE_READ: "DR",
    DeltaException.CONCURRENT_DELETE_DELETE: "DD",
    DeltaException.METADATA_CHANGED: "MC",
    DeltaException.PROTOCOL_CHANGED: "PC",
    DeltaException.CONCURRENT_TRANSACTION: "CT",
}


def representative_operations() -> tuple[Operation, ...]:
    """One operation per row of the matrix, each over the whole table."""
    k = OperationKind
    return (
        Operation(k.INSERT, label="INSERT"),
        Operation(k.INSERT, reads_target=True, label="INSERT SELECT"),
        Operation(k.UPDATE, label="UPDATE"),
        Operation(k.DELETE, label="DELETE"),
        Operation(k.MERGE, merge_condition="t.id = s.id", label="MERGE"),
        Operation(k.OPTIMIZE, label="OPTIMIZE"),
        Operation(k.OPTIMIZE, zorder_by=("id",), label="OPTIMIZE ZORDER"),
        Operation(k.REORG_PURGE, label="REORG PURGE"),
        Operation(k.OVERWRITE, label="OVERWRITE"),
        Operation(k.REPLACE_WHERE, label="REPLACE WHERE"),
        Operation(k.STREAMING_WRITE, checkpoint_location="/chk/a", label="STREAM"),
        Operation(k.SET_TBLPROPERTIES, label="SET TBLPROPS"),
        Operation(k.ADD_COLUMNS, label="ADD COLUMNS"),
        Operation(k.REORG_UPGRADE, label="REORG UPGRADE"),
        Operation(k.CREATE_OR_REPLACE, label="CREATE/REPLACE"),
    )


@dataclass(frozen=True)
class ConflictMatrix:
    """Pairwise verdicts of ``operations`` (``cells[i][j]`` is row ``i`` vs column ``j``; symmetric).

    :param profile: the engine.
    :param table: the table.
    :param operations: row/column operations.
    :param cells: the verdicts.
    :param notes: how the engine read the table (isolation level, row-level concurrency).
    """

    profile: EngineProfile
    table: TableConfig
    operations: tuple[Operation, ...]
    cells: tuple[tuple[PairVerdict, ...], ...]
    notes: tuple[str, ...]

    def labels(self) -> list[str]:
        return [op.label or op.describe() for op in self.operations]

    def to_json(self) -> dict[str, Any]:
        labels = self.labels()
        return {
            "engine": {
                "name": self.profile.name.value,
                "version": self.profile.version,
                "photon": self.profile.photon,
            },
            "table": {
                "partition_columns": list(self.table.partition_columns),
                "clustering_columns": list(self.table.clustering_columns),
                "identity_columns": list(self.table.identity_columns),
                "properties": dict(self.table.properties),
            },
            "notes": list(self.notes),
            "operations": labels,
            "cells": [
                {
                    "a": labels[i],
                    "b": labels[j],
                    "verdict": "conflict" if cell.conflict else "no_conflict",
                    "exceptions": [e.value for e in cell.exceptions],
                    "reason": cell.reason,
                    "rule": cell.rule,
                }
                for i, row in enumerate(self.cells)
                for j, cell in enumerate(row)
                if j >= i
            ],
        }

    def to_text(self) -> str:
        labels = self.labels()
        cells = [[_cell_text(cell) for cell in row] for row in self.cells]
        first = max(len(label) for label in labels)
        widths = [
            max(len(labels[j]), *(len(cells[i][j]) for i in range(len(labels)))) for j in range(len(labels))
        ]
        lines = [f"Conflict matrix: {self.profile.describe()}", *(f"  {note}" for note in self.notes), ""]
        lines.append(
            " " * first + " | " + " | ".join(label.ljust(w) for label, w in zip(labels, widths, strict=True))
        )
        lines.append("-" * first + "-+-" + "-+-".join("-" * w for w in widths))
        for label, row in zip(labels, cells, strict=True):
            lines.append(
                label.ljust(first) + " | " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
            )
        lines.append("")
        lines.append(
            "ok = cannot conflict; X = can conflict, with "
            + ", ".join(f"{abbr} = {exc.value}" for exc, abbr in ABBREVIATIONS.items())
        )
        return "\n".join(lines)


def _cell_text(cell: PairVerdict) -> str:
    if not cell.conflict:
        return "ok"
    return "X " + ",".join(ABBREVIATIONS[e] for e in cell.exceptions)


def conflict_matrix(
    table: TableConfig, profile: EngineProfile, operations: Sequence[Operation] | None = None
) -> ConflictMatrix:
    """Build the matrix.

    :param table: the table.
    :param profile: the engine.
    :param operations: the operations to compare (default :func:`representative_operations`).
    :raises ValueError: on an unparsable predicate.
    """
    ops = tuple(operations) if operations is not None else representative_operations()
    grid: list[list[PairVerdict | None]] = [[None] * len(ops) for _ in ops]
    for i, a in enumerate(ops):
        for j in range(i, len(ops)):
            verdict = pair_verdict(a, ops[j], table, profile)
            grid[i][j] = grid[j][i] = verdict
    ctx = table_context(table, profile)
    notes = (f"isolation level: {ctx.isolation.value}", *ctx.notes, *ctx.conservative)
    cells = tuple(tuple(cell for cell in row if cell is not None) for row in grid)
    return ConflictMatrix(profile=profile, table=table, operations=ops, cells=cells, notes=notes)
