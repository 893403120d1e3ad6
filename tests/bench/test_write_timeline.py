"""The per-write timeline of a kept benchmark run: points read from the run's records, parts that sum."""

from __future__ import annotations

import pytest

from benchmarks.harness.write_timeline import PARTS, occupancy, parts, points_of, report


def _resumed() -> object:
    """A write that asked, deferred, was granted, waited for a worker and wrote."""
    task = [
        (100.0, "::group::Pre Execute"),
        (104.0, "::endgroup::"),
        (105.0, "Pausing task as DEFERRED. "),
        (105.2, "::endgroup::"),
        (150.0, "::group::Pre Execute"),
        (151.0, "::endgroup::"),
        (190.0, "::endgroup::"),
    ]
    trigger = [(106.0, "trigger starting"), (131.0, "Trigger fired event")]
    decisions = [(104.5, "wait"), (130.0, "grant"), (188.0, "release")]
    return points_of("w1", task, trigger, [98.0, 133.0], decisions, {"start": 153.0, "end": 187.5})


def test_a_resumed_write_is_cut_at_its_points() -> None:
    p = _resumed()
    got = parts(p)  # type: ignore[arg-type]
    assert got == pytest.approx(
        {"write_s": 34.5, "conflict_s": 25.5, "slot_s": 2.0, "granted_s": 20.0, "overhead_s": 8.0}
    )
    assert sum(got.values()) == pytest.approx(p.released - p.queued)  # type: ignore[attr-defined]
    assert p.enqueued_again == 133.0  # type: ignore[attr-defined]


def test_a_write_granted_at_once_has_no_wait() -> None:
    task = [(10.0, "::group::Pre Execute"), (12.0, "::endgroup::"), (50.0, "::endgroup::")]
    p = points_of("w2", task, [], [9.0], [(12.5, "grant"), (49.0, "release")], {"start": 13.0, "end": 48.0})
    got = parts(p)
    assert got["conflict_s"] == got["granted_s"] == 0.0
    assert got["overhead_s"] == pytest.approx(3.0 + 1.0)
    assert sum(got.values()) == pytest.approx(49.0 - 9.0)


def test_report_sums_and_occupancy() -> None:
    p = _resumed()
    out = report([p], slots=2)  # type: ignore[list-item]
    assert set(out["sums_s"]) == set(PARTS)
    assert out["writes"][0]["enqueued_to_started_s"] == pytest.approx(17.0)
    # two worker stints (100-105.2, 150-187.5 within the span) on 2 slots from 100 to 187.5
    occ = occupancy([p], 2, 100.0, 187.5)  # type: ignore[list-item]
    assert occ["capacity"] == pytest.approx(175.0)
    assert occ["writing"] == pytest.approx(34.5)
    assert occ["idle"] == pytest.approx(175.0 - 5.2 - 37.5)
