"""Hypothesis properties of the conflict model.

* The pair verdict does not depend on argument order.
* Narrowing a predicate (adding a conjunct) never turns ``no_conflict`` into ``conflict``.
* ``decide`` conflicts with at least every running operation its pairwise verdicts conflict with.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltaguard.core import decide, pair_verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

K = OperationKind
DATES = ["'2024-01-01'", "'2024-01-02'", "'2024-01-03'"]

# Simple, deterministic atoms over a partition-capable column (date) and data columns (id, country).
atoms = st.one_of(
    st.builds(lambda v: f"date = {v}", st.sampled_from(DATES)),
    st.builds(
        lambda op, v: f"date {op} {v}", st.sampled_from(["<", "<=", ">", ">="]), st.sampled_from(DATES)
    ),
    st.builds(
        lambda vs: f"date IN ({', '.join(vs)})", st.lists(st.sampled_from(DATES), min_size=1, max_size=2)
    ),
    st.builds(lambda v: f"id = {v}", st.integers(0, 3)),
    st.builds(lambda op, v: f"id {op} {v}", st.sampled_from(["<", ">"]), st.integers(0, 3)),
    st.builds(lambda v: f"country = '{v}'", st.sampled_from(["DE", "FR"])),
)
predicates = st.one_of(st.none(), st.lists(atoms, min_size=1, max_size=2).map(" AND ".join))

KINDS = [
    K.INSERT,
    K.UPDATE,
    K.DELETE,
    K.MERGE,
    K.OPTIMIZE,
    K.REORG_PURGE,
    K.OVERWRITE,
    K.REPLACE_WHERE,
    K.STREAMING_WRITE,
    K.SET_TBLPROPERTIES,
    K.ADD_COLUMNS,
]


def _qualified(predicate: str) -> str:
    for column in ("date", "id", "country"):
        predicate = predicate.replace(f"{column} ", f"t.{column} ")
    return predicate


@st.composite
def operations(draw: st.DrawFn) -> Operation:
    kind = draw(st.sampled_from(KINDS))
    predicate = draw(predicates)
    if kind is K.MERGE:
        condition = "t.id = s.id" + (f" AND {_qualified(predicate)}" if predicate else "")
        return Operation(kind, merge_condition=condition)
    return Operation(
        kind,
        predicate=predicate,
        zorder_by=("id",) if kind is K.OPTIMIZE and draw(st.booleans()) else (),
        reads_target=kind is K.INSERT and draw(st.booleans()),
        checkpoint_location=draw(st.sampled_from(["/c/a", "/c/b"])) if kind is K.STREAMING_WRITE else None,
    )


@st.composite
def tables(draw: st.DrawFn) -> TableConfig:
    layout = draw(st.sampled_from(["none", "date", "date_country", "liquid"]))
    properties = {}
    if draw(st.booleans()):
        properties["delta.enableDeletionVectors"] = draw(st.sampled_from(["true", "false"]))
    if draw(st.booleans()):
        properties["delta.isolationLevel"] = draw(st.sampled_from(["Serializable", "WriteSerializable"]))
    return TableConfig(
        partition_columns={"none": (), "date": ("date",), "date_country": ("date", "country"), "liquid": ()}[
            layout
        ],
        clustering_columns=("id",) if layout == "liquid" else (),
        properties=properties,
    )


profiles = st.one_of(
    st.builds(
        lambda v, p, pre: EngineProfile(EngineName.DATABRICKS, v, photon=p, row_level_preview=pre),
        st.sampled_from(["13.2", "13.3", "14.1", "14.2", "14.3", "15.4"]),
        st.booleans(),
        st.booleans(),
    ),
    st.just(EngineProfile(EngineName.DELTA_SPARK, "3.2.0")),
    st.just(EngineProfile(EngineName.DELTA_RS, "1.6.6")),
)

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(operations(), operations(), tables(), profiles)
def test_pair_verdict_is_symmetric(
    a: Operation, b: Operation, table: TableConfig, profile: EngineProfile
) -> None:
    assert pair_verdict(a, b, table, profile) == pair_verdict(b, a, table, profile)


def _narrow(op: Operation, conjunct: str) -> Operation:
    from dataclasses import replace

    if op.kind is K.MERGE:
        return replace(op, merge_condition=f"{op.merge_condition} AND {_qualified(conjunct)}")
    return replace(op, predicate=f"({op.predicate}) AND {conjunct}" if op.predicate else conjunct)


@SETTINGS
@given(operations(), operations(), atoms, tables(), profiles)
def test_narrowing_never_creates_a_conflict(
    a: Operation, b: Operation, conjunct: str, table: TableConfig, profile: EngineProfile
) -> None:
    if pair_verdict(a, b, table, profile).conflict:
        return
    assert not pair_verdict(_narrow(a, conjunct), b, table, profile).conflict


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations(), st.lists(operations(), max_size=5), tables(), profiles)
def test_decide_covers_every_pairwise_conflict(
    candidate: Operation, running: list[Operation], table: TableConfig, profile: EngineProfile
) -> None:
    decision = decide(candidate, running, table, profile)
    pairwise = {i for i, op in enumerate(running) if pair_verdict(candidate, op, table, profile).conflict}
    assert pairwise <= set(decision.conflicts_with)
    assert decision.conflict == bool(decision.conflicts_with)
    assert all(0 <= i < len(running) for i in decision.conflicts_with)
