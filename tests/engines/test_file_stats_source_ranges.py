"""A MERGE's and a REPLACE WHERE's source ranges on real delta-rs tables (ADR 0020).

The operators' scoping functions read them with the engine that writes the source; the model judges the
operation of the scoped spec, and the engine refuses a source that has left the ranges.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from deltaguard.core.file_stats import value_bounds
from deltaguard.core.merge_scope import ScopeLimits
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.merge_scope import scoped_merge, scoped_replace_where
from deltaguard.engines.specs import AppendSpec, CreateSpec, MergeSpec, ReplaceWhereSpec
from lab.conformance.stats_scenarios import DAYS, StatsLayout, StatsOp, build, rows

LIMITS = ScopeLimits()
UPDATE_IDS_NEXT = Operation(OperationKind.UPDATE, "id >= 3 AND id <= 4", assignments=(("v", "v + 1"),))
UPDATE_NEXT_DAY = Operation(OperationKind.UPDATE, f"day = '{DAYS[1]}'", assignments=(("v", "v + 1"),))


@pytest.fixture
def engine() -> DeltaRsEngine:
    return DeltaRsEngine(file_stats=True)


@pytest.fixture
def uri(tmp_path: Path, engine: DeltaRsEngine) -> str:
    path = str(tmp_path / "per_day")
    first, *rest = StatsLayout.PER_DAY.batches()
    engine.write(path, CreateSpec(source=first))
    for batch in rest:
        engine.write(path, AppendSpec(source=batch))
    return path


def conflict(a: Operation, b: Operation, engine: DeltaRsEngine, uri: str) -> bool:
    verdict = pair_verdict(a, b, engine.table_config(uri), engine.profile())
    assert verdict.conflict is not None
    return verdict.conflict


def test_a_scoped_merge_states_its_source_ranges_and_runs_them(engine: DeltaRsEngine, uri: str) -> None:
    spec = build(StatsOp.MERGE_INSERT_INSIDE, DAYS[0], "A").spec
    assert isinstance(spec, MergeSpec)
    scoped, reasons = scoped_merge(spec, engine.table_config(uri), engine, limits=LIMITS)
    operation = scoped.operation()
    assert operation.merge_condition is not None and "t.id BETWEEN 1 AND 100" in operation.merge_condition
    assert operation.inserts is not None and "id BETWEEN 1 AND 100" in operation.inserts
    assert any("inserted day" in r for r in reasons)
    assert conflict(operation, UPDATE_NEXT_DAY, engine, uri) is False
    assert conflict(spec.operation(), UPDATE_NEXT_DAY, engine, uri) is True  # unscoped: rows anywhere
    engine.write(uri, scoped)  # the engine runs the conjunct the model judged; the source lies within it
    ids = DeltaTable(uri).to_pyarrow_table().column("id").to_pylist()
    assert sorted(ids) == [*range(1, 9), 100]


def test_a_merge_source_too_large_to_bound_leaves_its_rows_anywhere(engine: DeltaRsEngine, uri: str) -> None:
    spec = build(StatsOp.MERGE_INSERT_INSIDE, DAYS[0], "A").spec
    assert isinstance(spec, MergeSpec)
    # two distinct ids, at most one counted: ``id`` is not bounded, ``day`` and ``v`` still are
    scoped, reasons = scoped_merge(spec, engine.table_config(uri), engine, limits=ScopeLimits(1, 1))
    operation = scoped.operation()
    stated = value_bounds(operation.inserts, {"id": "long", "day": "date", "v": "long"})
    assert set(stated) == {"day", "v"}
    assert any("more than 1 distinct values" in r for r in reasons)
    # the inserted rows' ids may then reach ids 3..4 (the MERGE's own files stay apart from them)
    assert conflict(operation, UPDATE_IDS_NEXT, engine, uri) is True


def test_a_scoped_replace_where_states_its_source_ranges(engine: DeltaRsEngine, uri: str) -> None:
    spec = ReplaceWhereSpec(source=rows([100], DAYS[0]), predicate=f"day = '{DAYS[0]}'")
    assert conflict(spec.operation(), UPDATE_IDS_NEXT, engine, uri) is True  # new ids unknown
    scoped, _ = scoped_replace_where(spec, engine.table_config(uri), engine, limits=LIMITS)
    assert scoped.source_scope is not None
    assert "id BETWEEN 100 AND 100" in scoped.operation().inserts  # type: ignore[operator]
    assert conflict(scoped.operation(), UPDATE_IDS_NEXT, engine, uri) is False
    engine.write(uri, scoped)
    assert sorted(DeltaTable(uri).to_pyarrow_table().column("id").to_pylist()) == [3, 4, 5, 6, 7, 8, 100]


def test_the_engine_refuses_a_source_that_left_its_ranges(engine: DeltaRsEngine, uri: str) -> None:
    spec = ReplaceWhereSpec(source=rows([100], DAYS[0]), predicate=f"day = '{DAYS[0]}'")
    scoped, _ = scoped_replace_where(spec, engine.table_config(uri), engine, limits=LIMITS)
    version = DeltaTable(uri).version()
    changed = dataclasses.replace(scoped, source=pa.concat_tables([rows([100], DAYS[0]), rows([3], DAYS[0])]))
    with pytest.raises(InvalidWriteError, match="outside the scope"):
        engine.write(uri, changed)
    assert DeltaTable(uri).version() == version  # nothing written


def test_without_statistics_the_source_is_not_read(uri: str) -> None:
    plain = DeltaRsEngine()
    spec = ReplaceWhereSpec(source=rows([100], DAYS[0]), predicate=f"day = '{DAYS[0]}'")
    scoped, reasons = scoped_replace_where(spec, plain.table_config(uri), plain, limits=LIMITS)
    assert scoped is spec and "no file statistics" in reasons[0]
    merge = build(StatsOp.MERGE_INSERT_INSIDE, DAYS[0], "A").spec
    assert isinstance(merge, MergeSpec)
    unchanged, _ = scoped_merge(merge, plain.table_config(uri), plain, limits=LIMITS)
    assert unchanged is merge
