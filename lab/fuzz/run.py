"""Long differential fuzzing runs: rounds of hypothesis examples until a time budget is spent.

Each round is a hypothesis run of a few dozen examples from its own seed. When a case is unsound,
hypothesis shrinks it; the shrunk case is saved (one JSON file per finding class) and its class is then
treated as known, so later rounds look for other classes instead of finding the same one again. Model
crashes on hostile input are fuzzed alongside (no engine needed) and saved the same way.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lab.fuzz.cases import FuzzCase
from lab.fuzz.check import CaseResult, DifferentialRun
from lab.fuzz.engine import DifferentialEngine


class _Finding(Exception):
    """Raised inside a hypothesis example so that hypothesis shrinks the case."""


@dataclass
class FuzzStats:
    """What a run saw; ``to_json`` is the summary ``python -m lab.fuzz`` prints.

    Counts are over distinct cases (shrinking re-runs cases; each is counted once).
    """

    cases: int = 0
    triples: int = 0
    executed: int = 0
    not_executable: Counter[str] = field(default_factory=Counter)
    model_allowed: int = 0
    #: allowed cases where per-file statistics decided some pair (ADR 0020)
    allowed_by_file_stats: int = 0
    model_conflict_executed: int = 0
    model_conflict_engine_allowed: int = 0
    engine_allowed: int = 0
    both_allowed: int = 0
    unclassified: int = 0
    unsound: int = 0
    unsound_classes: dict[str, dict[str, Any]] = field(default_factory=dict)
    unsound_signatures: Counter[str] = field(default_factory=Counter)
    crashes: dict[str, dict[str, Any]] = field(default_factory=dict)
    hostile_inputs: int = 0
    statement_kinds: Counter[str] = field(default_factory=Counter)
    saved: list[str] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def add(self, result: CaseResult) -> None:
        key = json.dumps(result.case.to_json(), sort_keys=True)
        if key in self._seen:
            return
        self._seen.add(key)
        self.cases += 1
        self.triples += len(result.case.statements) > 2
        self.statement_kinds.update(s.kind for s in result.case.statements)
        self.unclassified += any(v.verdict == "unclassified" for v in result.views.values())
        allowed = bool(result.allowed_by)
        self.model_allowed += allowed
        self.allowed_by_file_stats += any(
            v.verdict == "no_conflict" and "deltars.file_stats_disjoint" in v.rules
            for v in result.views.values()
        )
        if result.not_executable:
            self.not_executable[_reason_class(result.not_executable)] += 1
        if result.executed:
            self.executed += 1
            self.engine_allowed += result.engine_allows
            self.both_allowed += result.engine_allows and allowed
            if not allowed:
                self.model_conflict_executed += 1
                self.model_conflict_engine_allowed += result.engine_allows
        if result.unsound:
            self.unsound += 1
            self.unsound_signatures[result.signature()] += 1
        if result.crashed:
            detail = next(v.detail for v in result.views.values() if v.verdict == "crash")
            self.crashes.setdefault(detail.split(":")[0], {"count": 0, "example": detail})["count"] += 1

    def to_json(self) -> dict[str, Any]:
        precision = self.both_allowed / self.engine_allowed if self.engine_allowed else 1.0
        return {
            "cases_generated": self.cases,
            "triples": self.triples,
            "executed_differentially": self.executed,
            "not_executable": dict(self.not_executable.most_common()),
            "model_no_conflict": self.model_allowed,
            "model_no_conflict_by_file_stats": self.allowed_by_file_stats,
            "unclassified": self.unclassified,
            "unsound_cases": self.unsound,
            "unsound_classes": self.unsound_classes,
            "crashes": self.crashes,
            "hostile_inputs": self.hostile_inputs,
            "precision": {
                "engine_allowed": self.engine_allowed,
                "model_and_engine_allowed": self.both_allowed,
                "precision": round(precision, 4),
                "model_conflict_cases_run": self.model_conflict_executed,
                "model_conflict_but_engine_allowed": self.model_conflict_engine_allowed,
            },
            "statement_kinds": dict(self.statement_kinds.most_common()),
            "saved": self.saved,
        }


def _reason_class(reason: str) -> str:
    """``no translation`` / ``fails on the untouched table: DeltaError`` style buckets for not-executable cases."""
    if "no translation" in reason:
        return reason.split(" (")[0]
    if "fails on the untouched table" in reason:
        head, _, rest = reason.partition(": ")
        return f"{head}: {rest.split(':')[0]}"
    return reason[:80]


def save_case(directory: Path, result: CaseResult, engine: str, extra: dict[str, Any] | None = None) -> Path:
    """Write one failing case as JSON (named by a hash of its content) and return the path.

    :param directory: where regression cases live.
    :param result: the checked case.
    :param engine: the engine name it failed on.
    :param extra: more keys for the file (e.g. the finding class).
    """
    directory.mkdir(parents=True, exist_ok=True)
    body = {"engine": engine, "signature": result.signature(), **(extra or {}), **result.to_json()}
    digest = hashlib.sha256(json.dumps(body["case"], sort_keys=True).encode()).hexdigest()[:12]
    path = directory / f"unsound-{digest}.json"
    path.write_text(json.dumps(body, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    return path


def fuzz(
    engine: DifferentialEngine,
    workdir: Path,
    minutes: float,
    seed: int,
    out_dir: Path | None,
    examples_per_round: int = 25,
    run_conflicts: bool = True,
    progress: Callable[[str], None] | None = None,
    strategy: Any = None,
    hostile_examples: int = 10,
    known_classes: tuple[str, ...] = (),
) -> FuzzStats:
    """Fuzz until ``minutes`` have passed; return the statistics.

    :param engine: the engine to measure.
    :param workdir: scratch space for tables.
    :param minutes: the time budget (a round that is shrinking may overrun it by its shrink time).
    :param seed: the first round's seed; round ``n`` uses ``seed + n``.
    :param out_dir: where shrunk failing cases are saved (``None``: not saved).
    :param examples_per_round: hypothesis examples per round.
    :param run_conflicts: also run cases the model calls a conflict (precision statistics).
    :param progress: called with one line per round.
    :param strategy: the hypothesis strategy of cases (default: :func:`fuzz_strategies.cases`).
    :param hostile_examples: hostile ``deltaguard check`` inputs per round (0: none).
    :param known_classes: finding classes already saved; cases they cover are counted, not saved again.
    """
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as with_seed

    from lab.fuzz.strategies import cases, hostile_documents

    stats = FuzzStats()
    deadline = time.monotonic() + minutes * 60
    run = DifferentialRun(engine, workdir)
    known: set[str] = set(known_classes)
    round_number = 0
    #: the unsound results of the current round; hypothesis replays the shrunk example last
    last: list[CaseResult] = []
    while time.monotonic() < deadline:
        last.clear()
        config = settings(
            max_examples=examples_per_round,
            deadline=None,
            database=None,
            report_multiple_bugs=False,
            suppress_health_check=list(HealthCheck),
            phases=(Phase.generate, Phase.shrink),
            print_blob=False,
        )

        @config
        @with_seed(seed + round_number)
        @given(strategy if strategy is not None else cases())
        def probe(case: FuzzCase) -> None:
            result = run.check(case, run_conflicts)
            stats.add(result)
            if result.unsound and result.explained_by(known) is None:
                last.append(result)
                raise _Finding(result.signature())

        try:
            probe()
        except _Finding:
            found = last[-1]
            signature = found.signature()
            known.add(signature)
            entry = {
                "count": 1,
                "tags": list(found.case.tags()),
                "statements": [s.sql for s in found.case.statements],
            }
            entry["layout"] = found.case.layout.describe()
            stats.unsound_classes[signature] = entry
            if out_dir is not None:
                stats.saved.append(
                    str(save_case(out_dir, found, engine.name, {"class": signature, "status": "open"}))
                )
            if progress:
                progress(f"round {round_number}: UNSOUND {signature}")
        if hostile_examples:
            _hostile_round(stats, seed + round_number, hostile_documents, hostile_examples)
        round_number += 1
        if progress:
            progress(
                f"round {round_number}: {stats.cases} cases, {stats.executed} executed, {stats.unsound} unsound"
            )
    for signature, entry in stats.unsound_classes.items():
        entry["count"] = stats.unsound_signatures[signature]
    return stats


def crash_site(error: BaseException) -> str:
    """``file.py:function`` of the innermost frame of ``error``'s traceback (where the crash happened)."""
    import os
    import traceback

    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return "?"
    frame = frames[-1]
    return f"{os.path.basename(frame.filename)}:{frame.name}"


def check_text(text: str) -> int:
    """Run ``deltaguard check`` on JSON text in this process (output discarded); return its exit code.

    :raises Exception: whatever the command lets escape (which would be a traceback for a user).
    """
    import contextlib
    import io
    import tempfile

    from deltaguard.cli import main

    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            return main(["check", handle.name])


def _hostile_round(stats: FuzzStats, seed: int, documents: Any, examples: int = 20) -> None:
    """Feed hostile ``deltaguard check`` documents to the model; any non-``ValueError`` is a crash."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as with_seed

    from deltaguard.commands.check import check_documents

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @with_seed(seed)
    @given(documents())
    def probe(document: Any) -> None:
        stats.hostile_inputs += 1
        try:
            if isinstance(document, str):
                check_text(document)
            else:
                check_documents(document)
        except ValueError:
            pass  # a one-line refusal is the documented behaviour
        except Exception as error:  # any other exception would be a traceback from `deltaguard check`
            shown = document if isinstance(document, str) else json.dumps(document)
            entry = stats.crashes.setdefault(
                f"check:{type(error).__name__} in {crash_site(error)}",
                {
                    "count": 0,
                    "error": f"{type(error).__name__}: {str(error)[:200]}",
                    "input_chars": len(shown),
                },
            )
            entry["count"] += 1
            entry.setdefault("input_start", shown[:160])

    probe()
