"""Run a :mod:`lab.simulation.workload` for real through delta-spark on a Spark Connect server.

The Spark twin of :mod:`benchmarks.workload_tables` (same tables, same specs, same plan files and attempt
log): :class:`TimedSparkEngine` is deltaguard's :class:`~deltaguard.engines.spark.SparkEngine` whose writes hold
their planned duration **inside the Spark job**, between the snapshot the command reads and its commit.

How a write is held (:func:`held_spec`): the rows the job writes pass through a SQL function,
:data:`HOLD_FUNCTION`, a Python UDF registered for the write alone (on the Spark connection it writes
through) that returns its argument unchanged after sleeping until a deadline (the planned duration after
the job's first row reached it, :func:`hold_for`). Only the *value* expressions carry it:

* append: the appended rows' ``v`` column (``v`` -> ``deltaguard_bench_hold(v)``);
* MERGE: the source rows' ``v`` column, so the condition, the clauses and the source's keys are untouched;
* UPDATE: the assignment (``v + 3`` -> ``deltaguard_bench_hold(v + 3)``), never the predicate.

The UDF is the identity, so the rows written are the rows planned; the predicates, MERGE condition, target
partitions and the MERGE source's keys are exactly what the conflict model judged (the operators judge
the spec *before* this engine wraps it, and the scope read sees the unwrapped source). delta-spark reads the
table snapshot when the command starts (``withNewTransaction``), runs the job (which waits in the UDF) and
commits after it, so a conflicting commit in between is a real delta-spark conflict
(``ConcurrentAppendException`` & co.). Every call sleeps only for what is left until the deadline, so a
job of many rows or tasks holds the write once, not once per row.

DELETE, OPTIMIZE and ALTER TABLE have no value expression to carry the wait without changing what runs, so
the Spark benchmark draws its writes from :data:`HOLDABLE_KINDS` only (:data:`SPARK_MIX`).

The deltaguard strategy's tasks also log when the operator's lease path starts and ends around the engine
(:data:`EVENTS_SUFFIX` files): the end of validation (the last step before the lease is asked for), the
MERGE scope read, and the engine write itself; with the lease store's decision log these give the lease's
own overhead per write (:mod:`benchmarks.harness.lease_overhead`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from benchmarks.workload_tables import (
    attempt_record,
    build_spec,
    load_plan,
    log_attempt,
    planned_write,
    tagged,
)
from deltaguard.engines import specs
from deltaguard.engines.base import WriteResult
from deltaguard.engines.errors import DeltaConflictError
from deltaguard.engines.spark.engine import SparkEngine
from lab.simulation.workload import DEFAULT_MIX, BenchWrite

#: The SQL function a held write's values pass through (registered for each write on its own Spark connection).
HOLD_FUNCTION = "deltaguard_bench_hold"
#: The value column every benchmark table has (``p``, ``k``, ``v``): the one that carries the wait.
HELD_COLUMN = "v"
#: Write kinds whose duration can be held inside the Spark job without changing what the model judged.
HOLDABLE_KINDS = ("append", "merge", "merge_all", "update")
#: The delta-rs benchmark's default mix restricted to :data:`HOLDABLE_KINDS` (same relative weights).
SPARK_MIX: dict[str, float] = {kind: DEFAULT_MIX[kind] for kind in HOLDABLE_KINDS}
#: The ``spark_connect`` connection the benchmark's tasks reach the server through.
CONNECT_CONN_ID = "deltaguard_bench_spark_connect"
#: Suffix of the per-strategy file where tasks log their lease-path events.
EVENTS_SUFFIX = ".events.jsonl"


def hold_for(
    duration_s: float, marker: str, clock: Callable[[], float] = time.time, sleep: Any = time.sleep
) -> Any:
    """The identity function that first waits until ``duration_s`` after the job's first row reached it.

    Runs in Spark's Python workers (several processes, several tasks): the first call anywhere creates
    ``marker`` (``O_EXCL``) holding the deadline, every other call reads it; each call sleeps only for what
    is left, so a job of many rows or tasks holds the write once. Counting from the first row, not from the
    task's start, keeps the hold whole however long connecting and planning took before the snapshot.

    :param duration_s: the write's planned duration.
    :param marker: a path no other write uses, on a filesystem the workers share.
    """
    known: list[float] = []

    def deadline() -> float:
        if known:
            return known[0]
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            text = ""
            for _ in range(1000):  # the creator writes right after creating: wait for its few bytes
                text = Path(marker).read_text().strip()
                if text:
                    break
                sleep(0.01)
            known.append(float(text))
        else:
            value = clock() + duration_s
            try:
                os.write(fd, repr(value).encode())
            finally:
                os.close(fd)
            known.append(value)
        return known[0]

    def hold(value: Any) -> Any:
        left = deadline() - clock()
        if left > 0:
            sleep(left)
        return value

    return hold


def held_spec(spec: specs.WriteSpec) -> specs.WriteSpec:
    """``spec`` with its written values passed through :data:`HOLD_FUNCTION` (see the module docstring).

    :raises ValueError: for a spec whose duration cannot be held this way.
    """
    if isinstance(spec, specs.UpdateSpec):
        return dataclasses.replace(
            spec, updates={col: f"{HOLD_FUNCTION}({expr})" for col, expr in spec.updates.items()}
        )
    if isinstance(spec, specs.AppendSpec | specs.MergeSpec):
        from deltaguard.engines.spark.sources import SparkSource

        return dataclasses.replace(spec, source=SparkSource(functools.partial(_held_frame, spec.source)))
    raise ValueError(f"{type(spec).__name__} cannot be held inside its Spark job; use {HOLDABLE_KINDS}")


def _held_frame(source: Any, spark: Any) -> Any:
    from pyspark.sql.connect.functions import expr

    from deltaguard.engines.spark.sources import to_spark_dataframe

    frame = to_spark_dataframe(spark, source)
    return frame.withColumn(HELD_COLUMN, expr(f"{HOLD_FUNCTION}({HELD_COLUMN})"))


def events_path(attempt_log: Path) -> Path:
    """Where a strategy's lease-path events go: next to its attempt log."""
    return attempt_log.with_suffix(EVENTS_SUFFIX)


class TimedSparkEngine(SparkEngine):
    """delta-spark over Spark Connect, every write held for its planned duration inside its Spark job.

    Under deltaguard's operators it is ``engine="benchmarks.spark_workload:TimedSparkEngine"`` (its ``name``
    stays ``spark``, so the operators hand it their ``spark_connect`` connection); the write is found from
    the operator's app id (``<dag_id>.<task_id>``) in the DAG's plan.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._hold = threading.local()

    # -- lease-path events (deltaguard strategy) ---------------------------------------------------------

    def _event(self, context_write: str | None, event: str, **extra: Any) -> None:
        if not context_write:
            return
        dag_id, task_id = context_write.split(".", 1)
        _, _, log = load_plan(dag_id)
        log_attempt(
            events_path(log),
            {"write": task_id, "event": event, "at": time.time(), "pid": os.getpid(), **extra},
        )

    def validate(self, table_uri: str, spec: specs.WriteSpec, config: Any) -> None:
        """The operator's last step before it asks for the lease: logged as ``validated``."""
        super().validate(table_uri, spec, config)
        self._event(_current_task(), "validated")

    def read_source_keys(self, source: Any, columns: Collection[str], limits: Any) -> Any:
        """The MERGE scope read (before the lease), timed."""
        started = time.time()
        try:
            return super().read_source_keys(source, columns, limits)
        finally:
            self._event(_current_task(), "scope_read", started=started)

    # -- writes ------------------------------------------------------------------------------------------

    def write(self, table_uri: str, spec: specs.WriteSpec, context: specs.WriteContext) -> WriteResult:
        planned = planned_write(context)
        if planned is None:
            return super().write(table_uri, spec, context)
        dag_id, write, log = planned
        return self.timed_write(table_uri, spec, write, log, context, dag_id)

    def timed_write(
        self,
        table_uri: str,
        spec: specs.WriteSpec,
        write: BenchWrite,
        log: Path | None,
        context: specs.WriteContext | None = None,
        strategy: str = "",
    ) -> WriteResult:
        """Run ``spec`` held until its start plus ``write.duration_s``; log the attempt like the delta-rs twin.

        ``read_version`` in the log is the version before the write started (the commit's own
        ``readVersion`` in the Delta log is what the analysis uses).
        """
        started = time.time()
        holds = (log.parent if log is not None else Path(tempfile.gettempdir())) / "holds"
        holds.mkdir(parents=True, exist_ok=True)
        self._hold.value = (write.duration_s, str(holds / f"{write.id}-{uuid.uuid4().hex}"))
        read_version = self._version(table_uri)
        outcome, error = "ok", ""
        version: int | None = None
        committed = False
        try:
            result = super().write(table_uri, held_spec(spec), tagged(context, write.id))
            version, committed = result.version, result.committed and not result.duplicate
            return result
        except DeltaConflictError as exc:
            outcome, error = "conflict", f"{exc.kind.value}: {str(exc)[:200]}"
            raise
        except Exception as exc:
            outcome, error = "error", f"{type(exc).__name__}: {str(exc)[:200]}"
            raise
        finally:
            self._hold.value = None
            if log is not None:
                log_attempt(
                    log,
                    attempt_record(
                        strategy, write, started, outcome, error, read_version, version, committed
                    ),
                )

    @contextlib.contextmanager
    def _write_session(self, spark: Any) -> Iterator[Any]:
        """The write's own Spark connection, with :data:`HOLD_FUNCTION` registered for this write's hold."""
        with super()._write_session(spark) as own:
            hold = getattr(self._hold, "value", None)
            if hold is not None:
                own.udf.register(HOLD_FUNCTION, hold_for(*hold), "bigint")
            yield own

    @staticmethod
    def _version(table_uri: str) -> int | None:
        from deltalake import DeltaTable

        try:
            return int(DeltaTable(table_uri).version())
        except Exception:  # no table yet: the write reports its own error
            return None


def _current_task() -> str | None:
    """``<dag_id>.<task_id>`` of the Airflow task running in this process (``None`` outside a task)."""
    with contextlib.suppress(Exception):  # not in a task (a test, the replay): no events
        from airflow.sdk import get_current_context

        ti = get_current_context()["ti"]
        return f"{ti.dag_id}.{ti.task_id}"
    return None


def run_planned_spark_write(dag_id: str, write_id: str) -> dict[str, Any]:
    """The task body of the baseline strategies: one held write straight through delta-spark."""
    workload, uris, log = load_plan(dag_id)
    write = workload.write(write_id)
    engine = TimedSparkEngine(connect_conn_id=CONNECT_CONN_ID)
    try:
        spec = build_spec(write, workload.table(write.table))
        result = engine.timed_write(uris[write.table], spec, write, log, None, dag_id)
    finally:
        engine.close()
    return {"version": result.version, "committed": not result.duplicate}


def task_kwargs() -> Mapping[str, Any]:
    """What every deltaguard operator of the Spark benchmark gets besides the write itself."""
    return {"engine": "benchmarks.spark_workload:TimedSparkEngine", "spark_connect_conn_id": CONNECT_CONN_ID}
