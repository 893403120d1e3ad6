"""The operators tell the conflict model when a write's source may read its own table (ADR 0012)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from deltaguard.operators.dml import DeltaInsertOperator, DeltaMergeOperator
from tests.airflow.helpers import sales_table, task_context

pytestmark = pytest.mark.usefixtures("airflow_db")


def _merge(table: str, source: object) -> DeltaMergeOperator:
    return DeltaMergeOperator(
        task_id="m",
        table=table,
        source=source,
        condition="t.id = s.id",
        target_partition_values={"country": "DE"},
        matched_update={"amount": "s.amount"},
    )


def test_a_merge_whose_source_is_its_table_reads_the_whole_table(tmp_path: Path) -> None:
    table = sales_table(str(tmp_path / "sales"))
    link = tmp_path / "link"
    os.symlink(table, link)
    for source in ("delta+" + str(link), lambda: pa.table({"id": [1], "country": ["DE"], "amount": [5]})):
        prepared = _merge(table, source).prepare_try(task_context("m")).value
        assert prepared.operation.reads_target, source
    data = pa.table({"id": [1], "country": ["DE"], "amount": [5]})
    assert not _merge(table, data).prepare_try(task_context("m")).value.operation.reads_target


def test_an_append_of_its_own_table_has_merge_concurrency(tmp_path: Path) -> None:
    table = sales_table(str(tmp_path / "sales"))
    prepared = (
        DeltaInsertOperator(task_id="i", table=table, source=table + "/").prepare_try(task_context("i")).value
    )
    assert prepared.operation.reads_target


def test_source_reads_target_false_takes_a_callable_at_its_authors_word(tmp_path: Path) -> None:
    table = sales_table(str(tmp_path / "sales"))
    rows = lambda: pa.table({"id": [1], "country": ["DE"], "amount": [5]})  # noqa: E731
    stated = DeltaMergeOperator(
        task_id="m",
        table=table,
        source=rows,
        source_reads_target=False,
        condition="t.id = s.id",
        target_partition_values={"country": "DE"},
        matched_update={"amount": "s.amount"},
    )
    assert not stated.prepare_try(task_context("m")).value.operation.reads_target
    with pytest.raises(ValueError, match="source_reads_target"):
        DeltaInsertOperator(task_id="i", table=table, source=rows, source_reads_target="no")  # type: ignore[arg-type]
