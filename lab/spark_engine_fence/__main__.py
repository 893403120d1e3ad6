"""What delta-spark 4.4.0 does with application transactions of concurrent commits (ADR 0038).

``nice -n 15 .venv/bin/python -m lab.spark_engine_fence [--out FILE]``: one local JVM with the environment's
Delta jars, raw PySpark (no deltaguard engine in between). Each "stale" write starts its transaction, waits
at a Python UDF gate inside its job, a "winning" write commits meanwhile, then the stale write is released.
A write carries a ``txn`` through the writer options ``txnAppId``/``txnVersion`` (DataFrame appends and
overwrites) or the session confs ``spark.databricks.delta.write.txnAppId``/``txnVersion`` (DELETE, UPDATE,
MERGE). Also measured: which pair a write carries when it is given both, and when a write is skipped.
Prints one line per case and writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the gate UDF runs in Spark's Python workers

APP_CONF = "spark.databricks.delta.write.txnAppId"
VERSION_CONF = "spark.databricks.delta.write.txnVersion"
SMALL = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.memory": "512m",
}


def _why(exc: BaseException) -> str:
    """The Delta exception class of a failure (``ConcurrentTransactionException``, ...)."""
    text = f"{type(exc).__name__} {exc}"
    found = re.findall(
        r"\b(Concurrent\w+|DELTA_CONCURRENT_\w+|MetadataChanged\w*|ProtocolChanged\w*)\b", text
    )
    return found[0] if found else f"{type(exc).__name__}: {str(exc)[:200]}"


class Gate:
    """A pause inside a Spark job: the first row waits until the driver releases it (files)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.reached, self.release_file = folder / "reached", folder / "release"

    def function(self) -> Callable[[int], int]:
        reached, release = str(self.reached), str(self.release_file)

        def gate(value: int) -> int:
            import os as _os
            import time as _time

            try:
                _os.close(_os.open(reached, _os.O_CREAT | _os.O_EXCL | _os.O_WRONLY))
            except FileExistsError:
                return value
            deadline = _time.monotonic() + 120
            while not _os.path.exists(release) and _time.monotonic() < deadline:
                _time.sleep(0.05)
            return value

        return gate

    def wait(self) -> None:
        deadline = time.monotonic() + 120
        while not self.reached.exists():
            if time.monotonic() > deadline:
                raise TimeoutError("gate not reached")
            time.sleep(0.05)

    def release(self) -> None:
        self.release_file.touch()


def _txns(spark: Any, path: str) -> dict[str, int]:
    """appId -> version of the table's current snapshot (deltalake reads the log)."""
    from deltalake import DeltaTable

    table = DeltaTable(path)
    out: dict[str, int] = {}
    for app in ("F", "G", "OPT", "CONF"):
        version = table.transaction_version(app)
        if version is not None:
            out[app] = int(version)
    return out


def _version(path: str) -> int:
    from deltalake import DeltaTable

    return int(DeltaTable(path).version())


class Probe:
    def __init__(self, spark: Any, root: Path) -> None:
        self.spark = spark
        self.root = root
        self.count = 0

    def table(self) -> str:
        self.count += 1
        path = str(self.root / f"t{self.count}")
        self.spark.range(1, 4).selectExpr("id", "'a' AS v").write.format("delta").save(path)
        return path

    def append(
        self,
        session: Any,
        path: str,
        txn: tuple[str, int] | None,
        gate: Gate | None = None,
        mode: str = "append",
    ) -> None:
        from pyspark.sql.functions import col, udf

        df = session.range(100, 102).selectExpr("id", "'n' AS v")
        if gate is not None:
            df = df.withColumn("id", udf(gate.function(), "bigint")(col("id")))
        writer = df.write.format("delta").mode(mode)
        if txn is not None:
            writer = writer.option("txnAppId", txn[0]).option("txnVersion", str(txn[1]))
        writer.save(path)

    def dml(self, session: Any, path: str, kind: str, txn: tuple[str, int] | None, gate: Gate | None) -> None:
        predicate = "id = 1"
        if gate is not None:
            session.udf.register("probe_gate", gate.function(), "bigint")
            predicate = "probe_gate(id) = 1"
        statement = {
            "delete": f"DELETE FROM delta.`{path}` WHERE {predicate}",
            "update": f"UPDATE delta.`{path}` SET v = 'u' WHERE {predicate}",
            "merge": (
                f"MERGE INTO delta.`{path}` t USING (SELECT {'probe_gate(1)' if gate else '1'} AS id) s "
                "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = 'm'"
            ),
        }[kind]
        if txn is not None:
            session.conf.set(APP_CONF, txn[0])
            session.conf.set(VERSION_CONF, str(txn[1]))
        try:
            session.sql(statement).collect()
        finally:
            session.conf.unset(APP_CONF)
            session.conf.unset(VERSION_CONF)

    def race(
        self, name: str, stale: Callable[[Any, str, Gate], None], winner: Callable[[Any, str], None]
    ) -> dict[str, Any]:
        """``stale`` starts, pauses at its gate, ``winner`` commits, ``stale`` goes on."""
        path = self.table()
        gate = Gate(self.root / f"gate{self.count}")
        stale_session, winner_session = self.spark.newSession(), self.spark.newSession()
        caught: list[BaseException] = []

        def run() -> None:
            try:
                stale(stale_session, path, gate)
            except BaseException as exc:  # the outcome being measured
                caught.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        gate.wait()
        winner_error = None
        try:
            winner(winner_session, path)
        except BaseException as exc:
            winner_error = _why(exc)
        gate.release()
        worker.join(180)
        result = {
            "case": name,
            "winner": winner_error or "committed",
            "stale": _why(caught[0]) if caught else "committed",
            "log_version": _version(path),
            "txns": _txns(self.spark, path),
        }
        print(json.dumps(result), flush=True)
        return result

    def sequential(self, name: str, writes: list[Callable[[Any, str], None]]) -> dict[str, Any]:
        path = self.table()
        session = self.spark.newSession()
        outcomes = []
        for write in writes:
            before = _version(path)
            try:
                write(session, path)
                outcomes.append("committed" if _version(path) > before else "no commit, no error")
            except BaseException as exc:
                outcomes.append(_why(exc))
        result = {
            "case": name,
            "writes": outcomes,
            "log_version": _version(path),
            "txns": _txns(self.spark, path),
        }
        print(json.dumps(result), flush=True)
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    from deltaguard.engines.spark.session import worker_session

    spark = worker_session(master="local[3]", conf=SMALL, app_name="spark-engine-fence-probe")
    import delta
    import pyspark

    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        p = Probe(spark, Path(tmp))
        a = p.append
        results += [
            p.race(
                "append F,1 | winner append F,2",
                lambda s, t, g: a(s, t, ("F", 1), g),
                lambda s, t: a(s, t, ("F", 2)),
            ),
            p.race(
                "append F,1 | winner append G,1",
                lambda s, t, g: a(s, t, ("F", 1), g),
                lambda s, t: a(s, t, ("G", 1)),
            ),
            p.race(
                "append none | winner append F,1",
                lambda s, t, g: a(s, t, None, g),
                lambda s, t: a(s, t, ("F", 1)),
            ),
            p.race(
                "append F,5 | winner append F,1 (winner lower)",
                lambda s, t, g: a(s, t, ("F", 5), g),
                lambda s, t: a(s, t, ("F", 1)),
            ),
            p.race(
                "overwrite F,1 | winner append G,1",
                lambda s, t, g: a(s, t, ("F", 1), g, "overwrite"),
                lambda s, t: a(s, t, ("G", 1)),
            ),
            p.race(
                "overwrite F,1 | winner append F,2",
                lambda s, t, g: a(s, t, ("F", 1), g, "overwrite"),
                lambda s, t: a(s, t, ("F", 2)),
            ),
        ]
        for kind in ("delete", "update", "merge"):
            results += [
                p.race(
                    f"{kind} conf F,1 | winner append F,2",
                    lambda s, t, g, k=kind: p.dml(s, t, k, ("F", 1), g),
                    lambda s, t: a(s, t, ("F", 2)),
                ),
                p.race(
                    f"{kind} conf F,1 | winner append G,1",
                    lambda s, t, g, k=kind: p.dml(s, t, k, ("F", 1), g),
                    lambda s, t: a(s, t, ("G", 1)),
                ),
            ]
        results += [
            p.race(
                "append F,1 | winner delete conf F,2",
                lambda s, t, g: a(s, t, ("F", 1), g),
                lambda s, t: p.dml(s, t, "delete", ("F", 2), None),
            ),
            # the skip: a write whose version is at or below the log's for its app id commits nothing
            p.sequential(
                "append F,5 then append F,3 then append F,5 then append F,6",
                [lambda s, t, v=v: a(s, t, ("F", v)) for v in (5, 3, 5, 6)],
            ),
            p.sequential(
                "delete conf F,5 then update conf F,5",
                [
                    lambda s, t: p.dml(s, t, "delete", ("F", 5), None),
                    lambda s, t: p.dml(s, t, "update", ("F", 5), None),
                ],
            ),
        ]

        def both(s: Any, t: str) -> None:
            s.conf.set(APP_CONF, "CONF")
            s.conf.set(VERSION_CONF, "1")
            try:
                a(s, t, ("OPT", 1))
            finally:
                s.conf.unset(APP_CONF)
                s.conf.unset(VERSION_CONF)

        def conf_only_append(s: Any, t: str) -> None:
            s.conf.set(APP_CONF, "CONF")
            s.conf.set(VERSION_CONF, "1")
            try:
                a(s, t, None)
            finally:
                s.conf.unset(APP_CONF)
                s.conf.unset(VERSION_CONF)

        results += [
            p.sequential("append with options OPT,1 and confs CONF,1", [both]),
            p.sequential("append with confs CONF,1 only", [conf_only_append]),
        ]
    out = {
        "delta_spark": delta.__version__ if hasattr(delta, "__version__") else "",
        "pyspark": pyspark.__version__,
        "results": results,
    }
    if args.out is not None:
        args.out.write_text(json.dumps(out, indent=2) + "\n")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
