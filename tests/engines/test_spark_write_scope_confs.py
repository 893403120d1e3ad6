"""The Spark engine pins the session settings that change which rows a write touches (no JVM).

``spark.databricks.delta.replaceWhere.constraintCheck.enabled=false`` lets a REPLACE WHERE write rows
outside its predicate (measured on delta-spark 4.4.0, ``tests/spark/jars/test_session_settings_spark.py``);
every statement and DataFrame write of the engine runs with it ``true``, and the session's own value is
restored after.
"""

from __future__ import annotations

from deltaguard.engines.spark import ops
from deltaguard.engines.spark.target import SparkTarget
from deltaguard.engines.specs import WriteContext
from tests.engines.fake_spark import FakeSpark

CHECK = "spark.databricks.delta.replaceWhere.constraintCheck.enabled"
TARGET = SparkTarget.parse("/data/sales")


def test_statements_run_with_the_replace_where_check_on() -> None:
    spark = FakeSpark(CHECK, **{CHECK: "false"})
    run = ops.under_txn_confs(lambda spark, target, spec, ready: spark.sql("INSERT ...").collect())
    run(spark, TARGET, None, WriteContext(), None)  # type: ignore[arg-type]
    assert [value for _, value in spark.ran] == ["true"]
    assert spark.conf.values[CHECK] == "false"


def test_dataframe_writes_pin_it_on_the_frames_own_session_too() -> None:
    engine_session, caller_session = (
        FakeSpark(CHECK, **{CHECK: "false"}),
        FakeSpark(CHECK, **{CHECK: "false"}),
    )
    seen: list[tuple[str | None, str | None]] = []

    class Writer:
        def format(self, _: str) -> Writer:
            return self

        def mode(self, _: str) -> Writer:
            return self

        def option(self, _key: str, _value: str) -> Writer:
            return self

        def save(self, _path: str) -> None:
            seen.append((engine_session.conf.values.get(CHECK), caller_session.conf.values.get(CHECK)))

    class Frame:
        write = Writer()
        sparkSession = caller_session

    ops._save_dataframe(
        engine_session, Frame(), TARGET, "overwrite", WriteContext(), None, replace_where="p = 'a'"
    )  # type: ignore[arg-type]
    assert seen == [("true", "true")]
    assert engine_session.conf.values[CHECK] == caller_session.conf.values[CHECK] == "false"
