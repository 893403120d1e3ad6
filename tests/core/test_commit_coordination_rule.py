"""Writes whose commits different coordinators guard never run at once, whatever they touch."""

from __future__ import annotations

import dataclasses

from deltaguard.core import decide, pair_verdict
from deltaguard.core.decision import Verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import STORAGE_COORDINATION, EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases import codec

TABLE = TableConfig(partition_columns=("date",))
APPEND = Operation(OperationKind.INSERT)
SPARK = EngineProfile(EngineName.DELTA_SPARK, "4.4.0")
DELTARS = EngineProfile(EngineName.DELTA_RS, "1.6.6")


def on(profile: EngineProfile, coordinator: str) -> EngineProfile:
    return dataclasses.replace(profile, commit_coordination=coordinator)


def test_blind_appends_share_the_storage_coordinator() -> None:
    # The control: two blind appends never conflict when the storage excludes every commit.
    assert not pair_verdict(APPEND, APPEND, TABLE, SPARK).conflict


def test_two_drivers_of_a_single_driver_log_store_conflict() -> None:
    a = dataclasses.replace(APPEND, engine=on(SPARK, "single-driver:app-1"))
    b = dataclasses.replace(APPEND, engine=on(SPARK, "single-driver:app-2"))
    verdict = pair_verdict(a, b, TABLE, SPARK)
    assert verdict.conflict
    assert verdict.rule == "common.single_driver_commits"
    assert "Storage configuration" in verdict.reason
    assert verdict == pair_verdict(b, a, TABLE, SPARK)


def test_one_driver_keeps_the_engine_rules() -> None:
    same = on(SPARK, "single-driver:app-1")
    a = dataclasses.replace(APPEND, engine=same)
    b = dataclasses.replace(APPEND, engine=same)
    assert not pair_verdict(a, b, TABLE, SPARK).conflict


def test_mixed_coordinators_conflict() -> None:
    dynamo = dataclasses.replace(APPEND, engine=on(SPARK, "dynamodb:us-east-1/delta_log"))
    deltars = dataclasses.replace(APPEND, engine=on(DELTARS, STORAGE_COORDINATION))
    verdict = pair_verdict(dynamo, deltars, TABLE, SPARK)
    assert verdict.conflict
    assert verdict.rule == "common.mixed_commit_coordination"


def test_decide_uses_the_candidate_profile_when_the_operation_names_no_engine() -> None:
    running = dataclasses.replace(APPEND, engine=on(SPARK, "single-driver:app-1"))
    decision = decide(APPEND, [running], TABLE, on(SPARK, "single-driver:app-2"))
    assert decision.verdict is Verdict.CONFLICT
    same = decide(APPEND, [running], TABLE, on(SPARK, "single-driver:app-1"))
    assert same.verdict is Verdict.NO_CONFLICT


def test_the_coordinator_survives_the_lease_store_encoding() -> None:
    profile = on(SPARK, "single-driver:app-1")
    assert codec.profile_from_json(codec.profile_to_json(profile)) == profile
    # Texts written before the field existed read as the storage coordinator.
    assert codec.profile_from_json({"name": "delta-spark", "version": "4.4.0"}) == SPARK
