"""File statistics in the delta-rs profile (ADR 0020): the rule on hand-built snapshots.

The engine's side of every case is measured by ``python -m lab.conformance --suite file-stats``
(tests/conformance/test_file_stats_slice.py runs a slice of it on real tables).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from deltaguard.core.file_stats import (
    ColumnStats,
    FileStats,
    FileStatsSummary,
    Interval,
    constraints,
    file_interval,
    touched,
)
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

DELTARS = EngineProfile(EngineName.DELTA_RS, "1.6.6")
SPARK = EngineProfile(EngineName.DELTA_SPARK, "4.4.0")
TYPES = (("id", "long"), ("day", "date"), ("v", "long"), ("tags", "complex"))
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04")


def day_file(k: int, nulls: int = 0, day_max: str | None = None) -> FileStats:
    return FileStats(
        path=f"day{k}.parquet",
        columns=(
            ("id", ColumnStats(2 * k + 1, 2 * k + 2, 0)),
            ("day", ColumnStats(DAYS[k], day_max or DAYS[k], nulls)),
            ("v", ColumnStats((2 * k + 1) * 10, (2 * k + 2) * 10, 0)),
        ),
    )


def table(
    *files: FileStats, version: int = 3, indexed: tuple[str, ...] = ("id", "day", "v"), **kw: object
) -> TableConfig:
    summary = FileStatsSummary(version=3, column_types=TYPES, files=files, indexed=frozenset(indexed))
    return TableConfig(version=version, file_stats=summary, **kw)  # type: ignore[arg-type]


PER_DAY = table(*(day_file(k) for k in range(4)))


def update(on: str, **assign: str) -> Operation:
    return Operation(K.UPDATE, f"day = '{on}'", assignments=tuple((assign or {"v": "v + 1"}).items()))


def verdict(a: Operation, b: Operation, config: TableConfig = PER_DAY) -> tuple[bool, str]:
    v = pair_verdict(a, b, config, DELTARS)
    assert v.conflict == pair_verdict(b, a, config, DELTARS).conflict  # symmetric
    return v.conflict, v.rule


def test_per_day_rewrites_of_different_days_commit_side_by_side() -> None:
    assert verdict(update(DAYS[0]), update(DAYS[1])) == (False, "deltars.file_stats_disjoint")
    assert verdict(update(DAYS[0]), Operation(K.DELETE, f"day = '{DAYS[3]}' AND id = 8"))[0] is False
    merge = Operation(
        K.MERGE,
        merge_condition=f"t.id = s.id AND t.day = '{DAYS[2]}'",
        assignments=(("v", "s.v"),),
        inserts="",
    )
    assert verdict(update(DAYS[0]), merge)[0] is False
    replace = Operation(K.REPLACE_WHERE, f"day = '{DAYS[1]}'")
    assert verdict(update(DAYS[0]), replace)[0] is False
    ids = Operation(K.UPDATE, "id >= 3 AND id <= 4", assignments=(("v", "v + 1"),))
    assert verdict(Operation(K.DELETE, f"day = '{DAYS[0]}'"), ids)[0] is False


def test_same_day_conflicts() -> None:
    assert verdict(update(DAYS[0]), update(DAYS[0])) == (True, "deltars.rewrite_rewrite")


def test_a_file_spanning_both_ranges_is_touched_by_both() -> None:
    spanning = table(*(day_file(k) for k in range(4)), day_file(0, day_max=DAYS[2]))
    assert verdict(update(DAYS[0]), update(DAYS[1]), spanning)[0] is True


def test_rewritten_files_take_the_hull_of_every_touched_file() -> None:
    # ids 1-4 live in the day-1 and day-3 files, not in the day-2 file: rewritten together they may land in
    # one file whose day range covers day 2
    def file(name: str, day: str, ids: tuple[int, int]) -> FileStats:
        return FileStats(
            name,
            (("id", ColumnStats(*ids, 0)), ("day", ColumnStats(day, day, 0)), ("v", ColumnStats(0, 0, 0))),
        )

    config = table(file("f1", DAYS[0], (1, 2)), file("f2", DAYS[1], (10, 11)), file("f3", DAYS[2], (3, 4)))
    both = Operation(K.UPDATE, "id >= 1 AND id <= 4", assignments=(("v", "1"),))
    assert verdict(both, update(DAYS[1]), config)[0] is True
    one = Operation(K.UPDATE, "id >= 1 AND id <= 2", assignments=(("v", "1"),))
    assert verdict(one, update(DAYS[1]), config)[0] is False


def test_nulls_do_not_widen_the_range() -> None:
    some_null = table(*(day_file(k, nulls=1) for k in range(4)))
    assert verdict(update(DAYS[0]), update(DAYS[1]), some_null)[0] is False
    all_null = FileStats(
        "nulls.parquet", (("id", ColumnStats(1, 2, 0)), ("day", ColumnStats(None, None, 2))), 2
    )
    day_one = FileStats(
        "d1.parquet", (("id", ColumnStats(5, 6, 0)), ("day", ColumnStats(DAYS[0], DAYS[0], 0))), 2
    )
    both = Operation(K.UPDATE, "id >= 1 AND id <= 6", assignments=(("v", "1"),))
    other = Operation(K.UPDATE, f"day = '{DAYS[1]}' AND id >= 5", assignments=(("v", "1"),))
    # the rewritten rows' days are day 1 or null: a file the other's day conjunct prunes
    assert verdict(both, other, table(all_null, day_one))[0] is False
    # without the row count the null file could be one whose range was simply not recorded
    unknown = dataclasses.replace(all_null, num_records=None)
    assert verdict(both, other, table(unknown, day_one))[0] is True


def test_assigned_columns_move_rows_out_of_the_hull() -> None:
    assert verdict(update(DAYS[0], day=f"'{DAYS[1]}'"), update(DAYS[1]))[0] is True
    # rows it does not match keep their day: the hull of day 1 and day 4 still covers day 2
    assert verdict(update(DAYS[0], day=f"'{DAYS[3]}'"), update(DAYS[1]))[0] is True
    assert verdict(update(DAYS[0], day=f"'{DAYS[0]}'"), update(DAYS[1]))[0] is False  # a literal inside
    assert verdict(update(DAYS[0], day="date_add(day, 1)"), update(DAYS[1]))[0] is True
    assert (
        verdict(
            Operation(
                K.MERGE,
                merge_condition=f"t.id = s.id AND t.day = '{DAYS[0]}'",
                assignments=(("*", "*"),),
                inserts="",
            ),
            update(DAYS[1]),
        )[0]
        is True
    )


def test_inserted_rows_are_bounded_only_where_declared() -> None:
    merge = Operation(K.MERGE, merge_condition=f"t.id = s.id AND t.day = '{DAYS[0]}'", inserts=None)
    assert verdict(merge, update(DAYS[1]))[0] is True  # source values unknown: anywhere
    declared = dataclasses.replace(merge, inserts=f"day = '{DAYS[0]}'")
    assert verdict(declared, update(DAYS[1]))[0] is False
    # a REPLACE WHERE's new rows satisfy its predicate, nothing more: another column stays unknown
    replace = Operation(K.REPLACE_WHERE, f"day = '{DAYS[0]}'")
    assert verdict(replace, Operation(K.UPDATE, "id >= 3 AND id <= 4", assignments=(("v", "1"),)))[0] is True


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(table(*(dataclasses.replace(day_file(k), columns=()) for k in range(4))), id="no-stats"),
        pytest.param(table(*(day_file(k) for k in range(4)), indexed=("id",)), id="day-not-indexed"),
        pytest.param(
            table(
                *(
                    dataclasses.replace(day_file(k), columns=(("day", ColumnStats(None, None, 0)),))
                    for k in range(4)
                )
            ),
            id="day-range-not-recorded",
        ),
        pytest.param(table(*(day_file(k) for k in range(4)), version=4), id="other-version"),
        pytest.param(TableConfig(version=3), id="not-read"),
        pytest.param(
            table(*(day_file(k) for k in range(4)), properties={"delta.columnMapping.mode": "name"}),
            id="column-mapping",
        ),
        pytest.param(
            table(*(day_file(k) for k in range(4)), properties={"delta.enableDeletionVectors": "true"}),
            id="deletion-vectors",
        ),
    ],
)
def test_falls_back_to_the_predicate_rules(config: TableConfig) -> None:
    conflict, rule = verdict(update(DAYS[0]), update(DAYS[1]), config)
    # on a column-mapped table delta-rs' stale rewrites panic or fail whatever they touch
    mapped = config.properties.get("delta.columnMapping.mode") == "name"
    assert (conflict, rule) == (True, "deltars.column_mapping" if mapped else "deltars.rewrite_rewrite")


@pytest.mark.parametrize(
    "predicate",
    [
        f"day = '{DAYS[1]}' OR day = '{DAYS[2]}'",
        f"lower(day) = '{DAYS[1]}'",
        f"day IN ('{DAYS[1]}')",
        f"day <> '{DAYS[0]}'",
        "day = '2024-1-2'",  # not ISO: the engine casts it, text comparison would not
        "id = '3'",  # a string for a long column: an implicit cast
        f"DAY = '{DAYS[1]}'",
        "tags = 3",
        f"x.day = '{DAYS[1]}'",
    ],
)
def test_predicates_beyond_the_understood_forms_fall_back(predicate: str) -> None:
    other = Operation(K.UPDATE, predicate, assignments=(("v", "1"),))
    assert verdict(update(DAYS[0]), other)[0] is True


def test_appends_optimize_and_overwrite_keep_their_rules() -> None:
    for op in (
        Operation(K.INSERT, f"day = '{DAYS[3]}'"),
        Operation(K.OPTIMIZE),
        Operation(K.OVERWRITE),
        Operation(K.INSERT, reads_target=True),
    ):
        assert verdict(update(DAYS[0]), op)[0] is True


def test_other_engines_ignore_statistics() -> None:
    assert pair_verdict(update(DAYS[0]), update(DAYS[1]), PER_DAY, SPARK).conflict is True


def test_constraints_parse_only_column_literal_conjunctions() -> None:
    types = dict(TYPES)
    assert constraints("id > 3 AND id <= 9 AND day = '2024-01-02'", types) == {
        "id": Interval(3, False, 9, True),
        "day": Interval("2024-01-02", True, "2024-01-02", True),
    }
    assert constraints("5 < id", types) == {"id": Interval(5, False, None, True)}
    assert constraints("id BETWEEN -2 AND 4", types) == {"id": Interval(-2, True, 4, True)}
    assert constraints("t.id = s.id AND t.day = '2024-01-02' AND s.v > 1", types, qualifier="t") == {
        "day": Interval("2024-01-02", True, "2024-01-02", True)
    }
    assert constraints("t.id = s.id", types, qualifier="t") is None
    assert constraints("id > 3 OR id < 1", types) is None
    # the engine prunes conjunct by conjunct: a contradiction keeps files each conjunct overlaps
    assert constraints("id > 5 AND id < 3", types) is None
    assert constraints("day >= DATE '2024-01-02'", types) == {"day": Interval("2024-01-02", True, None, True)}
    assert constraints("day = CAST('2024-01-02' AS DATE)", types) is None
    assert constraints("id = DATE '2024-01-02'", types) is None
    assert constraints("s = 'it''s'", {"s": "string"}) is None


_bound = st.one_of(st.none(), st.integers(-5, 25))


def may_match(file: FileStats, wanted: dict[str, Interval]) -> bool:
    """The file-by-file reading the index must agree with: the engine's statistics pruning may keep ``file``
    unless some constrained column's recorded range provably misses the interval."""
    for column, interval in wanted.items():
        stats = file.by_column.get(column)
        rng = file_interval(stats) if stats is not None else None
        if rng is not None and not rng.overlaps(interval):
            return False
    return True


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    ranges=st.lists(st.one_of(st.none(), st.tuples(st.integers(0, 20), st.integers(0, 6))), max_size=25),
    low=_bound,
    high=_bound,
    low_closed=st.booleans(),
    high_closed=st.booleans(),
)
def test_the_file_index_finds_exactly_the_files_may_match_keeps(
    ranges: list[tuple[int, int] | None],
    low: int | None,
    high: int | None,
    low_closed: bool,
    high_closed: bool,
) -> None:
    files = tuple(
        FileStats(f"f{i}", (("id", ColumnStats(r[0], r[0] + r[1], 0) if r else ColumnStats(None, None, 0)),))
        for i, r in enumerate(ranges)
    )
    summary = FileStatsSummary(1, (("id", "long"),), files, frozenset({"id"}))
    wanted = {"id": Interval(low, low_closed, high, high_closed)}
    assume(not wanted["id"].empty())  # constraints() never yields an empty interval
    assert touched(summary, wanted) == {f.path for f in files if may_match(f, wanted)}
