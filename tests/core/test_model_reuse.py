"""``decide`` judges the candidate once against running operations equal but for their label, and its
answer is the one judging each of them would give, text included."""

from __future__ import annotations

import itertools
import random

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


def _one_pair_at_a_time(
    candidate: Operation, running: list[Operation], table: TableConfig, profile: EngineProfile
) -> object:
    """``decide`` as it read before it grouped equal operations: every running operation judged in
    running order, one pair at a time (the reference the grouped decision must equal, text included)."""
    from deltaguard.core.decision import Decision, Verdict
    from deltaguard.core.facts import build_facts, with_generated_columns
    from deltaguard.core.rules.common import ordered

    contexts = model._Contexts(table, profile)
    ctx = contexts(profile)
    judged = [with_generated_columns(op, table) for op in (candidate, *running)]
    cand = build_facts(judged[0])
    others = [build_facts(op) for op in judged[1:]]
    conflicts: dict[int, None] = {}
    exceptions: set[object] = set()
    grouped: dict[str, list[int]] = {}
    advice: dict[str, None] = {}
    rules_used: dict[str, None] = {}
    any_conflict = False
    for index, other in enumerate(others):
        verdict = model._judge_all(cand, other, contexts)
        rules_used[verdict.rule] = None
        if verdict.conflict:
            any_conflict = True
            conflicts[index] = None
            exceptions.update(verdict.exceptions)
            advice.update(dict.fromkeys(verdict.advice))
        grouped.setdefault(("C" if verdict.conflict else "N") + verdict.reason, []).append(index)
    multi = model._multi_reader_rule(cand, others, ctx) if ctx.multi_reader_append and others else []
    for indexes, _reason in multi:
        any_conflict = True
        conflicts.update(dict.fromkeys(indexes))
        exceptions.add(model.DeltaException.CONCURRENT_APPEND)
        advice[model._advice_for_multi(cand)] = None
        rules_used["db.multi_reader_append"] = None
    reasons = [
        f"{'conflicts with' if key[0] == 'C' else 'compatible with'} {model._name_list(members, others)}: "
        f"{key[1:]}"
        for key, members in grouped.items()
        if not (any_conflict and key[0] != "C")
    ]
    reasons.extend(reason for _, reason in multi)
    if any_conflict:
        reasons.extend(model._generated_notes((candidate, *running), judged))
    if not others:
        reasons.append(f"no operation is running on the table ({profile.describe()})")
    return Decision(
        verdict=Verdict.CONFLICT if any_conflict else Verdict.NO_CONFLICT,
        exceptions=ordered(exceptions),  # type: ignore[arg-type]
        conflicts_with=tuple(sorted(conflicts)),
        reasons=tuple(reasons),
        advice=tuple(advice),
        rules=tuple(rules_used),
    )


GENERATED = TableConfig(
    partition_columns=("d",), generated_columns=(("d", "CAST(ts AS DATE)"),), timestamp_columns=("ts",)
)
MIXED = [
    *SHAPES,
    Operation(K.UPDATE, predicate="d = '2024-01-01'", assignments=(("ts", "now()"),)),
    Operation(K.UPDATE, predicate="d = '2024-01-01'", assignments=(("ts", "now()"), ("x", "1"))),
    Operation(K.INSERT, reads_target=True),
    Operation(K.SET_TBLPROPERTIES),
]


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name.value)
@pytest.mark.parametrize("table", [TABLE, GENERATED], ids=["plain", "generated"])
def test_grouped_decisions_equal_judging_one_pair_at_a_time(
    profile: EngineProfile, table: TableConfig
) -> None:
    """Equal operations (the same object, equal objects, equal but for labels) interleaved in a random
    order, with and without an open pass memo: every decision equals the pair-at-a-time one."""
    rng = random.Random(20261127)
    pool = [
        Operation(
            s.kind,
            predicate=s.predicate,
            merge_condition=s.merge_condition,
            assignments=s.assignments,
            reads_target=s.reads_target,
            label=label,
        )
        for s, label in itertools.product(MIXED, [None, None, "w1", "nightly"])
    ]
    for trial in range(12):
        running = [rng.choice(pool) for _ in range(rng.randint(0, 30))]
        running += running[: rng.randint(0, len(running))]  # the same objects again
        rng.shuffle(running)
        for candidate in rng.sample(pool, 6):
            expected = _one_pair_at_a_time(candidate, running, table, profile)
            assert model.decide(candidate, running, table, profile) == expected, (trial, candidate)
            with model.pair_memo():
                for _ in range(2):  # the second time from the pass's memo
                    assert model.decide(candidate, running, table, profile) == expected
