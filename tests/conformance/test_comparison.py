"""The serial-equivalence check and the cell judgement, on hand-made outcomes."""

from __future__ import annotations

import pytest

from lab.conformance.cells import (
    Cell,
    CellResult,
    Observed,
    OrderResult,
    Prediction,
    generate,
    summarize,
)
from lab.conformance.scenarios import ISOLATION_SPELLINGS, Layout, ProbeOp
from lab.conformance.state import Outcome, TableState, explain_mismatch, matching_serial_order

COLUMNS = ("id", "p", "v")


def state(
    *ids: int, properties: dict[str, str] | None = None, columns: tuple[str, ...] = COLUMNS
) -> TableState:
    return TableState.of([{"id": i, "p": "a", "v": i * 10} for i in ids], columns, properties or {})


def serial_pair(ab: Outcome, ba: Outcome) -> dict[str, Outcome]:
    return {"A,B": ab, "B,A": ba}


def test_row_order_does_not_matter_but_duplicates_do() -> None:
    assert state(1, 2, 3) == state(3, 1, 2)
    # two concurrent OPTIMIZEs leave every row twice: same set, different multiset
    assert state(1, 1, 2, 2) != state(1, 2)


def test_matches_the_serial_order_with_the_same_state_and_commits() -> None:
    both = frozenset({"A", "B"})
    serial = serial_pair(Outcome(both, state(1, 2)), Outcome(both, state(1, 2, 3)))
    assert matching_serial_order(Outcome(both, state(3, 2, 1)), serial) == "B,A"
    assert matching_serial_order(Outcome(both, state(1, 2)), serial) == "A,B"


def test_duplicated_rows_match_no_serial_order() -> None:
    both = frozenset({"A", "B"})
    serial = serial_pair(Outcome(both, state(1, 2)), Outcome(both, state(1, 2)))
    concurrent = Outcome(both, state(1, 1, 2, 2))
    assert matching_serial_order(concurrent, serial) is None
    assert "4 rows vs 2 rows" in explain_mismatch(concurrent, serial)


def test_a_constraint_committed_over_violating_rows_matches_no_serial_order() -> None:
    # serially, one of the two writes fails: the constraint (violating row present) or the append
    constraint = {"delta.constraints.chk_b": "v < 1000"}
    serial = serial_pair(
        Outcome(frozenset({"A"}), state(1, 500)),
        Outcome(frozenset({"B"}), state(1, properties=constraint)),
    )
    concurrent = Outcome(frozenset({"A", "B"}), state(1, 500, properties=constraint))
    assert matching_serial_order(concurrent, serial) is None
    assert "committed ['A', 'B'] vs ['A']" in explain_mismatch(concurrent, serial)


def test_same_rows_but_different_commits_is_not_equivalent() -> None:
    serial = serial_pair(Outcome(frozenset({"A"}), state(1)), Outcome(frozenset({"B"}), state(1)))
    assert matching_serial_order(Outcome(frozenset({"A", "B"}), state(1)), serial) is None
    assert matching_serial_order(Outcome(frozenset({"B"}), state(1)), serial) == "B,A"


def test_schema_and_properties_are_compared() -> None:
    both = frozenset({"A", "B"})
    serial = serial_pair(Outcome(both, state(1)), Outcome(both, state(1)))
    assert matching_serial_order(Outcome(both, state(1, columns=(*COLUMNS, "c_a"))), serial) is None
    assert matching_serial_order(Outcome(both, state(1, properties={"k": "v"})), serial) is None


CELL = Cell(ProbeOp.OPTIMIZE_COMPACT, ProbeOp.OPTIMIZE_COMPACT, Layout.PARTITIONED_SAME, None)


def result(predicted: bool | None, *observed: Observed) -> CellResult:
    orders = tuple(OrderResult(order, obs) for order, obs in zip(("A,B", "B,A"), observed, strict=True))
    return CellResult(CELL, Prediction(predicted, "rule"), orders)


@pytest.mark.parametrize(
    ("predicted", "observed", "unsound", "allowed"),
    [
        (False, (Observed.COMMIT, Observed.COMMIT), False, True),
        (False, (Observed.COMMIT, Observed.CORRUPT), True, False),
        (False, (Observed.CONFLICT, Observed.COMMIT), True, False),
        (False, (Observed.COMMIT, Observed.ERROR), True, False),
        (False, (Observed.SERIAL_FAILURE, Observed.COMMIT), False, True),
        (True, (Observed.CORRUPT, Observed.CORRUPT), False, False),
        (True, (Observed.COMMIT, Observed.COMMIT), False, True),
        (None, (Observed.COMMIT, Observed.COMMIT), True, True),
        (False, (Observed.NOT_RUN, Observed.COMMIT), False, False),
    ],
)
def test_cell_judgement(
    predicted: bool | None, observed: tuple[Observed, ...], unsound: bool, allowed: bool
) -> None:
    cell = result(predicted, *observed)
    assert cell.unsound is unsound
    assert cell.engine_allows is allowed


def test_summary_counts_precision_over_engine_allowed_cells() -> None:
    results = [
        result(False, Observed.COMMIT, Observed.COMMIT),  # both allow
        result(True, Observed.COMMIT, Observed.COMMIT),  # engine allows, model does not
        result(True, Observed.CONFLICT, Observed.COMMIT),  # neither
        result(False, Observed.CORRUPT, Observed.COMMIT),  # unsound
    ]
    summary = summarize(results)
    assert (summary.cells, summary.unsound, summary.engine_allowed, summary.both_allowed) == (4, 1, 2, 1)
    assert summary.model_allowed == 2
    assert summary.precision == pytest.approx(0.5)
    assert summary.to_json()["precision"] == 0.5


def test_slices() -> None:
    full = generate("full")
    probes = len(ProbeOp)
    assert len(full) == probes * (probes + 1) // 2 * len(Layout) * len(ISOLATION_SPELLINGS)
    assert len(set(full)) == len(full)
    representative = generate("representative")
    assert set(representative) < set(full)
    with pytest.raises(ValueError, match="unknown slice"):
        generate("everything")
