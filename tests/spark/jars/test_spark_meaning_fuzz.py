"""The delta-spark fuzzer of meaning (``python -m lab.fuzz.spark_meaning``) runs, and flags a planted hole.

Bounded by case count, never by time: a slow machine only makes them slower.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deltaguard.core.rules import delta_spark as spark_rules
from lab.fuzz import spark_meaning

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars, pytest.mark.slow]

SEED = 17


def test_the_model_keeps_apart_only_pairs_spark_keeps_apart(delta_spark: Any) -> None:
    summary, truth = spark_meaning.fuzz(delta_spark, SEED, cases=4, pairs=40)
    assert summary.cases == 4 and summary.pairs == 160
    assert summary.model_apart >= 10  # the pairs that can show a hole were asked about
    assert truth.queries >= 8  # Spark evaluated them, under every setting the model was not told
    assert summary.hand_candidates == 0, summary.candidates
    assert summary.oracle_candidates == 0, summary.candidates


def test_a_reading_that_keeps_every_pair_apart_is_flagged_and_run(
    delta_spark: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Plant an unsound reading (every pair "on provably different partitions"): Spark's evaluation finds
    pairs that meet, real delta-spark DELETEs remove a common file for each, and the engine's evaluator, which
    the Spark engine attaches, refutes them."""
    monkeypatch.setattr(spark_rules, "may_overlap", lambda *args, **kwargs: False)
    summary, _ = spark_meaning.fuzz(delta_spark, SEED, cases=1, pairs=12, confirm_in=tmp_path)
    assert summary.hand_candidates > 0
    assert summary.confirmed == summary.hand_candidates, summary.candidates
    assert summary.oracle_candidates < summary.hand_candidates


def test_a_double_quoted_column_is_seen_by_the_truth_and_kept_together_by_the_model(
    delta_spark: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Under ``spark.sql.ansi.doubleQuotedIdentifiers`` (found by this fuzzer with the model's check of it
    removed: `` `p` IN ("p") `` beside ``p = '1'``), ``"p"`` is the column: the pair meets on every
    partition, a real DELETE pair removes a common file, and the model keeps it together unless told the
    setting is off."""
    from deltaguard.core import model

    truth = spark_meaning.Truth(delta_spark)
    layout = spark_meaning.Layout((("p", "string"),))
    a, b = '`p` IN ("p")', "p = '1'"
    candidates = truth.candidates(layout, {"p": {'"p"', "'1'"}})
    with truth.session(True, "UTC", True) as session:
        quoted = truth.selected(session, layout, candidates, [a, b])
        key = sorted(quoted[0] & quoted[1])[0]
        assert spark_meaning.confirm(session, truth, layout, candidates, key, a, b, tmp_path) == "confirmed"
    with truth.session(True, "UTC", False) as session:
        plain = truth.selected(session, layout, candidates, [a, b])
    assert quoted[0] & quoted[1] and not plain[0] & plain[1]
    config = layout.config()
    for told in (True, None):
        conflict, reason = spark_meaning.model_verdict(
            a, b, config, spark_meaning.Settings(True, "UTC", told)
        )
        assert conflict and "doubleQuotedIdentifiers" in reason
    assert spark_meaning.model_verdict(a, b, config, spark_meaning.Settings(True, "UTC", False))[0] is False
    monkeypatch.setattr(model, "parser_neutral", lambda f, profile: f)
    assert spark_meaning.model_verdict(a, b, config, spark_meaning.Settings(True, "UTC", True))[0] is False


def test_a_batch_with_refused_predicates_answers_as_each_predicate_alone(delta_spark: Any) -> None:
    """Spark refuses one predicate while analysing it (an array compared with an INT) and one while running
    it (text ANSI will not cast): the batch answers every other predicate as it is answered alone, and the
    refused ones as refused (``None``), whichever way the refusal came."""
    truth = spark_meaning.Truth(delta_spark)
    layout = spark_meaning.Layout((("k", "integer"),))
    predicates = ["k = 1", "k = array(1)", "k >= 0", "k = CAST(v AS INT)", "k IS NULL", "k IN (1, 2)"]
    candidates = truth.candidates(layout, {"k": {"1", "2"}})
    with truth.session(True, "UTC") as session:
        together = truth.selected(session, layout, candidates, predicates)
        alone = [truth.selected(session, layout, candidates, [p])[0] for p in predicates]
    assert together == alone
    assert together[1] is None  # refused while analysed
    assert together[0] and together[2] and together[4]
    assert truth.refused_by_analysis >= 1


def test_more_pairs_than_predicates_judge_pairs_of_shared_predicates(
    delta_spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    judged: list[tuple[str, str]] = []
    verdict = spark_meaning.model_verdict

    def recorded(a: str, b: str, *args: Any) -> Any:
        judged.append((a, b))
        return verdict(a, b, *args)

    monkeypatch.setattr(spark_meaning, "model_verdict", recorded)
    summary, truth = spark_meaning.fuzz(delta_spark, SEED, cases=2, pairs=100, predicates=20, oracle=False)
    assert summary.pairs == 200
    for case in (judged[:100], judged[100:200]):  # each table's 100 pairs are made of its 20 predicates
        assert len({text for pair in case for text in pair}) <= 20
    assert summary.model_apart >= 10 and truth.queries >= 2  # Spark was asked about the pairs kept apart
    assert summary.hand_candidates == 0, summary.candidates
