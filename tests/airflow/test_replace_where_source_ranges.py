"""``DeltaReplaceWhereOperator`` states its source's ranges when the table's file statistics are read, and a
resumed task writes under the ranges it queued with (ADR 0020)."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.specs import AppendSpec, CreateSpec, ReplaceWhereSpec, WriteContext
from deltaguard.operators.dml import DeltaReplaceWhereOperator
from deltaguard.writes.prepared import PreparedWrite
from lab.conformance.stats_scenarios import DAYS, StatsLayout, rows


def test_a_resumed_replace_where_writes_under_the_ranges_it_queued_with(tmp_path) -> None:
    engine = DeltaRsEngine(file_stats=True)
    table = str(tmp_path / "per_day")
    first, *rest = StatsLayout.PER_DAY.batches()
    engine.write(table, CreateSpec(source=first))
    for batch in rest:
        engine.write(table, AppendSpec(source=batch))
    version = DeltaTable(table).version()
    calls = itertools.count()

    def drifting() -> pa.Table:  # id 100 before the wait, id 3 after it
        return rows([100 if next(calls) == 0 else 3], DAYS[0])

    def operator() -> DeltaReplaceWhereOperator:
        op = DeltaReplaceWhereOperator(
            task_id="r", table=table, source=drifting, predicate=f"day = '{DAYS[0]}'"
        )
        op.resolved_engine = engine
        return op

    before = operator()
    queued = before.build_spec(engine.table_config(table))
    assert isinstance(queued, ReplaceWhereSpec) and queued.source_scope is not None
    assert "id BETWEEN 100 AND 100" in queued.operation().inserts  # type: ignore[operator]
    config = engine.table_config(table)
    after = operator()
    # what a resumed try takes from the prepared write its deferral carried (tests/airflow/test_prepared_write.py)
    after.resumed_write = PreparedWrite(
        uri=table,
        operation=queued.operation(),
        profile=engine.profile(),
        table_config=config,
        source_scope=queued.source_scope,  # type: ignore[attr-defined]
    )
    resumed = after.build_spec(config)
    assert isinstance(resumed, ReplaceWhereSpec)
    assert resumed.source_scope == queued.source_scope and resumed.operation() == queued.operation()
    assert next(calls) == 1  # the source was not read again to build the ranges
    with pytest.raises(InvalidWriteError, match="outside the scope"):
        engine.write(table, resumed, WriteContext())
    assert DeltaTable(table).version() == version


def test_without_statistics_the_operator_leaves_the_source_unread(tmp_path) -> None:
    engine = DeltaRsEngine()
    table = str(tmp_path / "per_day")
    engine.write(table, CreateSpec(source=StatsLayout.PER_DAY.batches()[0]))
    calls = itertools.count()

    def source() -> pa.Table:
        next(calls)
        return rows([100], DAYS[0])

    op = DeltaReplaceWhereOperator(task_id="r", table=table, source=source, predicate=f"day = '{DAYS[0]}'")
    op.resolved_engine = engine
    spec = op.build_spec(engine.table_config(table))
    assert isinstance(spec, ReplaceWhereSpec) and spec.source_scope is None
    assert spec.operation().inserts == ""
    assert next(calls) == 0  # the callable runs under the lease, as before
