"""The Spark engine never lets ``schema.autoMerge.enabled`` turn a write judged as changing no metadata into
a schema change (ADR 0035). No JVM: the runners only talk to the SparkSession's conf and ``sql``.

Measured on delta-spark 4.4.0 (ADR 0035): under autoMerge a plain ``MERGE ... UPDATE SET * INSERT *`` and a
SQL ``INSERT`` with a new source column add it to the schema, and a concurrent INSERT of another partition
fails with MetadataChangedException; set ``false`` for the statement the MERGE leaves the schema alone, and
a DataFrame write with ``mergeSchema=false`` fails with DELTA_METADATA_MISMATCH instead of evolving.
"""

from __future__ import annotations

import pytest

from deltaguard.core.sql.classify import classify_sql
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.spark import ops
from deltaguard.engines.spark.runners import execute
from deltaguard.engines.spark.target import SparkTarget
from deltaguard.engines.specs import SqlSpec, WriteContext
from tests.engines.fake_spark import FakeSpark

AUTO = ops.SCHEMA_AUTO_MERGE_CONF
TARGET = SparkTarget.parse("/data/sales")
MERGE = "MERGE INTO delta.`/data/sales` t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"


def _spec(sql: str) -> SqlSpec:
    return SqlSpec(sql=sql, classified=classify_sql(sql).operation)


@pytest.mark.parametrize(
    "sql",
    [MERGE, "INSERT INTO delta.`/data/sales` SELECT * FROM staging"],
    ids=["merge", "insert"],
)
def test_a_statement_the_conf_may_evolve_unjudged_is_refused_before_it_runs(sql: str) -> None:
    spark = FakeSpark(AUTO, **{AUTO: "True"})
    with pytest.raises(InvalidWriteError, match=r"schema\.autoMerge\.enabled=true.*WITH SCHEMA EVOLUTION"):
        execute(spark, TARGET, _spec(sql), WriteContext(), None)  # type: ignore[arg-type]
    assert spark.ran == []


def test_a_statement_judged_as_evolving_runs_under_auto_merge() -> None:
    sql = MERGE.replace("MERGE INTO", "MERGE WITH SCHEMA EVOLUTION INTO")
    spark = FakeSpark(AUTO, **{AUTO: "true"})
    execute(spark, TARGET, _spec(sql), WriteContext(), None)  # type: ignore[arg-type]
    assert [statement for statement, _ in spark.ran] == [sql]
    assert spark.conf.values[AUTO] == "true"  # the conf's own setting is restored


def test_statements_that_cannot_evolve_and_confs_without_auto_merge_run() -> None:
    update = "UPDATE delta.`/data/sales` SET v = 1 WHERE id = 2"
    with_auto = FakeSpark(AUTO, **{AUTO: "true"})
    execute(with_auto, TARGET, _spec(update), WriteContext(), None)  # type: ignore[arg-type]
    without = FakeSpark(AUTO)
    execute(without, TARGET, _spec(MERGE), WriteContext(), None)  # type: ignore[arg-type]
    assert [s for s, _ in with_auto.ran] == [update] and [s for s, _ in without.ran] == [MERGE]


def test_the_specs_own_statements_run_with_auto_merge_off() -> None:
    spark = FakeSpark(AUTO, **{AUTO: "true"})
    run = ops.under_txn_confs(lambda spark, target, spec, ready: spark.sql("MERGE ...").collect())
    run(spark, TARGET, None, WriteContext(), None)  # type: ignore[arg-type]
    assert spark.ran == [("MERGE ...", "false")]
    assert spark.conf.values[AUTO] == "true"


def test_the_specs_dataframe_writes_refuse_to_merge_schemas() -> None:
    options: dict[str, str] = {}

    class Writer:
        def format(self, _: str) -> Writer:
            return self

        def mode(self, _: str) -> Writer:
            return self

        def option(self, key: str, value: str) -> Writer:
            options[key] = value
            return self

    class Frame:
        write = Writer()

    ops._writer(Frame(), "append", WriteContext(), None)  # type: ignore[arg-type]
    assert options["mergeSchema"] == "false"
