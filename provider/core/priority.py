"""How much of a table's work must run one write after another: the scheduling priority of its writes.

A DAG run releases many writes at once and Airflow starts them in priority order as worker slots free up.
Writes on a table whose conflicting writes form a long chain should start first: that chain bounds the
run's makespan however many slots there are, while compatible writes elsewhere can fill slots later (the
critical-path rule of list scheduling). Pure: the model and the chain search only.
"""

from __future__ import annotations

from collections.abc import Sequence

from deltaguard.core.chains import heaviest_clique
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.profiles import EngineProfile
from deltaguard.core.table_config import TableConfig

#: Seconds assumed for a write without an expected duration.
DEFAULT_EXPECTED_S = 60.0
#: Above this many writes on one table, pairs are not judged (a DAG file is parsed often): all of the
#: table's work counts as serial.
MAX_JUDGED_WRITES = 60


def serial_work_s(
    operations: Sequence[Operation | None],
    expected_s: Sequence[float | None],
    table: TableConfig,
    profile: EngineProfile,
) -> float:
    """Seconds of the heaviest set of pairwise-conflicting writes among ``operations`` on one table.

    :param operations: the writes; ``None`` for one whose operation is not known (conflicts with all).
    :param expected_s: each write's expected duration; ``None``: :data:`DEFAULT_EXPECTED_S`.
    :param table: the table's configuration, as far as it is known.
    :param profile: the engine whose rules judge the pairs.
    :raises ValueError: when the two sequences differ in length.
    """
    if len(operations) != len(expected_s):
        raise ValueError("one expected duration per operation")
    weights = [DEFAULT_EXPECTED_S if e is None else max(0.0, float(e)) for e in expected_s]
    if len(operations) > MAX_JUDGED_WRITES:
        return sum(weights)

    def conflicts(i: int, j: int) -> bool:
        a, b = operations[i], operations[j]
        if a is None or b is None:
            return True
        return pair_verdict(a, b, table, profile).conflict

    return heaviest_clique(weights, conflicts)[0]
