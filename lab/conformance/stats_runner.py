"""Run the statistics cells against delta-rs (ADR 0020): the same procedure as :mod:`.runner` -- two handles
on one version, one commits, the other commits from its stale snapshot, in both orders, and a commit that slips
through is compared with both serial executions -- on the layouts of :mod:`.stats_scenarios`.

The model is asked with the configuration *and file statistics* of the snapshot both writes read
(``DeltaRsEngine(file_stats=True)``). A MERGE or REPLACE WHERE is first given its source's scope by the
functions the operators call (:func:`~deltaguard.engines.merge_scope.scoped_merge`,
:func:`~deltaguard.engines.merge_scope.scoped_replace_where`): the model judges the operation of the spec
the engine then writes.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from deltaguard.core.merge_scope import ScopeLimits
from deltaguard.core.model import pair_verdict
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.errors import DeltaConflictError
from deltaguard.engines.merge_scope import scoped_merge, scoped_replace_where
from deltaguard.engines.sources import engine_table_config
from deltaguard.engines.specs import AppendSpec, CreateSpec, MergeSpec, ReplaceWhereSpec
from lab.conformance.cells import (
    JudgedPair,
    Observed,
    OrderResult,
    Prediction,
    judge_order,
    short_detail,
)
from lab.conformance.runner import read_state
from lab.conformance.state import Outcome
from lab.conformance.stats_scenarios import StatsCell, StatsLayout, StatsOp, StatsWrite, build

#: writes whose new rows come from a source whose values the model is not told
SOURCE_WRITES: frozenset[StatsOp] = frozenset(
    {StatsOp.MERGE_UPDATE, StatsOp.MERGE_INSERT_INSIDE, StatsOp.MERGE_INSERT_OUTSIDE, StatsOp.REPLACE_WHERE}
)


@dataclass(frozen=True)
class StatsResult(JudgedPair):
    """A statistics cell with its prediction and both orders."""

    cell: StatsCell
    prediction: Prediction
    orders: tuple[OrderResult, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.cell.a.value,
            "b": self.cell.b.value,
            "layout": self.cell.layout.value,
            "scopes": self.cell.scopes.value,
            "predicted": None
            if self.prediction.conflict is None
            else ("conflict" if self.prediction.conflict else "no_conflict"),
            "rule": self.prediction.rule,
            "orders": [{**asdict(o), "observed": o.observed.value} for o in self.orders],
            "engine_allows": self.engine_allows,
            "unsound": self.unsound,
        }


class StatsRunner:
    """Runs statistics cells in a scratch directory.

    :param workdir: where the scratch tables go.
    """

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.engine = DeltaRsEngine(file_stats=True)
        self._runs = 0

    def template(self, layout: StatsLayout) -> Path:
        path = self.workdir / f"seed_{layout.value}"
        if not path.exists():
            first, *rest = layout.batches()
            self.engine.write(str(path), CreateSpec(source=first, properties=layout.properties()))
            for batch in rest:
                self.engine.write(str(path), AppendSpec(source=batch))
        return path

    def _copy(self, template: Path) -> str:
        self._runs += 1
        target = self.workdir / f"run{self._runs}"
        shutil.copytree(template, target)
        return str(target)

    def serial(self, template: Path, first: StatsWrite, second: StatsWrite) -> Outcome:
        uri = self._copy(template)
        committed: set[str] = set()
        for write in (first, second):
            try:
                self.engine.write(uri, write.spec)
                committed.add(write.role)
            except Exception:  # a write that fails serially is part of the serial outcome
                pass
        outcome = Outcome(frozenset(committed), read_state(uri))
        shutil.rmtree(uri, ignore_errors=True)
        return outcome

    def concurrent(
        self, template: Path, first: StatsWrite, second: StatsWrite, serial: dict[str, Outcome]
    ) -> OrderResult:
        uri = self._copy(template)
        order = f"{first.role},{second.role}"
        try:
            winner, stale = self.engine.open_table(uri), self.engine.open_table(uri)
            try:
                self.engine.write(uri, first.spec, snapshot=winner)
            except Exception as exc:
                return OrderResult(order, Observed.NOT_RUN, type(exc).__name__, short_detail(str(exc)))
            committed = {first.role}
            error: Exception | None = None
            try:
                self.engine.write(uri, second.spec, snapshot=stale)
                committed.add(second.role)
            except DeltaConflictError as exc:
                return OrderResult(
                    order, Observed.CONFLICT, exc.kind.value, short_detail(exc.original_message)
                )
            except Exception as exc:  # judged against the serial executions below
                error = exc
            outcome = Outcome(frozenset(committed), read_state(uri))
        finally:
            shutil.rmtree(uri, ignore_errors=True)
        return judge_order(order, outcome, serial, error)

    def as_operator_builds(self, write: StatsWrite, config: TableConfig) -> StatsWrite:
        """``write`` with the spec the operator would hand the engine (its source's scope read as
        :class:`~deltaguard.operators.dml.DeltaMergeOperator` and
        :class:`~deltaguard.operators.dml.DeltaReplaceWhereOperator` read it, with their defaults) and
        that spec's operation."""
        spec = write.spec
        if isinstance(spec, MergeSpec):
            spec, _ = scoped_merge(spec, config, self.engine, limits=ScopeLimits())
        elif isinstance(spec, ReplaceWhereSpec):
            spec, _ = scoped_replace_where(spec, config, self.engine, limits=ScopeLimits())
        else:
            return write
        return dataclasses.replace(write, spec=spec, operation=spec.operation())

    def run(self, cell: StatsCell) -> StatsResult:
        day_a, day_b = cell.scopes.days()
        template = self.template(cell.layout)
        config = engine_table_config(self.engine, str(template))
        a = self.as_operator_builds(build(cell.a, day_a, "A"), config)
        b = self.as_operator_builds(build(cell.b, day_b, "B"), config)
        try:
            verdict = pair_verdict(a.operation, b.operation, config, self.engine.profile())
            prediction = Prediction(verdict.conflict, verdict.rule, verdict.reason)
        except Exception as exc:  # a model that raises is reported, never hidden
            prediction = Prediction(None, "model_error", f"{type(exc).__name__}: {exc}")
        serial = {"A,B": self.serial(template, a, b), "B,A": self.serial(template, b, a)}
        orders = (self.concurrent(template, a, b, serial), self.concurrent(template, b, a, serial))
        return StatsResult(cell, prediction, orders)


def run_chunk(cells: Sequence[StatsCell]) -> list[StatsResult]:
    """Run cells in one scratch directory (the worker-process entry point)."""
    with tempfile.TemporaryDirectory(prefix="deltaguard-stats-") as scratch:
        runner = StatsRunner(Path(scratch))
        return [runner.run(cell) for cell in cells]


def run_stats_cells(
    cells: Sequence[StatsCell], jobs: int = 1, progress: Callable[[list[StatsResult]], None] | None = None
) -> list[StatsResult]:
    """Run cells, in ``jobs`` worker processes when ``jobs > 1``; results come back in cell order.

    :param cells: the cells.
    :param jobs: worker processes.
    :param progress: called with each finished chunk's results.
    :raises ValueError: if ``jobs < 1``.
    """
    if jobs < 1:
        raise ValueError("jobs must be >= 1")
    chunks = [list(cells[i : i + 20]) for i in range(0, len(cells), 20)]
    finished: list[StatsResult] = []
    if jobs == 1:
        for chunk in chunks:
            done = run_chunk(chunk)
            finished.extend(done)
            if progress:
                progress(done)
    else:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            for done in pool.map(run_chunk, chunks):
                finished.extend(done)
                if progress:
                    progress(done)
    return finished


@dataclass(frozen=True)
class StatsSummary:
    """Figures of a run: unsound cells, and the share of the cells delta-rs runs safely the model admits."""

    cells: int
    unsound: int
    engine_allows: int
    model_allows_of_those: int
    inconclusive: int
    by_layout: dict[str, tuple[int, int]]
    #: (engine allows, model admits) over cells where neither write takes rows from a source (no MERGE, no
    #: REPLACE WHERE): what the statistics alone can decide
    without_source: tuple[int, int] = (0, 0)

    @property
    def admitted_share(self) -> float:
        return self.model_allows_of_those / self.engine_allows if self.engine_allows else 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "admitted_share": round(self.admitted_share, 4),
            "by_layout": {
                k: {"engine_allows": v[0], "model_allows": v[1]} for k, v in self.by_layout.items()
            },
        }


def summarize(results: Sequence[StatsResult]) -> StatsSummary:
    """Count unsound cells and the admitted share (overall and per layout)."""
    by_layout: dict[str, list[int]] = {}
    for r in results:
        entry = by_layout.setdefault(r.cell.layout.value, [0, 0])
        if r.engine_allows:
            entry[0] += 1
            entry[1] += int(r.prediction.conflict is False)
    allows = [r for r in results if r.engine_allows]
    plain = [r for r in allows if not ({r.cell.a, r.cell.b} & SOURCE_WRITES)]
    return StatsSummary(
        cells=len(results),
        unsound=sum(r.unsound for r in results),
        engine_allows=len(allows),
        model_allows_of_those=sum(r.prediction.conflict is False for r in allows),
        inconclusive=sum(r.inconclusive for r in results),
        by_layout={k: (v[0], v[1]) for k, v in by_layout.items()},
        without_source=(len(plain), sum(r.prediction.conflict is False for r in plain)),
    )
