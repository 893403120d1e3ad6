"""Late commits of a frozen delta-spark writer: refused by the engine, detected, or landed silently (ADR 0038).

The delta-spark sibling of ``bench_engine_fence.py``. One local JVM (the environment's Delta jars), real
local tables partitioned by ``day`` and a real SQLite lease store. For each operation the "late" writer
holds a lease without an idempotency pair (so its commit carries the fence app transaction) and freezes
past its TTL, played in process: the lease clock jumps and the conflicting successor (a REPLACE WHERE of
the other partition, claimed as an overwrite) is granted and commits meanwhile. Two freeze points:

* ``at_last_check``: right after the writer's last check, before its Delta transaction starts; the
  transaction then reads the successor's commit (delta-spark skips the write when the log holds its fence
  id at a higher version);
* ``inside_job``: inside the writer's Spark job (a Python UDF gate), after its transaction read the table.

Each run is counted by what happened to the late write: ``refused by fence`` (delta-spark's
``ConcurrentTransaction``), ``skipped, detected`` (delta-spark skipped it and the engine failed it),
``refused by conflict <kind>`` (another conflict check fired first), ``detected`` (it landed and the writer
failed with ``LateCommitError``), ``silent`` (it landed, or was skipped, and nobody failed). The truth is
the Delta log: whether the late write's rows or deletions are in the table.

    nice .venv/bin/python -m benchmarks.bench_engine_fence_spark --runs 5 \
        --out benchmarks/results/engine_fence_spark.json
    nice .venv/bin/python -m benchmarks.bench_engine_fence_spark --runs 5 --no-engine-fence \
        --out benchmarks/results/engine_fence_spark_off.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the gate UDF runs in Spark's Python workers

import pyarrow as pa
from deltalake import DeltaTable

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.spark.engine import SparkEngine
from deltaguard.engines.specs import (
    AppendSpec,
    CreateSpec,
    DeleteSpec,
    MergeSpec,
    OverwriteSpec,
    ReplaceWhereSpec,
    UpdateSpec,
    WriteContext,
    WriteSpec,
)
from deltaguard.exceptions import CommitFencedError, DeltaConflictError, LateCommitError
from deltaguard.leases.keeper import LeaseKeeper
from deltaguard.leases.manager import LeaseManager
from lab.conformance.scenarios import ProbeOp, ProbeWrite
from lab.conformance.spark_runner import Gate, gated_spec

SMALL = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.memory": "512m",
    "spark.sql.session.timeZone": "UTC",
}


def _rows(ids: list[int], day: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [day] * len(ids)})


def _late_ops() -> dict[str, tuple[OperationKind, ProbeOp, WriteSpec]]:
    """operation -> (lease kind, probe kind for the gate, spec); every one touches partition d1 only."""
    return {
        "append": (OperationKind.INSERT, ProbeOp.INSERT, AppendSpec(source=_rows([9], "d1"))),
        "overwrite": (OperationKind.OVERWRITE, ProbeOp.OVERWRITE, OverwriteSpec(source=_rows([9], "d1"))),
        "delete": (OperationKind.DELETE, ProbeOp.DELETE, DeleteSpec(predicate="day = 'd1' AND id = 1")),
        "update": (
            OperationKind.UPDATE,
            ProbeOp.UPDATE,
            UpdateSpec(predicate="day = 'd1' AND id = 2", updates={"id": "id + 20"}),
        ),
        "merge": (
            OperationKind.MERGE,
            ProbeOp.MERGE_TARGET_FILTER,
            MergeSpec(
                source=_rows([1], "d1"),
                condition="t.id = s.id AND t.day = 'd1'",
                matched_update={"id": "s.id + 40"},
            ),
        ),
    }


#: what the table holds once the late write alone landed (ids; d1: 1, 2; d2: 3)
LANDED = {
    "append": [1, 2, 3, 9],
    "overwrite": [9],
    "delete": [2, 3],
    "update": [1, 3, 22],
    "merge": [2, 3, 41],
}


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


ENGINE_FENCE = [True]


def _keeper(manager: LeaseManager, uri: str, kind: OperationKind, name: str) -> LeaseKeeper:
    owner = Owner(task_id=name)
    claim = TableClaim(uri, Operation(kind), EngineProfile(EngineName.DELTA_SPARK, "4.4.0"), TableConfig())
    grant = manager.acquire(LeaseRequest(claims=[claim], owner=owner, ttl_s=120))
    assert isinstance(grant, Granted), grant
    keeper = LeaseKeeper(
        manager,
        grant.lease_id,
        owner,
        expires_at=grant.expires_at,
        fencing=grant.fencing,
        clock=manager.clock,
    )
    if not ENGINE_FENCE[0]:
        keeper.fence_app_ids = None  # type: ignore[assignment,method-assign]  # engines look it up with getattr
    return keeper


def make_template(spark: Any, path: Path) -> Path:
    """The table every run starts from (copied, so each run costs only its two writes)."""
    engine = SparkEngine(spark)
    engine.write(str(path), CreateSpec(source=_rows([1, 2], "d1"), partition_by=("day",)), WriteContext())
    engine.write(str(path), AppendSpec(source=_rows([3], "d2")), WriteContext())
    return path


def one_run(spark: Any, root: Path, op: str, point: str, template: Path) -> str:
    kind, probe, spec = _late_ops()[op]
    uri = str(root / "t")
    shutil.copytree(template, uri)
    engine = SparkEngine(spark)
    # decisions stamped an hour before the storage's clock, so the grant precedes the late commit's entry
    clock = _Clock(time.time() - 3600)
    manager = LeaseManager(f"sqlite:///{root / 'leases.db'}", clock=clock)
    late = _keeper(manager, uri, kind, "late")
    successor_spec = ReplaceWhereSpec(source=_rows([3], "d2"), predicate="day = 'd2'")

    def successor_commits() -> None:
        clock.now += 300
        keeper = _keeper(manager, uri, OperationKind.OVERWRITE, "successor")
        SparkEngine(spark).write(uri, successor_spec, WriteContext(fence=keeper))

    late_engine = engine
    if point == "inside_job":
        late_engine = SparkEngine(spark.newSession(), session_per_write=False)  # the gate UDF's session
        gate = Gate(root / "gate")
        gated = gated_spec(ProbeWrite(probe, "A", spec, spec.operation()), late_engine.session(), gate)
        assert gated is not None
        spec = gated

        def release_after_successor() -> None:
            gate.wait_reached(120)
            try:
                successor_commits()
            finally:
                gate.release()

        helper = threading.Thread(target=release_after_successor)
        helper.start()
    else:
        real_check = late.check
        checks = [0]
        last = 2  # the engine's check, then the one right before the writing statement

        def check_then_freeze() -> None:
            real_check()
            checks[0] += 1
            if checks[0] == last:
                successor_commits()

        late.check = check_then_freeze  # type: ignore[method-assign]
    try:
        outcome = _outcome(lambda: late_engine.write(uri, spec, WriteContext(fence=late)))
        if point == "inside_job":
            helper.join(180)
    finally:
        manager.store.close()
    ids = sorted(r["id"] for r in DeltaTable(uri).to_pyarrow_table().to_pylist())
    before = [1, 2, 3]  # the successor rewrote d2 with the row it held
    landed = ids != before
    if ids not in (before, LANDED[op]):
        return f"unexpected: {outcome}, table {ids}"
    if not landed:
        return outcome if outcome != "committed" else "silent (reported committed, not in the table)"
    return "detected" if outcome == "late" else f"silent ({outcome})"


def _outcome(write: Any) -> str:
    try:
        write()
    except CommitFencedError as exc:
        text = str(exc)
        if "conflict checker" in text:
            return "refused by fence"
        return "skipped, detected" if "skipped" in text else "fenced before commit"
    except DeltaConflictError as exc:
        kind = exc.kind.value
        return "refused by fence" if kind == "ConcurrentTransaction" else f"refused by conflict {kind}"
    except LateCommitError:
        return "late"
    return "committed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ops", default=",".join(_late_ops()))
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--no-engine-fence", action="store_true", help="commits carry no lease fence ids")
    args = parser.parse_args(argv)
    ENGINE_FENCE[0] = not args.no_engine_fence
    from deltaguard.engines.spark.session import worker_session

    spark = worker_session(master="local[3]", conf=SMALL, app_name="bench-engine-fence-spark")
    import pyspark

    started = time.monotonic()
    template_dir = tempfile.TemporaryDirectory()
    template = make_template(spark, Path(template_dir.name) / "t")
    figures: dict[str, dict[str, dict[str, int]]] = {}
    for op in args.ops.split(","):
        for point in ("at_last_check", "inside_job"):
            counts: Counter[str] = Counter()
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory() as tmp:
                    counts[one_run(spark, Path(tmp), op, point, template)] += 1
            figures.setdefault(op, {})[point] = dict(counts)
            print(f"{op:10s} {point:14s} {dict(counts)}", flush=True)
    result = {
        "delta_spark_jars": "4.4.0",
        "pyspark": pyspark.__version__,
        "runs": args.runs,
        "engine_fence": ENGINE_FENCE[0],
        "elapsed_s": round(time.monotonic() - started, 1),
        "figures": figures,
    }
    template_dir.cleanup()
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
