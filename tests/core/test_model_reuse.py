"""``decide`` judges the candidate once against running operations equal but for their label, and its
answer is the one judging each of them would give, text included."""

from __future__ import annotations

import itertools

import pytest

from deltaguard.core import model
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

K = OperationKind
PROFILES = [
    EngineProfile(EngineName.DELTA_RS, "1.6.6"),
    EngineProfile(EngineName.DELTA_SPARK, "4.0"),
    EngineProfile(EngineName.DATABRICKS, "14.3"),
]
TABLE = TableConfig(partition_columns=("date",))
SHAPES = [
    Operation(K.INSERT),
    Operation(K.INSERT, predicate="date = '2024-01-01'"),
    Operation(K.MERGE, merge_condition="t.id = s.id"),
    Operation(K.MERGE, merge_condition="t.id = s.id AND t.date = '2024-01-01'"),
    Operation(K.UPDATE, predicate="date = '2024-01-02'"),
    Operation(K.DELETE, predicate="id = 3"),
    Operation(K.OPTIMIZE),
]


def _labelled(shape: Operation, label: str | None) -> Operation:
    return Operation(
        shape.kind, predicate=shape.predicate, merge_condition=shape.merge_condition, label=label
    )


def _one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model, "_reusable", lambda verdict, other: False)


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name.value)
def test_reused_verdicts_read_as_judging_each_operation(
    profile: EngineProfile, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each shape several times, under different labels (and none), in an interleaved order
    labels = [None, "nightly_merge", "w1", "w2"]
    running = [_labelled(s, lab) for lab, s in itertools.product(labels, SHAPES)]
    fast = {}
    for candidate in SHAPES:
        for label in (None, "candidate"):
            cand = _labelled(candidate, label)
            fast[(candidate, label)] = model.decide(cand, running, TABLE, profile)
    _one_by_one(monkeypatch)
    for (candidate, label), decision in fast.items():
        assert decision == model.decide(_labelled(candidate, label), running, TABLE, profile)


def test_a_crowd_of_equal_operations_is_judged_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    judge = model._judge_all

    def counted(*args: object) -> object:
        calls.append(1)
        return judge(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(model, "_judge_all", counted)
    appends = [Operation(K.INSERT, label=f"append{i}") for i in range(200)]
    decision = model.decide(appends[0], appends[1:], TABLE, PROFILES[0])
    assert not decision.conflict
    assert len(calls) == 1
