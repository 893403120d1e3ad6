"""Spark's own analyzer confirms the partitions the model keeps apart on delta-spark (ADR 0037).

The hand-written reading is replaced by a planted unsound one (every pair "on provably different
partitions") so each test shows what the engine's check alone refuses and keeps; without the oracle every
pair here would be admitted. The oracle evaluates on a session made as the engine's writes are, so the
ANSI mode and time zone are the write's.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from deltaguard.core.decision import PairVerdict
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.oracle import PredicateOracle
from deltaguard.core.rules import delta_spark
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.spark.engine import SparkEngine
from deltaguard.engines.spark.meaning import SparkOracle
from deltaguard.engines.spark.session import ANSI_CONF, SESSION_TIME_ZONE_CONF

pytestmark = [pytest.mark.spark, pytest.mark.delta_jars]


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Partitioned tables written by delta-rs (no Spark job): an INT, a DATE and TIMESTAMP, a dotted name."""
    base = tmp_path_factory.mktemp("meaning")
    ids = pa.array([1, 2, 3], pa.int64())
    layouts = {
        "ints": (pa.table({"id": ids, "k": pa.array([1, 2, None], pa.int32())}), ["k"]),
        "times": (
            pa.table(
                {
                    "id": ids,
                    "d": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2), None]),
                    "ts": pa.array(
                        [dt.datetime(2024, 1, 1, 5), dt.datetime(2024, 1, 1), None],
                        pa.timestamp("us", tz="UTC"),
                    ),
                }
            ),
            ["d", "ts"],
        ),
        "dotted": (pa.table({"id": ids, "a.b": pa.array(["x", "y", None])}), ["a.b"]),
    }
    out = {}
    for name, (data, partitions) in layouts.items():
        write_deltalake(str(base / name), data, partition_by=partitions)
        out[name] = str(base / name)
    return out


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hand reading keeps every pair apart: only the engine's check can refuse one."""
    monkeypatch.setattr(delta_spark, "may_overlap", lambda *args, **kwargs: False)


@pytest.fixture(scope="module")
def engines(delta_spark: Any) -> Iterator[dict[tuple[bool, str], SparkEngine]]:
    """One engine per (ANSI mode, time zone), each on a session of its own whose settings its writes use."""
    made = {}
    for ansi in (True, False):
        for zone in ("UTC", "America/New_York"):
            session = delta_spark.newSession()
            session.conf.set(ANSI_CONF, str(ansi).lower())
            session.conf.set(SESSION_TIME_ZONE_CONF, zone)
            made[(ansi, zone)] = SparkEngine(session, session_per_write=False)
    yield made


def _delete(predicate: str) -> Operation:
    return Operation(OperationKind.DELETE, predicate=predicate)


def _verdict(
    engine: SparkEngine, uri: str, a: str, b: str, *, believed_ansi: bool | None = None
) -> PairVerdict:
    config = engine.table_config(uri)
    profile = engine.table_profile(uri)
    if believed_ansi is not None:
        # what the hand reading believes of the write's session (see the ANSI test)
        profile = dataclasses.replace(profile, session_ansi=believed_ansi)
    return pair_verdict(_delete(a), _delete(b), config, profile)


def test_the_engine_reads_the_table_with_its_evaluator(
    engines: dict[tuple[bool, str], SparkEngine], tables: dict[str, str]
) -> None:
    config = engines[(True, "UTC")].table_config(tables["ints"])
    assert isinstance(config.meaning, SparkOracle)
    assert isinstance(config.meaning, PredicateOracle)
    assert config.meaning.types == {"k": "integer"}


@pytest.mark.usefixtures("planted")
def test_numeric_text_under_ansi_off_selects_the_truncated_partition(
    engines: dict[tuple[bool, str], SparkEngine], tables: dict[str, str]
) -> None:
    """Measured on Spark 4.2: with ANSI off ``k = '1.5'`` is TRUE on ``k = 1`` (the text is cast to the
    column's type and truncated); with ANSI on the cast fails (CAST_INVALID_INPUT), so nothing confirms the
    pair; ``k = '01'`` reads as ``1`` under both."""
    uri = tables["ints"]
    # the hand reading is told ANSI is on, as it is when it reads a setting the write does not run with
    off = _verdict(engines[(False, "UTC")], uri, "k = '1.5'", "k = 1", believed_ansi=True)
    assert off.conflict and off.rule == "spark.engine_unconfirmed"
    assert "selects one witness partition by both" in off.reason
    on = _verdict(engines[(True, "UTC")], uri, "k = '1.5'", "k = 1", believed_ansi=True)
    assert on.conflict and on.rule == "spark.engine_unconfirmed"
    assert "CAST_INVALID_INPUT" in on.reason
    same = _verdict(engines[(True, "UTC")], uri, "k = '01'", "k = 1")
    assert same.conflict and same.rule == "spark.engine_unconfirmed"
    apart = _verdict(engines[(True, "UTC")], uri, "k = '01'", "k = 2")
    assert not apart.conflict and apart.rule == "spark.disjoint_partitions"


def test_with_ansi_on_the_write_fails_as_the_oracle_does(
    engines: dict[tuple[bool, str], SparkEngine], tables: dict[str, str]
) -> None:
    """The same predicate as a delta-spark DELETE, in the same session: with ANSI on it fails before writing
    (with ANSI off it deletes partition 1: ``test_session_settings_spark.py``)."""
    on = engines[(True, "UTC")].session()
    with pytest.raises(Exception, match="CAST_INVALID_INPUT"):
        on.sql(f"DELETE FROM delta.`{tables['ints']}` WHERE k = '1.5'").collect()


@pytest.mark.usefixtures("planted")
def test_date_and_timestamp_literals_in_the_session_time_zone(
    engines: dict[tuple[bool, str], SparkEngine], tables: dict[str, str]
) -> None:
    """A zone-less timestamp text is read in the session's zone: in New York ``2024-01-01 00:00`` is
    05:00 UTC, and a DATE compared with a TIMESTAMP is its midnight there; in UTC the pairs are apart."""
    uri = tables["times"]
    pairs = [
        ("ts = '2024-01-01 00:00:00'", "ts = '2024-01-01 05:00:00Z'"),
        ("d = '2024-01-02'", "d = TIMESTAMP '2024-01-02 05:00:00Z'"),
    ]
    for a, b in pairs:
        new_york = _verdict(engines[(True, "America/New_York")], uri, a, b)
        assert new_york.conflict and new_york.rule == "spark.engine_unconfirmed", (a, b, new_york.reason)
        utc = _verdict(engines[(True, "UTC")], uri, a, b)
        assert not utc.conflict, (a, b, utc.reason)


@pytest.mark.usefixtures("planted")
def test_null_partitions(engines: dict[tuple[bool, str], SparkEngine], tables: dict[str, str]) -> None:
    """delta-spark keeps the files a predicate is TRUE on: ``k = 1`` leaves the NULL partition alone, while
    ``NOT (k <=> 1)`` and ``k <=> NULL`` select it."""
    engine, uri = engines[(True, "UTC")], tables["ints"]
    assert not _verdict(engine, uri, "k IS NULL", "k = 1").conflict
    assert not _verdict(engine, uri, "k IS NULL", "NOT (k = 1)").conflict
    for other in ("NOT (k <=> 1)", "k <=> NULL"):
        verdict = _verdict(engine, uri, "k IS NULL", other)
        assert verdict.conflict and verdict.rule == "spark.engine_unconfirmed", (other, verdict.reason)


@pytest.mark.usefixtures("planted")
def test_a_dotted_partition_name_resolves_as_spark_resolves_it(
    engines: dict[tuple[bool, str], SparkEngine], tables: dict[str, str]
) -> None:
    """Spark resolves `` `A.B` `` to the column `` `a.b` `` (names ignore case by default)."""
    engine, uri = engines[(True, "UTC")], tables["dotted"]
    same = _verdict(engine, uri, "`a.b` = 'x'", "`A.B` = 'x'")
    assert same.conflict and same.rule == "spark.engine_unconfirmed", same.reason
    assert not _verdict(engine, uri, "`a.b` = 'x'", "`a.b` = 'y'").conflict


def test_a_table_without_partition_types_gets_no_oracle(
    engines: dict[tuple[bool, str], SparkEngine],
) -> None:
    engine = engines[(True, "UTC")]
    config = TableConfig(partition_columns=("k",), exists=True, uri="/nowhere")
    assert engine.predicate_oracle(config) is None
    assert isinstance(engine.predicate_oracle(config, {"k": "int"}), SparkOracle)


def test_the_settings_the_model_reads_are_those_writes_run_with(delta_spark: Any) -> None:
    """A classic session's writes run on its ``newSession()``, which does not see settings changed at run
    time on it: the engine reports what the write session has, as the oracle evaluates there."""
    given = delta_spark.newSession()
    given.conf.set(SESSION_TIME_ZONE_CONF, "America/New_York")
    given.conf.set(ANSI_CONF, "false")
    write_session = given.newSession()
    assert write_session.conf.get(SESSION_TIME_ZONE_CONF) != "America/New_York"  # as measured
    assert write_session.conf.get(ANSI_CONF) == "true"
    per_write = SparkEngine(given)
    assert per_write.session_time_zone() == write_session.conf.get(SESSION_TIME_ZONE_CONF)
    # not False: the write session has Spark's default, not set, which the engine reports as unknown
    assert per_write.session_ansi() is None
    shared = SparkEngine(given, session_per_write=False)
    assert shared.session_time_zone() == "America/New_York"
    assert shared.session_ansi() is False
