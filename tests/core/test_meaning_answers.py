"""What the model asks the engine about partition predicates, and what it takes from the answer (ADR 0037)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deltaguard.core.meaning import partition_only
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.sql.predicates import parse_predicate
from deltaguard.core.table_config import TableConfig

RS = EngineProfile(EngineName.DELTA_RS, "1.6.6")
DE = Operation(OperationKind.DELETE, predicate="k = 'a'")
FR = Operation(OperationKind.DELETE, predicate="k = 'b'")


class Answers:
    """An engine whose evaluation returns ``rows`` whatever it is asked."""

    def __init__(self, rows: Sequence[Sequence[Any]]) -> None:
        self.rows = [list(r) for r in rows]

    def evaluate(self, predicates: Sequence[str], rows: Any) -> list[list[Any]]:
        return self.rows


def _table(answers: Answers) -> TableConfig:
    return TableConfig(partition_columns=("k",), column_types=(("k", "string"),), meaning=answers)  # type: ignore[arg-type]


def test_an_answer_not_of_the_shape_asked_for_confirms_nothing() -> None:
    assert not pair_verdict(DE, FR, TableConfig(partition_columns=("k",)), RS).conflict  # the hand reading
    for rows in ([], [[False]], [[False, False, False]]):
        verdict = pair_verdict(DE, FR, _table(Answers(rows)), RS)
        assert verdict.conflict and verdict.rule == "deltars.engine_unconfirmed", rows


def test_a_non_deterministic_condition_is_not_sent_to_the_engine() -> None:
    # the engine would evaluate rand() on the witness rows, not on the table's rows
    for text in ("k = 'a' AND rand() < 0.5", "k = 'a' AND uuid() = 'x'"):
        tree = partition_only(parse_predicate(text), ["k"])
        assert tree is not None and "RAND" not in tree.sql().upper() and "UUID" not in tree.sql().upper()


def test_optimizes_the_engine_does_not_keep_apart_are_said_so() -> None:
    a = Operation(OperationKind.OPTIMIZE, predicate="k = 'a'")
    b = Operation(OperationKind.OPTIMIZE, predicate="k = 'b'")
    verdict = pair_verdict(a, b, _table(Answers([])), RS)
    assert verdict.conflict and verdict.rule == "deltars.engine_unconfirmed", verdict.rule


class Overlapping:
    """An engine that finds every predicate true on its one witness row (it refutes every separation)."""

    def evaluate(self, predicates: Sequence[str], rows: Any) -> list[tuple[bool, ...]]:
        return [(True,) * len(predicates)]


def test_a_pass_memo_keeps_the_hand_reading_apart_from_the_engines() -> None:
    """Equal configurations, one without the engine's evaluator: judged in that order in one pass, the
    second must get the engine's answer, not the hand reading's memoised one."""
    from deltaguard.core.model import decide, pair_memo

    hand = TableConfig(partition_columns=("k",), column_types=(("k", "string"),))
    engine = TableConfig(partition_columns=("k",), column_types=(("k", "string"),), meaning=Overlapping())
    assert hand == engine  # the oracle is not part of the configuration's identity
    with pair_memo():
        assert decide(DE, [FR], hand, RS).verdict.value == "no_conflict"
        judged = decide(DE, [FR], engine, RS)
    assert judged.verdict.value == "conflict"
    assert "deltars.engine_unconfirmed" in judged.rules


class SparkSays(Overlapping):
    """Another engine's evaluator that would confirm every separation."""

    engine = "delta-spark"

    def evaluate(self, predicates: Sequence[str], rows: Any) -> list[tuple[bool, ...]]:
        return [(False,) * len(predicates)]


def test_the_delta_rs_rules_take_no_other_engines_evaluator() -> None:
    assert not pair_verdict(DE, FR, _table(Answers([[False, False]])), RS).conflict  # one that says nothing
    verdict = pair_verdict(DE, FR, _table(SparkSays()), RS)  # type: ignore[arg-type]
    assert verdict.conflict and verdict.rule == "deltars.engine_unconfirmed"
    assert "delta-spark's, not delta-rs'" in verdict.reason
