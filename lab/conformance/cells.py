"""Cells of the conformance matrix, what was observed in them, and how a cell is judged.

A cell is an unordered pair of probe writes on one layout with one isolation spelling. It is run in both
commit orders: ``A,B`` (A commits first, B commits from the stale snapshot) and ``B,A``. The engine
*allows* the pair when both orders commit and leave the table as some serial execution would. The model
is *unsound* on a cell when it says ``no_conflict`` but some order conflicted, failed or corrupted data.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from lab.conformance.scenarios import ISOLATION_SPELLINGS, Layout, ProbeOp
from lab.conformance.state import Outcome, explain_mismatch, matching_serial_order


class Observed(StrEnum):
    """What happened to the stale (second) write of one order."""

    #: committed, and the table equals a serial execution
    COMMIT = "commit"
    #: failed with a non-conflict error exactly as it fails in a serial execution
    SERIAL_FAILURE = "serial_failure"
    #: the engine raised a conflict
    CONFLICT = "conflict"
    #: committed, but the table matches neither serial order (silent corruption)
    CORRUPT = "corrupt"
    #: failed with a non-conflict error that no serial execution shows
    ERROR = "error"
    #: the first write could not even run on the fresh initial table (the cell is inconclusive)
    NOT_RUN = "not_run"


#: outcomes under which the engine lets the pair run concurrently without harm
ALLOWED: frozenset[Observed] = frozenset({Observed.COMMIT, Observed.SERIAL_FAILURE})
#: outcomes that make a ``no_conflict`` prediction unsound
HARMFUL: frozenset[Observed] = frozenset({Observed.CONFLICT, Observed.CORRUPT, Observed.ERROR})


@dataclass(frozen=True)
class Cell:
    """One unordered pair of probe writes on one layout and isolation spelling.

    :param a: the first probe write (scope ``layout.scopes()[0]``).
    :param b: the second probe write (scope ``layout.scopes()[1]``).
    :param layout: the table layout.
    :param isolation: the ``delta.isolationLevel`` value, ``None`` for absent.
    """

    a: ProbeOp
    b: ProbeOp
    layout: Layout
    isolation: str | None

    @property
    def key(self) -> str:
        return f"{self.a.value} x {self.b.value} | {self.layout.value} | {self.isolation or '(absent)'}"


@dataclass(frozen=True)
class OrderResult:
    """One commit order of a cell.

    :param order: ``"A,B"`` or ``"B,A"`` (the first named commits first).
    :param observed: what happened to the stale write.
    :param kind: the conflict kind (``ConcurrentAppend``, ...) or error type, if any.
    :param detail: the engine message or the difference to the serial orders, shortened.
    :param serial_match: the serial order the outcome is equivalent to, if any.
    """

    order: str
    observed: Observed
    kind: str = ""
    detail: str = ""
    serial_match: str | None = None


@dataclass(frozen=True)
class Prediction:
    """The conflict model's verdict for a cell.

    :param conflict: ``True``/``False``, or ``None`` when the model raised.
    :param rule: the rule identifier.
    :param reason: the rule's reason (or the model's error).
    """

    conflict: bool | None
    rule: str = ""
    reason: str = ""


#: how much of an engine message a result keeps
DETAIL_LIMIT = 300


def short_detail(text: str, limit: int = DETAIL_LIMIT) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def judge_order(
    order: str, outcome: Outcome, serial: dict[str, Outcome], error: BaseException | None
) -> OrderResult:
    """The result of one commit order whose second write did not raise a conflict.

    :param order: the order's label (``"a,b"``).
    :param outcome: what committed and the table it left.
    :param serial: the outcome of each serial order.
    :param error: what the second write raised, if anything but a conflict.
    """
    match = matching_serial_order(outcome, serial)
    if error is not None:
        observed = Observed.SERIAL_FAILURE if match else Observed.ERROR
        return OrderResult(order, observed, type(error).__name__, short_detail(str(error)), match)
    if match is None:
        return OrderResult(order, Observed.CORRUPT, "", short_detail(explain_mismatch(outcome, serial)))
    return OrderResult(order, Observed.COMMIT, "", "", match)


class JudgedPair:
    """What every judged pair shares: a prediction, the outcome of each commit order, and the judgement.

    Mixed into the result dataclasses, which declare ``prediction`` and ``orders`` themselves.
    """

    prediction: Prediction
    orders: tuple[OrderResult, ...]

    @property
    def engine_allows(self) -> bool:
        """Both orders commit (or fail as serially) and leave a serial-equivalent table."""
        return bool(self.orders) and all(o.observed in ALLOWED for o in self.orders)

    @property
    def inconclusive(self) -> bool:
        return any(o.observed is Observed.NOT_RUN for o in self.orders)

    @property
    def unsound(self) -> bool:
        """The model allowed the pair, but the engine conflicted, failed or corrupted data (or the model raised)."""
        if self.prediction.conflict is None:
            return True
        return not self.prediction.conflict and any(o.observed in HARMFUL for o in self.orders)

    def observed_summary(self) -> str:
        """``commit/conflict:ConcurrentAppend`` style text for the two orders."""
        return "/".join(o.observed.value + (f":{o.kind}" if o.kind else "") for o in self.orders)


@dataclass(frozen=True)
class CellResult(JudgedPair):
    """A cell with its prediction, both orders, and the judgement."""

    cell: Cell
    prediction: Prediction
    orders: tuple[OrderResult, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.cell.a.value,
            "b": self.cell.b.value,
            "layout": self.cell.layout.value,
            "isolation": self.cell.isolation,
            "predicted": None
            if self.prediction.conflict is None
            else ("conflict" if self.prediction.conflict else "no_conflict"),
            "rule": self.prediction.rule,
            "reason": self.prediction.reason,
            "orders": [{**asdict(o), "observed": o.observed.value} for o in self.orders],
            "engine_allows": self.engine_allows,
            "unsound": self.unsound,
            "inconclusive": self.inconclusive,
        }


def all_pairs(probes: Sequence[ProbeOp]) -> list[tuple[ProbeOp, ProbeOp]]:
    """Every unordered pair of ``probes``, each with itself included."""
    return list(itertools.combinations_with_replacement(probes, 2))


#: pairs of the representative slice: every fact the issue lists, plus the disjointness boundaries
REPRESENTATIVE_PAIRS: tuple[tuple[ProbeOp, ProbeOp], ...] = (
    (ProbeOp.INSERT, ProbeOp.INSERT),
    (ProbeOp.INSERT, ProbeOp.UPDATE),
    (ProbeOp.INSERT, ProbeOp.OPTIMIZE_COMPACT),
    (ProbeOp.INSERT, ProbeOp.ADD_CONSTRAINT),
    (ProbeOp.INSERT_READING_TARGET, ProbeOp.DELETE),
    (ProbeOp.UPDATE, ProbeOp.DELETE),
    (ProbeOp.MERGE_TARGET_FILTER, ProbeOp.MERGE_TARGET_FILTER),
    (ProbeOp.MERGE_NO_TARGET_FILTER, ProbeOp.UPDATE),
    (ProbeOp.OPTIMIZE_COMPACT, ProbeOp.OPTIMIZE_COMPACT),
    (ProbeOp.OPTIMIZE_ZORDER, ProbeOp.UPDATE),
    (ProbeOp.OPTIMIZE_COMPACT, ProbeOp.OVERWRITE),
    (ProbeOp.REPLACE_WHERE, ProbeOp.REPLACE_WHERE),
    (ProbeOp.SET_TBLPROPERTIES, ProbeOp.INSERT),
)
#: isolation spellings of the representative slice (absent, the honoured and an ignored spelling)
REPRESENTATIVE_SPELLINGS: tuple[str | None, ...] = (None, "snapshotIsolation", "SnapshotIsolation")


def generate(slice_name: str) -> list[Cell]:
    """The cells of a slice.

    :param slice_name: ``full`` (every pair x layout x spelling) or ``representative`` (a fast subset
        covering every measured fact).
    :raises ValueError: on an unknown slice name.
    """
    if slice_name == "full":
        pairs: Iterable[tuple[ProbeOp, ProbeOp]] = all_pairs(list(ProbeOp))
        spellings: Sequence[str | None] = ISOLATION_SPELLINGS
    elif slice_name == "representative":
        pairs, spellings = REPRESENTATIVE_PAIRS, REPRESENTATIVE_SPELLINGS
    else:
        raise ValueError(f"unknown slice {slice_name!r} (expected 'representative' or 'full')")
    order = list(ProbeOp)
    # a pair is unordered: name it in declaration order so slices never hold the same pair twice
    canonical = [(a, b) if order.index(a) <= order.index(b) else (b, a) for a, b in pairs]
    return [Cell(a, b, layout, iso) for a, b in canonical for layout in Layout for iso in spellings]


@dataclass(frozen=True)
class Summary:
    """Soundness and precision of the model over a set of cells.

    :param cells: cells run.
    :param unsound: cells where the model said ``no_conflict`` and the engine disagreed.
    :param engine_allowed: cells the engine allows (both orders commit, serial-equivalent).
    :param model_allowed: cells the model says ``no_conflict`` for.
    :param both_allowed: cells both allow.
    :param inconclusive: cells whose first write could not run at all.
    """

    cells: int
    unsound: int
    engine_allowed: int
    model_allowed: int
    both_allowed: int
    inconclusive: int

    @property
    def precision(self) -> float:
        """Share of the engine-allowed cells the model allows too (1.0 when the engine allows none)."""
        return self.both_allowed / self.engine_allowed if self.engine_allowed else 1.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "precision": round(self.precision, 4)}


def summarize(results: Sequence[CellResult]) -> Summary:
    """Count soundness and precision over ``results``."""
    return Summary(
        cells=len(results),
        unsound=sum(r.unsound for r in results),
        engine_allowed=sum(r.engine_allows for r in results),
        model_allowed=sum(r.prediction.conflict is False for r in results),
        both_allowed=sum(r.engine_allows and r.prediction.conflict is False for r in results),
        inconclusive=sum(r.inconclusive for r in results),
    )
