"""Run cells against delta-rs: create a table, commit one write, commit the other from the stale snapshot.

Work is grouped by (pair, layout): the two serial executions (A then B, B then A) do not depend on the
isolation spelling, so they run once per group and every spelling's concurrent runs are compared with them.
Groups run in worker processes (``spawn``, so no delta-rs runtime is inherited across a fork).

:class:`GroupRunner`'s serial and stale-concurrent executions are also what the meaning fuzzer
(``lab/fuzz/meaning.py``) confirms its candidates with: any write that says its spec for a table location
(:class:`PairWrite`) can be run, and the stale write's source is read at its snapshot, before the other
commit lands, as a write that reads its source and then commits does.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from deltalake.exceptions import CommitFailedError

from deltaguard.core.decision import PairVerdict
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.conflict_messages import parse_conflict_kind
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.errors import DeltaConflictError
from deltaguard.engines.sources import engine_table_config, materialize, resolve_source
from deltaguard.engines.specs import AppendSpec, CreateSpec, MergeSpec, OverwriteSpec, ReplaceWhereSpec
from lab.conformance.cells import (
    Cell,
    CellResult,
    Observed,
    OrderResult,
    Prediction,
    judge_order,
    short_detail,
)
from lab.conformance.scenarios import (
    AddConstraintSpec,
    Layout,
    ProbeOp,
    ProbeSpec,
    ProbeWrite,
    build_write,
    seed_batches,
    seed_properties,
)
from lab.conformance.state import Outcome, TableState

#: the model under test: ``pair_verdict(a, b, table, profile)``; must be picklable (a module-level function)
Predictor = Callable[[Operation, Operation, TableConfig, EngineProfile], PairVerdict]


class PairWrite(Protocol):
    """One write of a pair the runner executes: its role (``A``/``B``) and its spec at a table location
    (each execution runs on its own copy of the table, and a source may name the table's location)."""

    @property
    def role(self) -> str: ...

    def spec_at(self, uri: str) -> ProbeSpec: ...


@dataclass(frozen=True)
class Group:
    """All cells of one (pair, layout), run together so the serial executions are shared.

    :param a: the first probe write.
    :param b: the second probe write.
    :param layout: the table layout.
    :param spellings: the isolation spellings to run.
    """

    a: ProbeOp
    b: ProbeOp
    layout: Layout
    spellings: tuple[str | None, ...]


def group_cells(cells: Sequence[Cell]) -> list[Group]:
    """Group cells by (pair, layout), keeping the order of first appearance."""
    grouped: dict[tuple[ProbeOp, ProbeOp, Layout], list[str | None]] = {}
    for cell in cells:
        grouped.setdefault((cell.a, cell.b, cell.layout), []).append(cell.isolation)
    return [Group(a, b, layout, tuple(spellings)) for (a, b, layout), spellings in grouped.items()]


def read_state(uri: str) -> TableState:
    """The table's rows, columns and properties, read fresh from its log."""
    table = DeltaTable(uri)
    try:
        data = table.to_pyarrow_table()
    except Exception:  # deltalake's pyarrow reader refuses some reader features its query engine reads
        data = pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())
    # The initial table's isolation property is the only thing that differs between the per-spelling tables and the
    # spelling-free table the serial executions run on; no probe write touches it.
    properties = {k: v for k, v in table.metadata().configuration.items() if k != "delta.isolationLevel"}
    return TableState.of(data.to_pylist(), data.column_names, properties)


class _Executor:
    """Executes probe writes through the delta-rs engine, from a given (possibly stale) handle."""

    def __init__(self, engine: DeltaRsEngine) -> None:
        self.engine = engine

    def run(
        self, uri: str, write: PairWrite, handle: DeltaTable | None, spec: ProbeSpec | None = None
    ) -> None:
        """Execute one write; conflicts surface as :class:`DeltaConflictError`.

        ADD CONSTRAINT has no engine spec, and the engine's CREATE OR REPLACE always starts from the latest
        version (it takes the URI), so both run here with the same deltalake calls on the stale handle to
        measure what delta-rs does when another commit lands between its read and its commit.
        """
        spec = write.spec_at(uri) if spec is None else spec
        try:
            if isinstance(spec, AddConstraintSpec):
                target = handle if handle is not None else DeltaTable(uri)
                target.alter.add_constraint({spec.name: spec.expression})
                return
            if isinstance(spec, CreateSpec):
                write_deltalake(
                    handle if handle is not None else uri,
                    spec.source,
                    mode="overwrite",
                    schema_mode="overwrite",
                    partition_by=list(spec.partition_by) or None,
                )
                return
        except CommitFailedError as exc:
            raise DeltaConflictError(parse_conflict_kind(str(exc)), str(exc), uri, self.engine.name) from exc
        self.engine.write(uri, spec, snapshot=handle)


def _reraise_interrupts(error: BaseException) -> None:
    """deltalake's ``PanicException`` is a ``BaseException``: it is an outcome, an interrupt is not."""
    if isinstance(error, KeyboardInterrupt | SystemExit | GeneratorExit):
        raise error


def read_source_now(spec: ProbeSpec) -> ProbeSpec:
    """``spec`` with its source read now (the engine's own reader), when it is not data in memory already.

    A write reads its source while it runs and commits afterwards: run stale, its source is read at its
    snapshot, before the concurrent commit lands (a source reading the target then sees the old rows).
    """
    if not isinstance(spec, AppendSpec | MergeSpec | ReplaceWhereSpec | OverwriteSpec | CreateSpec):
        return spec
    source: Any = spec.source
    if source is None or isinstance(source, pa.Table):
        return spec
    return dataclasses.replace(spec, source=materialize(resolve_source(source)))


def _seed(engine: DeltaRsEngine, uri: str, layout: Layout, isolation: str | None) -> None:
    first, *rest = seed_batches()
    partition_by = ("p",) if layout.partitioned else ()
    engine.write(
        uri, CreateSpec(source=first, partition_by=partition_by, properties=seed_properties(isolation))
    )
    for batch in rest:
        engine.write(uri, AppendSpec(source=batch))


class GroupRunner:
    """Runs one :class:`Group` in a scratch directory.

    :param workdir: where the scratch tables go (removed afterwards).
    :param predictor: the conflict model to judge (default: deltaguard's ``pair_verdict``).
    """

    def __init__(self, workdir: Path, predictor: Predictor = pair_verdict) -> None:
        self.workdir = workdir
        self.predictor = predictor
        self.engine = DeltaRsEngine()
        self.executor = _Executor(self.engine)
        self._runs = 0

    def _copy(self, template: Path) -> str:
        self._runs += 1
        target = self.workdir / f"run{self._runs}"
        shutil.copytree(template, target)
        return str(target)

    def _template(self, layout: Layout, isolation: str | None) -> Path:
        path = self.workdir / f"seed_{layout.value}_{isolation or 'absent'}"
        if not path.exists():
            _seed(self.engine, str(path), layout, isolation)
        return path

    def serial(self, template: Path, first: PairWrite, second: PairWrite) -> Outcome:
        """Run ``first`` then ``second``, each from the latest version, on a fresh copy."""
        uri = self._copy(template)
        committed: set[str] = set()
        for write in (first, second):
            try:
                self.executor.run(uri, write, None)
                committed.add(write.role)
            except BaseException as exc:  # a write that fails serially (a panic too) is part of the outcome
                _reraise_interrupts(exc)
        outcome = Outcome(frozenset(committed), read_state(uri))
        shutil.rmtree(uri, ignore_errors=True)
        return outcome

    def concurrent(
        self, template: Path, first: PairWrite, second: PairWrite, serial: dict[str, Outcome]
    ) -> OrderResult:
        """Open two handles at the same version, read ``second``'s source, commit ``first`` through one
        handle, then ``second`` through the other."""
        uri = self._copy(template)
        order = f"{first.role},{second.role}"
        try:
            winner, stale = self.engine.open_table(uri), self.engine.open_table(uri)
            try:
                late = read_source_now(second.spec_at(uri))
                self.executor.run(uri, first, winner)
            except BaseException as exc:  # recorded, the cell is inconclusive
                _reraise_interrupts(exc)
                return OrderResult(order, Observed.NOT_RUN, type(exc).__name__, short_detail(str(exc)))
            committed = {first.role}
            try:
                self.executor.run(uri, second, stale, late)
                committed.add(second.role)
            except DeltaConflictError as exc:
                return OrderResult(
                    order, Observed.CONFLICT, exc.kind.value, short_detail(exc.original_message)
                )
            except BaseException as exc:  # judged against the serial executions below (a panic too)
                _reraise_interrupts(exc)
                error: BaseException | None = exc
            else:
                error = None
            outcome = Outcome(frozenset(committed), read_state(uri))
        finally:
            shutil.rmtree(uri, ignore_errors=True)
        return judge_order(order, outcome, serial, error)

    def predict(self, template: Path, a: ProbeWrite, b: ProbeWrite) -> tuple[TableConfig, Prediction]:
        config = engine_table_config(self.engine, str(template))
        try:
            verdict = self.predictor(a.operation, b.operation, config, self.engine.profile())
        except Exception as exc:  # a model that raises is reported, never hidden
            return config, Prediction(None, "model_error", f"{type(exc).__name__}: {exc}")
        return config, Prediction(verdict.conflict, verdict.rule, verdict.reason)

    def run(self, group: Group) -> list[CellResult]:
        """Every spelling of one (pair, layout): serial orders once, then both concurrent orders each."""
        a = build_write(group.a, group.layout, "A")
        b = build_write(group.b, group.layout, "B")
        base = self._template(group.layout, None)
        serial = {"A,B": self.serial(base, a, b), "B,A": self.serial(base, b, a)}
        results: list[CellResult] = []
        for isolation in group.spellings:
            template = self._template(group.layout, isolation)
            _, prediction = self.predict(template, a, b)
            orders = (self.concurrent(template, a, b, serial), self.concurrent(template, b, a, serial))
            results.append(CellResult(Cell(group.a, group.b, group.layout, isolation), prediction, orders))
        return results


def run_group(group: Group, predictor: Predictor = pair_verdict) -> list[CellResult]:
    """Run one group in its own scratch directory (the worker-process entry point)."""
    with tempfile.TemporaryDirectory(prefix="deltaguard-conformance-") as scratch:
        return GroupRunner(Path(scratch), predictor).run(group)


def run_cells(
    cells: Sequence[Cell],
    jobs: int = 1,
    progress: Callable[[list[CellResult]], None] | None = None,
    predictor: Predictor = pair_verdict,
) -> list[CellResult]:
    """Run cells, in ``jobs`` worker processes when ``jobs > 1``; results come back in cell order.

    :param cells: the cells.
    :param jobs: worker processes (1 = in this process).
    :param progress: called with each finished group's results.
    :param predictor: the conflict model to judge (default: deltaguard's ``pair_verdict``).
    :raises ValueError: if ``jobs < 1``.
    """
    if jobs < 1:
        raise ValueError("jobs must be >= 1")
    groups = group_cells(cells)
    finished: list[CellResult] = []
    if jobs == 1:
        for group in groups:
            done = run_group(group, predictor)
            finished.extend(done)
            if progress:
                progress(done)
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            for done in pool.map(functools.partial(run_group, predictor=predictor), groups):
                finished.extend(done)
                if progress:
                    progress(done)
    position = {cell: index for index, cell in enumerate(cells)}
    return sorted(finished, key=lambda r: position[r.cell])
