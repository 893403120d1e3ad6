"""Does the hand reading keep apart two delta-spark partition predicates that Spark selects together?

Run as a script (a local[1] PySpark session, no Delta jars; nothing is written)::

    .venv/bin/python -m lab.probe_spark_meaning

For every pair below, on a table partitioned by that one column, and under each of ANSI on/off and the
session time zones UTC and Europe/Paris: the model's verdict with the hand reading alone, then with Spark's
evaluator (:class:`deltaguard.engines.spark.meaning.SparkOracle`) in a session with those settings. Prints
each pair the hand reading keeps apart and Spark does not, then the counts (ADR 0037, delta-spark section).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator
from typing import Any

from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.spark.meaning import SparkOracle

#: (type, pairs of DELETE predicates) per partition column
PAIRS: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "k": (
        "integer",
        [
            ("k = '1.5'", "k = 1"),
            ("k = '01'", "k = 1"),
            ("k = '01'", "k = 2"),
            ("k IN ('1.5', 3)", "k = 1"),
            ("k IN ('01', 3)", "k = 1"),
            ("k = 1.5", "k = 1"),
            ("k < '1.5'", "k = 1"),
            ("k = ' 1 '", "k = 1"),
            ("k = 1.0", "k = 1"),
            ("k = '+1'", "k = 1"),
            ("k IS NULL", "k = 1"),
            ("NOT (k = 1)", "k IS NULL"),
            ("k <=> NULL", "k = 1"),
            ("k = 2", "k = 1"),
            ("k IN (1.5, 2)", "k = 1"),
            ("k BETWEEN 1.5 AND 3", "k = 1"),
            ("k > 0.5", "k = 0"),
            ("NOT (k <=> 1)", "k IS NULL"),
            ("k IN (NULL)", "k IS NULL"),
            ("k = NULL", "k IS NULL"),
            ("NOT (k IN (1, NULL))", "k = 2"),
            ("k NOT IN (1)", "k IS NULL"),
            ("k BETWEEN 3 AND 1", "k = 2"),
            ("k = 2147483648", "k = -2147483648"),
            ("k = '1'", "k = 1.0"),
            ("k = 1", "k = 4294967297"),
            ("k = -0", "k = 0"),
            ("k IN ('1', 2)", "k = 1"),
            ("k = '1 '", "k = 1"),
            ("k = '\t1'", "k = 1"),
            ("K = 1", "k = 1"),
            ("k = 0x1", "k = 1"),
        ],
    ),
    "s": (
        "string",
        [
            ("s = '01'", "s = '1'"),
            ("s = 1", "s = '1.0'"),
            ("s = 1", "s = '01'"),
            ("s = 1", "s = ' 1'"),
            ("s = 1", "s = '1.9'"),
            ("s = 'a'", "s = 'A'"),
            ("s > 5", "s = '10'"),
            ("s = ''", "s IS NULL"),
            ("s IN (1, 2)", "s = '1.0'"),
            ("s = 'a'", "lower(s) = 'a'"),
            ("s ILIKE 'A%'", "s = 'a'"),
            ("s = 'a '", "s = 'a'"),
            ("s LIKE 'a_'", "s = 'a%'"),
            ("s = 'a'", "s RLIKE '^A'"),
            ("s = 1", "s = '1'"),
            ("s < 'b'", "s = 'B'"),
            ("s >= 'a'", "s = 'B'"),
            ("s = 'ß'", "s = 'SS'"),
        ],
    ),
    "d": (
        "date",
        [
            ("d = '2024-01-01'", "d = '2024-01-01 10:00'"),
            ("d = '2024-01-01'", "d = '2024-1-1'"),
            ("d = '2024-01-02'", "d = TIMESTAMP '2024-01-01 23:00:00Z'"),
            ("d = '2024-01-02'", "d = '2024-01-01'"),
            ("d = DATE '2024-01-02'", "d < TIMESTAMP '2024-01-02 00:30:00'"),
            ("d = '2024-01-01'", "d = '2024-01-01T23:59'"),
            ("d = '2024-01-02'", "d > '2024-01-01 12:00:00'"),
            ("d = '2024-01-32'", "d IS NULL"),
            ("d = '2024-01-01 '", "d = '2024-01-01'"),
            ("d = '2024-01-01T00:00:00Z'", "d = '2024-01-01'"),
            ("d = '+2024-01-01'", "d = '2024-01-01'"),
            ("d = '2024-01'", "d = '2024-01-01'"),
            ("d = '2024'", "d = '2024-01-01'"),
            ("d = '20240101'", "d = '2024-01-01'"),
            ("d BETWEEN '2024-01-01' AND '2024-01-01 23:59'", "d = '2024-01-01'"),
            ("d < '2024-01-02'", "d = '2024-01-01'"),
            ("d > '2024-01-01 00:00:01'", "d = '2024-01-01'"),
        ],
    ),
    "ts": (
        "timestamp",
        [
            ("ts = '2024-01-01 01:00:00'", "ts = '2024-01-01 00:00:00Z'"),
            ("ts = '2024-01-01 00:00:00+00:00'", "ts = '2024-01-01 01:00:00+01:00'"),
            ("ts = TIMESTAMP '2024-01-01 01:00:00'", "ts = TIMESTAMP '2024-01-01 00:00:00 UTC'"),
            ("ts = '2024-01-01'", "ts = '2024-01-01 00:00:00'"),
            ("ts = DATE '2024-01-01'", "ts = '2024-01-01 00:00:00Z'"),
            ("ts = '2024-01-01 01:00:00'", "ts = '2024-01-01 02:00:00'"),
            ("ts = '2024-01-01 00:00:00'", "ts = '2024-01-01 00:00:00.000001'"),
            ("ts = '2024-01-01'", "ts = '2024-01-01T00:00'"),
            ("ts < '2024-01-02'", "ts = '2024-01-01 23:00:00'"),
            ("ts = '2024-01-01 00:00:00 Europe/Paris'", "ts = '2023-12-31 23:00:00Z'"),
            ("ts >= '2024-01-01 00:00:00+01:00'", "ts = '2023-12-31 23:30:00Z'"),
            ("ts = '2024-01-01T00:00:00.5'", "ts = '2024-01-01 00:00:00.500'"),
            ("ts = '2024-03-31 02:30:00'", "ts = '2024-03-31 03:30:00'"),
            ("ts = '2024-10-27 02:30:00'", "ts = '2024-10-27 01:30:00Z'"),
        ],
    ),
    "a.b": (
        "string",
        [
            ("`a.b` = 'x'", "`a.b` = 'y'"),
            ("`a.b` = 'x'", "`A.B` = 'x'"),
            ("`a.b` = 'x'", "`a.b` IN ('x', 'z')"),
        ],
    ),
    "b": (
        "boolean",
        [
            ("b = 'yes'", "b = true"),
            ("b = 't'", "b = true"),
            ("b = '1'", "b = true"),
            ("b = 1", "b = true"),
            ("b = 'TRUE'", "b = true"),
            ("b = 'true'", "b = false"),
            ("b = 'no'", "b = true"),
            ("b IS TRUE", "b IS NULL"),
            ("b", "b = false"),
            ("NOT b", "b IS NULL"),
            ("b = 'y'", "b = false"),
        ],
    ),
    "x": (
        "double",
        [
            ("x = 0.0", "x = -0.0"),
            ("x = 'NaN'", "x = 1"),
            ("x = CAST('NaN' AS DOUBLE)", "x = 1"),
            ("x = 1", "x = '1e0'"),
            ("x = 0.1", "x = 0.10000000000000001"),
            ("x = 1e308", "x = 'Infinity'"),
            ("x > 1e308", "x = 'Infinity'"),
            ("x = 'inf'", "x = 1"),
            ("x < 0", "x = -0.0"),
        ],
    ),
    "m": (
        "decimal(5,2)",
        [
            ("m = 1.5", "m = 1.50"),
            ("m = 1.5", "m = 1.505"),
            ("m = '1.5'", "m = 1.5"),
            ("m = 1", "m = 1.001"),
            ("m = 1.004", "m = 1"),
        ],
    ),
    "tn": (
        "timestamp_ntz",
        [
            ("tn = '2024-01-01 00:00:00'", "tn = '2024-01-01 00:00:00Z'"),
            ("tn = '2024-01-01 00:00:00+01:00'", "tn = '2024-01-01 00:00:00'"),
            ("tn = TIMESTAMP '2024-01-01 01:00:00'", "tn = '2024-01-01 00:00:00'"),
        ],
    ),
}


def main() -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    for name in ("SQLQueryContextLogger", "pyspark", "py4j"):
        logging.getLogger(name).setLevel(logging.CRITICAL)

    def settings(ansi: bool, zone: str) -> Any:
        @contextlib.contextmanager
        def scope() -> Iterator[Any]:
            session = spark.newSession()
            session.conf.set("spark.sql.ansi.enabled", str(ansi).lower())
            session.conf.set("spark.sql.session.timeZone", zone)
            yield session

        return scope

    counts = {"pairs": 0, "hand apart": 0, "spark confirms": 0, "hand apart, spark not": 0}
    for ansi in (True, False):
        for zone in ("UTC", "Europe/Paris"):
            profile = EngineProfile(
                EngineName.DELTA_SPARK, "4.4.0", session_ansi=ansi, session_time_zone=zone
            )
            for column, (kind, pairs) in PAIRS.items():
                config = TableConfig(
                    partition_columns=(column,), column_types=((column, kind), ("id", "long")), exists=True
                )
                judged = dataclasses.replace(
                    config, meaning=SparkOracle.for_table(config, settings(ansi, zone))
                )
                for a, b in pairs:
                    first = Operation(OperationKind.DELETE, predicate=a)
                    second = Operation(OperationKind.DELETE, predicate=b)
                    counts["pairs"] += 1
                    if pair_verdict(first, second, config, profile).conflict:
                        continue
                    counts["hand apart"] += 1
                    verdict = pair_verdict(first, second, judged, profile)
                    if verdict.conflict:
                        counts["hand apart, spark not"] += 1
                        print(f"ansi={ansi} zone={zone} {column} {kind}: {a!r} vs {b!r}: {verdict.reason}")
                    else:
                        counts["spark confirms"] += 1
    print(", ".join(f"{name}: {value}" for name, value in counts.items()))
    spark.stop()


if __name__ == "__main__":
    main()
