"""Run a :mod:`lab.simulation.workload` for real on Delta tables with the delta-rs engine.

* :func:`create_tables` writes each table's seed rows (a few small files per partition, so OPTIMIZE has
  something to compact);
* :func:`build_spec` turns a write into the engine spec it runs as;
* :class:`TimedDeltaRsEngine` models a long transaction: it opens the table (the write's read snapshot),
  spends the write's duration (standing in for the Spark job a real write waits on), then commits through
  that snapshot, so a commit by someone else in between produces a real Delta conflict. Every attempt is
  appended to a JSON-lines log with its start, end and outcome;
* :func:`replay_serially` and :func:`table_fingerprint` give the contents a serial execution produces.

The benchmark's DAGs find their plan (workload, table URIs, attempt log) in ``$DELTAGUARD_BENCH_DIR``,
one ``<dag_id>.json`` per strategy.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from benchmarks.harness.app_ids import parse_app_id
from deltaguard.engines import specs
from deltaguard.engines.base import WriteResult
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.errors import DeltaConflictError
from lab.simulation.workload import (
    MERGE_CONDITION,
    SEED_KEYS,
    BenchTable,
    BenchWrite,
    Workload,
    delete_predicate,
)

BENCH_DIR_ENV = "DELTAGUARD_BENCH_DIR"
SCHEMA = pa.schema([("p", pa.string()), ("k", pa.int64()), ("v", pa.int64())])
#: commitInfo key naming the benchmark write a commit belongs to (the Delta log, not the harness, orders them)
WRITE_KEY = "benchmark.write"
#: Seed commits per table (each adds one small file per partition).
SEED_COMMITS = 3


def rows(partition: str, keys: Iterable[int], value: int = 1) -> pa.Table:
    return pa.Table.from_pylist([{"p": partition, "k": k, "v": value} for k in keys], schema=SCHEMA)


def create_tables(workload: Workload, base: Path) -> dict[str, str]:
    """Create every table of ``workload`` under ``base`` (which must not hold them yet).

    :return: table name -> URI.
    :raises FileExistsError: when a table directory exists already (use a fresh directory per run).
    """
    uris: dict[str, str] = {}
    for table in workload.tables:
        path = base / table.name
        if path.exists():
            raise FileExistsError(f"{path} exists; benchmark tables are always created fresh")
        path.mkdir(parents=True)
        partitions = [f"p{j}" for j in range(table.partitions)]
        per_commit = max(1, SEED_KEYS // SEED_COMMITS)
        for commit in range(SEED_COMMITS):
            keys = range(commit * per_commit, min(SEED_KEYS, (commit + 1) * per_commit))
            data = pa.concat_tables([rows(p, keys) for p in partitions])
            write_deltalake(
                str(path),
                data,
                mode="append",
                partition_by=["p"] if table.partitioned else None,
                configuration=table.properties if commit == 0 else None,
            )
        uris[table.name] = str(path)
    return uris


def _fresh_keys(write: BenchWrite) -> list[int]:
    # keys no seed row and no other write uses
    return [1000 + write.index * 10 + i for i in range(3)]


def build_spec(write: BenchWrite, table: BenchTable) -> specs.WriteSpec:
    """The delta-rs spec of a write (its :meth:`operation` equals :func:`lab.simulation.workload.operation`)."""
    part = write.partition or "p0"
    if write.kind == "append":
        return specs.AppendSpec(
            rows(part, _fresh_keys(write), value=write.index),
            partition_values={"p": part} if table.partitioned and write.partition else {},
        )
    if write.kind in ("merge", "merge_all"):
        # one existing key (updated additively) and fresh keys (inserted)
        source = rows(part, [write.index % SEED_KEYS, *_fresh_keys(write)], value=write.index)
        return specs.MergeSpec(
            source,
            MERGE_CONDITION,
            target_partition_values={"p": part} if write.kind == "merge" and write.partition else {},
            matched_update={"v": "t.v + s.v"},
            not_matched_insert_all=True,
        )
    if write.kind == "update":
        return specs.UpdateSpec({"v": f"v + {write.index}"}, f"p = '{part}'" if write.partition else None)
    if write.kind == "delete":
        return specs.DeleteSpec(delete_predicate(write))
    if write.kind == "optimize":
        filters = {"p": part} if table.partitioned and write.partition else {}
        return specs.OptimizeSpec(partition_filters=filters)
    if write.kind == "optimize_zorder":
        return specs.OptimizeSpec(zorder_by=("k",))
    if write.kind == "add_column":
        return specs.AddColumnsSpec({f"c_{write.id}": "string"})
    raise ValueError(f"unknown write kind {write.kind!r}")


def fit_to_schema(spec: specs.WriteSpec, table: DeltaTable) -> specs.WriteSpec:
    """Pad an append's rows with null columns a schema change added since the spec was built."""
    if not isinstance(spec, specs.AppendSpec):
        return spec
    from deltaguard.engines.sources import resolve_source

    source = resolve_source(spec.source)
    if isinstance(source, pa.RecordBatchReader):
        source = source.read_all()
    target = table.schema().to_arrow()
    names = [f.name for f in target]
    missing = [n for n in names if n not in source.column_names]
    for name in missing:
        source = source.append_column(pa.field(name, pa.string()), pa.nulls(source.num_rows, pa.string()))
    return replace(spec, source=source.select(names))


# -- the plan a benchmark DAG runs ----------------------------------------------------------------------


def write_plan(path: Path, workload: Workload, uris: Mapping[str, str], attempt_log: Path) -> None:
    path.write_text(
        json.dumps({"workload": workload.to_json(), "tables": dict(uris), "attempt_log": str(attempt_log)})
    )


def load_plan(dag_id: str) -> tuple[Workload, dict[str, str], Path]:
    """The plan of a benchmark DAG: ``$DELTAGUARD_BENCH_DIR/<dag_id>.json``.

    :raises RuntimeError: when the environment variable is missing.
    """
    base = os.environ.get(BENCH_DIR_ENV)
    if not base:
        raise RuntimeError(f"${BENCH_DIR_ENV} is not set")
    data = json.loads((Path(base) / f"{dag_id}.json").read_text())
    return Workload.from_json(data["workload"]), dict(data["tables"]), Path(data["attempt_log"])


def log_attempt(path: Path, record: Mapping[str, Any]) -> None:
    # one short line per O_APPEND write: concurrent task processes do not interleave it
    line = (json.dumps(dict(record), sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def attempt_record(
    strategy: str,
    write: BenchWrite,
    started: float,
    outcome: str,
    error: str,
    read_version: int | None,
    version: int | None,
    committed: bool,
) -> dict[str, Any]:
    """One line of the attempt log: a write's try, from its start to now, with its outcome."""
    return {
        "strategy": strategy,
        "write": write.id,
        "table": write.table,
        "kind": write.kind,
        "start": started,
        "end": time.time(),
        "outcome": outcome,
        "error": error,
        "read_version": read_version,
        "version": version,
        "committed": committed,
        "pid": os.getpid(),
    }


def read_attempts(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def tagged(context: specs.WriteContext | None, write_id: str) -> specs.WriteContext:
    """``context`` with the benchmark write's id added to the commit metadata (:data:`WRITE_KEY`)."""
    context = context or specs.WriteContext()
    return replace(context, commit_metadata={**context.commit_metadata, WRITE_KEY: write_id})


def planned_write(context: specs.WriteContext | None) -> tuple[str, BenchWrite, Path | None] | None:
    """The benchmark write a task's write context names (its DAG, the write, the DAG's attempt log), found
    from the app id ``<dag_id>/<task_id>@<run>`` in the DAG's plan; ``None`` for a write outside the plan."""
    try:
        dag_id, task_id = parse_app_id((context.app_id if context else None) or "")[:2]
    except ValueError:  # no app id, or a shortened one
        return None
    if not task_id:
        return None
    workload, _, log = load_plan(dag_id)
    return dag_id, workload.write(task_id), log


class TimedDeltaRsEngine(DeltaRsEngine):
    """delta-rs, with every write held open for its planned duration between snapshot and commit.

    Under deltaguard's operators it is chosen as ``engine="benchmarks.workload_tables:TimedDeltaRsEngine"``;
    the write is found from the operator's app id (``<dag_id>.<task_id>``) in the DAG's plan.
    """

    def write(
        self,
        table_uri: str,
        spec: specs.WriteSpec,
        context: specs.WriteContext | None = None,
        *,
        snapshot: DeltaTable | None = None,
    ) -> WriteResult:
        planned = planned_write(context)
        if planned is None:
            return super().write(table_uri, spec, context, snapshot=snapshot)
        # A pinned snapshot (the operators pin the one their lease was judged for) is held for the write's
        # duration like any other: skipping it made every pinned MERGE and UPDATE take no time at all.
        dag_id, write, log = planned
        return self.timed_write(table_uri, spec, write, log, context, dag_id, snapshot=snapshot)

    def timed_write(
        self,
        table_uri: str,
        spec: specs.WriteSpec,
        write: BenchWrite,
        log: Path | None,
        context: specs.WriteContext | None = None,
        strategy: str = "",
        sleep: Any = time.sleep,
        *,
        snapshot: DeltaTable | None = None,
    ) -> WriteResult:
        """Open the snapshot (or take the pinned one), hold it for ``write.duration_s``, commit through it;
        log the attempt.

        The commit carries the write's id under :data:`WRITE_KEY`, so the order of the writes can be read
        back from the Delta log itself (:func:`delta_log_order`).

        :param snapshot: the handle to commit from (a pinned, judged snapshot); default: the newest version.
        """
        started = time.time()
        table = snapshot if snapshot is not None else self.open_table(table_uri)
        read_version = table.version()
        sleep(write.duration_s)
        outcome, error = "ok", ""
        version: int | None = None
        committed = False
        try:
            result = super().write(
                table_uri, fit_to_schema(spec, table), tagged(context, write.id), snapshot=table
            )
            version, committed = result.version, result.committed
            return result
        except DeltaConflictError as exc:
            outcome, error = "conflict", f"{exc.kind.value}: {str(exc)[:200]}"
            raise
        except Exception as exc:
            outcome, error = "error", f"{type(exc).__name__}: {str(exc)[:200]}"
            raise
        finally:
            if log is not None:
                log_attempt(
                    log,
                    attempt_record(
                        strategy, write, started, outcome, error, read_version, version, committed
                    ),
                )


def run_planned_write(dag_id: str, write_id: str) -> dict[str, Any]:
    """The task body of the baseline strategies: one timed write straight through delta-rs."""
    workload, uris, log = load_plan(dag_id)
    write = workload.write(write_id)
    table = workload.table(write.table)
    engine = TimedDeltaRsEngine()
    result = engine.timed_write(uris[write.table], build_spec(write, table), write, log, None, dag_id)
    return {"version": result.version, "committed": result.committed}


# -- what a serial execution gives ---------------------------------------------------------------------


def replay_serially(workload: Workload, order: Sequence[str], base: Path) -> dict[str, str]:
    """Create fresh tables under ``base`` and run the writes one by one, in ``order``, without waiting.

    :param order: write ids; writes not named run afterwards in workload order.
    :return: table name -> URI.
    """
    uris = create_tables(workload, base)
    engine = DeltaRsEngine()
    named = [workload.write(w) for w in order]
    rest = [w for w in workload.writes if w.id not in set(order)]
    for write in [*named, *rest]:
        table = workload.table(write.table)
        handle = engine.open_table(uris[write.table])
        engine.write(
            uris[write.table], fit_to_schema(build_spec(write, table), handle), None, snapshot=handle
        )
    return uris


def table_fingerprint(uri: str) -> str:
    """A digest of a table's rows (order-free) and column names; file layout does not matter."""
    data = DeltaTable(uri).to_pyarrow_table()
    names = sorted(data.column_names)
    lines = sorted(json.dumps([row[n] for n in names], default=str) for row in data.select(names).to_pylist())
    digest = hashlib.sha256(json.dumps(names).encode())
    for line in lines:
        digest.update(line.encode())
    return digest.hexdigest()
