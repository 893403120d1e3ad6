"""Session settings the conflict model does not know the effect of separate nothing (closed world)."""

from __future__ import annotations

import pytest

from deltaguard.core.check_request import parse_engine
from deltaguard.core.closed_world import unknown_settings
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.leases.codec import profile_from_json, profile_to_json

TABLE = TableConfig(partition_columns=("p",), column_types=(("p", "string"), ("id", "long")), exists=True)
LEGACY = "spark.sql.legacy.typeCoercion.datetimeToString.enabled"


def _spark(*unknown: str) -> EngineProfile:
    return EngineProfile(EngineName.DELTA_SPARK, "4.4.0", session_unknown_settings=unknown)


def test_what_spark_and_deltaguard_set_to_wire_a_session_is_understood() -> None:
    # as listed by spark.conf.getAll on a classic and a Spark Connect session (Spark 4.2, Delta's jars)
    listed = {
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.sql.artifact.isolation.enabled": "true",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.warehouse.dir": "file:/tmp/warehouse",
        "spark.app.name": "x",
        "spark.master": "local[1]",
    }
    assert unknown_settings(listed) == ()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (LEGACY, "true"),
        ("spark.databricks.delta.conflictDetection.somethingNew", "false"),
        ("SPARK.SQL.ANSI.ENABLED", "false"),  # a known key in another case: not the setting Spark reads
        ("spark.sql.<unreadable>", "Py4JError"),
    ],
)
def test_any_other_setting_of_spark_sql_or_delta_is_unknown(key: str, value: str) -> None:
    assert unknown_settings({key: value, "spark.sql.shuffle.partitions": "4"}) == (f"{key}={value}",)


def test_a_long_value_is_shortened() -> None:
    (shown,) = unknown_settings({LEGACY: "x" * 100})
    assert shown.endswith("...") and len(shown) < len(LEGACY) + 70


def test_a_session_with_an_unknown_setting_separates_nothing() -> None:
    append = Operation(OperationKind.INSERT, predicate="p = 'a'")
    other = Operation(OperationKind.INSERT, predicate="p = 'b'")
    assert not pair_verdict(append, other, TABLE, _spark()).conflict
    verdict = pair_verdict(append, other, TABLE, _spark(f"{LEGACY}=true"))
    assert verdict.conflict and verdict.rule == "common.unknown_session_settings"
    assert LEGACY in verdict.reason


def test_a_running_write_s_session_counts_too() -> None:
    running = Operation(OperationKind.DELETE, predicate="p = 'a'", engine=_spark(f"{LEGACY}=true"))
    candidate = Operation(OperationKind.DELETE, predicate="p = 'b'")
    assert pair_verdict(running, candidate, TABLE, _spark()).conflict


def test_the_settings_survive_the_lease_store() -> None:
    profile = _spark(f"{LEGACY}=true")
    assert profile_from_json(profile_to_json(profile)).session_unknown_settings == (f"{LEGACY}=true",)
    assert profile_from_json(profile_to_json(_spark())).session_unknown_settings == ()


def test_a_check_request_may_list_the_session_s_settings() -> None:
    stated = {
        "name": "delta-spark",
        "version": "4.4.0",
        "settings": {LEGACY: "true", "spark.sql.shuffle.partitions": "8"},
    }
    assert parse_engine(stated).session_unknown_settings == (f"{LEGACY}=true",)


def test_every_setting_the_spark_engine_reads_pins_or_sets_is_understood() -> None:
    """The allowlist names the engine's settings by hand (the core imports no engine); a setting the engine
    starts pinning or reading without the list knowing it would make every Spark pair a conflict."""
    pytest.importorskip("pyspark")
    from deltaguard.engines.spark import ops, session
    from deltaguard.engines.spark.engine import ROW_LEVEL_PREVIEW_CONF

    used = {
        ops.TXN_APP_ID_CONF,
        ops.TXN_VERSION_CONF,
        ops.USER_METADATA_CONF,
        ops.OPTIMIZE_MAX_FILE_SIZE_CONF,
        ops.SCHEMA_AUTO_MERGE_CONF,
        *ops.WRITE_SCOPE_CONFS,
        session.ANSI_CONF,
        session.SESSION_TIME_ZONE_CONF,
        *session.PARSER_CONFS,
        *session.SMALL_SESSION_CONF,
        ROW_LEVEL_PREVIEW_CONF,
    }
    assert unknown_settings(dict.fromkeys(used, "x")) == ()
