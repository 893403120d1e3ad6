"""Generated partition columns move rows; zone-less timestamp literals of different sessions may meet."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from deltaguard.core import decide, pair_verdict
from deltaguard.core.check_request import parse_request
from deltaguard.core.decision import Verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.core.time_zones import canonical_zone, zone_mismatch
from deltaguard.leases import codec

SPARK = EngineProfile(EngineName.DELTA_SPARK, "4.4.0", session_time_zone="UTC")
DELTARS = EngineProfile(EngineName.DELTA_RS, "1.6.6", session_time_zone="UTC")
GENERATED = TableConfig(
    partition_columns=("d",), generated_columns=(("d", "CAST(ts AS DATE)"),), timestamp_columns=("ts",)
)
MOVE = Operation(
    OperationKind.UPDATE,
    predicate="d = '2024-01-01'",
    assignments=(("ts", "TIMESTAMP '2024-02-01 12:00:00'"),),
)
DELETE_FEB = Operation(OperationKind.DELETE, predicate="d = '2024-02-01'")


@pytest.mark.parametrize("profile", [SPARK, DELTARS], ids=["delta-spark", "delta-rs"])
def test_setting_the_source_of_a_generated_partition_moves_the_row(profile: EngineProfile) -> None:
    assert pair_verdict(MOVE, DELETE_FEB, GENERATED, profile).conflict
    decision = decide(DELETE_FEB, [MOVE], GENERATED, profile)
    assert decision.verdict is Verdict.CONFLICT
    assert any("d = CAST(ts AS DATE)" in reason for reason in decision.reasons)


def test_a_merge_setting_the_source_moves_the_row_too() -> None:
    merge = Operation(
        OperationKind.MERGE,
        merge_condition="t.id = s.id AND t.d = '2024-01-01'",
        assignments=(("t.ts", "s.ts"),),
        inserts="",
    )
    assert pair_verdict(merge, DELETE_FEB, GENERATED, SPARK).conflict


def test_assignments_to_other_columns_keep_the_partition() -> None:
    stay = dataclasses.replace(MOVE, assignments=(("x", "1"),))
    assert not pair_verdict(stay, DELETE_FEB, GENERATED, SPARK).conflict


def test_an_unreadable_generation_expression_moves_on_any_assignment() -> None:
    table = dataclasses.replace(GENERATED, generated_columns=(("d", "CAST(ts AS"),))
    stay = dataclasses.replace(MOVE, assignments=(("x", "1"),))
    assert pair_verdict(stay, DELETE_FEB, table, SPARK).conflict


def test_generated_columns_survive_the_lease_store_and_documents() -> None:
    assert codec.config_from_json(codec.config_to_json(GENERATED)) == GENERATED
    request = parse_request(
        {
            "engine": {"name": "delta-spark", "version": "4.4.0", "session_time_zone": "UTC"},
            "table": {
                "partition_columns": ["d"],
                "generated_columns": {"d": "CAST(ts AS DATE)"},
                "timestamp_columns": ["ts"],
            },
            "running": [{"sql": "UPDATE t SET ts = TIMESTAMP '2024-02-01 12:00:00' WHERE d = '2024-01-01'"}],
            "candidate": {"sql": "DELETE FROM t WHERE d = '2024-02-01'"},
        }
    )
    assert request.table == GENERATED
    assert (
        decide(request.candidate, request.running, request.table, request.profile).verdict is Verdict.CONFLICT
    )


UTC_DELETE = Operation(
    OperationKind.DELETE,
    predicate="ts = TIMESTAMP '2024-01-01 01:00:00'",
    engine=dataclasses.replace(SPARK, session_time_zone="UTC"),
)
PARIS_DELETE = Operation(
    OperationKind.DELETE,
    predicate="ts = TIMESTAMP '2024-01-01 02:00:00'",
    engine=dataclasses.replace(SPARK, session_time_zone="Europe/Paris"),
)
TS_TABLE = TableConfig(partition_columns=("ts",), timestamp_columns=("ts",))


def test_one_instant_in_two_zones_conflicts_with_the_reason() -> None:
    verdict = pair_verdict(UTC_DELETE, PARIS_DELETE, TS_TABLE, SPARK)
    assert verdict.conflict
    assert "UTC, Europe/Paris" in verdict.reason


def test_unknown_zones_conflict_even_without_column_types() -> None:
    unknown = dataclasses.replace(SPARK, session_time_zone=None)
    a = dataclasses.replace(UTC_DELETE, engine=None)
    b = dataclasses.replace(PARIS_DELETE, engine=None)
    verdict = pair_verdict(a, b, TableConfig(partition_columns=("ts",)), unknown)
    assert verdict.conflict
    assert "unknown" in verdict.reason


def test_one_known_zone_keeps_literals_apart() -> None:
    b = dataclasses.replace(PARIS_DELETE, engine=dataclasses.replace(SPARK, session_time_zone="Etc/UTC"))
    assert not pair_verdict(UTC_DELETE, b, TS_TABLE, SPARK).conflict


def test_date_literals_on_a_timestamp_column_depend_on_the_zone() -> None:
    # ts < '2024-01-02' in UTC and ts >= '2024-01-02' in Paris share the hour 23:00Z-00:00Z.
    a = Operation(OperationKind.DELETE, predicate="ts < '2024-01-02'", engine=UTC_DELETE.engine)
    b = Operation(OperationKind.DELETE, predicate="ts >= '2024-01-02'", engine=PARIS_DELETE.engine)
    assert pair_verdict(a, b, TS_TABLE, SPARK).conflict
    # the same on a DATE column is zone-free
    date_table = TableConfig(partition_columns=("ts",))
    assert not pair_verdict(a, b, date_table, SPARK).conflict


def test_a_skipped_local_time_is_not_told_apart_in_its_zone() -> None:
    paris = dataclasses.replace(SPARK, session_time_zone="Europe/Paris")
    gap = Operation(OperationKind.DELETE, predicate="ts = TIMESTAMP '2024-03-31 02:30:00'", engine=paris)
    after = Operation(OperationKind.DELETE, predicate="ts = TIMESTAMP '2024-03-31 03:30:00'", engine=paris)
    assert pair_verdict(gap, after, TS_TABLE, SPARK).conflict
    day_before = dataclasses.replace(after, predicate="ts = TIMESTAMP '2024-03-30 03:30:00'")
    day_after = dataclasses.replace(after, predicate="ts = TIMESTAMP '2024-04-01 03:30:00'")
    assert not pair_verdict(day_before, day_after, TS_TABLE, SPARK).conflict


def test_zone_spellings() -> None:
    assert canonical_zone("Etc/UTC") == canonical_zone("Z") == canonical_zone("+00:00") == "UTC"
    assert canonical_zone("GMT+1") == canonical_zone("+01:00")
    assert zone_mismatch("UTC", "utc", [dt.datetime(2024, 1, 1)]) is None
    assert zone_mismatch("Europe/Paris", None, []) is not None


def test_the_zone_survives_the_lease_store() -> None:
    profile = dataclasses.replace(SPARK, session_time_zone="Europe/Paris")
    assert codec.profile_from_json(codec.profile_to_json(profile)) == profile
    older = codec.profile_to_json(dataclasses.replace(SPARK, session_time_zone=None))
    assert "session_time_zone" not in older
