"""The Databricks profile's file-level cells against the delta-spark measurements.

Without row-level concurrency (Runtime below 13.3, or no deletion vectors) Databricks runs delta-spark's
``ConflictChecker`` under Serializable, the table "Write conflicts without row-level concurrency" of the page
"Isolation levels and write conflicts". Where that page and delta-spark agree, a pair delta-spark was
measured to conflict on must not be a Databricks ``no_conflict`` either. The measurements are
``benchmarks/results/conformance_deltaspark.json`` (``python -m lab.conformance --engine delta-spark``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deltaguard.core.model import pair_verdict
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from lab.conformance.scenarios import Layout, ProbeOp, build_write

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "conformance_deltaspark.json"
#: probes whose kind the page's file-level table lists (INSERT, UPDATE/DELETE/MERGE INTO, OPTIMIZE); the
#: page names neither REPLACE WHERE/OVERWRITE nor metadata changes in that table
PAGE_KINDS = frozenset(
    {
        ProbeOp.INSERT,
        ProbeOp.UPDATE,
        ProbeOp.DELETE,
        ProbeOp.MERGE_TARGET_FILTER,
        ProbeOp.MERGE_NO_TARGET_FILTER,
        ProbeOp.INSERT_READING_TARGET,
        ProbeOp.OPTIMIZE_COMPACT,
        ProbeOp.OPTIMIZE_ZORDER,
    }
)
FILE_LEVEL = EngineProfile(EngineName.DATABRICKS, "12.2")


def _cells() -> list[dict[str, Any]]:
    cells = json.loads(RESULTS.read_text())["cells"]
    return [
        c
        for c in cells
        if ProbeOp(c["a"]) in PAGE_KINDS
        and ProbeOp(c["b"]) in PAGE_KINDS
        and c["isolation"] in (None, "Serializable")
        and not c["inconclusive"]
    ]


def _databricks(cell: dict[str, Any]) -> bool:
    layout = Layout(cell["layout"])
    a = build_write(ProbeOp(cell["a"]), layout, "A").operation
    b = build_write(ProbeOp(cell["b"]), layout, "B").operation
    table = TableConfig(
        partition_columns=("p",) if layout.partitioned else (),
        properties={"delta.isolationLevel": "Serializable"},
        exists=True,
    )
    return pair_verdict(a, b, table, FILE_LEVEL).conflict


def test_measured_cells_cover_the_pages_file_level_table() -> None:
    cells = _cells()
    if not cells:
        pytest.fail(f"no comparable delta-spark cells in {RESULTS}")
    covered = {(c["a"], c["b"]) for c in cells}
    assert ("INSERT", "INSERT") in covered and ("INSERT", "UPDATE") in covered


def test_databricks_never_allows_what_delta_spark_conflicts_on() -> None:
    disagreements = [
        f"{c['a']} x {c['b']} | {c['layout']} | {c['isolation']}: delta-spark {c['orders']}"
        for c in _cells()
        if not c["engine_allows"] and not _databricks(c)
    ]
    assert not disagreements, "\n".join(disagreements)
