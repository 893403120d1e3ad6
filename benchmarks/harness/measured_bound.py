"""The lower bound of a workload in measured write durations instead of planned ones.

:func:`lab.simulation.workload.lower_bound` judges a schedule against the planned durations; through
delta-spark each write takes longer than planned (the session's job, Connect round trips, the commit), so a
bound in planned seconds leaves the engine's own time out. :func:`measured_lower_bound` is the same bound
(same function, same conflict model) over a workload whose durations are the measured ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from lab.simulation.workload import ConflictFn, LowerBound, Workload, lower_bound


def with_durations(workload: Workload, durations_s: Mapping[str, float]) -> Workload:
    """``workload`` with each write's duration replaced by ``durations_s[write id]``.

    :param durations_s: a duration (seconds, >= 0) for every write of the workload.
    :raises ValueError: when a write has no duration, or a duration names no write of the workload.
    """
    ids = {w.id for w in workload.writes}
    missing = sorted(ids - set(durations_s))
    if missing:
        raise ValueError(f"no measured duration for writes {missing}")
    unknown = sorted(set(durations_s) - ids)
    if unknown:
        raise ValueError(f"measured durations name writes not in the workload: {unknown}")
    writes = tuple(dataclasses.replace(w, duration_s=float(durations_s[w.id])) for w in workload.writes)
    return dataclasses.replace(workload, writes=writes)


def measured_lower_bound(
    workload: Workload, slots: int, conflicts: ConflictFn, durations_s: Mapping[str, float]
) -> LowerBound:
    """:func:`~lab.simulation.workload.lower_bound` of ``workload`` with its measured durations.

    Which writes conflict does not depend on their durations, so ``conflicts`` is the planned run's.

    :param durations_s: each write's measured duration (e.g. its committed attempt in the one-slot pools run).
    """
    return lower_bound(with_durations(workload, durations_s), slots, conflicts)


def committed_write_times(attempts: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each write's engine time (end - start) in its committed attempt, from a run's attempt log.

    :raises ValueError: when a write has two successful attempts (the run is then not a valid measurement).
    """
    times: dict[str, float] = {}
    for attempt in attempts:
        if attempt["outcome"] != "ok":
            continue
        write = str(attempt["write"])
        if write in times:
            raise ValueError(f"write {write} has two successful attempts")
        times[write] = round(float(attempt["end"]) - float(attempt["start"]), 2)
    return dict(sorted(times.items()))


def summary_floor(summary: Mapping[str, Any], slots: int) -> float | None:
    """The least value the measured bound can have when a run recorded only ``count``, ``min_s``,
    ``median_s`` (the sorted ``count // 2``-th) and ``max_s`` of its write times: its work term can be no less
    than the smallest total those allow, over ``slots``, and no bound is below the longest write.

    :return: ``None`` when the summary holds fewer than two writes.
    """
    n = int(summary.get("count", 0))
    if n < 2:
        return None
    lo, median, hi = float(summary["min_s"]), float(summary["median_s"]), float(summary["max_s"])
    # sorted times: n // 2 of them at least the minimum, the median and those above it up to the maximum
    total = lo * (n // 2) + median * (n - n // 2 - 1) + hi
    return max(total / slots, hi)
