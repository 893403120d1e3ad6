"""delta-rs against the conflict model on real tables: what runs is what was judged, and every conflict
delta-rs raises between two stale-snapshot commits is one the model predicted.

Two handles open the same table version; one commits, the other commits from its stale snapshot; both
orders. This is the measurement ADR 0012 records (deltalake as installed, 1.6.6 when written).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.sql.classify import classify_sql
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.specs import DeleteSpec, MergeSpec, ReplaceWhereSpec, UpdateSpec, WriteContext

PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")
TABLE = TableConfig(partition_columns=("date",))
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")

# ------------------------------------------------------------------------------- one reading of SQL

CRAFTED = [
    "x\\' OR true --",
    "x\\",
    "a\\\\b",
    "it's",
    "\\'",
    "x\\' OR '1'='1",
    "--",
    "/* c */",
    "é😀 ü",
    "a\nb",
]


def _crafted_table(tmp_path: Path, value: str) -> str:
    uri = str(tmp_path / "t")
    days = [value, "other", "x"]
    write_deltalake(
        uri,
        pa.table({"id": pa.array([1, 2, 3], pa.int64()), "day": days, "v": pa.array([0, 0, 0], pa.int64())}),
        partition_by=["day"],
    )
    return uri


def _spark_string(value: str) -> str:
    """``value`` as a Spark SQL string literal (Spark reads backslash escapes)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@pytest.mark.parametrize("value", CRAFTED)
def test_a_delete_touches_only_the_partition_the_model_judged(value: str, tmp_path: Path) -> None:
    uri = _crafted_table(tmp_path, value)
    spec = DeleteSpec(predicate=f"day = {_spark_string(value)}")
    judged = spec.operation()
    assert judged.predicate == spec.predicate
    DeltaRsEngine().write(uri, spec, WriteContext())
    left = sorted(DeltaTable(uri).to_pyarrow_table()["day"].to_pylist())
    assert left == ["other", "x"]


@pytest.mark.parametrize("value", ["x\\' OR true --", "it's", "x\\"])
def test_an_update_touches_only_the_partition_the_model_judged(value: str, tmp_path: Path) -> None:
    uri = _crafted_table(tmp_path, value)
    spec = UpdateSpec(updates={"v": "v + 1"}, predicate=f"day = {_spark_string(value)}")
    DeltaRsEngine().write(uri, spec, WriteContext())
    changed = {row["day"] for row in DeltaTable(uri).to_pyarrow_table().to_pylist() if row["v"] != 0}
    assert changed == {value}


def test_a_raw_spark_literal_would_have_deleted_every_partition(tmp_path: Path) -> None:
    # The hazard itself, measured: handing delta-rs the Spark text deletes rows the model never judged.
    value = "x\\' OR true --"
    uri = _crafted_table(tmp_path, value)
    DeltaTable(uri).delete(f"day = {_spark_string(value)}")
    assert DeltaTable(uri).to_pyarrow_table().num_rows == 0


def test_sql_that_cannot_be_rendered_faithfully_is_refused(tmp_path: Path) -> None:
    uri = _crafted_table(tmp_path, "a")
    with pytest.raises(InvalidWriteError, match="faithfully"):
        DeltaRsEngine().write(uri, DeleteSpec(predicate="id = 1L"), WriteContext())
    assert DeltaTable(uri).to_pyarrow_table().num_rows == 3


# ------------------------------------------------------------------------ stale-snapshot interleavings


def _seed(uri: str) -> None:
    for day in DAYS:
        write_deltalake(
            uri,
            pa.table(
                {"id": pa.array([1, 2, 3], pa.int64()), "date": [day] * 3, "v": pa.array([0] * 3, pa.int64())}
            ),
            mode="append",
            partition_by=["date"],
        )


Write = Callable[[DeltaTable], object]


def _merge_insert_elsewhere(table: DeltaTable) -> object:
    source = pa.table(
        {"id": pa.array([9], pa.int64()), "date": ["2024-01-02"], "v": pa.array([1], pa.int64())}
    )
    merge = table.merge(source, "t.id = s.id AND t.date = '2024-01-01'", source_alias="s", target_alias="t")
    return merge.when_not_matched_insert_all().execute()


def _merge_move(table: DeltaTable) -> object:
    source = pa.table(
        {"id": pa.array([1], pa.int64()), "date": ["2024-01-01"], "v": pa.array([1], pa.int64())}
    )
    merge = table.merge(source, "t.id = s.id AND t.date = '2024-01-01'", source_alias="s", target_alias="t")
    return merge.when_matched_update({"date": "'2024-01-03'"}).execute()


#: (name, first write as SQL for the model, first write for delta-rs, second write as SQL, second for delta-rs)
CASES: list[tuple[str, str, Write, str, Write]] = [
    (
        "update moves rows into the deleted partition",
        "UPDATE t SET date = '2024-01-03' WHERE date = '2024-01-01'",
        lambda t: t.update(updates={"date": "'2024-01-03'"}, predicate="date = '2024-01-01'"),
        "DELETE FROM t WHERE date = '2024-01-03'",
        lambda t: t.delete("date = '2024-01-03'"),
    ),
    (
        "merge inserts source rows of another partition",
        "MERGE INTO t USING s ON t.id = s.id AND t.date = '2024-01-01' WHEN NOT MATCHED THEN INSERT *",
        _merge_insert_elsewhere,
        "DELETE FROM t WHERE date = '2024-01-02'",
        lambda t: t.delete("date = '2024-01-02'"),
    ),
    (
        "merge moves matched rows",
        "MERGE INTO t USING s ON t.id = s.id AND t.date = '2024-01-01' "
        "WHEN MATCHED THEN UPDATE SET date = '2024-01-03'",
        _merge_move,
        "DELETE FROM t WHERE date = '2024-01-03'",
        lambda t: t.delete("date = '2024-01-03'"),
    ),
    (
        "mixed disjunction against another partition",
        "DELETE FROM t WHERE (date = '2024-01-01' AND id = 1) OR (date = '2024-01-02' AND id = 2)",
        lambda t: t.delete("(date = '2024-01-01' AND id = 1) OR (date = '2024-01-02' AND id = 2)"),
        "DELETE FROM t WHERE date = '2024-01-03'",
        lambda t: t.delete("date = '2024-01-03'"),
    ),
    (
        "negated disjunction against the excluded partition",
        "DELETE FROM t WHERE NOT (date = '2024-01-01' OR id = 1)",
        lambda t: t.delete("NOT (date = '2024-01-01' OR id = 1)"),
        "DELETE FROM t WHERE date = '2024-01-01'",
        lambda t: t.delete("date = '2024-01-01'"),
    ),
    (
        "data-column predicate against a partition",
        "DELETE FROM t WHERE id = 1",
        lambda t: t.delete("id = 1"),
        "DELETE FROM t WHERE date = '2024-01-03'",
        lambda t: t.delete("date = '2024-01-03'"),
    ),
]


def _interleave(tmp_path: Path, first: Write, second: Write) -> bool:
    """Whether the second commit, from a snapshot older than the first commit, fails."""
    uri = str(tmp_path / f"t{dt.datetime.now().timestamp()}".replace(".", "_"))
    _seed(uri)
    winner, loser = DeltaTable(uri), DeltaTable(uri)
    first(winner)
    try:
        second(loser)
    except CommitFailedError:
        return True
    return False


@pytest.mark.parametrize(("name", "sql_a", "run_a", "sql_b", "run_b"), CASES, ids=[c[0] for c in CASES])
def test_every_delta_rs_conflict_is_predicted(
    name: str, sql_a: str, run_a: Write, sql_b: str, run_b: Write, tmp_path: Path
) -> None:
    engine_conflicts = _interleave(tmp_path, run_a, run_b) or _interleave(tmp_path, run_b, run_a)
    a: Operation = classify_sql(sql_a).operation
    b: Operation = classify_sql(sql_b).operation
    predicted = pair_verdict(a, b, TABLE, PROFILE).conflict
    if engine_conflicts:
        assert predicted, f"{name}: delta-rs conflicts, the model said no_conflict"
    # What was measured when ADR 0012 was written (a change in delta-rs shows up here first).
    expected = name not in (
        "mixed disjunction against another partition",
        "negated disjunction against the excluded partition",
    )
    assert engine_conflicts is expected


def test_a_merge_spec_writes_where_its_source_rows_are_checked_or_anywhere(tmp_path: Path) -> None:
    source = pa.table(
        {"id": pa.array([9], pa.int64()), "date": ["2024-01-02"], "v": pa.array([1], pa.int64())}
    )
    delete_elsewhere = DeleteSpec(predicate="date = '2024-01-02'").operation()
    declared = {"date": "2024-01-01"}
    checked = [
        MergeSpec(
            source=source,
            condition="t.id = s.id",
            target_partition_values=declared,
            matched_update={"v": "s.v"},
        ),
        MergeSpec(
            source=source,
            condition="t.id = s.id",
            target_partition_values=declared,
            not_matched_insert_all=True,
        ),
        MergeSpec(
            source=source, condition="t.id = s.id", target_partition_values=declared, matched_update_all=True
        ),
    ]
    for spec in checked:
        assert not pair_verdict(spec.operation(), delete_elsewhere, TABLE, PROFILE).conflict
    anywhere = [
        MergeSpec(source=source, condition="t.id = s.id", not_matched_insert_all=True),
        MergeSpec(source=source, condition="t.id = s.id", matched_update_all=True),
        MergeSpec(
            source=source,
            condition="t.id = s.id",
            target_partition_values=declared,
            not_matched_insert={"id": "s.id", "date": "s.date"},
        ),
    ]
    for spec in anywhere:
        assert pair_verdict(spec.operation(), delete_elsewhere, TABLE, PROFILE).conflict
    # What makes the checked ones safe: the engine refuses source rows outside the declared partitions.
    uri = str(tmp_path / "t")
    _seed(uri)
    for spec in checked[1:]:
        with pytest.raises(InvalidWriteError, match="partition"):
            DeltaRsEngine().write(uri, spec, WriteContext())
    assert DeltaTable(uri).version() == 2


def test_a_replace_where_runs_the_rendered_predicate(tmp_path: Path) -> None:
    value = "x\\' OR true --"
    uri = _crafted_table(tmp_path, value)
    source = pa.table({"id": pa.array([7], pa.int64()), "day": [value], "v": pa.array([5], pa.int64())})
    DeltaRsEngine().write(
        uri, ReplaceWhereSpec(source=source, predicate=f"day = {_spark_string(value)}"), WriteContext()
    )
    kept = sorted((row["day"], row["id"]) for row in DeltaTable(uri).to_pyarrow_table().to_pylist())
    assert kept == sorted([("other", 2), ("x", 3), (value, 7)])


def _dated_table(tmp_path: Path) -> str:
    uri = str(tmp_path / "dated")
    days = [dt.date(2024, 1, d) for d in (1, 2, 3)]
    write_deltalake(
        uri,
        pa.table({"id": pa.array([1, 2, 3], pa.int64()), "d": days, "v": pa.array([0, 0, 0], pa.int64())}),
    )
    return uri


def test_a_date_literal_from_the_sql_path_runs_on_delta_rs(tmp_path: Path) -> None:
    from deltaguard.engines.sql_translate import translate

    uri = _dated_table(tmp_path)
    spec = translate("UPDATE t SET v = 1 WHERE d = DATE '2024-01-02'")
    assert spec is not None
    DeltaRsEngine().write(uri, spec, WriteContext())
    changed = {row["d"] for row in DeltaTable(uri).to_pyarrow_table().to_pylist() if row["v"] == 1}
    assert changed == {dt.date(2024, 1, 2)}


@pytest.mark.parametrize("text", ["2024-1-2", "2024-02-30", "20240102"])
def test_a_cast_spark_would_read_as_null_is_still_refused(text: str, tmp_path: Path) -> None:
    # Spark's CAST of a malformed date string is NULL; DataFusion's is an error or another date.
    uri = _dated_table(tmp_path)
    with pytest.raises(InvalidWriteError, match="faithfully"):
        DeltaRsEngine().write(uri, DeleteSpec(predicate=f"d = CAST('{text}' AS DATE)"), WriteContext())
    assert DeltaTable(uri).to_pyarrow_table().num_rows == 3


@pytest.mark.parametrize(
    "predicate",
    ["id IN (SELECT id FROM t WHERE v > 0)", "EXISTS (SELECT 1 FROM other)", "v = (SELECT max(v) FROM t)"],
)
def test_a_subquery_is_refused_before_delta_rs_can_panic_on_it(predicate: str, tmp_path: Path) -> None:
    uri = _dated_table(tmp_path)
    with pytest.raises(InvalidWriteError, match="subquery"):
        DeltaRsEngine().write(uri, DeleteSpec(predicate=predicate), WriteContext())
    assert DeltaTable(uri).version() == 0 and DeltaTable(uri).to_pyarrow_table().num_rows == 3
