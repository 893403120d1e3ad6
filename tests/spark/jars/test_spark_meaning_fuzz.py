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
