"""The differential check: the conflict model's verdict on a case against what a real engine does.

For one :class:`~lab.fuzz.cases.FuzzCase`:

1. The model judges the writes as deltaguard's lease manager would: every write is classified from its SQL
   (:func:`~deltaguard.core.sql.classify.classify_sql`, the ``sql`` view) and, for writes a typed operator
   runs, also taken from the spec (``spec.operation()``, the ``spec`` view). A view allows the case when
   :func:`~deltaguard.core.model.decide` admits every write beside the others.
2. When a view allows it (and, for precision, when asked even when none does), the engine creates the
   table, runs every serial order, then every concurrent order: all writes open the same version, and
   commit one after the other from their stale snapshots.
3. The case is UNSOUND when a view said ``no_conflict`` and some concurrent order conflicted, failed in a
   way no serial order fails, or committed a table equal to no serial order (the judgement of
   :mod:`lab.conformance.cells`, with outcomes compared by :mod:`lab.conformance.state`).
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltaguard.core.model import decide
from deltaguard.core.operations import Operation
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.sql.classify import classify_sql
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.errors import DeltaConflictError
from lab.conformance.cells import ALLOWED, HARMFUL, Observed, OrderResult
from lab.conformance.state import Outcome, explain_mismatch, matching_serial_order
from lab.fuzz.cases import FuzzCase, FuzzLayout
from lab.fuzz.engine import DifferentialEngine, NotExecutable

_DETAIL_LIMIT = 400
#: exceptions that stop the run rather than describe the write; delta-rs panics surface as
#: ``pyo3_runtime.PanicException``, a ``BaseException``, and are recorded as the write's failure
#: ImportError and NameError are the harness's own faults: counting them as "the engine cannot run this
#: write" would silently skip every case.
_NOT_OURS = (KeyboardInterrupt, SystemExit, GeneratorExit, ImportError, NameError)
#: tags of a case that change what a write reads or writes beyond its predicate (finding classes use them)
RISKY_FEATURES: tuple[str, ...] = (
    "moves_rows",
    "self_read",
    "subquery_self_read",
    "not_matched_by_source",
    "triple",
)
#: the model's views of a case: the classified SQL, and the typed operators' specs
VIEWS: tuple[str, ...] = ("sql", "spec")


@dataclass(frozen=True)
class ViewVerdict:
    """The model's verdict on a case in one view.

    :param verdict: ``no_conflict``, ``conflict``, ``unclassified`` (some write cannot be classified, so
        deltaguard refuses it) or ``crash`` (the model raised something other than a one-line refusal).
    :param rules: the rules that decided.
    :param detail: the refusal or crash message.
    """

    verdict: str
    rules: tuple[str, ...] = ()
    detail: str = ""


@dataclass
class CaseResult:
    """What the check found for one case.

    :param case: the case.
    :param views: the model's verdict per view (only views that differ from ``sql`` are listed).
    :param orders: the concurrent orders run (empty when the engine did not run the case).
    :param not_executable: why the engine could not run the case, if it could not.
    :param serial: the outcome of every serial order (what a correct concurrent run must equal).
    """

    case: FuzzCase
    views: dict[str, ViewVerdict] = field(default_factory=dict)
    orders: list[OrderResult] = field(default_factory=list)
    not_executable: str = ""
    serial: dict[str, Outcome] = field(default_factory=dict)

    @property
    def allowed_by(self) -> tuple[str, ...]:
        return tuple(name for name, view in self.views.items() if view.verdict == "no_conflict")

    @property
    def crashed(self) -> bool:
        return any(view.verdict == "crash" for view in self.views.values())

    @property
    def executed(self) -> bool:
        return bool(self.orders) and not self.not_executable

    @property
    def engine_allows(self) -> bool:
        return self.executed and all(order.observed in ALLOWED for order in self.orders)

    @property
    def unsound(self) -> bool:
        return bool(self.allowed_by) and any(order.observed in HARMFUL for order in self.orders)

    def signature(self) -> str:
        """A class for the finding: the views that allowed it, the risky features of the case, and what the
        engine did (``conflict``, ``corrupt``, ``error``).

        Incidental detail (literal values, conflict kinds, the other write) is left out so that one model
        defect is one class; a case with none of the :data:`RISKY_FEATURES` is classed by its write kinds.
        """
        features = [tag for tag in RISKY_FEATURES if tag in self.case.tags()]
        if not features:
            features = ["+".join(sorted(s.kind for s in self.case.statements))]
        harmful = sorted({o.observed.value for o in self.orders if o.observed in HARMFUL})
        return f"allowed by {','.join(self.allowed_by)} | {'+'.join(features)} | {','.join(harmful)}"

    def explained_by(self, known: Iterable[str]) -> str | None:
        """The known finding class that covers this unsound result, if any.

        A class covers a result when the result was allowed by the class's views, has every one of its
        features and shows its engine outcomes: an UPDATE that also moves rows does not make a MERGE's
        known NOT MATCHED BY SOURCE defect a new one.

        :param known: finding classes (``signature()`` values) already saved.
        """
        mine = [set(part.split(sep)) for part, sep in zip(_split(self.signature()), ",+,", strict=True)]
        for signature in known:
            theirs = [set(part.split(sep)) for part, sep in zip(_split(signature), ",+,", strict=True)]
            if all(t <= m for t, m in zip(theirs, mine, strict=True)):
                return signature
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case.to_json(),
            "views": {name: vars(view) | {"rules": list(view.rules)} for name, view in self.views.items()},
            "orders": [{**vars(o), "observed": o.observed.value} for o in self.orders],
            "not_executable": self.not_executable,
            "serial": {
                order: {"committed": sorted(o.committed), "rows": list(o.state.rows)}
                for order, o in self.serial.items()
            },
            "unsound": self.unsound,
            "engine_allows": self.engine_allows,
            "tags": list(self.case.tags()),
        }


def _split(signature: str) -> list[str]:
    """The three parts of a finding class: views, features, outcomes."""
    views, features, outcomes = signature.split(" | ")
    return [views.removeprefix("allowed by "), features, outcomes]


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 3] + "..."


def judge(operations: list[Operation], table: TableConfig, profile: EngineProfile) -> ViewVerdict:
    """Admit every write beside all the others, as the lease manager would whichever arrives last.

    :param operations: the writes.
    :param table: the table configuration.
    :param profile: the engine profile.
    """
    rules: dict[str, None] = {}
    conflict = False
    for index, candidate in enumerate(operations):
        running = operations[:index] + operations[index + 1 :]
        try:
            decision = decide(candidate, running, table, profile)
        except ValueError as error:  # a one-line refusal: deltaguard refuses to admit the write
            return ViewVerdict("unclassified", (), _short(str(error)))
        except Exception as error:  # anything else is a crash of the model
            return ViewVerdict("crash", (), _short(f"{type(error).__name__}: {error}"))
        rules.update(dict.fromkeys(decision.rules))
        conflict = conflict or decision.verdict.value == "conflict"
    return ViewVerdict("conflict" if conflict else "no_conflict", tuple(rules))


def model_views(
    case: FuzzCase, engine: DifferentialEngine, table: TableConfig, profile: EngineProfile
) -> dict[str, ViewVerdict]:
    """The model's verdict in the ``sql`` view and, when any write has a spec, the ``spec`` view."""
    classified: list[Operation] = []
    for statement in case.statements:
        try:
            classified.append(classify_sql(statement.sql).operation)
        except ValueError as error:
            return {"sql": ViewVerdict("unclassified", (), _short(str(error)))}
        except Exception as error:  # the classifier must refuse with a ValueError, never crash
            return {"sql": ViewVerdict("crash", (), _short(f"{type(error).__name__}: {error}"))}
    views = {"sql": judge(classified, table, profile)}
    typed = [engine.spec_operation(s, case.layout) for s in case.statements]
    if any(op is not None for op in typed):
        views["spec"] = judge([op or c for op, c in zip(typed, classified, strict=True)], table, profile)
    return views


class DifferentialRun:
    """Runs cases on one engine in a scratch directory.

    :param engine: the engine.
    :param workdir: scratch space (tables are created and removed under it).
    """

    def __init__(self, engine: DifferentialEngine, workdir: Path) -> None:
        self.engine = engine
        self.workdir = workdir
        self._count = 0
        #: the layout of the case being checked (an overwrite keeps its partitioning)
        self.layout = FuzzLayout()

    def _fresh(self, name: str) -> str:
        self._count += 1
        return str(self.workdir / f"{name}{self._count}")

    def check(self, case: FuzzCase, run_conflicts: bool = False) -> CaseResult:
        """Judge ``case`` by the model, and run it on the engine when a view allows it.

        :param case: the case.
        :param run_conflicts: also run cases every view calls a conflict (for precision statistics).
        """
        template = self._fresh("template")
        self.layout = case.layout
        try:
            self.engine.create(template, case.layout)
            table = self.engine.table_config(template)
            result = CaseResult(case, model_views(case, self.engine, table, self.engine.profile()))
            if result.allowed_by or (run_conflicts and not result.crashed):
                self._differential(template, result)
            return result
        finally:
            _remove(template)

    def _differential(self, template: str, result: CaseResult) -> None:
        case = result.case
        roles = case.roles
        statements = dict(zip(roles, case.statements, strict=True))
        serial: dict[str, Outcome] = {}
        for order in itertools.permutations(roles):
            outcome, failed_first = self._serial(template, order, statements)
            if failed_first:
                result.not_executable = failed_first
                return
            serial[",".join(order)] = outcome
        result.serial = serial
        result.orders = [
            self._concurrent(template, order, statements, serial) for order in itertools.permutations(roles)
        ]

    def _serial(
        self, template: str, order: tuple[str, ...], statements: dict[str, Any]
    ) -> tuple[Outcome, str]:
        """Run ``order`` one write after the other; the second value says why the first write cannot run."""
        uri = self._fresh("serial")
        self.engine.copy(template, uri)
        committed: set[str] = set()
        try:
            for position, role in enumerate(order):
                try:
                    self.engine.execute(uri, statements[role], self.layout, None)
                    committed.add(role)
                except NotExecutable as error:
                    return Outcome(frozenset(), self.engine.read_state(uri)), str(error)
                except _NOT_OURS:
                    raise
                except BaseException as error:  # a serial failure is part of the serial outcome
                    if position == 0:
                        # the write fails on the untouched table: the engine cannot run it, nothing to compare
                        return Outcome(frozenset(), self.engine.read_state(uri)), _short(
                            f"{statements[role].kind} fails on the untouched table: {type(error).__name__}: {error}"
                        )
            return Outcome(frozenset(committed), self.engine.read_state(uri)), ""
        finally:
            _remove(uri)

    def _concurrent(
        self, template: str, order: tuple[str, ...], statements: dict[str, Any], serial: dict[str, Outcome]
    ) -> OrderResult:
        """Open one handle per write at the same version, then commit them in ``order``."""
        name = ",".join(order)
        uri = self._fresh("concurrent")
        self.engine.copy(template, uri)
        try:
            handles = {role: self.engine.open_snapshot(uri) for role in order}
            committed: set[str] = set()
            errors: list[tuple[str, Exception]] = []
            for position, role in enumerate(order):
                try:
                    self.engine.execute(uri, statements[role], self.layout, handles[role])
                    committed.add(role)
                except DeltaConflictError as error:
                    return OrderResult(
                        name, Observed.CONFLICT, error.kind.value, _short(error.original_message)
                    )
                except _NOT_OURS:
                    raise
                except BaseException as error:
                    if position == 0:
                        return OrderResult(name, Observed.NOT_RUN, type(error).__name__, _short(str(error)))
                    errors.append((role, error))
            outcome = Outcome(frozenset(committed), self.engine.read_state(uri))
        finally:
            _remove(uri)
        match = matching_serial_order(outcome, serial)
        if errors:
            role, error = errors[0]
            observed = Observed.SERIAL_FAILURE if match else Observed.ERROR
            return OrderResult(name, observed, type(error).__name__, _short(f"{role}: {error}"), match)
        if match is None:
            return OrderResult(name, Observed.CORRUPT, "", _short(explain_mismatch(outcome, serial)))
        return OrderResult(name, Observed.COMMIT, "", "", match)


def _remove(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def check_case(case: FuzzCase, engine: DifferentialEngine, run_conflicts: bool = False) -> CaseResult:
    """Check one case in its own scratch directory.

    :param case: the case.
    :param engine: the engine.
    :param run_conflicts: also run cases the model calls a conflict (precision statistics).
    """
    with tempfile.TemporaryDirectory(prefix="deltaguard-fuzz-") as scratch:
        return DifferentialRun(engine, Path(scratch)).check(case, run_conflicts)
