"""Data-aware MERGE scopes on the Spark engine, against real delta-spark (ADR 0019; jar-gated: see conftest.py).

The same glue as on delta-rs (``writes/merge_scope.scoped_merge``, ``DeltaMergeOperator.build_spec``): the
Spark engine reads the source's key values in Spark, the claim and the executed ON condition carry the one
``t.date IN (...)`` conjunct, and the MERGE's own job refuses a source row outside what the lease claims.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import write_deltalake

from deltaguard.core.merge_scope import ScopeLimits
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.merge_scope import scoped_merge
from deltaguard.engines.spark.engine import SparkEngine
from deltaguard.engines.specs import CreateSpec, MergeSpec, WriteContext

NONE = WriteContext()
UPSERT = "t.id = s.id AND t.date = s.date"


@pytest.fixture
def engine(delta_spark: Any) -> SparkEngine:
    return SparkEngine(delta_spark)


@pytest.fixture
def table(engine: SparkEngine, tmp_path: Path) -> str:
    """Partitioned by ``date``: id 1 on 2024-01-01, id 2 on 2024-01-02."""
    uri = str(tmp_path / "sales")
    source = pa.table({"id": pa.array([1, 2], pa.int64()), "date": ["2024-01-01", "2024-01-02"], "v": [0, 0]})
    engine.write(uri, CreateSpec(source=source, partition_by=("date",)), NONE)
    return uri


def _upsert(source: object, condition: str = UPSERT, **kwargs: Any) -> MergeSpec:
    return MergeSpec(
        source=source, condition=condition, matched_update_all=True, not_matched_insert_all=True, **kwargs
    )


def _rows(uri: str) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["date"], r["v"]) for r in RsTable(uri).to_pyarrow_table().to_pylist())


def test_a_spark_source_narrows_the_claim_and_the_executed_condition(engine: SparkEngine, table: str) -> None:
    def changes(spark: Any) -> Any:
        return spark.createDataFrame(
            [(1, "2024-01-01", 5), (7, "2024-01-01", 7), (8, None, 8)], "id long, date string, v long"
        )

    spec, reasons = scoped_merge(_upsert(changes), engine.table_config(table), engine, limits=ScopeLimits())
    assert spec.source is changes  # a plan: built again for the write, on the write's own session
    assert spec.scope_conjunct() == "t.date IN ('2024-01-01')"
    assert spec.operation().merge_condition == f"({UPSERT}) AND (t.date IN ('2024-01-01'))"
    assert spec.operation().inserts == "(date IN ('2024-01-01') OR date IS NULL)"
    assert "matched date: narrowed to 1 source value(s)" in reasons
    engine.write(table, spec, NONE)
    # delta-spark records the ON condition it ran: the claim's conjunct is in it (Spark folds a one-value IN
    # into an equality), as a target-only conjunct Delta prunes files by
    (executed,) = json.loads(RsTable(table).history(1)[0]["operationParameters"]["predicate"])
    assert re.search(r"\) AND \(date#\d+ = 2024-01-01\)\)$", executed), executed
    assert _rows(table) == [(1, "2024-01-01", 5), (2, "2024-01-02", 0), (7, "2024-01-01", 7), (8, None, 8)]


def test_beyond_the_in_bound_integer_keys_become_a_range(engine: SparkEngine, tmp_path: Path) -> None:
    uri = str(tmp_path / "by_day")
    engine.write(
        uri,
        CreateSpec(source=pa.table({"id": pa.array([1], pa.int64()), "day": [1]}), partition_by=("day",)),
        NONE,
    )

    def days(spark: Any) -> Any:
        return spark.range(1, 5).selectExpr("id", "CAST(id AS INT) AS day")

    spec, _ = scoped_merge(
        _upsert(days, "t.id = s.id AND t.day = s.day"),
        engine.table_config(uri),
        engine,
        limits=ScopeLimits(max_in_values=2, max_range_values=10),
    )
    assert spec.scope_conjunct() == "t.day BETWEEN 1 AND 4"
    engine.write(uri, spec, NONE)
    assert sorted(r["day"] for r in RsTable(uri).to_pyarrow_table().to_pylist()) == [1, 2, 3, 4]


def test_the_operator_refuses_a_source_outside_its_partitions_before_any_lease_or_widens(
    engine: SparkEngine, table: str, tmp_path: Path
) -> None:
    from deltaguard.operators.base import InvalidTaskInputError
    from deltaguard.operators.dml import DeltaMergeOperator

    source = pa.table(
        {"id": pa.array([9], pa.int64()), "date": ["2024-01-03"], "v": pa.array([9], pa.int64())}
    )
    store = tmp_path / "leases.db"
    refused = DeltaMergeOperator(
        task_id="refused",
        table=table,
        source=source,
        condition="t.id = s.id",
        target_partition_values={"date": "2024-01-01"},
        engine="spark",
        lease_store_url=f"sqlite:///{store}",
    )
    with pytest.raises(InvalidTaskInputError, match=r"outside its declared target .* date: '2024-01-03'"):
        refused.execute(context={})  # type: ignore[arg-type]
    assert not store.exists() and RsTable(table).version() == 0  # no lease store opened, nothing written

    def late(spark: Any) -> Any:
        return spark.createDataFrame([(9, "2024-01-03", 9)], "id long, date string, v long")

    widened = DeltaMergeOperator(
        task_id="widened",
        table=table,
        source=late,
        condition="t.id = s.id",
        target_partition_values={"date": "2024-01-01"},
        engine="spark",
        on_source_outside_target="widen",
    )
    widened.resolved_engine = engine  # as execute() resolves it before building the spec
    spec = widened.build_spec(engine.table_config(table))
    assert spec.operation().inserts == "date IN ('2024-01-03')"
    assert "widened: inserted rows also land outside date = '2024-01-01'" in widened.scope_reasons
    engine.write(table, spec, NONE)
    assert (9, "2024-01-03", 9) in _rows(table)


def test_the_merge_job_refuses_a_source_that_changed_after_its_scope_was_read(
    engine: SparkEngine, table: str, tmp_path: Path
) -> None:
    """A query over a table someone appends to: its keys were read for the lease, the MERGE reads it again."""
    landing = str(tmp_path / "landing")
    write_deltalake(landing, pa.table({"id": pa.array([7], pa.int64()), "date": ["2024-01-01"], "v": [7]}))

    def landed(spark: Any) -> Any:
        return spark.read.format("delta").load(landing)

    spec, _ = scoped_merge(_upsert(landed), engine.table_config(table), engine, limits=ScopeLimits())
    assert spec.scope_conjunct() == "t.date IN ('2024-01-01')"
    write_deltalake(
        landing, pa.table({"id": pa.array([8], pa.int64()), "date": ["2024-01-02"], "v": [8]}), mode="append"
    )
    with pytest.raises(InvalidWriteError, match=r"holds date = 2024-01-02, outside the scope read from it"):
        engine.write(table, spec, NONE)
    assert RsTable(table).version() == 0  # not even the in-scope row: the job failed before the commit


def test_declared_partitions_are_checked_in_the_merge_job(engine: SparkEngine, table: str) -> None:
    """``INSERT *`` with ``target_partition_values``: the claim's inserted rows are the declared partition
    (``copies_checked_rows``); a source callable pinned that way runs under the lease only, unread."""

    def changes(spark: Any) -> Any:
        return spark.createDataFrame(
            [(1, "2024-01-01", 5), (9, "2024-01-02", 9)], "id long, date string, v long"
        )

    declared = _upsert(changes, "t.id = s.id", target_partition_values={"date": "2024-01-01"})
    spec, reasons = scoped_merge(
        declared, engine.table_config(table), engine, limits=ScopeLimits(), produced=True
    )
    assert spec.source_scope is None and "pins every key column" in reasons[0]
    assert spec.operation().inserts == "date = '2024-01-01'"
    with pytest.raises(InvalidWriteError, match=r"holds date = 2024-01-02, outside the partitions"):
        engine.write(table, spec, NONE)
    assert RsTable(table).version() == 0


def test_an_append_with_declared_partition_values_is_checked_in_its_job(
    engine: SparkEngine, table: str
) -> None:
    """``AppendSpec.partition_values`` narrows the append's claim to that partition; the same guard refuses a
    row of another one (delta-rs: ``check_rows_in_partition``)."""
    from deltaguard.engines.specs import AppendSpec

    stray = pa.table({"id": pa.array([5, 6], pa.int64()), "date": ["2024-01-01", None], "v": [5, 6]})
    assert AppendSpec(source=stray, partition_values={"date": "2024-01-01"}).operation().predicate
    with pytest.raises(
        InvalidWriteError, match=r"holds date = NULL, outside the partitions partition_values"
    ):
        engine.write(table, AppendSpec(source=stray, partition_values={"date": "2024-01-01"}), NONE)
    assert RsTable(table).version() == 0
    engine.write(table, AppendSpec(source=stray.slice(0, 1), partition_values={"date": "2024-01-01"}), NONE)
    assert (5, "2024-01-01", 5) in _rows(table)
