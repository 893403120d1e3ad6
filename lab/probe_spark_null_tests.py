"""delta-spark against the delta-rs null-test class, and the stale-write gate's blind spot.

``python -m lab.probe_spark_null_tests`` (about 2 minutes; a local[4] Spark with Delta's jars). On a table
partitioned by a STRING ``p`` holding ``a``, ``b``, ``c`` and NULL (eight rows, two files per partition):

1. each reader DELETE of :data:`READERS` is run stale beside ``UPDATE ... WHERE p = 'b'`` in both commit orders
   through the conformance runner (the stale write paused inside its transaction by a Python UDF gate), and
   the model's verdict for delta-spark is printed beside what happened;
2. each DELETE of :data:`GATE_CHECKS` is run alone, once with the gate's conjunct (never pausing) and once
   without, and the ids left are printed: the gate is only a faithful pause where both leave the same rows.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.engines.base import WriteContext
from deltaguard.engines.discovery import read_table_config
from deltaguard.engines.specs import CreateSpec, DeleteSpec, UpdateSpec
from lab.conformance import spark_runner
from lab.conformance.scenarios import ProbeOp, ProbeWrite

#: readers whose exact reading is apart from ``p = 'b'`` only through a term a null test contradicts
READERS = ("p <> 'a' AND (p IS NULL OR p <> 'b')", "p = 'c' OR (p = 'b' AND p IS NULL)", "p = 'c'")
#: DELETEs of one and of two partitions
GATE_CHECKS = ("p = 'c'", "p IN ('a', 'c')")
ROWS = pa.table(
    {
        "id": pa.array(range(8), pa.int64()),
        "v": pa.array([0] * 8, pa.int64()),
        "p": pa.array(["a", "b", "c", None] * 2, pa.string()),
    }
)


def _ids(uri: Path) -> list[int]:
    return sorted(int(row["id"]) for row in DeltaTable(str(uri)).to_pyarrow_table().to_pylist())


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="deltaguard-spark-null-"))
    runner = spark_runner.SparkGroupRunner(spark_runner.delta_spark_session(work), work)
    template = work / "template"
    runner.engine.write(str(template), CreateSpec(source=ROWS, partition_by=("p",)), WriteContext())
    config, profile = read_table_config(str(template)), runner.engine.profile()
    writer = ProbeWrite(
        ProbeOp.UPDATE, "B", UpdateSpec({"v": "v + 1"}, "p = 'b'"), Operation(K.UPDATE, "p = 'b'")
    )
    for predicate in READERS:
        reader = ProbeWrite(
            ProbeOp.DELETE, "A", DeleteSpec(predicate=predicate), Operation(K.DELETE, predicate)
        )
        serial = {
            "A,B": runner.serial(template, reader, writer),
            "B,A": runner.serial(template, writer, reader),
        }
        orders = [
            runner.concurrent(template, reader, writer, serial),
            runner.concurrent(template, writer, reader, serial),
        ]
        verdict = pair_verdict(reader.operation, writer.operation, config, profile)
        print(
            f"DELETE WHERE {predicate} x UPDATE WHERE p = 'b': model conflict={verdict.conflict} "
            f"({verdict.rule}); "
            + ", ".join(f"{o.order} {o.observed.value} {o.kind}".strip() for o in orders),
            flush=True,
        )
    for number, predicate in enumerate(GATE_CHECKS):
        gated, plain = work / f"gated{number}", work / f"plain{number}"
        for uri in (gated, plain):
            runner.engine.write(str(uri), CreateSpec(source=ROWS, partition_by=("p",)), WriteContext())
        gate = spark_runner.Gate(work / f"gate{number}")
        gate.release()  # the conjunct stays, the pause never happens
        write = ProbeWrite(
            ProbeOp.DELETE, "A", DeleteSpec(predicate=predicate), Operation(K.DELETE, predicate)
        )
        spark_runner.run_write(
            runner.stale_engine, str(gated), spark_runner.gated_spec(write, runner.stale_spark, gate)
        )
        spark_runner.run_write(runner.stale_engine, str(plain), DeleteSpec(predicate=predicate))
        print(
            f"DELETE WHERE {predicate} alone: ids left with the gate {_ids(gated)}, without {_ids(plain)}",
            flush=True,
        )


if __name__ == "__main__":
    main()
