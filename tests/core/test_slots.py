"""The slot gate's rule (:mod:`deltaguard.core.slots`): grants while fewer leases than slots are held."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deltaguard.core.slots import free_slots, slot_open


def test_no_gate_leaves_every_grant_open() -> None:
    assert free_slots(None, 0) is None
    assert free_slots(None, 10_000) is None
    assert slot_open(None, 10_000)


def test_the_gate_closes_when_the_leases_fill_the_slots() -> None:
    assert free_slots(8, 0) == 8
    assert free_slots(8, 5) == 3
    assert slot_open(8, 7)
    assert not slot_open(8, 8)
    # more leases than slots (granted by concurrent decisions, or held by writes outside the pool)
    assert free_slots(8, 11) == 0
    assert not slot_open(8, 11)


@given(slots=st.integers(1, 64), held=st.integers(0, 128))
def test_free_slots_never_lets_the_held_leases_pass_the_slots(slots: int, held: int) -> None:
    left = free_slots(slots, held)
    assert left is not None and left >= 0
    assert held + left <= max(slots, held)
    assert slot_open(slots, held) == (held < slots)


@pytest.mark.parametrize(("slots", "held"), [(0, 0), (-1, 0), (4, -1)])
def test_bad_sizes_are_refused(slots: int, held: int) -> None:
    with pytest.raises(ValueError):
        free_slots(slots, held)
