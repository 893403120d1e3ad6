"""The meaning fuzzer's generators of sources, property spellings, versions and session settings run, and
each flags a planted unsound reading.

Bounded by case count, never by time.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lab.fuzz import meaning, meaning_settings

SEED = 11
CASES = 24
#: a seed whose 40 property cases include a misspelled isolation key beside an insert-if-absent pair
PROPERTY_SEED = 4


def test_each_generator_runs_and_finds_today_s_model_sound(tmp_path: Path) -> None:
    for family in ("sources", "properties", "versions", "settings"):
        summary = meaning.fuzz(SEED, CASES, tmp_path / family, families=(family,))
        assert summary.families == {family: CASES}
        assert not summary.confirmed, summary.findings
        assert not summary.candidates, summary.findings
    assert summary.cases == CASES


def test_sources_are_judged_against_what_the_engine_reads(tmp_path: Path) -> None:
    summary = meaning.fuzz(SEED, CASES, tmp_path, families=("sources",))
    assert summary.source_checked >= CASES // 2  # most generated sources are read by delta-rs


def test_a_model_that_ignores_sources_is_flagged_and_confirmed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plant a model that takes every source as reading nothing of the target: the fuzzer finds candidates
    and delta-rs confirms them (the write and its mirror both commit into a state no serial order gives)."""
    from deltaguard.engines import sources as target_reads

    monkeypatch.setattr(target_reads, "source_reads_target", lambda *args, **kwargs: None)
    summary = meaning.fuzz(SEED, CASES, tmp_path, families=("sources",))
    assert summary.candidates["source"] > 0
    assert summary.candidates["source pair"] > 0
    assert sum(summary.confirmed.values()) > 0
    assert not any("copy" in key or "in memory" in key for key in summary.by_class)  # the controls


def test_a_model_that_reads_property_keys_in_any_case_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plant a model that sees no problem in any property and reads keys in any case (the reading ADR 0036
    replaced): pairs it allows fail on delta-rs."""
    from deltaguard.core.rules import common, deltars
    from deltaguard.core.table_config import TableConfig

    def any_case(table: TableConfig, key: str) -> str | None:
        return next((v for k, v in sorted(table.properties.items()) if k.lower() == key.lower()), None)

    monkeypatch.setattr(common, "table_unknowns", lambda table: ())
    monkeypatch.setattr(deltars, "table_property", any_case)
    summary = meaning.fuzz(PROPERTY_SEED, 40, tmp_path, families=("properties",))
    assert summary.allowed_run > 0
    assert summary.confirmed, summary.findings


def test_a_model_that_takes_every_version_as_measured_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltaguard.core import closed_world
    from deltaguard.core.rules import databricks, delta_spark, deltars

    for module in (closed_world, deltars, delta_spark, databricks):
        monkeypatch.setattr(module, "version_caveat", lambda profile: None)
    summary = meaning.fuzz(SEED, CASES, tmp_path, families=("versions",))
    assert summary.candidates["version"] > 0


def test_a_model_that_reads_an_unknown_ansi_setting_as_on_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plant a model that reads an ANSI setting it does not know as on: only a session known to run with
    ANSI off keeps two writes together."""
    from deltaguard.core import model
    from deltaguard.core.decision import PairVerdict
    from deltaguard.core.operations import Operation
    from deltaguard.core.profiles import EngineProfile
    from deltaguard.core.table_config import TableConfig

    real = model.pair_verdict

    def unknown_is_on(a: Operation, b: Operation, table: TableConfig, profile: EngineProfile) -> PairVerdict:
        verdict = real(a, b, table, profile)
        off = any(op.engine is not None and op.engine.session_ansi is False for op in (a, b))
        return dataclasses.replace(verdict, conflict=off)

    monkeypatch.setattr(model, "pair_verdict", unknown_is_on)
    summary = meaning.fuzz(SEED, 80, tmp_path, families=("settings",))
    assert summary.candidates["setting"] > 0


def test_the_ansi_text_reading_is_checked_against_spark() -> None:
    case = meaning_settings.SettingsCase(
        "delta-spark",
        (meaning_settings.Session(True, "UTC"), meaning_settings.Session(True, "UTC")),
        ("k = 1", "k = 2"),
        "yes",
    )
    assert meaning_settings.check_settings(case) == []
    assert meaning_settings.spark_reads_ansi(" TRUE\n") is True
    assert meaning_settings.spark_reads_ansi("yes") is None


def test_a_spark_engine_that_does_not_pin_the_write_scope_settings_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plant a Spark engine whose statements run with the session's replaceWhere and auto-merge settings."""
    from deltaguard.engines.spark import ops

    monkeypatch.setattr(ops, "_txn_confs", lambda context, user_metadata: {})
    summary = meaning.fuzz(SEED, CASES, tmp_path, families=("settings",))
    assert summary.candidates["setting"] > 0
    assert any("while the statement ran" in f["problems"][0] for f in summary.findings)


def test_a_model_that_reads_sql_relations_by_their_text_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plant a model that places a statement's relations only by how they are written (no filesystem, no
    catalog): a symlink or another spelling of the target read through SQL is flagged."""
    from deltaguard.engines import sources as target_reads

    monkeypatch.setattr(target_reads, "sql_reads_target", lambda *args, **kwargs: None)
    summary = meaning.fuzz(SEED, 80, tmp_path, families=("sources",))
    assert any("via SQL" in key for key in summary.by_class), summary.by_class
