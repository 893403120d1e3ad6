"""The conformance harness's cells, run against delta-spark with forced interleavings.

delta-rs lets the harness commit from a stale table handle; delta-spark has no such handle in its public
API, so the interleaving is forced inside the second ("stale") write instead: its source DataFrame (or an
UPDATE/DELETE expression) goes through a Python UDF *gate* that waits, after delta-spark has started the
transaction and fixed its snapshot, until the first write has committed from another SparkSession. The
stale write's ``readVersion`` in its commitInfo proves the interleaving happened; an order whose stale
write has nothing to pause in (OPTIMIZE, ALTER TABLE) or read too late is reported ``not_run``
(inconclusive), never as evidence.

Everything else is the shared harness: probe writes (:func:`build_write`), table states, serial-order
matching, :func:`pair_verdict` predictions and :class:`CellResult` judgements.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from deltaguard.core.model import pair_verdict
from deltaguard.engines.errors import DeltaConflictError
from deltaguard.engines.sources import engine_table_config
from deltaguard.engines.spark.engine import SparkEngine
from deltaguard.engines.spark.errors import to_conflict_error
from deltaguard.engines.spark.sources import SparkSource
from deltaguard.engines.specs import (
    AppendSpec,
    CreateSpec,
    DeleteSpec,
    MergeSpec,
    OverwriteSpec,
    ReplaceWhereSpec,
    UpdateSpec,
    WriteContext,
)
from lab.conformance.cells import (
    Cell,
    CellResult,
    Observed,
    OrderResult,
    Prediction,
    judge_order,
)
from lab.conformance.runner import read_state
from lab.conformance.scenarios import (
    AddConstraintSpec,
    Layout,
    ProbeOp,
    ProbeWrite,
    build_write,
    seed_batches,
    seed_properties,
)
from lab.conformance.state import Outcome

#: How long a gate waits for its release, and how long the harness waits for a gate to be reached.
GATE_WAIT_S = 120.0
_names = itertools.count()


def delta_version_from_jars(jars: list[str]) -> str | None:
    """``3.2.0`` from ``.../delta-spark_2.13-3.2.0.jar`` (the version the profile must name)."""
    for jar in jars:
        match = re.search(r"delta-spark_[\d.]+(?:_[\d.]+)?-(\d+\.\d+\.\d+[\w.-]*)\.jar$", jar)
        if match:
            return match.group(1)
    return None


class Gate:
    """A pause point inside a Spark job, released from the driver (files: UDFs run in Python workers)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.reached = folder / "reached"
        self.release_file = folder / "release"
        self.name = f"deltaguard_gate_{next(_names)}"

    def function(self) -> Any:
        reached, release, wait_s = str(self.reached), str(self.release_file), GATE_WAIT_S

        def gate(value: Any) -> Any:
            import os
            import time as _time

            # Only the first call blocks: one paused task holds the job (and its transaction) open, while
            # the job's other tasks finish and free their slots for the competing write.
            try:
                os.close(os.open(reached, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return value
            deadline = _time.monotonic() + wait_s
            while not os.path.exists(release) and _time.monotonic() < deadline:
                _time.sleep(0.05)
            return value

        return gate

    def register(self, spark: Any) -> None:
        spark.udf.register(self.name, self.function(), "bigint")

    def wait_reached(self, timeout: float = GATE_WAIT_S) -> bool:
        deadline = time.monotonic() + timeout
        while not self.reached.exists():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def release(self) -> None:
        self.release_file.touch()


def gated_spec(write: ProbeWrite, spark: Any, gate: Gate) -> Any | None:
    """The stale write's spec with the gate inside it, or ``None`` when it has nothing to pause in."""
    spec = write.spec
    if isinstance(spec, AddConstraintSpec):
        return None
    # the specs with a source (the others have no such field)
    if (
        isinstance(spec, AppendSpec | MergeSpec | ReplaceWhereSpec | OverwriteSpec | CreateSpec)
        and spec.source is not None
    ):
        source = spec.source
        from pyspark.sql.functions import col, udf

        gate_udf = udf(gate.function(), "bigint")

        def build(session: Any, data: Any = source) -> Any:
            return session.createDataFrame(data).withColumn("id", gate_udf(col("id")))

        return dataclasses.replace(spec, source=SparkSource(build))
    gate.register(spark)
    if isinstance(spec, UpdateSpec):
        column, expression = next(iter(spec.updates.items()))
        return dataclasses.replace(spec, updates={**spec.updates, column: f"{gate.name}({expression})"})
    if isinstance(spec, DeleteSpec) and spec.predicate:
        # A row-level conjunct: the partition conjuncts still prune files exactly as before.
        return dataclasses.replace(spec, predicate=f"({spec.predicate}) AND {gate.name}(id) = id")
    return None


def run_write(engine: SparkEngine, uri: str, spec: Any) -> None:
    """Execute one probe spec; conflicts surface as :class:`DeltaConflictError`."""
    if isinstance(spec, AddConstraintSpec):
        spark = engine.session()
        statement = f"ALTER TABLE delta.`{uri}` ADD CONSTRAINT {spec.name} CHECK ({spec.expression})"
        try:
            spark.sql(statement)
        except Exception as exc:
            conflict = to_conflict_error(exc, uri)
            if conflict is not None:
                raise conflict from exc
            raise
        return
    engine.write(uri, spec, WriteContext())


def _latest(spark: Any, uri: str) -> int:
    """The table's version, read from its Delta log (no Spark job)."""
    from deltalake import DeltaTable as RsTable

    return int(RsTable(uri).version())


def _read_version_of_commit_after(spark: Any, uri: str, version: int) -> int | None:
    """The ``readVersion`` delta-spark recorded in the commits after ``version`` (the stale write's snapshot)."""
    from deltalake import DeltaTable as RsTable

    rows = [c for c in RsTable(uri).history() if int(c["version"]) > version]
    values = [int(c["readVersion"]) for c in rows if c.get("readVersion") is not None]
    return min(values) if values else None


class SparkGroupRunner:
    """Runs cells of one (pair, layout) on delta-spark, with two sessions of one Spark application.

    :param spark: a session with Delta's jars and extension.
    :param workdir: scratch folder for tables and gates.
    :param delta_version: the delta-spark version of the jars (for the profile).
    """

    def __init__(
        self, spark: Any, workdir: Path, delta_version: str | None = None, creator: str = "delta-spark"
    ) -> None:
        if creator not in TEMPLATE_CREATORS:
            raise ValueError(f"creator must be one of {TEMPLATE_CREATORS}, not {creator!r}")
        self.creator = creator
        self.spark = spark
        self.stale_spark = spark.newSession()  # separate SQL confs and UDF registry, same JVM
        # One session per engine (not one per write): the stale write's gate UDF is registered on its session.
        self.engine = SparkEngine(spark, delta_version=delta_version, session_per_write=False)
        self.stale_engine = SparkEngine(
            self.stale_spark, delta_version=delta_version, session_per_write=False
        )
        self.workdir = workdir
        self._runs = 0

    def _copy(self, template: Path) -> str:
        self._runs += 1
        target = self.workdir / f"run{self._runs}"
        shutil.copytree(template, target)
        return str(target)

    def template(self, layout: Layout, isolation: str | None) -> Path:
        path = self.workdir / f"seed_{layout.value}_{isolation or 'absent'}_{self.creator}"
        if not path.exists():
            first, *rest = seed_batches()
            partition_by = ("p",) if layout.partitioned else ()
            if self.creator == "delta-rs":
                # delta-rs stores any delta.isolationLevel without checking it; Spark refuses all but Serializable
                create_with_deltars(path, partition_by, seed_properties(isolation))
                return path
            create = CreateSpec(
                source=first, partition_by=partition_by, properties=seed_properties(isolation)
            )
            self.engine.write(str(path), create, WriteContext())
            for batch in rest:
                self.engine.write(str(path), AppendSpec(source=batch), WriteContext())
        return path

    def serial(self, template: Path, first: ProbeWrite, second: ProbeWrite) -> Outcome:
        uri = self._copy(template)
        committed: set[str] = set()
        for write in (first, second):
            try:
                run_write(self.engine, uri, write.spec)
                committed.add(write.role)
            except Exception:  # a write that fails serially is part of the serial outcome
                pass
        outcome = Outcome(frozenset(committed), read_state(uri))
        shutil.rmtree(uri, ignore_errors=True)
        return outcome

    def concurrent(
        self, template: Path, first: ProbeWrite, second: ProbeWrite, serial: dict[str, Outcome]
    ) -> OrderResult:
        """Start ``second``, pause it inside its transaction, commit ``first``, release ``second``."""
        order = f"{first.role},{second.role}"
        uri = self._copy(template)
        gate = Gate(self.workdir / f"gate{self._runs}")
        try:
            stale_spec = gated_spec(second, self.stale_spark, gate)
            if stale_spec is None:
                return OrderResult(
                    order, Observed.NOT_RUN, "", "cannot force: the stale write has nothing to pause in"
                )
            outcome: dict[str, Any] = {}

            def stale() -> None:
                try:
                    run_write(self.stale_engine, uri, stale_spec)
                    outcome["committed"] = True
                except BaseException as exc:  # judged on the driver thread below
                    outcome["error"] = exc

            thread = threading.Thread(target=stale, name="deltaguard-stale-write", daemon=True)
            thread.start()
            if not gate.wait_reached():
                gate.release()
                thread.join(GATE_WAIT_S)
                return OrderResult(
                    order, Observed.NOT_RUN, "", f"gate never reached: {outcome.get('error')!r}"[:300]
                )
            try:
                run_write(self.engine, uri, first.spec)
            except Exception as exc:
                gate.release()
                thread.join(GATE_WAIT_S)
                return OrderResult(order, Observed.NOT_RUN, type(exc).__name__, str(exc)[:300])
            first_version = _latest(self.spark, uri)
            gate.release()
            thread.join(GATE_WAIT_S * 2)
            if thread.is_alive():
                return OrderResult(order, Observed.NOT_RUN, "", "the stale write did not finish")
            error = outcome.get("error")
            if isinstance(error, DeltaConflictError):
                return OrderResult(order, Observed.CONFLICT, error.kind.value, error.original_message[:300])
            committed = {first.role}
            if outcome.get("committed"):
                read_version = _read_version_of_commit_after(self.spark, uri, first_version)
                if read_version is not None and read_version >= first_version:
                    return OrderResult(
                        order, Observed.NOT_RUN, "", "not interleaved: the stale write read late"
                    )
                committed.add(second.role)
            state = Outcome(frozenset(committed), read_state(uri))
        finally:
            gate.release()
            shutil.rmtree(uri, ignore_errors=True)
        return judge_order(order, state, serial, error)

    def predict(self, template: Path, a: ProbeWrite, b: ProbeWrite) -> Prediction:
        config = engine_table_config(self.engine, str(template))
        try:
            verdict = pair_verdict(a.operation, b.operation, config, self.engine.profile())
        except Exception as exc:  # a model that raises is reported, never hidden
            return Prediction(None, "model_error", f"{type(exc).__name__}: {exc}")
        return Prediction(verdict.conflict, verdict.rule, verdict.reason)

    def run(self, a_probe: ProbeOp, b_probe: ProbeOp, layout: Layout, isolation: str | None) -> CellResult:
        a = build_write(a_probe, layout, "A")
        b = build_write(b_probe, layout, "B")
        template = self.template(layout, isolation)
        serial = {"A,B": self.serial(template, a, b), "B,A": self.serial(template, b, a)}
        orders = (self.concurrent(template, a, b, serial), self.concurrent(template, b, a, serial))
        return CellResult(Cell(a_probe, b_probe, layout, isolation), self.predict(template, a, b), orders)


def create_with_deltars(path: Path, partition_by: tuple[str, ...], properties: dict[str, str]) -> None:
    """The initial table written by delta-rs (two commits), with ``properties`` as its configuration.

    :param path: where the table goes.
    :param partition_by: partition columns.
    :param properties: table properties of the first commit (stored as given: delta-rs does not validate
        ``delta.isolationLevel``).
    """
    from deltalake import write_deltalake

    first, *rest = seed_batches()
    write_deltalake(
        str(path), first, partition_by=list(partition_by) or None, configuration=properties or None
    )
    for batch in rest:
        write_deltalake(str(path), batch, mode="append")


@dataclasses.dataclass(frozen=True)
class SoloResult:
    """One read or one write alone on a fresh copy of a table (no competing write).

    :param isolation: the table's ``delta.isolationLevel`` (``None``: absent).
    :param action: ``READ`` or the probe write.
    :param observed: ``commit`` (``ok`` for a read) or ``error``.
    :param kind: the error type, if any.
    :param detail: the engine message, shortened.
    :param commit_isolation: the ``isolationLevel`` delta-spark recorded in the write's commitInfo.
    """

    isolation: str | None
    action: str
    observed: str
    kind: str = ""
    detail: str = ""
    commit_isolation: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _commit_isolation(uri: str, after: int) -> str | None:
    """The ``isolationLevel`` of the first commit after version ``after`` (from the Delta log)."""
    from deltalake import DeltaTable as RsTable

    rows = sorted(
        (c for c in RsTable(uri).history() if int(c["version"]) > after), key=lambda c: c["version"]
    )
    return str(rows[0].get("isolationLevel")) if rows and rows[0].get("isolationLevel") else None


def run_solo(
    runner: SparkGroupRunner, isolation: str | None, probes: tuple[ProbeOp, ...]
) -> list[SoloResult]:
    """A plain read, then each of ``probes`` alone, on fresh copies of the partitioned table.

    :param runner: the group runner (its template creator decides who wrote the table).
    :param isolation: the ``delta.isolationLevel`` spelling.
    :param probes: the writes to run one at a time.
    """
    from lab.conformance.cells import short_detail

    template = runner.template(Layout.PARTITIONED_SAME, isolation)
    results = []
    uri = runner._copy(template)
    try:
        rows = runner.spark.read.format("delta").load(uri).count()
        results.append(SoloResult(isolation, "READ", "ok", detail=f"{rows} rows"))
    except Exception as exc:
        results.append(SoloResult(isolation, "READ", "error", type(exc).__name__, short_detail(str(exc))))
    finally:
        shutil.rmtree(uri, ignore_errors=True)
    for probe in probes:
        write = build_write(probe, Layout.PARTITIONED_SAME, "A")
        uri = runner._copy(template)
        before = _latest(runner.spark, uri)
        try:
            run_write(runner.engine, uri, write.spec)
            results.append(
                SoloResult(isolation, probe.value, "commit", commit_isolation=_commit_isolation(uri, before))
            )
        except Exception as exc:
            kind = type(exc).__name__
            results.append(SoloResult(isolation, probe.value, "error", kind, short_detail(str(exc))))
        finally:
            shutil.rmtree(uri, ignore_errors=True)
    return results


#: Spark conf for a session writing tiny tables on a small machine. Delta rebuilds every snapshot with
#: ``snapshotPartitions`` tasks (50 by default): one is plenty for a few files. None of these settings takes
#: part in conflict detection (``ConflictChecker`` reads the winners' actions from the log).
TINY_TABLE_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "2",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
    "spark.databricks.delta.snapshotPartitions": "1",
    "spark.sql.adaptive.enabled": "false",
}

#: ``delta.isolationLevel`` spellings measured on delta-spark: absent (the default) and ``Serializable``,
#: the one level open-source Delta accepts for the property (``DeltaConfigs.ISOLATION_LEVEL``).
SPARK_SPELLINGS: tuple[str | None, ...] = (None, "Serializable")
#: who writes the initial tables: delta-spark itself, or delta-rs (which stores any isolation spelling)
TEMPLATE_CREATORS: tuple[str, ...] = ("delta-spark", "delta-rs")
#: ``delta.isolationLevel`` spellings of the ``isolation`` slice's single writes, stored by delta-rs (Spark refuses
#: to set all but Serializable): what a delta-spark writer does when it *finds* them in a table's metadata.
#: Absent and ``Serializable`` are the representative slice's (benchmarks/results/conformance_deltaspark.json).
ISOLATION_SLICE_SPELLINGS: tuple[str | None, ...] = (
    "WriteSerializable",
    "writeserializable",
    "SnapshotIsolation",
    "nonsense",
)
_SAME, _UNPART = Layout.PARTITIONED_SAME, Layout.UNPARTITIONED
#: cells of the ``isolation`` slice, most telling first: where Serializable and WriteSerializable differ on the
#: Databricks page "Isolation levels and write conflicts" (a blind INSERT against an UPDATE/DELETE/MERGE of
#: the same rows, both commit orders; the Serializable reference on a table delta-rs wrote too), a pair that
#: conflicts under both levels, and the other spellings on the first pair. (A machine shared with other
#: work runs a delta-spark write in about 30 s, so the slice stays small: 8 cells, 16 single writes.)
ISOLATION_CELLS: tuple[Cell, ...] = (
    Cell(ProbeOp.INSERT, ProbeOp.UPDATE, _SAME, "WriteSerializable"),
    Cell(ProbeOp.INSERT, ProbeOp.UPDATE, _SAME, "Serializable"),
    Cell(ProbeOp.INSERT, ProbeOp.MERGE_TARGET_FILTER, _SAME, "WriteSerializable"),
    Cell(ProbeOp.INSERT, ProbeOp.UPDATE, _UNPART, "WriteSerializable"),
    Cell(ProbeOp.INSERT, ProbeOp.DELETE, _SAME, "WriteSerializable"),
    Cell(ProbeOp.UPDATE, ProbeOp.DELETE, _SAME, "WriteSerializable"),
    Cell(ProbeOp.INSERT, ProbeOp.UPDATE, _SAME, "writeserializable"),
    Cell(ProbeOp.INSERT, ProbeOp.UPDATE, _SAME, "SnapshotIsolation"),
)
#: single writes of the ``isolation`` slice (each alone on a fresh copy, after a plain read)
SOLO_PROBES: tuple[ProbeOp, ...] = (ProbeOp.INSERT, ProbeOp.UPDATE, ProbeOp.MERGE_TARGET_FILTER)
#: a few cells for CI: compatible appends, an append against a rewrite, disjoint rewrites, same-partition MERGEs
CI_CELLS: tuple[Cell, ...] = (
    Cell(ProbeOp.INSERT, ProbeOp.INSERT, Layout.PARTITIONED_DISJOINT, None),
    Cell(ProbeOp.INSERT, ProbeOp.UPDATE, Layout.UNPARTITIONED, None),
    Cell(ProbeOp.UPDATE, ProbeOp.DELETE, Layout.PARTITIONED_DISJOINT, None),
    Cell(ProbeOp.MERGE_TARGET_FILTER, ProbeOp.MERGE_TARGET_FILTER, Layout.PARTITIONED_SAME, None),
)


def spark_cells(slice_name: str) -> list[Cell]:
    """The delta-spark cells of a slice.

    :param slice_name: ``ci`` (:data:`CI_CELLS`), ``representative`` (the
        delta-rs representative pairs, every layout, :data:`SPARK_SPELLINGS`), ``full`` (every pair) or
        ``isolation`` (:data:`ISOLATION_CELLS`, tables written by delta-rs).
    """
    from lab.conformance.cells import REPRESENTATIVE_PAIRS, all_pairs

    if slice_name == "ci":
        return list(CI_CELLS)
    if slice_name == "isolation":
        return list(ISOLATION_CELLS)
    if slice_name == "representative":
        pairs: list[tuple[ProbeOp, ProbeOp]] = list(REPRESENTATIVE_PAIRS)
    elif slice_name == "full":
        pairs = all_pairs(list(ProbeOp))
    else:
        raise ValueError(
            f"unknown slice {slice_name!r} (expected 'ci', 'representative', 'full' or 'isolation')"
        )
    order = list(ProbeOp)
    canonical = [(a, b) if order.index(a) <= order.index(b) else (b, a) for a, b in pairs]
    return [Cell(a, b, layout, iso) for iso in SPARK_SPELLINGS for a, b in canonical for layout in Layout]


def run_spark_cells(
    cells: list[Cell],
    spark: Any,
    workdir: Path,
    delta_version: str | None = None,
    progress: Any = None,
    creator: str = "delta-spark",
) -> list[CellResult]:
    """Run ``cells`` one after the other on one Spark application (two sessions of it).

    :param cells: the cells.
    :param spark: a session with Delta's jars and extension.
    :param workdir: scratch folder.
    :param delta_version: the delta-spark version of the jars (the profile the model is asked about).
    :param progress: called with ``[result]`` after each cell.
    :param creator: who writes the initial tables (:data:`TEMPLATE_CREATORS`).
    """
    runner = SparkGroupRunner(spark, workdir, delta_version, creator)
    results = []
    for cell in cells:
        try:
            result = runner.run(cell.a, cell.b, cell.layout, cell.isolation)
        except Exception as exc:  # a harness failure is reported on the cell (inconclusive), never hidden
            detail = f"{type(exc).__name__}: {exc}"[:300]
            a, b = build_write(cell.a, cell.layout, "A"), build_write(cell.b, cell.layout, "B")
            try:
                prediction = runner.predict(runner.template(cell.layout, cell.isolation), a, b)
            except Exception as again:
                prediction = Prediction(None, "model_error", f"{type(again).__name__}: {again}"[:300])
            not_run = tuple(OrderResult(order, Observed.NOT_RUN, "", detail) for order in ("A,B", "B,A"))
            result = CellResult(cell, prediction, not_run)
        results.append(result)
        if progress is not None:
            progress([result])
    return results


def delta_spark_session(workdir: Path) -> Any:
    """One small local Spark session with Delta's jars (from the install step), extension and catalog."""
    from deltaguard.engines.spark.session import worker_session
    from deltaguard.engines.spark.setup import check_delta_available

    conf = {
        **TINY_TABLE_CONF,
        "spark.driver.memory": "768m",
        "spark.sql.warehouse.dir": str(workdir / "warehouse"),
    }
    # Four task slots on two cores: a paused stale write holds one, the competing write needs the others.
    session = worker_session(master="local[4]", conf=conf, app_name="deltaguard-conformance")
    check_delta_available(session)
    return session
