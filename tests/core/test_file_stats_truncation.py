"""Truncated string statistics in the delta-rs profile (ADR 0020): a file a write adds is bounded by what
the engine *records* for it, and a recorded bound that may be a cut is open on that side.

delta-rs 1.6.6 records a string statistic of more than 64 UTF-8 bytes as a prefix (the maximum with its last
incrementable character bumped); measured in ``tests/engines/test_deltars_string_stats.py``.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from deltaguard.core.file_stats import (
    STATS_TRUNCATE_BYTES,
    ColumnStats,
    FileStats,
    FileStatsSummary,
    recorded_high,
    recorded_low,
)
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

DELTARS = EngineProfile(EngineName.DELTA_RS, "1.6.6")
TYPES = (("id", "long"), ("s", "string"))
EURO = "\u20ac"  # 3 UTF-8 bytes
KIP = "\u20ad"  # the euro sign + 1


def _table(*ranges: tuple[str, str]) -> TableConfig:
    files = tuple(
        FileStats(
            path=f"f{k}.parquet",
            columns=(("id", ColumnStats(k * 10, k * 10 + 9, 0)), ("s", ColumnStats(low, high, 0))),
            num_records=10,
        )
        for k, (low, high) in enumerate(ranges)
    )
    summary = FileStatsSummary(version=1, column_types=TYPES, files=files, indexed=frozenset({"id", "s"}))
    return TableConfig(version=1, file_stats=summary)


def _allowed(a: Operation, b: Operation, table: TableConfig) -> bool:
    verdict = pair_verdict(a, b, table, DELTARS)
    assert verdict.conflict == pair_verdict(b, a, table, DELTARS).conflict
    return not verdict.conflict


def _sql(text: str) -> str:
    return "'" + text + "'"


def test_max_side_long_literal_is_not_its_own_bound() -> None:
    """The measured case: the new file's recorded max is 20 euro signs and a kip, inside the DELETE's range."""
    table = _table(("a", "a"), ("m", "m"))
    update = Operation(K.UPDATE, "s = 'a'", assignments=(("s", _sql(EURO * 22)),))
    delete = Operation(K.DELETE, f"s >= {_sql(EURO * 21 + KIP)}")
    assert not _allowed(update, delete, table)


def test_min_side_long_literal_is_not_its_own_bound() -> None:
    """A new file holding a long literal records a prefix as its min, below a concurrent ``<`` bound."""
    table = _table(("\uffee", "\uffee"), ("a", "a"))
    update = Operation(K.UPDATE, "id < 10", assignments=(("s", _sql(EURO * 22)),))
    delete = Operation(K.DELETE, f"s < {_sql(EURO * 22)}")
    assert not _allowed(update, delete, table)


def test_replace_where_rows_bounded_by_what_is_recorded() -> None:
    table = _table(("\uffee", "\uffee"), ("a", "a"))
    replace = Operation(K.REPLACE_WHERE, f"s >= {_sql(EURO * 22)}", inserts=f"s = {_sql(EURO * 22)}")
    delete = Operation(K.DELETE, f"s < {_sql(EURO * 22)}")
    assert not _allowed(replace, delete, table)


def test_recorded_long_existing_bound_is_open() -> None:
    """An existing file whose recorded max is 61+ bytes (a possible cut) bounds nothing above it."""
    table = _table(("a", EURO * 21), (EURO * 21 + KIP + "z", EURO * 21 + KIP + "z"))
    update = Operation(K.UPDATE, "s = 'a'")  # copies the rows of file 0
    delete = Operation(K.DELETE, f"s >= {_sql(EURO * 21 + KIP)}")
    assert not _allowed(update, delete, table)


def test_short_strings_keep_their_precision() -> None:
    table = _table(("a", "b"), ("m", "n"))
    update = Operation(K.UPDATE, "s = 'a'", assignments=(("s", "'c'"),))
    delete = Operation(K.DELETE, "s >= 'm'")
    assert _allowed(update, delete, table)


def _engine_min(value: str) -> str:
    """The measured cut of a minimum: the longest prefix of whole characters within 64 bytes."""
    used = 0
    for position, char in enumerate(value):
        used += len(char.encode())
        if used > STATS_TRUNCATE_BYTES:
            return value[:position]
    return value


def _engine_max(value: str) -> str:
    """The measured cut of a maximum: the cut, then its last in-place incrementable character bumped."""
    cut = _engine_min(value)
    if cut == value:
        return value
    for position in range(len(cut) - 1, -1, -1):
        code = ord(cut[position]) + 1
        if (
            code <= 0x10FFFF
            and not 0xD800 <= code <= 0xDFFF
            and len(chr(code).encode()) == len(cut[position].encode())
        ):
            return cut[:position] + chr(code)
    return value


_CHARS = st.sampled_from(
    ["a", "z", "\x7f", "\x80", "\u07ff", "\u0800", EURO, "\uffff", "\U00010000", "\U0010ffff"]
)
_TEXT = st.text(alphabet=_CHARS, max_size=80)


@settings(max_examples=400, deadline=None)
@given(_TEXT, _TEXT)
@example("A" + "\x7f" * 70, "A\x80")
@example("a" + "\uffff" * 30, "a\U00010000")
@example(EURO * 22, EURO * 21 + KIP)
def test_recorded_bounds_cover_every_recorded_value(bound: str, other: str) -> None:
    """For any value on the far side of a bound, the engine's recorded statistic stays within the widened
    bound (the cut model above is the one measured on real files)."""
    low, high = min(bound, other), max(bound, other)
    assert recorded_low(low) <= _engine_min(high)
    widened = recorded_high(high)
    if widened is not None:
        assert _engine_max(low) <= widened


@pytest.mark.parametrize("value", ["a" * 60, "abc", "2024-01-01"])
def test_short_ascii_values_are_their_own_bounds(value: str) -> None:
    assert recorded_low(value) == value
    assert recorded_high(value) == value


def test_long_and_non_ascii_bounds() -> None:
    assert recorded_high(EURO * 22) is None  # may be cut: open
    assert recorded_low(EURO * 22) == EURO * 20  # a prefix within 60 bytes
    assert recorded_high("A\x80") == "B"  # 'A\x7f...' (long) is recorded as 'B'
    assert recorded_high(7) == 7 and recorded_low(-3) == -3
