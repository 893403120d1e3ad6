"""A Spark benchmark write's engine time cut at its hold, on hand-made attempt logs and marker files."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.harness.hold_split import hold_deadlines, read_run, split


def test_a_committed_attempt_splits_at_its_own_hold() -> None:
    attempts = [
        {"write": "w0", "outcome": "ok", "start": 100.0, "end": 140.0},
        {"write": "w1", "outcome": "ok", "start": 100.0, "end": 130.0},
    ]
    # w0's first row at 112 (deadline 112 + 25); w1's first row at 101 (deadline 101 + 20)
    rows = split(attempts, {"w0": 25.0, "w1": 20.0}, {"w0": [137.0], "w1": [121.0]})
    assert rows == [
        {"write": "w0", "engine_s": 40.0, "before_s": 12.0, "hold_s": 25.0, "after_s": 3.0},
        {"write": "w1", "engine_s": 30.0, "before_s": 1.0, "hold_s": 20.0, "after_s": 9.0},
    ]
    assert all(r["before_s"] + r["hold_s"] + r["after_s"] == r["engine_s"] for r in rows)


def test_a_failed_attempts_marker_is_not_the_retry_s() -> None:
    attempts = [
        {"write": "w0", "outcome": "conflict", "start": 0.0, "end": 30.0},
        {"write": "w0", "outcome": "ok", "start": 50.0, "end": 80.0},
    ]
    # the failed attempt's hold started at 2, the committed one's at 53
    rows = split(attempts, {"w0": 25.0}, {"w0": [27.0, 78.0]})
    assert rows == [{"write": "w0", "engine_s": 30.0, "before_s": 3.0, "hold_s": 25.0, "after_s": 2.0}]
    # no marker inside the attempt: the parts are unknown, not guessed
    assert split(attempts[1:], {"w0": 25.0}, {"w0": [27.0]})[0]["before_s"] is None


def test_a_kept_run_is_read_per_strategy(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    (bench / "holds").mkdir(parents=True)
    (bench / "holds" / "w0-abc").write_text("137.0")
    (bench / "holds" / "w0-def").write_text("")  # a marker whose creator has not written yet
    writes = [
        {"id": "w0", "table": "t0", "kind": "append", "partition": "p0", "duration_s": 25.0, "index": 0}
    ]
    (bench / "bench_deltaguard.json").write_text(json.dumps({"workload": {"writes": writes}}))
    (bench / "deltaguard.jsonl").write_text(
        json.dumps({"write": "w0", "outcome": "ok", "start": 100.0, "end": 140.0}) + "\n"
    )
    assert hold_deadlines(bench / "holds") == {"w0": [137.0]}
    assert read_run(tmp_path) == {
        "deltaguard": [{"write": "w0", "engine_s": 40.0, "before_s": 12.0, "hold_s": 25.0, "after_s": 3.0}]
    }
