"""A catalog name stored at the target's location is the target, on real delta-spark 4.4.0.

``INSERT INTO delta.`<t>` PARTITION (p = 'b') SELECT ... FROM alias WHERE p = 'a'`` where ``alias`` is a
catalog table over ``<t>`` reads the target: the Spark engine's catalog lookup
(``SparkEngine.relation_location``) tells the operators so, and the model then judges the INSERT as reading
the whole table (MERGE's concurrency, "Isolation levels and write conflicts").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltaguard.core.model import pair_verdict
from deltaguard.core.sql.classify import classify_sql
from deltaguard.engines.discovery import read_table_config
from deltaguard.engines.sources import with_target_reads
from deltaguard.engines.spark.engine import SparkEngine
from deltaguard.engines.specs import SqlSpec


def test_a_catalog_alias_of_the_target_is_read_as_the_target(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    uri = str(tmp_path / "t")
    spark.createDataFrame([(1, "a", 1), (1, "b", 2)], "id long, p string, v long").write.format(
        "delta"
    ).partitionBy("p").save(uri)
    spark.sql(f"CREATE TABLE IF NOT EXISTS alias_of_t USING delta LOCATION '{uri}'")
    spark.sql("CREATE OR REPLACE TEMP VIEW a_view AS SELECT 1 AS id")
    try:
        engine = SparkEngine(spark, session_per_write=False)
        assert engine.relation_location("`alias_of_t`") is not None
        assert engine.relation_location("`a_view`") is None
        copy_a = f"INSERT INTO delta.`{uri}` PARTITION (p = 'b') SELECT id, v FROM alias_of_t WHERE p = 'a'"
        copy_b = f"INSERT INTO delta.`{uri}` PARTITION (p = 'a') SELECT id, v FROM alias_of_t WHERE p = 'b'"
        judged = []
        for sql in (copy_a, copy_b):
            operation = classify_sql(sql).operation
            marked, why = with_target_reads(
                operation, SqlSpec(sql=sql, classified=operation), uri, engine.relation_location
            )
            assert marked.reads_target and (why or operation.reads_target)
            judged.append(marked)
        assert pair_verdict(judged[0], judged[1], read_table_config(uri), engine.table_profile(uri)).conflict
    finally:
        spark.sql("DROP TABLE IF EXISTS alias_of_t")
