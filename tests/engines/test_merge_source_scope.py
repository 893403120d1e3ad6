"""Data-aware MERGE scopes on real delta-rs tables and the real lease manager (ADR 0019).

Forced interleaving as in ``test_deltars_scopes.py``: two handles open the same table version, both MERGEs
commit from it. What the lease manager admitted side by side must commit side by side.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st

from deltaguard.core.admission import Granted, Owner, TableClaim, Waiting
from deltaguard.core.merge_scope import ColumnScope, MergeScope, ScopeLimits
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.errors import DeltaConflictError, InvalidWriteError
from deltaguard.engines.merge_scope import scoped_merge
from deltaguard.engines.sources import check_source_in_scope, source_key_summaries
from deltaguard.engines.specs import MergeSpec, WriteContext
from deltaguard.hooks.lease import claims_request
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.open import open_store

LIMITS = ScopeLimits()
UPSERT = "t.id = s.id AND t.date = s.date"


def _table(tmp_path: Path) -> str:
    uri = str(tmp_path / "sales")
    write_deltalake(
        uri,
        pa.table(
            {
                "id": pa.array([1, 2, 3], pa.int64()),
                "date": ["2024-01-01", "2024-01-02", "2024-01-03"],
                "v": pa.array([0, 0, 0], pa.int64()),
            }
        ),
        partition_by=["date"],
    )
    return uri


def _source(ids: list[int], dates: list[str | None]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "date": pa.array(dates, pa.string()),
            "v": pa.array([7] * len(ids), pa.int64()),
        }
    )


def _upsert(source: object, condition: str = UPSERT, **kwargs: object) -> MergeSpec:
    return MergeSpec(
        source=source, condition=condition, matched_update_all=True, not_matched_insert_all=True, **kwargs
    )  # type: ignore[arg-type]


def _scoped(engine: DeltaRsEngine, uri: str, spec: MergeSpec, **kwargs: object) -> MergeSpec:
    scoped, _ = scoped_merge(spec, engine.table_config(uri), engine, limits=LIMITS, **kwargs)  # type: ignore[arg-type]
    return scoped


def _ask(
    manager: LeaseManager, engine: DeltaRsEngine, uri: str, task: str, spec: MergeSpec
) -> Granted | Waiting:
    owner = Owner(dag_id="d", run_id="r", task_id=task, map_index=-1, try_number=1)
    claim = TableClaim(
        uri=uri, operation=spec.operation(), profile=engine.profile(), config=engine.table_config(uri)
    )
    request = claims_request(
        claims=(claim,),
        owner=owner,
        ttl_s=60,
        poll_interval_s=1,
    )
    return manager.acquire(request)


def _interleave(engine: DeltaRsEngine, uri: str, first: MergeSpec, second: MergeSpec) -> None:
    """Both MERGEs start on the same snapshot; the first commits, then the second from its stale one."""
    a, b = engine.open_table(uri), engine.open_table(uri)
    engine.write(uri, first, WriteContext(), snapshot=a)
    engine.write(uri, second, WriteContext(), snapshot=b)


def _dates(uri: str) -> dict[int, str | None]:
    return {r["id"]: r["date"] for r in DeltaTable(uri).to_pyarrow_table().to_pylist() if r["v"] == 7}


@pytest.mark.parametrize("first_source", ["arrow", "pandas", "parquet", "callable"])
def test_merges_of_disjoint_source_dates_are_admitted_and_commit_side_by_side(
    tmp_path: Path, first_source: str
) -> None:
    engine, uri = DeltaRsEngine(), _table(tmp_path)
    rows_a = _source([1, 10], ["2024-01-01", "2024-01-01"])
    source_a: object = {
        "arrow": rows_a,
        "pandas": rows_a.to_pandas(),
        "parquet": str(tmp_path / "a.parquet"),
        "callable": lambda: rows_a,
    }[first_source]
    pq.write_table(rows_a, tmp_path / "a.parquet")
    a = _scoped(engine, uri, _upsert(source_a))
    b = _scoped(engine, uri, _upsert(_source([2, 20], ["2024-01-02", "2024-01-02"])))
    assert a.scope_conjunct() == "t.date IN ('2024-01-01')"
    with open_store(f"sqlite:///{tmp_path / 'leases.db'}") as store:
        manager = LeaseManager(store)
        assert isinstance(_ask(manager, engine, uri, "a", a), Granted)
        assert isinstance(_ask(manager, engine, uri, "b", b), Granted)  # side by side
    _interleave(engine, uri, a, b)
    assert _dates(uri) == {1: "2024-01-01", 10: "2024-01-01", 2: "2024-01-02", 20: "2024-01-02"}


def test_a_source_row_with_a_null_partition_value_is_not_separated_unconfirmed(tmp_path: Path) -> None:
    """The second MERGE inserts into the NULL partition. The engine's evaluator counts a comparison that is
    unknown on a NULL partition as reading it (ADR 0003 fact 11, ADR 0037), so the pair is not kept apart
    on the hand reading alone: the lease manager queues it with the engine's reason."""
    engine, uri = DeltaRsEngine(), _table(tmp_path)
    a = _scoped(engine, uri, _upsert(_source([1, 10], ["2024-01-01", "2024-01-01"])))
    b = _scoped(engine, uri, _upsert(_source([2, 20, 21], ["2024-01-02", "2024-01-02", None])))
    verdict = pair_verdict(a.operation(), b.operation(), engine.table_config(uri), engine.profile())
    assert verdict.conflict and verdict.rule == "deltars.engine_unconfirmed", verdict
    with open_store(f"sqlite:///{tmp_path / 'leases.db'}") as store:
        manager = LeaseManager(store)
        assert isinstance(_ask(manager, engine, uri, "a", a), Granted)
        assert isinstance(_ask(manager, engine, uri, "b", b), Waiting)


def test_without_the_conjunct_in_the_executed_condition_the_claim_stays_whole_table(tmp_path: Path) -> None:
    """explicit_partitions=False: delta-rs reads every file for conflict detection, so the model must not
    narrow the read scope; the lease manager queues the second MERGE and delta-rs would fail it."""
    engine, uri = DeltaRsEngine(), _table(tmp_path)
    a = _scoped(engine, uri, _upsert(_source([1], ["2024-01-01"])), explicit=False)
    b = _scoped(engine, uri, _upsert(_source([2], ["2024-01-02"])), explicit=False)
    assert a.source_scope is not None and a.scope_conjunct() is None
    assert a.operation().inserts == "date IN ('2024-01-01')"  # the inserted rows' scope is still narrowed
    with open_store(f"sqlite:///{tmp_path / 'leases.db'}") as store:
        manager = LeaseManager(store)
        assert isinstance(_ask(manager, engine, uri, "a", a), Granted)
        assert isinstance(_ask(manager, engine, uri, "b", b), Waiting)
    with pytest.raises(DeltaConflictError):
        _interleave(engine, uri, a, b)


def test_overlapping_source_dates_conflict(tmp_path: Path) -> None:
    engine, uri = DeltaRsEngine(), _table(tmp_path)
    a = _scoped(engine, uri, _upsert(_source([1, 2], ["2024-01-01", "2024-01-02"])))
    b = _scoped(engine, uri, _upsert(_source([5], ["2024-01-02"])))
    assert pair_verdict(a.operation(), b.operation(), engine.table_config(uri), engine.profile()).conflict
    with pytest.raises(DeltaConflictError):
        _interleave(engine, uri, a, b)


DAY0 = dt.date(2024, 1, 1)


@pytest.mark.parametrize(
    ("key_type", "key", "conjunct"),
    [
        (pa.int64(), lambda n: n, "t.k BETWEEN 1 AND 5"),
        (
            pa.date32(),
            lambda n: DAY0 + dt.timedelta(days=n),
            "t.k BETWEEN CAST('2024-01-02' AS DATE) AND CAST('2024-01-06' AS DATE)",
        ),
    ],
)
def test_integer_and_date_keys_beyond_the_in_bound_become_a_range(
    tmp_path: Path, key_type, key, conjunct
) -> None:
    engine, uri = DeltaRsEngine(), str(tmp_path / "t")
    write_deltalake(
        uri,
        pa.table({"id": pa.array([1, 2], pa.int64()), "k": pa.array([key(1), key(50)], key_type)}),
        partition_by=["k"],
    )
    limits = ScopeLimits(max_in_values=3, max_range_values=100)

    def spec(ns: list[int]) -> MergeSpec:
        src = pa.table(
            {"id": pa.array([100 + n for n in ns], pa.int64()), "k": pa.array([key(n) for n in ns], key_type)}
        )
        scoped, _ = scoped_merge(
            _upsert(src, "t.id = s.id AND t.k = s.k"), engine.table_config(uri), engine, limits=limits
        )
        return scoped

    low, high = spec([1, 2, 3, 4, 5]), spec([40, 41, 42, 43, 50])
    assert low.scope_conjunct() == conjunct
    assert not pair_verdict(
        low.operation(), high.operation(), engine.table_config(uri), engine.profile()
    ).conflict
    _interleave(engine, uri, low, high)
    assert DeltaTable(uri).to_pyarrow_table().num_rows == 12  # 2 + 5 + 5 new ids
    assert pair_verdict(
        low.operation(), spec([5, 40]).operation(), engine.table_config(uri), engine.profile()
    ).conflict


def test_clustering_columns_narrow_like_partition_columns() -> None:
    engine = DeltaRsEngine()
    clustered = TableConfig(clustering_columns=("region",))
    src = pa.table({"id": [1], "region": ["EU"]})
    spec, _ = scoped_merge(
        _upsert(src, "t.id = s.id AND t.region = s.region"), clustered, engine, limits=LIMITS
    )
    assert spec.scope_conjunct() == "t.region IN ('EU')"
    assert spec.operation().inserts == "region IN ('EU')"


ARRAYS = st.lists(st.one_of(st.none(), st.integers(0, 6)), max_size=12)


@settings(max_examples=80, deadline=None)
@given(ARRAYS, st.sets(st.integers(0, 6), max_size=4), st.booleans(), st.booleans())
def test_the_write_time_check_refuses_exactly_the_values_outside_the_scope(
    values, allowed, has_null, ranged
) -> None:
    if ranged:
        column = ColumnScope("k", "k", None, 2, 4, has_null)
    else:
        column = ColumnScope("k", "k", tuple(sorted(allowed)), has_null=has_null)
    for array in (pa.array(values, pa.int64()), pa.array(values, pa.int64()).dictionary_encode()):
        data = pa.table({"K": array})
        outside = [v for v in values if not column.admits(v)]
        if outside:
            with pytest.raises(InvalidWriteError):
                check_source_in_scope(data, MergeScope(matched=(column,)))
        else:
            check_source_in_scope(data, MergeScope(matched=(column,)))


# --------------------------------------------------------------------------- source outside the target

DECLARED = "t.id = s.id AND t.date = '2024-01-01'"
INSERT = {"id": "s.id", "date": "s.date", "v": "s.v"}


def test_unguarded_a_source_outside_the_declared_target_lands_where_nobody_claimed(tmp_path: Path) -> None:
    """The unsafe case: a claim read from the declared predicate alone says the MERGE stays in 2024-01-01,
    so a DELETE of 2024-01-02 would run beside it, yet the MERGE inserts a 2024-01-02 row."""
    engine, uri = DeltaRsEngine(), _table(tmp_path)
    plain = MergeSpec(source=_source([9], ["2024-01-02"]), condition=DECLARED, not_matched_insert=INSERT)
    declared_only = Operation(OperationKind.MERGE, merge_condition=DECLARED, inserts="date = '2024-01-01'")
    delete_02 = Operation(OperationKind.DELETE, predicate="date = '2024-01-02'")
    assert not pair_verdict(declared_only, delete_02, engine.table_config(uri), engine.profile()).conflict
    engine.write(uri, plain, WriteContext())
    assert _dates(uri) == {9: "2024-01-02"}  # a partition the declared-only claim did not cover


@pytest.mark.parametrize("declared", ["condition", "target_partition_values"])
def test_a_source_outside_the_declared_target_fails_before_anything(tmp_path: Path, declared: str) -> None:
    engine, uri = DeltaRsEngine(), _table(tmp_path)
    source = _source([9, 10, 11], ["2024-01-01", "2024-01-02", None])
    if declared == "condition":
        spec = MergeSpec(source=source, condition=DECLARED, not_matched_insert=INSERT)
    else:
        spec = _upsert(source, "t.id = s.id", target_partition_values={"date": "2024-01-01"})
    with pytest.raises(InvalidWriteError, match=r"date: '2024-01-02', NULL"):
        _scoped(engine, uri, spec)  # on_source_outside_target="fail" is the default
    assert DeltaTable(uri).version() == 0


def test_widen_claims_the_partitions_the_source_inserts_into(tmp_path: Path) -> None:
    engine, uri = DeltaRsEngine(), _table(tmp_path)
    spec = MergeSpec(
        source=_source([9, 1], ["2024-01-02", "2024-01-01"]), condition=DECLARED, not_matched_insert=INSERT
    )
    widened = _scoped(engine, uri, spec, on_outside="widen")
    config, profile = engine.table_config(uri), engine.profile()
    delete = {
        d: Operation(OperationKind.DELETE, predicate=f"date = '{d}'") for d in ("2024-01-02", "2024-01-03")
    }
    assert pair_verdict(widened.operation(), delete["2024-01-02"], config, profile).conflict
    assert not pair_verdict(widened.operation(), delete["2024-01-03"], config, profile).conflict
    engine.write(uri, widened, WriteContext())
    assert _dates(uri) == {9: "2024-01-02"}


def test_widen_with_declared_partitions_lets_the_engine_write_the_claimed_extra_partition(
    tmp_path: Path,
) -> None:
    engine, uri = DeltaRsEngine(), _table(tmp_path)
    spec = _upsert(
        _source([9], ["2024-01-02"]), "t.id = s.id", target_partition_values={"date": "2024-01-01"}
    )
    widened = _scoped(engine, uri, spec, on_outside="widen")
    assert widened.operation().inserts == "date IN ('2024-01-02')"
    engine.write(uri, widened, WriteContext())
    assert _dates(uri) == {9: "2024-01-02"}


def test_a_source_that_changed_after_its_scope_was_read_is_refused_at_write_time(tmp_path: Path) -> None:
    engine, uri = DeltaRsEngine(), _table(tmp_path)
    calls = itertools.count()

    def drifting() -> pa.Table:  # the first call (scope) sees 2024-01-01, the second (write) 2024-01-03
        return _source([1], ["2024-01-01" if next(calls) == 0 else "2024-01-03"])

    spec = _scoped(engine, uri, _upsert(drifting))
    assert spec.scope_conjunct() == "t.date IN ('2024-01-01')"
    # granted at once, the write uses the data read for the scope (the callable runs once) ...
    assert isinstance(spec.source, pa.Table) and next(calls) == 1
    # ... after a deferral the resumed task calls it again under the scope it queued with
    with pytest.raises(InvalidWriteError, match="2024-01-03"):
        engine.write(uri, dataclasses.replace(spec, source=drifting), WriteContext())
    assert DeltaTable(uri).version() == 0


def test_a_callable_whose_keys_are_all_pinned_runs_under_the_lease_only(tmp_path: Path) -> None:
    """Reading a callable's keys means producing its data before the lease; when target_partition_values
    pins every key column the data cannot narrow the claim, so the work stays under the lease."""
    engine, uri = DeltaRsEngine(), _table(tmp_path)
    calls = itertools.count()

    def produce() -> pa.Table:
        next(calls)
        return _source([1], ["2024-01-01"])

    spec = _upsert(produce, target_partition_values={"date": "2024-01-01"})
    kept, reasons = scoped_merge(spec, engine.table_config(uri), engine, limits=LIMITS, produced=True)
    assert kept is spec and next(calls) == 0 and "pins every key column" in reasons[0]
    widened, _ = scoped_merge(
        spec, engine.table_config(uri), engine, limits=LIMITS, produced=True, on_outside="widen"
    )
    assert widened.source_scope is not None and next(calls) == 2  # read once for the widened claim
    unpinned, _ = scoped_merge(
        _upsert(produce), engine.table_config(uri), engine, limits=LIMITS, produced=True
    )
    assert unpinned.scope_conjunct() == "t.date IN ('2024-01-01')"


def test_a_stream_source_is_read_once_and_written_whole(tmp_path: Path) -> None:
    engine, uri = DeltaRsEngine(), _table(tmp_path)
    data = _source([40, 41], ["2024-01-02", "2024-01-02"])
    for i, source in enumerate((pa.RecordBatchReader.from_batches(data.schema, data.to_batches()), None)):
        if source is None:  # the same through a callable producing a stream
            batches = _source([42], ["2024-01-02"])
            source = lambda b=batches: pa.RecordBatchReader.from_batches(b.schema, b.to_batches())  # noqa: E731
        spec = _scoped(engine, uri, _upsert(source))
        assert spec.scope_conjunct() == "t.date IN ('2024-01-02')", i
        engine.write(uri, spec, WriteContext())
    assert _dates(uri) == {40: "2024-01-02", 41: "2024-01-02", 42: "2024-01-02"}


def test_key_columns_are_read_from_every_kind_of_source(tmp_path: Path) -> None:
    data = _source([1, 2, 3], ["2024-01-02", None, "2024-01-01"])
    pq.write_table(data, tmp_path / "s.parquet")
    write_deltalake(str(tmp_path / "src"), data)
    data.to_pandas().to_csv(tmp_path / "s.csv", index=False)
    for source in (
        data,
        data.to_pandas(),
        str(tmp_path / "s.parquet"),
        "delta+" + str(tmp_path / "src"),
        str(tmp_path / "src"),
        lambda: data,
    ):
        summaries = source_key_summaries(source, ["DATE"], LIMITS)
        assert list(summaries) == ["date"], source
        assert summaries["date"].values == ("2024-01-01", "2024-01-02") and summaries["date"].has_null


def test_a_null_key_is_inserted_into_the_null_partition_which_the_claim_covers(tmp_path: Path) -> None:
    """A NULL key never matches in the ON join, so its row is inserted with a NULL date: the claim's
    inserted rows must cover the NULL partition, which a DELETE of it reads."""
    from deltaguard.engines.specs import DeleteSpec

    engine, uri = DeltaRsEngine(), _table(tmp_path)
    write_deltalake(uri, _source([30], [None]).set_column(2, "v", pa.array([0], pa.int64())), mode="append")
    merge = _scoped(engine, uri, _upsert(_source([31, 32], [None, "2024-01-02"])))
    assert merge.scope_conjunct() == "t.date IN ('2024-01-02')"  # NULL matches nothing
    delete = DeleteSpec(predicate="date IS NULL")
    assert pair_verdict(
        merge.operation(), delete.operation(), engine.table_config(uri), engine.profile()
    ).conflict
    a, b = engine.open_table(uri), engine.open_table(uri)
    engine.write(uri, merge, WriteContext(), snapshot=a)
    with pytest.raises(DeltaConflictError):
        engine.write(uri, delete, WriteContext(), snapshot=b)
