"""Compare a plan with a baseline plan (both as JSON): what ``deltaguard plan --check`` fails on.

A change fails the check when it adds a serializing pair the baseline does not have, or when the
deltaguard makespan grows by more than the tolerance (relative, default 5 %, plus 0.001 s of rounding).
Pairs that stopped serializing and a shorter makespan pass: the baseline is then worth refreshing.
"""

from __future__ import annotations

from typing import Any

from deltaguard.planning.report import FORMAT_VERSION, serializing_keys

#: how much longer (relative) the deltaguard makespan may get before the check fails
DEFAULT_TOLERANCE = 0.05


def compare(
    current: dict[str, Any], baseline: dict[str, Any], tolerance: float = DEFAULT_TOLERANCE
) -> list[str]:
    """What makes ``current`` worse than ``baseline`` (empty: the check passes).

    :param current: this plan's JSON (:func:`~deltaguard.planning.report.plan_json`).
    :param baseline: the baseline's JSON, of the same DAG.
    :param tolerance: relative growth of the deltaguard makespan allowed.
    :raises ValueError: when the baseline is not a plan of this format, or of another DAG, or the tolerance
        is negative.
    """
    if tolerance < 0:
        raise ValueError(f"the tolerance must be >= 0, got {tolerance}")
    if not isinstance(baseline, dict) or baseline.get("format") != FORMAT_VERSION:
        raise ValueError(
            f"the baseline is not a plan of format {FORMAT_VERSION} (deltaguard plan --format json)"
        )
    if baseline.get("dag_id") != current.get("dag_id"):
        raise ValueError(f"the baseline plans DAG {baseline.get('dag_id')!r}, not {current.get('dag_id')!r}")
    problems = [
        f"new serializing pair {key}"
        for key in sorted(serializing_keys(current) - serializing_keys(baseline))
    ]
    before = float(baseline["makespan"]["deltaguard"]["makespan_s"])
    after = float(current["makespan"]["deltaguard"]["makespan_s"])
    if after > before * (1 + tolerance) + 0.001:
        problems.append(
            f"deltaguard makespan {after:g} s is longer than the baseline's {before:g} s "
            f"(tolerance {tolerance:.0%})"
        )
    return problems
