"""The meaning fuzzer (``python -m lab.fuzz.meaning``) runs, and flags a planted unsoundness.

Bounded by case count, never by time: a slow machine only makes them slower.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.fuzz import meaning

SEED = 11
CASES = 40


def test_fuzzer_runs_writes_and_finds_the_model_sound(tmp_path: Path) -> None:
    summary = meaning.fuzz(SEED, CASES, tmp_path, confirm_candidates=False)
    assert summary.cases == CASES
    assert summary.executed >= CASES // 4  # most generated writes run on delta-rs
    assert summary.touched_pairs >= CASES // 4  # and their commits touch partitions the model is asked about
    assert summary.candidates["hand"] == 0, summary.findings
    assert summary.candidates["oracle"] == 0, summary.findings


def test_progress_lines_are_counted(tmp_path: Path) -> None:
    lines: list[str] = []
    meaning.fuzz(SEED, 10, tmp_path, confirm_candidates=False, progress=lines.append, every=5)
    assert [line.split("]")[0] for line in lines] == ["[5/10", "[10/10"]


def test_a_rule_that_drops_partitions_is_flagged_and_the_oracle_refutes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plant an unsound delta-rs rule (every rewrite pair "on different partitions"): the hand reading's
    candidates appear, are confirmed stale-concurrently, and the engine's evaluator refutes most of them."""
    from deltaguard.core.rules import deltars

    monkeypatch.setattr(deltars, "_reads_disjoint", lambda a, b, ctx: True)
    summary = meaning.fuzz(SEED, CASES, tmp_path, confirm_candidates=True)
    assert summary.candidates["hand"] > 0
    assert sum(summary.confirmed.values()) > 0
    assert summary.candidates["oracle"] < summary.candidates["hand"]


def test_a_scope_reading_that_drops_partitions_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltaguard.core.sql import predicates

    monkeypatch.setattr(predicates, "provably_disjoint", lambda a, b, columns: True)
    summary = meaning.fuzz(SEED, CASES, tmp_path, confirm_candidates=False)
    assert summary.candidates["scope"] > 0


def test_the_read_check_runs_compatible_pairs_stale_concurrently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``reads``: untouched partitions the model calls compatible are run beside the write. With a planted rule
    that keeps every rewrite pair apart and no engine to refute it, what the writes read is found."""
    from deltaguard.core.rules import deltars

    monkeypatch.setattr(deltars, "_reads_disjoint", lambda a, b, ctx: True)
    monkeypatch.setattr(deltars, "_engine_refutes", lambda a, b, ctx: None)
    summary = meaning.fuzz(SEED, CASES, tmp_path, confirm_candidates=False, reads=2)
    assert summary.read_checked > 0
    assert summary.candidates["read"] > 0
    assert all("read" in f["model_allows"] for f in summary.findings if f["stale_concurrent"] != "not run")


def test_wide_layouts_round_trip_and_find_the_model_sound(tmp_path: Path) -> None:
    import random

    layouts = [meaning.gen_layout(random.Random(seed), wide=True) for seed in range(60)]
    kinds = {kind for layout in layouts for _, kind in layout.partitions}
    assert kinds & set(meaning.WIDE_TYPES), kinds  # the wide types are drawn
    for layout in layouts:
        assert meaning.layout_of(layout.describe()) == layout  # a reproducer names the same table
    summary = meaning.fuzz(SEED, CASES, tmp_path, confirm_candidates=False, wide=True)
    assert summary.executed >= CASES // 4
    assert summary.candidates["hand"] == 0, summary.findings
    assert summary.candidates["oracle"] == 0, summary.findings


@pytest.mark.parametrize("planted", [False, True])
def test_a_fraction_on_a_short_partition_is_judged_by_what_delta_rs_rewrites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planted: bool
) -> None:
    """``p = .5`` on a SHORT partition rewrites ``p = 0``: the hand reading must call the pair a conflict, and
    the fuzzer must flag it when the rule that says so is taken out."""
    from deltaguard.core.rules import deltars

    if planted:
        monkeypatch.setattr(deltars, "fractional_columns", lambda p: frozenset())
    layout = meaning.Layout((("p", "short"),), ((0,), (1,), (-1,)), (), wide=True)
    case = meaning.case_of({"kind": "delete", "predicate": "p = .5"}, layout)
    summary = meaning.Summary()
    meaning.judge_case(meaning.Tables(tmp_path), summary, layout, case, tmp_path)
    assert summary.touched_pairs == 1  # the partition p = 0
    assert (summary.candidates["hand"] > 0) is planted, summary.findings
