"""The pure half of data-aware MERGE scopes (ADR 0019): which columns, which conjunct, which values lie
outside a declared target, and that the model reads the conjunct as exactly the source's values."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from deltaguard.core.merge_scope import (
    ColumnScope,
    KeySummary,
    MergeScope,
    ScopeLimits,
    column_scope,
    equated_columns,
    inserted_columns,
    plan_merge_scope,
    values_outside,
)
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.sql.literals import DATAFUSION, column_equals
from deltaguard.core.sql.predicates import merge_target_predicate, parse_predicate, provably_disjoint
from deltaguard.core.table_config import TableConfig

LIMITS = ScopeLimits(max_in_values=3, max_range_values=10)
TABLE = TableConfig(partition_columns=("date",))
PROFILES = [EngineProfile(EngineName.DELTA_RS, "1.6.6"), EngineProfile(EngineName.DELTA_SPARK, "4.4.0")]


def test_equated_columns_takes_top_level_equalities_with_the_source_only() -> None:
    keys = ("date", "country")
    assert equated_columns("t.id = s.id AND t.date = s.date", keys) == {"date": "date"}
    assert equated_columns("(s.day = t.DATE) AND (t.id = s.id AND t.country = s.c)", keys) == {
        "date": "day",
        "country": "c",
    }
    # inside OR / NOT, against a literal or between two target columns: no equality with the source
    assert equated_columns("t.id = s.id AND (t.date = s.date OR t.id = 1)", keys) == {}
    assert equated_columns("NOT (t.date = s.date)", keys) == {}
    assert equated_columns("t.date = '2024-01-01' AND t.country = t.date", keys) == {}
    assert equated_columns("a.date = b.date", keys, "a", "b") == {"date": "date"}


def test_inserted_columns_follow_insert_star_and_plain_source_columns() -> None:
    keys = ("date", "country")
    assert inserted_columns(keys, insert_all=True, insert_map=None) == {"date": "date", "country": "country"}
    assert inserted_columns(keys, insert_all=False, insert_map=None) is None
    mapping = {"DATE": "s.day", "country": "upper(s.country)", "id": "s.id"}
    assert inserted_columns(keys, insert_all=False, insert_map=mapping) == {"date": "day"}


def test_column_scope_bounds_and_types() -> None:
    assert column_scope("date", KeySummary("date", ("a", "b")), LIMITS) == ColumnScope(
        "date", "date", ("a", "b")
    )
    ranged = column_scope("n", KeySummary("n", None, 1, 9), LIMITS)
    assert isinstance(ranged, ColumnScope) and (ranged.low, ranged.high) == (1, 9)
    day = dt.date(2024, 1, 1)
    assert isinstance(
        column_scope("d", KeySummary("d", None, day, day + dt.timedelta(5)), LIMITS), ColumnScope
    )
    # strings have no range every engine orders alike; too many values; timestamps and floats
    assert "range" in str(column_scope("s", KeySummary("s", None, "a", "z"), LIMITS))
    assert "more than 10" in str(column_scope("n", KeySummary("n", None, too_many=True), LIMITS))
    assert "datetime" in str(column_scope("ts", KeySummary("ts", (dt.datetime(2024, 1, 1),)), LIMITS))
    assert "float" in str(column_scope("f", KeySummary("f", (1.5,)), LIMITS))
    assert "no non-NULL" in str(column_scope("d", KeySummary("d", (), has_null=True), LIMITS))


def test_plan_gives_the_claim_and_the_engine_one_conjunct() -> None:
    scope = plan_merge_scope(
        matched={"date": "date"},
        inserted={"date": "date"},
        partition_columns=("date",),
        summaries={"date": KeySummary("date", ("2024-01-01", "2024-01-02"), has_null=True)},
        limits=LIMITS,
    )
    assert scope.conjunct("t") == "t.date IN ('2024-01-01', '2024-01-02')"
    assert scope.inserted_predicate() == "(date IN ('2024-01-01', '2024-01-02') OR date IS NULL)"
    assert scope.copies_all_keys
    # what delta-rs runs is the same tree, rendered for DataFusion
    assert scope.conjunct("t", DATAFUSION) == "t.date IN ('2024-01-01', '2024-01-02')"


def test_values_outside_a_declared_target() -> None:
    declared = merge_target_predicate("t.id = s.id AND t.date = '2024-01-01'", "t")
    inserted = ColumnScope("date", "date", ("2024-01-01", "2024-01-02"), has_null=True)
    assert values_outside([inserted], declared, ("date",)) == {"date": ("2024-01-02", None)}
    inside = ColumnScope("date", "date", ("2024-01-01",))
    assert values_outside([inside], declared, ("date",)) == {}
    # a DATE-typed declaration and string source values are compared as days
    typed = merge_target_predicate("t.date = DATE '2024-01-02'", "t")
    assert values_outside([inside], typed, ("date",)) == {"date": ("2024-01-01",)}
    # nothing declared on the column: nothing to check
    assert values_outside([inserted], merge_target_predicate("t.id = s.id", "t"), ("date",)) == {}


def _merge(scope: MergeScope) -> Operation:
    return Operation(
        OperationKind.MERGE,
        merge_condition=f"(t.id = s.id AND t.date = s.date) AND ({scope.conjunct('t')})",
        inserts=scope.inserted_predicate(),
    )


DAYS = st.dates(min_value=dt.date(2020, 1, 1), max_value=dt.date(2020, 3, 1))
AS_VALUES = st.sampled_from([lambda d: d.isoformat(), lambda d: d])  # STRING or DATE source columns


@settings(max_examples=60, deadline=None)
@given(st.sets(DAYS, min_size=1, max_size=4), st.sets(DAYS, min_size=1, max_size=4), AS_VALUES, st.booleans())
def test_two_scoped_merges_conflict_exactly_when_their_days_meet(a, b, as_value, nulls) -> None:
    def scope(days: set[dt.date], has_null: bool) -> MergeScope:
        values = tuple(sorted(as_value(d) for d in days))
        return plan_merge_scope(
            matched={"date": "date"},
            inserted={"date": "date"},
            partition_columns=("date",),
            summaries={"date": KeySummary("date", values, has_null=has_null)},
            limits=ScopeLimits(max_in_values=10, max_range_values=10),
        )

    first, second = _merge(scope(a, nulls)), _merge(scope(b, nulls))
    for profile in PROFILES:
        verdict = pair_verdict(first, second, TABLE, profile)
        # NULL keys are inserted into the NULL partition, which neither reads (ADR 0012: two write
        # scopes alone never conflict)
        if a & b:
            assert verdict.conflict, (a, b, profile)
        else:
            assert not verdict.conflict, (a, b, profile, verdict.reason)


VALUES = st.one_of(
    st.lists(st.text(max_size=6), min_size=1, max_size=5, unique=True),
    st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=5, unique=True),
    st.lists(DAYS, min_size=1, max_size=5, unique=True),
    st.lists(
        st.decimals(allow_nan=False, allow_infinity=False, places=2, max_value=10**6, min_value=-(10**6)),
        min_size=1,
        max_size=5,
        unique=True,
    ),
)


@settings(max_examples=120, deadline=None)
@given(VALUES, st.data())
def test_the_model_reads_the_conjunct_as_exactly_the_source_values(values, data) -> None:
    scope = ColumnScope("k", "k", tuple(sorted(values)))
    conjunct = parse_predicate(scope.condition(None).sql(dialect="spark"))
    for value in values:
        single = parse_predicate(column_equals("k", value).sql(dialect="spark"))
        assert not provably_disjoint(single, conjunct, ("k",)), value  # never excludes a source value
    # what delta-rs runs, read back as DataFusion reads it, is the conjunct the model judged
    merge = MergeScope(matched=(scope,))
    executed = sqlglot.parse_one(str(merge.conjunct("t", DATAFUSION)), read=DATAFUSION)
    assert executed.sql(dialect="spark") == merge.conjunct("t")
    other = data.draw(st.sampled_from(values))
    assert scope.admits(other) and not scope.admits(None)


def test_ranges_are_understood_as_ranges() -> None:
    scope = ColumnScope("n", "n", None, 3, 7)
    conjunct = parse_predicate(scope.condition(None).sql(dialect="spark"))
    assert provably_disjoint(parse_predicate("n = 8"), conjunct, ("n",))
    assert not provably_disjoint(parse_predicate("n = 5"), conjunct, ("n",))
    assert scope.admits(3) and scope.admits(7) and not scope.admits(8)


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError):
        ScopeLimits(max_in_values=10, max_range_values=5)
    with pytest.raises(ValueError):
        ScopeLimits(max_in_values=0)


def test_decimal_values_render_exactly() -> None:
    scope = ColumnScope("d", "d", (Decimal("1.10"), Decimal("2")))
    assert scope.condition("t").sql(dialect="spark") == "t.d IN (1.10, 2)"


SCOPE_VALUES = st.one_of(
    st.lists(st.text(max_size=5), min_size=1, max_size=4, unique=True),
    st.lists(st.integers(), min_size=1, max_size=4, unique=True),
    st.lists(st.booleans(), min_size=1, max_size=2, unique=True),
    st.lists(DAYS, min_size=1, max_size=4, unique=True),
    st.lists(
        st.decimals(allow_nan=False, allow_infinity=False, places=3), min_size=1, max_size=4, unique=True
    ),
)


@settings(max_examples=80, deadline=None)
@given(SCOPE_VALUES, st.booleans(), st.booleans())
def test_a_scope_survives_its_json_form(values, has_null, ranged) -> None:
    import json

    ordered = tuple(sorted(values))
    if ranged:
        column = ColumnScope("k", "s_k", None, ordered[0], ordered[-1], has_null)
    else:
        column = ColumnScope("k", "s_k", ordered, has_null=has_null)
    scope = MergeScope(matched=(column,), inserted=(column,), copies_all_keys=has_null, reasons=("why",))
    back = MergeScope.from_json(json.loads(json.dumps(scope.to_json())))
    assert back == scope and back.reasons == ("why",)
    assert [type(v) for v in back.matched[0].values or ()] == [type(v) for v in column.values or ()]
    with pytest.raises(ValueError):
        MergeScope.from_json({"matched": [{"values": [["x", "1"]]}]})
