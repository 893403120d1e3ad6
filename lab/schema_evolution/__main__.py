"""delta-spark in one local JVM (``nice -n 15 python -m lab.schema_evolution``; five minutes on the shared
2-core machine).

Each schema-evolving write commits while a compatible INSERT of another partition, whose transaction
started first, waits at a Python UDF gate; then the INSERT commits or fails. Also measured: the two pins
the Spark engine relies on, and the version labels Spark's history gives after another writer's commit.
Prints one line per case (ADR 0035 quotes them).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the gate UDF runs in Spark's Python workers

AUTO = "spark.databricks.delta.schema.autoMerge.enabled"
SMALL = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.memory": "512m",
}


def _why(exc: BaseException) -> str:
    """The JVM exception class and Delta error lines of a failure."""
    text = str(exc)
    classes = re.findall(r"\b(?:io\.delta|org\.apache\.spark)[\w.]*(?:Exception|Error)\b", text)
    lines = " ".join(line for line in text.splitlines() if "DELTA_" in line)
    return (classes[0] if classes else type(exc).__name__) + " | " + lines[:240]


class Lab:
    """One local SparkSession and the cases run on it."""

    def __init__(self) -> None:
        from pyspark.sql import SparkSession

        from deltaguard.engines.spark.setup import delta_session_conf

        builder = SparkSession.builder.master("local[2]")
        for key, value in delta_session_conf(SMALL).items():
            builder = builder.config(key, value)
        self.spark = builder.getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")
        self.spark.sql("SELECT * FROM VALUES (1L, 'a', 'x') AS s(id, p, extra)").createOrReplaceTempView(
            "src"
        )

    def run(self, statement: str) -> None:
        self.spark.sql(statement).collect()

    def fresh(self) -> str:
        path = tempfile.mkdtemp() + "/t"
        self.run(f"CREATE TABLE delta.`{path}` (id BIGINT, p STRING) USING delta PARTITIONED BY (p)")
        self.run(f"INSERT INTO delta.`{path}` VALUES (1, 'a'), (2, 'b')")
        return path

    def columns(self, path: str) -> list[str]:
        return [f.name for f in self.spark.read.format("delta").load(path).schema.fields]

    def merge(self, path: str, evolution: str = "") -> str:
        return (
            f"MERGE {evolution}INTO delta.`{path}` t USING src s ON t.id = s.id AND t.p = 'a' AND s.p = 'a' "
            "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
        )

    def race(self, label: str, winner: Callable[[str], None]) -> None:
        """``winner`` commits while a blind INSERT into p = 'b' (started first) waits at its gate."""
        from pyspark.sql.functions import udf

        path = self.fresh()
        gates = tempfile.mkdtemp(prefix="gate")
        started, go = f"{gates}/started", f"{gates}/go"

        @udf("long")  # type: ignore[misc]
        def gate(x: int) -> int:
            import os
            import time

            open(started, "w").close()
            while not os.path.exists(go):
                time.sleep(0.05)
            return x

        name = "gate_" + os.path.basename(gates)
        self.spark.udf.register(name, gate)
        outcome: dict[str, str] = {}

        def loser() -> None:
            try:
                self.run(f"INSERT INTO delta.`{path}` SELECT {name}(id), p FROM VALUES (9L, 'b') AS s(id, p)")
                outcome["insert"] = "committed"
            except Exception as exc:
                outcome["insert"] = _why(exc)

        thread = threading.Thread(target=loser)
        thread.start()
        while not os.path.exists(started):
            time.sleep(0.05)
        try:
            winner(path)
            first = "committed"
        except Exception as exc:
            first = "failed " + _why(exc)
        open(go, "w").close()
        thread.join()
        print(f"[{label}] {first}; schema {self.columns(path)}; gated INSERT p=b -> {outcome['insert']}")

    def with_auto_merge(self, write: Callable[[str], None]) -> Callable[[str], None]:
        def run(path: str) -> None:
            self.spark.conf.set(AUTO, "true")
            try:
                write(path)
            finally:
                self.spark.conf.unset(AUTO)

        return run


def main() -> None:
    import pyspark
    from delta.tables import DeltaTable
    from deltalake import DeltaTable as RsTable

    lab = Lab()
    print("pyspark", pyspark.__version__)
    lab.race("MERGE WITH SCHEMA EVOLUTION p=a", lambda p: lab.run(lab.merge(p, "WITH SCHEMA EVOLUTION ")))
    lab.race("control: plain MERGE p=a, autoMerge off", lambda p: lab.run(lab.merge(p)))
    lab.race("autoMerge=true plain MERGE p=a", lab.with_auto_merge(lambda p: lab.run(lab.merge(p))))
    explicit = (
        "MERGE INTO delta.`{}` t USING src s ON t.id = s.id AND t.p = 'a' AND s.p = 'a' WHEN MATCHED THEN "
        "UPDATE SET t.id = s.id WHEN NOT MATCHED THEN INSERT (id, p) VALUES (s.id, s.p)"
    )
    lab.race(
        "autoMerge=true MERGE explicit columns p=a",
        lab.with_auto_merge(lambda p: lab.run(explicit.format(p))),
    )
    lab.race(
        "autoMerge=true INSERT INTO ... SELECT * FROM src p=a",
        lab.with_auto_merge(lambda p: lab.run(f"INSERT INTO delta.`{p}` SELECT * FROM src")),
    )
    lab.race(
        "DataFrame append mergeSchema=true p=a",
        lambda p: (
            lab.spark.table("src").write.format("delta").mode("append").option("mergeSchema", "true").save(p)
        ),
    )
    # the pins: autoMerge on in the Spark conf, off for one statement / mergeSchema=false on the writer
    path = lab.fresh()
    lab.spark.conf.set(AUTO, "false")
    lab.run(lab.merge(path))
    print("[pin] MERGE with autoMerge set false for the statement: schema", lab.columns(path))
    lab.spark.conf.set(AUTO, "true")
    try:
        lab.spark.table("src").write.format("delta").mode("append").option("mergeSchema", "false").save(path)
        print("[pin] append mergeSchema=false under autoMerge=true: committed, schema", lab.columns(path))
    except Exception as exc:
        print("[pin] append mergeSchema=false under autoMerge=true:", _why(exc))
    finally:
        lab.spark.conf.unset(AUTO)
    # history labels after a commit this JVM did not make
    path = lab.fresh()
    table = DeltaTable.forPath(lab.spark, path)
    before = [(r["version"], r["operation"]) for r in table.history(1).collect()]
    RsTable(path).delete("id = 1")
    after: Any = [(r["version"], r["operation"]) for r in table.history(2).collect()]
    described = lab.spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 2").collect()
    print(
        "[history] object loaded at",
        before,
        "; after another writer's DELETE: DeltaTable.history ->",
        after,
        "; DESCRIBE HISTORY ->",
        [(r["version"], r["operation"]) for r in described],
    )
    lab.spark.stop()


if __name__ == "__main__":
    main()
