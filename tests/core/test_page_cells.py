"""Every cell of the two conflict tables of the Databricks page "Isolation levels and write conflicts", for
both isolation levels, with and without deletion vectors, partitioned and not, generated from ONE data table: ``page_cells.csv``.

The CSV transcribes the seed (``row`` = "with row-level concurrency", ``file`` = "without"); ``expected`` is

* ``cannot``: no conflict even for whole-table operations;
* ``can``: conflict for whole-table operations;
* ``same_row``: conflict for whole-table operations, none when the conditions are disjoint on any column;
* ``partitions``: conflict for whole-table operations; on a partitioned table none when the conditions are
  disjoint on the partition column, but still a conflict when they are disjoint only on a data column.

Databricks Runtime 14.3 without Photon: row-level concurrency applies exactly to unpartitioned tables with
deletion vectors (MERGE included, since 14.3 does not need Photon).
"""

from __future__ import annotations

import csv
import itertools
from dataclasses import dataclass
from pathlib import Path

import pytest

from deltaguard.core import pair_verdict
from deltaguard.core.decision import DeltaException
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

CSV_PATH = Path(__file__).with_name("page_cells.csv")
PROFILE = EngineProfile(EngineName.DATABRICKS, "14.3", photon=False)
ABBR = {
    "CA": DeltaException.CONCURRENT_APPEND,
    "DR": DeltaException.CONCURRENT_DELETE_READ,
    "DD": DeltaException.CONCURRENT_DELETE_DELETE,
}
CLASS_RANK = {"INSERT": 0, "DML": 1, "OPTIMIZE": 2}


def _load() -> list[dict[str, str]]:
    with CSV_PATH.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


CELLS = _load()


@dataclass(frozen=True)
class Side:
    cls: str  # INSERT, DML, OPTIMIZE
    kind: OperationKind
    zorder: bool = False

    def op(self, predicate: str | None) -> Operation:
        """This operation restricted to ``predicate`` (None = whole table)."""
        if self.kind is OperationKind.MERGE:
            condition = "t.id = s.id" + (f" AND t.{predicate}" if predicate else "")
            return Operation(self.kind, merge_condition=condition)
        return Operation(self.kind, predicate=predicate, zorder_by=("id",) if self.zorder else ())

    def label(self) -> str:
        return self.kind.value + (" ZORDER" if self.zorder else "")


SIDES = [
    Side("INSERT", OperationKind.INSERT),
    Side("DML", OperationKind.UPDATE),
    Side("DML", OperationKind.DELETE),
    Side("DML", OperationKind.MERGE),
    Side("OPTIMIZE", OperationKind.OPTIMIZE),
    Side("OPTIMIZE", OperationKind.OPTIMIZE, zorder=True),
]


def _table(isolation: str, dv: bool, partitioned: bool) -> TableConfig:
    return TableConfig(
        partition_columns=("date",) if partitioned else (),
        properties={
            "delta.isolationLevel": isolation,
            "delta.enableDeletionVectors": "true" if dv else "false",
        },
        # The page's cells are about plain conditions: the columns are declared with primitive types (a
        # column of unknown type never gets row-level concurrency, ADR 0036).
        column_types=(("id", "long"), ("date", "date")),
    )


def _cell(section: str, a: Side, b: Side, isolation: str, dv: bool) -> dict[str, str]:
    row, col = (a, b) if CLASS_RANK[a.cls] >= CLASS_RANK[b.cls] else (b, a)
    zorder = a.zorder or b.zorder
    conditions = {
        "*": True,
        "zorder": zorder,
        "no_zorder": not zorder,
        "dv_no_zorder": dv and not zorder,
        "otherwise": not (dv and not zorder),
    }
    found = [
        c
        for c in CELLS
        if c["section"] == section
        and c["row"] == row.cls
        and c["column"] == col.cls
        and c["isolation"] in ("*", isolation)
        and conditions[c["condition"]]
    ]
    assert len(found) == 1, f"page_cells.csv must have exactly one cell for {section} {row} {col}: {found}"
    return found[0]


CASES = [
    pytest.param(
        a,
        b,
        isolation,
        dv,
        partitioned,
        id=f"{a.label()}-{b.label()}-{isolation}-dv{int(dv)}-part{int(partitioned)}",
    )
    for (a, b), isolation, dv, partitioned in itertools.product(
        itertools.combinations_with_replacement(SIDES, 2),
        ("Serializable", "WriteSerializable"),
        (True, False),
        (True, False),
    )
]


def _both_orders(a: Operation, b: Operation, table: TableConfig) -> bool:
    first = pair_verdict(a, b, table, PROFILE)
    second = pair_verdict(b, a, table, PROFILE)
    assert first == second, "the pair verdict must not depend on argument order"
    return first.conflict


@pytest.mark.parametrize(("a", "b", "isolation", "dv", "partitioned"), CASES)
def test_page_cell(a: Side, b: Side, isolation: str, dv: bool, partitioned: bool) -> None:
    section = "row" if dv and not partitioned else "file"
    cell = _cell(section, a, b, isolation, dv)
    table = _table(isolation, dv, partitioned)
    expected = cell["expected"]

    whole = pair_verdict(a.op(None), b.op(None), table, PROFILE)
    assert whole.conflict == (expected != "cannot"), f"{cell['seed_text']} ({whole.reason})"
    assert pair_verdict(b.op(None), a.op(None), table, PROFILE) == whole
    if whole.conflict:
        assert set(whole.exceptions) == {ABBR[x] for x in cell["exceptions"].split(";")}
        assert whole.reason.startswith("Isolation levels and write conflicts"), whole.reason
        assert whole.advice, "a conflict must come with advice"
    else:
        assert whole.exceptions == ()

    # Disjoint on a data column only: row-level rules see it, file-level rules do not.
    by_id = _both_orders(a.op("id = 1"), b.op("id = 2"), table)
    # Disjoint on the partition column: file-level rules see it only when the table is partitioned by it.
    by_date = _both_orders(a.op("date = '2024-01-01'"), b.op("date = '2024-01-02'"), table)
    if expected == "cannot":
        assert not by_id and not by_date
    elif expected == "can":
        assert by_id  # ZORDER BY rewrites the whole (unpartitioned) table
    elif expected == "same_row":
        assert not by_id and not by_date
    else:
        assert expected == "partitions"
        assert by_id, "file-level rules only look at partition columns"
        assert by_date == (not partitioned)


def test_csv_covers_every_seed_cell() -> None:
    # 6 cells per table, some split by isolation level or condition.
    for section in ("row", "file"):
        pairs = {(c["row"], c["column"]) for c in CELLS if c["section"] == section}
        assert pairs == {
            ("INSERT", "INSERT"),
            ("DML", "INSERT"),
            ("DML", "DML"),
            ("OPTIMIZE", "INSERT"),
            ("OPTIMIZE", "DML"),
            ("OPTIMIZE", "OPTIMIZE"),
        }
