"""The delta-rs facts ADR 0003 lists, each checked against measurements (never assumed).

Most facts are read off the cell matrix of a run; two need their own probe because they are about retries,
not about pairs: delta-rs silently rebases a non-conflicting stale commit, and OPTIMIZE ignores
``max_commit_retries``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deltaguard.engines.errors import ConflictKind, DeltaConflictError
from deltaguard.engines.specs import AppendSpec, CreateSpec, OptimizeSpec, WriteContext
from lab.conformance.cells import CellResult, Observed
from lab.conformance.scenarios import Layout, ProbeOp, rows


@dataclass(frozen=True)
class Fact:
    """One claim and whether the measurements support it.

    :param name: a stable identifier.
    :param claim: the claim in words.
    :param holds: ``True``/``False``, or ``None`` when the run did not measure it (a slice without the cells).
    :param evidence: what was observed.
    """

    name: str
    claim: str
    holds: bool | None
    evidence: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "claim": self.claim, "holds": self.holds, "evidence": self.evidence}


class _Index:
    def __init__(self, results: Sequence[CellResult]) -> None:
        self.cells = {(r.cell.a, r.cell.b, r.cell.layout, r.cell.isolation): r for r in results}
        self.results = results

    def get(self, a: ProbeOp, b: ProbeOp, layout: Layout, isolation: str | None = None) -> CellResult | None:
        return self.cells.get((a, b, layout, isolation)) or self.cells.get((b, a, layout, isolation))


def _order(result: CellResult, first: ProbeOp) -> Observed:
    """What happened when ``first`` committed first (the stale write was the other one)."""
    role = "A" if result.cell.a is first else "B"
    return next(o.observed for o in result.orders if o.order.startswith(role))


def _fact(name: str, claim: str, cells: Sequence[CellResult | None], check: Callable[[], bool]) -> Fact:
    present = [c for c in cells if c is not None]
    if len(present) != len(cells):
        return Fact(name, claim, None, "not measured in this slice")
    evidence = "; ".join(f"{c.cell.key}: {c.observed_summary()}" for c in present)
    return Fact(name, claim, check(), evidence)


def facts_from_cells(results: Sequence[CellResult]) -> list[Fact]:
    """Check the issue's facts against a run's cells (absent isolation unless the fact is about it)."""
    idx = _Index(results)
    P, L = ProbeOp, Layout
    facts: list[Fact] = []

    # every OPTIMIZE x OPTIMIZE cell on the same files that the slice measured (compact, z-order, mixed)
    same: list[CellResult | None] = [
        cell
        for a, b in (
            (P.OPTIMIZE_COMPACT, P.OPTIMIZE_COMPACT),
            (P.OPTIMIZE_ZORDER, P.OPTIMIZE_ZORDER),
            (P.OPTIMIZE_COMPACT, P.OPTIMIZE_ZORDER),
        )
        for layout in (L.PARTITIONED_SAME, L.UNPARTITIONED)
        if (cell := idx.get(a, b, layout)) is not None
    ]
    same = same or [None]  # nothing measured: the fact reports "not measured"
    facts.append(
        _fact(
            "optimize_optimize_duplicates",
            "two concurrent OPTIMIZEs of the same files both commit and duplicate rows",
            same,
            lambda: all(
                c is not None and all(o.observed is Observed.CORRUPT for o in c.orders) for c in same
            ),
        )
    )
    overwrite = idx.get(P.OPTIMIZE_COMPACT, P.OVERWRITE, L.PARTITIONED_SAME)
    facts.append(
        _fact(
            "optimize_then_overwrite_keeps_rows",
            "OPTIMIZE followed by a concurrent full OVERWRITE commits and leaves the compacted rows in place",
            [overwrite],
            lambda: overwrite is not None and _order(overwrite, P.OPTIMIZE_COMPACT) is Observed.CORRUPT,
        )
    )
    constraint = idx.get(P.INSERT, P.ADD_CONSTRAINT, L.UNPARTITIONED)
    facts.append(
        _fact(
            "constraint_over_violating_append",
            "ADD CONSTRAINT commits over a concurrent append that violates it",
            [constraint],
            lambda: constraint is not None and _order(constraint, P.INSERT) is Observed.CORRUPT,
        )
    )
    spellings = (
        "Serializable",
        "WriteSerializable",
        "writeSerializable",
        "snapshotIsolation",
        "SnapshotIsolation",
    )
    pairs = [(r.cell.a, r.cell.b, r.cell.layout) for r in results if r.cell.isolation is None]
    measured = [
        (key, iso, idx.get(*key, isolation=iso))
        for key in pairs
        for iso in spellings
        if idx.get(*key, isolation=iso) is not None
    ]

    def behaves_like_absent(iso: str) -> bool:
        return all(
            _signature(cell) == _signature(idx.get(*key))
            for key, spelling, cell in measured
            if spelling == iso and cell is not None
        )

    covered = {iso for _, iso, _ in measured}
    facts.append(
        Fact(
            "isolation_camel_case_only",
            "delta.isolationLevel is honoured only in camelCase: snapshotIsolation changes outcomes, while "
            "Serializable, WriteSerializable, SnapshotIsolation (and writeSerializable, since no delta-rs append is "
            "blind) behave exactly as an absent property",
            None
            if not {"snapshotIsolation", "SnapshotIsolation"} <= covered
            else (
                not behaves_like_absent("snapshotIsolation")
                and all(behaves_like_absent(iso) for iso in covered - {"snapshotIsolation"})
            ),
            "spellings measured: "
            + ", ".join(sorted(covered))
            + "; per spelling, same outcomes as absent: "
            + ", ".join(f"{iso}={behaves_like_absent(iso)}" for iso in sorted(covered)),
        )
    )
    blind = idx.get(P.INSERT, P.UPDATE, L.PARTITIONED_DISJOINT)
    facts.append(
        _fact(
            "appends_never_blind",
            "an append conflicts with a concurrent rewrite even in another partition",
            [blind],
            lambda: blind is not None and _order(blind, P.UPDATE) is Observed.CONFLICT,
        )
    )
    disjoint = idx.get(P.UPDATE, P.DELETE, L.PARTITIONED_DISJOINT)
    facts.append(
        _fact(
            "disjoint_partitions_commit",
            "rewrites with disjoint partition predicates both commit",
            [disjoint],
            lambda: disjoint is not None and disjoint.engine_allows,
        )
    )
    merge = idx.get(P.MERGE_NO_TARGET_FILTER, P.UPDATE, L.PARTITIONED_DISJOINT)
    facts.append(
        _fact(
            "merge_without_target_filter_reads_all",
            "a MERGE without an explicit target filter conflicts with a rewrite of another partition",
            [merge],
            lambda: merge is not None and any(o.observed is Observed.CONFLICT for o in merge.orders),
        )
    )
    conflicts = [o for r in results for o in r.orders if o.observed is Observed.CONFLICT]
    errors = [o for r in results for o in r.orders if o.observed is Observed.ERROR]
    facts.append(
        Fact(
            "conflicts_are_commit_failed",
            "every conflict is a CommitFailedError whose message names a known conflict kind",
            bool(conflicts) and not errors and all(o.kind != ConflictKind.UNKNOWN.value for o in conflicts),
            f"{len(conflicts)} conflicts, kinds: "
            + ", ".join(sorted({o.kind for o in conflicts}))
            + f"; {len(errors)} other errors",
        )
    )
    return facts


def _signature(cell: CellResult | None) -> tuple[tuple[str, str], ...]:
    if cell is None:
        return ()
    return tuple((o.observed.value, o.kind) for o in cell.orders)


def probe_retries() -> list[Fact]:
    """Probe silent rebasing and ``max_commit_retries``; an engine failure is reported, never raised."""
    try:
        return _probe_retries()
    except Exception as exc:  # a broken probe must not discard a run's results
        evidence = f"probe failed: {type(exc).__name__}: {exc}"
        return [
            Fact(
                "silent_rebase",
                "a stale commit that conflicts with nothing is silently rebased",
                None,
                evidence,
            ),
            Fact(
                "optimize_ignores_max_commit_retries", "OPTIMIZE ignores max_commit_retries", None, evidence
            ),
        ]


def _probe_retries() -> list[Fact]:
    """Probe silent rebasing and ``max_commit_retries`` with a stale append and a stale OPTIMIZE."""
    from deltaguard.engines.deltars.engine import DeltaRsEngine

    engine = DeltaRsEngine()
    outcomes: dict[tuple[str, int | None], str] = {}
    with tempfile.TemporaryDirectory(prefix="deltaguard-retries-") as scratch:
        for n, (second, retries) in enumerate([("append", None), ("append", 0), ("optimize", 0)]):
            uri = str(Path(scratch) / f"t{n}")
            engine.write(uri, CreateSpec(source=rows([1, 2], "a")))
            engine.write(uri, AppendSpec(source=rows([3], "a")))
            winner, stale = engine.open_table(uri), engine.open_table(uri)
            engine.write(uri, AppendSpec(source=rows([10], "a")), snapshot=winner)
            spec = AppendSpec(source=rows([11], "a")) if second == "append" else OptimizeSpec()
            try:
                result = engine.write(uri, spec, WriteContext(max_commit_retries=retries), snapshot=stale)
                outcomes[(second, retries)] = f"committed v{result.version}"
            except DeltaConflictError as exc:
                outcomes[(second, retries)] = f"conflict {exc.kind.value}"
    rebase = outcomes[("append", None)]
    no_retry = outcomes[("append", 0)]
    optimize = outcomes[("optimize", 0)]
    return [
        Fact(
            "silent_rebase",
            "a stale commit that conflicts with nothing is silently rebased onto the newer version",
            rebase == "committed v3",
            f"stale append after a concurrent append: {rebase}; with max_commit_retries=0: {no_retry}",
        ),
        Fact(
            "optimize_ignores_max_commit_retries",
            "OPTIMIZE ignores max_commit_retries (a stale append with 0 retries fails, a stale OPTIMIZE commits)",
            no_retry == f"conflict {ConflictKind.RETRIES_EXHAUSTED.value}"
            and optimize.startswith("committed"),
            f"append with max_commit_retries=0: {no_retry}; OPTIMIZE with max_commit_retries=0: {optimize}",
        ),
    ]
