"""The rows a MERGE or REPLACE WHERE adds, bounded by its source's ranges (ADR 0020), on hand-built snapshots.

The engine's side is measured by ``python -m lab.conformance --suite file-stats`` (the MERGE and REPLACE WHERE
cells there are built by the operators' own scoping functions).
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from deltaguard.core.file_stats import (
    ColumnStats,
    FileStats,
    FileStatsSummary,
    Interval,
    fully_matched,
    value_bounds,
)
from deltaguard.core.merge_scope import ColumnScope, KeySummary, MergeScope, ScopeLimits, plan_merge_scope
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

DELTARS = EngineProfile(EngineName.DELTA_RS, "1.6.6")
TYPES = (("id", "long"), ("day", "date"), ("v", "long"), ("name", "string"))
TYPE_MAP = dict(TYPES)
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04")


def day_file(k: int, day_nulls: int = 0) -> FileStats:
    return FileStats(
        path=f"day{k}.parquet",
        columns=(
            ("id", ColumnStats(2 * k + 1, 2 * k + 2, 0)),
            ("day", ColumnStats(DAYS[k], DAYS[k], day_nulls)),
            ("v", ColumnStats(0, 9, 0)),
        ),
        num_records=2,
    )


def table(*files: FileStats) -> TableConfig:
    summary = FileStatsSummary(
        version=3, column_types=TYPES, files=files, indexed=frozenset({"id", "day", "v"})
    )
    return TableConfig(version=3, file_stats=summary)


PER_DAY = table(*(day_file(k) for k in range(4)))
#: ids 3..4 (the second day's file): a predicate on ``id`` only
UPDATE_IDS = Operation(K.UPDATE, "id >= 3 AND id <= 4", assignments=(("v", "v + 1"),))


def conflict(a: Operation, b: Operation, config: TableConfig = PER_DAY) -> bool:
    v = pair_verdict(a, b, config, DELTARS)
    assert v.conflict == pair_verdict(b, a, config, DELTARS).conflict
    return v.conflict


def update(day: str) -> Operation:
    return Operation(K.UPDATE, f"day = '{day}'", assignments=(("v", "v + 1"),))


def merge_upsert(inserts: str | None, extra: str = "") -> Operation:
    return Operation(
        K.MERGE,
        merge_condition=f"t.id = s.id AND t.day = '{DAYS[0]}'{extra}",
        assignments=(("v", "s.v"),),
        inserts=inserts,
    )


def test_value_bounds_read_in_lists_null_alternatives_and_date_casts() -> None:
    found = value_bounds(
        "id BETWEEN 1 AND 100 AND (day IN (CAST('2024-01-04' AS DATE), DATE '2024-01-02') OR day IS NULL) "
        "AND v IN (7) AND lower(name) = 'x'",
        TYPE_MAP,
    )
    assert found == {
        "id": Interval(1, True, 100, True),
        "day": Interval("2024-01-02", True, "2024-01-04", True),
        "v": Interval(7, True, 7, True),
    }  # the function call is dropped: the other conjuncts still hold for every row
    assert value_bounds("id = 3 OR id = 40", TYPE_MAP) == {}  # an OR of values is not reasoned about
    assert value_bounds("(id > 3 OR v IS NULL)", TYPE_MAP) == {}  # the null alternative is another column
    assert value_bounds(None, TYPE_MAP) == {}


def test_a_merge_source_range_bounds_its_inserted_rows() -> None:
    # the source's range for every inserted column: the new rows stay on the first day and ids 1..100
    bounded = merge_upsert(
        f"id BETWEEN 1 AND 100 AND day BETWEEN CAST('{DAYS[0]}' AS DATE) AND CAST('{DAYS[0]}' AS DATE)",
        " AND (t.id BETWEEN 1 AND 100)",
    )
    assert conflict(bounded, update(DAYS[1])) is False
    # the same MERGE with a source of unknown values (``inserts=None``) may add a row of the second day
    assert conflict(dataclasses.replace(bounded, inserts=None), update(DAYS[1])) is True
    # a range that reaches the other's day is a conflict
    reaching = dataclasses.replace(
        bounded, inserts=f"day BETWEEN CAST('{DAYS[0]}' AS DATE) AND CAST('{DAYS[1]}' AS DATE)"
    )
    assert conflict(reaching, update(DAYS[1])) is True


def test_a_merge_source_range_on_another_column_leaves_the_day_unknown() -> None:
    # the source is bounded on ``id`` only: inserted rows may carry any day
    only_ids = merge_upsert("id BETWEEN 1 AND 100")
    assert conflict(only_ids, update(DAYS[1])) is True
    # ... but an UPDATE of ids far from the inserted range prunes them (and the read files are disjoint)
    far_ids = Operation(K.UPDATE, "id >= 7 AND id <= 8", assignments=(("v", "v + 1"),))
    assert conflict(merge_upsert("id BETWEEN 1 AND 2", " AND (t.id BETWEEN 1 AND 1)"), far_ids) is False


def test_a_replace_where_source_range_bounds_its_new_rows() -> None:
    replace = Operation(K.REPLACE_WHERE, f"day = '{DAYS[0]}'")
    assert conflict(replace, UPDATE_IDS) is True  # the new rows' ids are unknown
    ranged = dataclasses.replace(replace, inserts="id BETWEEN 100 AND 100")
    assert conflict(ranged, UPDATE_IDS) is False
    # a source range reaching the other's ids is a conflict
    assert conflict(dataclasses.replace(replace, inserts="id BETWEEN 4 AND 100"), UPDATE_IDS) is True


def test_a_replace_where_copies_no_row_of_a_file_it_matches_entirely() -> None:
    ranged = Operation(K.REPLACE_WHERE, f"day = '{DAYS[0]}'", inserts="id BETWEEN 100 AND 100")
    # a second first-day file holding a null day: that row does not match, so the file's ids 1..2 are
    # copied beside the new id 100, and the hull reaches ids 3..4
    with_null = table(*(day_file(k) for k in range(4)), dataclasses.replace(day_file(0, 1), path="n.parquet"))
    assert conflict(ranged, UPDATE_IDS, with_null) is True  # copied ids 1..2 hull with new id 100
    assert conflict(ranged, Operation(K.UPDATE, "id >= 200", assignments=(("v", "1"),)), with_null) is False


def test_fully_matched_needs_ranges_inside_and_no_nulls() -> None:
    wanted = {"day": Interval(DAYS[0], True, DAYS[0], True)}
    assert fully_matched(day_file(0), wanted)
    assert not fully_matched(day_file(0, day_nulls=1), wanted)
    assert not fully_matched(day_file(1), wanted)
    assert not fully_matched(dataclasses.replace(day_file(0), columns=()), wanted)
    assert not fully_matched(day_file(0), {"day": Interval(DAYS[0], False, DAYS[1], True)})
    assert not fully_matched(day_file(0), {})


def test_a_delete_copies_only_the_rows_of_files_it_does_not_match_entirely() -> None:
    spanning = FileStats(
        path="spanning.parquet",
        columns=(
            ("id", ColumnStats(9, 10, 0)),
            ("day", ColumnStats(DAYS[0], DAYS[2], 0)),
            ("v", ColumnStats(0, 9, 0)),
        ),
        num_records=2,
    )
    config = table(*(day_file(k) for k in range(4)), spanning)
    ids_5_6 = Operation(K.UPDATE, "id >= 5 AND id <= 6", assignments=(("v", "1"),))
    # the first day's file goes entirely; only the spanning file's other rows (ids 9..10) are copied
    assert conflict(Operation(K.DELETE, f"day = '{DAYS[0]}'"), ids_5_6, config) is False
    # deleting some rows of the first day (``v = 3``: no file lies inside it) copies the rest of both files
    # into what may be one file: ids 1..10 reach ids 5..6
    assert conflict(Operation(K.DELETE, f"day = '{DAYS[0]}' AND v = 3"), ids_5_6, config) is True


def test_plan_scopes_ranged_columns_as_ranges_of_their_type() -> None:
    summaries = {
        "id": KeySummary("id", (1, 5, 100)),
        "day": KeySummary("day", (dt.date(2024, 1, 1), dt.date(2024, 1, 3)), has_null=True),
        "v": KeySummary("v", ("a", "b")),  # strings in a long column: not ranged
        "w": KeySummary("w", None, too_many=True),
    }
    scope = plan_merge_scope(
        matched={"id": "id"},
        inserted={"id": "id", "day": "day", "v": "v", "w": "w"},
        partition_columns=(),
        summaries=summaries,
        limits=ScopeLimits(),
        ranged={"id": "long", "day": "date", "v": "long", "w": "long"},
    )
    assert scope.matched == (ColumnScope("id", "id", None, 1, 100),)
    assert scope.conjunct("t") == "t.id BETWEEN 1 AND 100"
    assert [c.column for c in scope.inserted] == ["id", "day"]
    text = scope.inserted_predicate()
    assert text is not None
    assert value_bounds(text, TYPE_MAP) == {
        "id": Interval(1, True, 100, True),
        "day": Interval("2024-01-01", True, "2024-01-03", True),
    }
    # without ``ranged`` the enumerated values stay an IN list (ADR 0019's partition scopes)
    plain = plan_merge_scope(
        matched={"id": "id"},
        inserted=None,
        partition_columns=(),
        summaries=summaries,
        limits=ScopeLimits(),
    )
    assert plain.conjunct("t") == "t.id IN (1, 5, 100)"


@pytest.mark.parametrize(
    "scope",
    [
        MergeScope(inserted=(ColumnScope("id", "id", None, 100, 100),)),
        MergeScope(inserted=(ColumnScope("id", "id", None, 100, 100, has_null=True),)),
    ],
)
def test_inserted_predicate_with_nulls_still_bounds_the_values(scope: MergeScope) -> None:
    replace = Operation(K.REPLACE_WHERE, f"day = '{DAYS[0]}'", inserts=scope.inserted_predicate() or "")
    assert conflict(replace, UPDATE_IDS) is False
