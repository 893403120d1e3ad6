"""One write reads its table once before the lease: the Delta log, the statistics and the spec checks are
not repeated between preparing the write, pinning its snapshot and committing it (ADR 0020)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import deltaguard.engines.base as validation
import deltaguard.engines.discovery as discovery
from tests.airflow.helpers import rows, sales_table, task_context


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the Delta log is opened, file statistics are read and a spec is validated."""
    counts = {"log": 0, "stats": 0, "spec": 0}

    def counting(name: str, function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return function(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(DeltaTable, "__init__", counting("log", DeltaTable.__init__))
    monkeypatch.setattr(discovery, "read_file_stats", counting("stats", discovery.read_file_stats))
    # validate_spec, whichever module calls it, builds what the spec is checked against here, once per check
    monkeypatch.setattr(validation, "spec_check", counting("spec", validation.spec_check))
    return counts


def test_a_merge_opens_the_log_twice_and_checks_its_spec_once(
    tmp_path: Any, lease_store_url: str, counted: dict[str, int]
) -> None:
    from deltaguard.operators.dml import DeltaMergeOperator

    table = sales_table(str(tmp_path / "sales"))
    counted.update(log=0, stats=0, spec=0)  # writing the table above opened it too

    def source() -> pa.Table:
        return pa.table({"id": [2, 4], "country": ["DE", "DE"], "amount": [21, 40]})

    op = DeltaMergeOperator(
        task_id="merge", table=table, source=source, condition="t.id = s.id", file_stats=True
    )
    result = op.execute(task_context("merge"))
    assert result["version"] == 1
    # prepare (configuration and statistics, kept as the write's snapshot), and the lineage read of the
    # committed version; the commit is found by bringing the write's own handle up to date
    assert 1 <= counted["log"] <= 2, counted  # 0 would mean the count no longer sees the reads
    assert counted["stats"] == 1, counted
    assert counted["spec"] == 1, counted
    assert [r["amount"] for r in rows(table)] == [10, 21, 30, 40]


def _update(table: str) -> Any:
    from deltaguard.operators.dml import DeltaUpdateOperator

    return DeltaUpdateOperator(
        task_id="write", table=table, updates={"amount": "amount + 1"}, predicate="id = 2", file_stats=True
    )


def _delete(table: str) -> Any:
    from deltaguard.operators.dml import DeltaDeleteOperator

    return DeltaDeleteOperator(task_id="write", table=table, predicate="id = 3", file_stats=True)


def _replace_where(table: str) -> Any:
    from deltaguard.operators.dml import DeltaReplaceWhereOperator

    def source() -> pa.Table:
        return pa.table({"id": [3], "country": ["FR"], "amount": [33]})

    return DeltaReplaceWhereOperator(
        task_id="write", table=table, source=source, predicate="country = 'FR'", file_stats=True
    )


@pytest.mark.parametrize(
    ("build", "amounts"),
    [(_update, [10, 21, 30]), (_delete, [10, 20]), (_replace_where, [10, 20, 33])],
    ids=["update", "delete", "replace_where"],
)
def test_a_write_whose_texts_datafusion_plans_opens_the_log_at_most_twice(
    tmp_path: Any, lease_store_url: str, counted: dict[str, int], build: Any, amounts: list[int]
) -> None:
    """DataFusion plans an UPDATE's, a DELETE's or a replaceWhere's texts before the lease, on the handle the
    write read its configuration from: no open of its own, as a MERGE."""
    table = sales_table(str(tmp_path / "sales"))
    counted.update(log=0, stats=0, spec=0)

    result = build(table).execute(task_context("write"))
    assert result["version"] == 1
    assert 1 <= counted["log"] <= 2, counted
    assert counted["spec"] == 1, counted
    assert [r["amount"] for r in rows(table)] == amounts
