"""delta-rs' evaluator confirms the partitions the model keeps apart (ADR 0037).

The hand-written reading is replaced by a planted unsound rule (every rewrite pair "on different
partitions") to show the engine's check alone refuses what the engine would contradict, and keeps what it
confirms.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.oracle import PredicateOracle
from deltaguard.core.rules import deltars
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.deltars.meaning import DataFusionOracle


def _delete(predicate: str) -> Operation:
    return Operation(OperationKind.DELETE, predicate=predicate)


@pytest.fixture
def table(tmp_path: Path) -> TableConfig:
    data = pa.table(
        {
            "s": pa.array(["a", "b", "12", None]),
            "k": pa.array([1, -1, 2, None], pa.int32()),
            "d": pa.array([dt.date(2024, 1, 1)] * 3 + [None]),
            "id": pa.array([1, 2, 3, 4], pa.int64()),
        }
    )
    write_deltalake(str(tmp_path / "t"), data, partition_by=["s", "k", "d"])
    return DeltaRsEngine().table_config(str(tmp_path / "t"))


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deltars, "_reads_disjoint", lambda a, b, ctx: True)


def test_the_engine_reads_the_table_with_its_evaluator(table: TableConfig) -> None:
    assert isinstance(table.meaning, DataFusionOracle)
    assert isinstance(table.meaning, PredicateOracle)


def test_disjoint_partitions_stay_apart(table: TableConfig) -> None:
    profile = DeltaRsEngine().profile()
    for a, b in (
        ("s = 'a'", "s = 'b'"),
        ("k = 1", "k = 2"),
        ("s IN ('a') AND id > 1", "s = 'b' AND (k = 7 OR id = 3)"),
    ):
        verdict = pair_verdict(_delete(a), _delete(b), table, profile)
        assert not verdict.conflict, (a, b, verdict.reason)
        assert verdict.rule == "deltars.disjoint_partitions"


@pytest.mark.usefixtures("planted")
@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("s = 'a'", "s IN ('a', 'b')"),
        ("s < 5", "s > 10"),  # text order: '12' < '5' and '5' > '10'
        ("k = -7", "k IN (-7, 3)"),  # a negative literal is a witness too
        ("d = '2024-01-01'", "d = DATE '2024-01-01'"),
        ("s = 'a' AND id = 1", "(s = 'a' OR s = 'b') AND id = 2"),
        ("NOT (k <> 1)", "k = 1"),
        # no literal on the column: the witnesses are typical values of its type besides NULL
        ("k IS NOT NULL", "k IS NOT NULL"),
        ("NOT (d IS NULL)", "d IS NOT NULL"),
    ],
)
def test_the_engine_refutes_a_wrong_reading(table: TableConfig, a: str, b: str) -> None:
    profile = DeltaRsEngine().profile()
    alone = pair_verdict(_delete(a), _delete(b), dataclasses.replace(table, meaning=None), profile)
    assert not alone.conflict  # the planted reading keeps them apart
    verdict = pair_verdict(_delete(a), _delete(b), table, profile)
    assert verdict.conflict
    assert verdict.rule == "deltars.engine_unconfirmed"
    assert "does not confirm" in verdict.reason


@pytest.mark.usefixtures("planted")
def test_what_the_engine_cannot_evaluate_separates_nothing(table: TableConfig) -> None:
    verdict = pair_verdict(_delete("s = 'a'"), _delete("k = 'abc'"), table, DeltaRsEngine().profile())
    assert verdict.conflict
    assert "could not evaluate" in verdict.reason


@pytest.mark.usefixtures("planted")
def test_moved_rows_count_where_they_land(table: TableConfig) -> None:
    update = Operation(OperationKind.UPDATE, predicate="s = 'a'", assignments=(("s", "'b'"),))
    verdict = pair_verdict(update, _delete("s = 'b'"), table, DeltaRsEngine().profile())
    assert verdict.conflict


@pytest.fixture
def fraction_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hand reading's check of a fraction on an integer partition taken out (ADR 0003 fact 13)."""
    monkeypatch.setattr(deltars, "fractional_columns", lambda p: frozenset())


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # delta-rs casts the literal to the partition type before it selects files: p = 1.5 rewrites p = 1
        ("k = 1.5", "k = 1"),
        ("k IN (1.5, 10)", "k = 1"),
        ("k BETWEEN 1.5 AND 10", "k = 1"),
    ],
)
def test_a_literal_delta_rs_casts_to_the_partition_type_is_caught(
    table: TableConfig, a: str, b: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the meaning fuzzer (seeds 202, 303): delta-rs' DELETE of the first rewrites the second's
    partition and the stale one of the pair fails in both orders. The hand reading now says so itself; with
    that check taken out, the engine's evaluator still does."""
    profile = DeltaRsEngine().profile()
    hand = dataclasses.replace(table, meaning=None)
    alone = pair_verdict(_delete(a), _delete(b), hand, profile)
    assert alone.conflict and "not a whole number" in alone.reason
    monkeypatch.setattr(deltars, "fractional_columns", lambda p: frozenset())
    assert not pair_verdict(_delete(a), _delete(b), hand, profile).conflict  # the planted hole
    verdict = pair_verdict(_delete(a), _delete(b), table, profile)
    assert verdict.conflict
    assert verdict.rule == "deltars.engine_unconfirmed"


@pytest.mark.usefixtures("fraction_unread")
def test_a_pass_memo_does_not_hand_the_hand_readings_verdict_to_the_engine(table: TableConfig) -> None:
    """In one :func:`pair_memo` pass, the configuration without the evaluator judged first must not answer
    for the equal one with it: ``k = 1.5`` rewrites ``k = 1`` on delta-rs (the hand reading's own check of
    that taken out)."""
    from deltaguard.core.model import decide, pair_memo

    profile = DeltaRsEngine().profile()
    hand = dataclasses.replace(table, meaning=None)
    with pair_memo():
        assert not decide(_delete("k = 1.5"), [_delete("k = 1")], hand, profile).conflicts_with
        judged = decide(_delete("k = 1.5"), [_delete("k = 1")], table, profile)
    assert judged.conflicts_with == (0,)
    assert "deltars.engine_unconfirmed" in judged.rules
