"""Session settings that widen a write, on real delta-spark 4.4.0.

With ``spark.databricks.delta.replaceWhere.constraintCheck.enabled=false`` a REPLACE WHERE writes rows
outside its predicate (into a partition a concurrent write of it was judged apart from). The Spark engine
pins the setting for its writes (``WRITE_SCOPE_CONFS``): the same write then fails before committing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deltaguard.engines.spark.engine import SparkEngine
from deltaguard.engines.spark.ops import WRITE_SCOPE_CONFS
from deltaguard.engines.specs import ReplaceWhereSpec, WriteContext

CHECK = "spark.databricks.delta.replaceWhere.constraintCheck.enabled"


def _table(spark: Any, path: Path) -> str:
    spark.createDataFrame([(1, "a"), (2, "b")], "id long, p string").write.format("delta").partitionBy(
        "p"
    ).save(str(path))
    return str(path)


def _rows(spark: Any, uri: str) -> list[tuple[int, str]]:
    return sorted((r.id, r.p) for r in spark.read.format("delta").load(uri).collect())


def test_the_setting_widens_a_replace_where_and_the_engine_pins_it(delta_spark: Any, tmp_path: Path) -> None:
    assert WRITE_SCOPE_CONFS[CHECK] == "true"
    spark = delta_spark
    outside = spark.createDataFrame([(9, "b")], "id long, p string")
    spark.conf.set(CHECK, "false")
    try:
        # as measured: the session's own write lands in partition b although it replaces p = 'a'
        plain = _table(spark, tmp_path / "plain")
        outside.write.format("delta").mode("overwrite").option("replaceWhere", "p = 'a'").save(plain)
        assert _rows(spark, plain) == [(2, "b"), (9, "b")]
        # through the engine the setting is pinned: the row outside the predicate fails the write
        pinned = _table(spark, tmp_path / "pinned")
        with pytest.raises(Exception, match=r"(?i)replaceWhere|does not conform|DELTA_REPLACE_WHERE"):
            SparkEngine(spark).write(
                pinned, ReplaceWhereSpec(source=outside, predicate="p = 'a'"), WriteContext()
            )
        assert _rows(spark, pinned) == [(1, "a"), (2, "b")]
        assert spark.conf.get(CHECK) == "false"  # the session's own setting is restored
    finally:
        spark.conf.unset(CHECK)


def test_numeric_text_is_truncated_with_ansi_off_and_the_engine_reads_the_mode(
    delta_spark: Any, tmp_path: Path
) -> None:
    from deltaguard.core.model import pair_verdict
    from deltaguard.core.sql.classify import classify_sql
    from deltaguard.engines.discovery import read_table_config

    spark = delta_spark
    uri = str(tmp_path / "ints")
    spark.createDataFrame([(1, 10), (2, 20)], "k int, v long").write.format("delta").partitionBy("k").save(
        uri
    )
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        engine = SparkEngine(spark, session_per_write=False)
        assert engine.session_ansi() is False
        # k = '1.5' deletes the row of partition k = 1
        spark.sql(f"DELETE FROM delta.`{uri}` WHERE k = '1.5'").collect()
        assert sorted(r.k for r in spark.read.format("delta").load(uri).collect()) == [2]
        profile = engine.table_profile(uri)
        assert profile.session_ansi is False
        first = classify_sql(f"DELETE FROM delta.`{uri}` WHERE k = '1.5'").operation
        second = classify_sql(f"DELETE FROM delta.`{uri}` WHERE k = '1'").operation
        assert pair_verdict(first, second, read_table_config(uri), profile).conflict
    finally:
        spark.conf.unset("spark.sql.ansi.enabled")


def test_double_quotes_name_a_column_under_the_setting_and_the_engine_reads_it(
    delta_spark: Any, tmp_path: Path
) -> None:
    """With ANSI mode on and ``spark.sql.ansi.doubleQuotedIdentifiers`` on, ``p = "x"`` compares ``p`` with
    the column ``x``: the DELETE removes a row of partition ``y`` (the one ``p = 'y'`` removes too), none of
    partition ``x``. The engine reads the setting, and the model then keeps the pair together."""
    from deltaguard.core.model import pair_verdict
    from deltaguard.core.sql.classify import classify_sql
    from deltaguard.engines.discovery import read_table_config

    spark = delta_spark
    uri = str(tmp_path / "quoted")
    rows = [("x", "q", 1), ("y", "y", 2), ("y", "z", 3)]
    spark.createDataFrame(rows, "p string, x string, id long").write.format("delta").partitionBy("p").save(
        uri
    )
    engine = SparkEngine(spark, session_per_write=False)
    first = classify_sql(f'DELETE FROM delta.`{uri}` WHERE p = "x"').operation
    second = classify_sql(f"DELETE FROM delta.`{uri}` WHERE p = 'y'").operation
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        assert engine.session_default_parser() is True
        settled = engine.table_profile(uri)
        assert settled.session_default_parser is True
        assert not pair_verdict(first, second, read_table_config(uri), settled).conflict
        spark.conf.set("spark.sql.ansi.doubleQuotedIdentifiers", "true")
        assert engine.session_default_parser() is False
        profile = engine.table_profile(uri)
        assert profile.session_default_parser is False
        verdict = pair_verdict(first, second, read_table_config(uri), profile)
        assert verdict.conflict and "doubleQuotedIdentifiers" in verdict.reason
        spark.sql(f'DELETE FROM delta.`{uri}` WHERE p = "x"').collect()
        assert sorted(r.id for r in spark.read.format("delta").load(uri).collect()) == [1, 3]
    finally:
        spark.conf.unset("spark.sql.ansi.doubleQuotedIdentifiers")
        spark.conf.unset("spark.sql.ansi.enabled")


def test_the_engine_lists_settings_the_model_does_not_know(delta_spark: Any, tmp_path: Path) -> None:
    """The suite's own session sets only what the model understands; a legacy coercion switch set in the
    session the writes run with makes every pair of that engine a conflict."""
    from deltaguard.core.model import pair_verdict
    from deltaguard.core.operations import Operation, OperationKind
    from deltaguard.engines.discovery import read_table_config

    spark = delta_spark
    uri = _table(spark, tmp_path / "settings")
    engine = SparkEngine(spark, session_per_write=False)
    assert engine.table_profile(uri).session_unknown_settings == ()
    legacy = "spark.sql.legacy.typeCoercion.datetimeToString.enabled"
    spark.conf.set(legacy, "true")
    try:
        profile = engine.table_profile(uri)
        assert profile.session_unknown_settings == (f"{legacy}=true",)
        first = Operation(OperationKind.INSERT, predicate="p = 'a'")
        second = Operation(OperationKind.INSERT, predicate="p = 'b'")
        verdict = pair_verdict(first, second, read_table_config(uri), profile)
        assert verdict.conflict and legacy in verdict.reason
        # a write session of its own starts from the context's settings, not this one's runtime change
        assert SparkEngine(spark).table_profile(uri).session_unknown_settings == ()
    finally:
        spark.conf.unset(legacy)
