"""Which duration a write is expected to take: one rule for the lease hook, the priority policy and the plan.

A write's expected duration is, in this order:

1. the one its author declared (``expected_duration`` on the operator or the lease declaration): the
   author knows of a change the log cannot (a bigger day, a new source);
2. the median of its recorded holds of the table's lease, from the decision log
   (:func:`deltaguard.leases.manager.learned_duration`, ADR 0024), when the caller can read one;
3. none: the lease request then carries no estimate (admission is FIFO among conflicting requests,
   ADR 0017), and where a number is needed (the priority policy's chain weights, the plan's schedule)
   :data:`~deltaguard.core.priority.DEFAULT_EXPECTED_S` stands in for it.

The recorded median is read only when nothing is declared, so a declared duration costs no store read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from deltaguard.core.priority import DEFAULT_EXPECTED_S

Source = Literal["declared", "recorded", "default"]


@dataclass(frozen=True)
class WriteDuration:
    """A write's expected duration and where it comes from.

    :param seconds: what its lease request carries (``None``: no estimate).
    :param source: ``declared``, ``recorded`` or ``default`` (no estimate).
    """

    seconds: float | None
    source: Source

    @property
    def planning_s(self) -> float:
        """The seconds a schedule or a chain weight uses: the estimate, else :data:`DEFAULT_EXPECTED_S`."""
        return DEFAULT_EXPECTED_S if self.seconds is None else self.seconds


def write_duration(
    declared: float | None, recorded: Callable[[], float | None] | None = None
) -> WriteDuration:
    """The expected duration of one write (the order: see the module docstring).

    :param declared: the author's ``expected_duration`` in seconds (``None``: not declared).
    :param recorded: reads the recorded median hold (called only when nothing is declared; ``None``: the
        caller has no decision log).
    """
    if declared is not None:
        return WriteDuration(float(declared), "declared")
    learned = recorded() if recorded is not None else None
    if learned is not None:
        return WriteDuration(float(learned), "recorded")
    return WriteDuration(None, "default")
