"""The one waiting rule: given an admission answer and how long the task has waited, what happens next.

Pure (no clock, no store, no Airflow): a function of its arguments returning an action, in the shape of
tenacity's ``DoAttempt``/``DoSleep`` - the decision is data, and thin loops carry it out. The write
operators (:class:`~deltaguard.operators.base.DeltaWriteOperator`), the lease trigger
(:class:`~deltaguard.triggers.lease.LeaseAvailableTrigger`) and the admission sensor
(:class:`~deltaguard.sensors.admission.DeltaAdmissionSensor`) all call :func:`next_step`, so they cannot
disagree on when to write, wait or give up.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deltaguard.core.admission import Waiting


@dataclass(frozen=True)
class Proceed:
    """Admitted: the operator writes, the trigger fires its event, the sensor succeeds."""


@dataclass(frozen=True)
class Defer:
    """Free the worker slot and wait in the triggerer.

    :param timeout_s: how much longer the wait may last (``None``: no limit of its own).
    """

    timeout_s: float | None


@dataclass(frozen=True)
class Sleep:
    """Wait here, then ask again.

    :param seconds: how long to wait before the next question.
    """

    seconds: float


@dataclass(frozen=True)
class TimeOut:
    """Give up: the wait lasted ``waited_s``, longer than the timeout allows. The caller withdraws its
    queued request (so it holds back no one) and fails."""

    waited_s: float


Step = Proceed | Defer | Sleep | TimeOut


def next_step(
    *,
    admitted: bool,
    waited_s: float,
    timeout_s: float | None,
    poll_s: float,
    deferrable: bool,
    imminent: bool = False,
) -> Step:
    """What to do after one admission answer.

    :param admitted: whether the answer admits the write (a granted lease; for the sensor, a write that
        would be admitted).
    :param waited_s: seconds since the task first asked (in this try).
    :param timeout_s: the task's ``lease_wait_timeout`` (``None``: wait until Airflow's own timeout).
    :param poll_s: seconds between questions.
    :param deferrable: whether waiting may move to the triggerer (``False`` inside the triggerer itself).
    :param imminent: the blockers are expected to leave within seconds
        (:func:`deltaguard.leases.imminent.is_imminent`): wait here, asking every
        :data:`~deltaguard.leases.imminent.IMMINENT_POLL_S`, since a deferral would come back later than that.
    :return: :class:`Proceed` when admitted; else :class:`TimeOut` once the timeout is spent; else
        :class:`Defer` with the time left, or :class:`Sleep` for one poll interval (never past the timeout).
    """
    if admitted:
        return Proceed()
    remaining = None if timeout_s is None else timeout_s - waited_s
    if remaining is not None and remaining <= 0:
        return TimeOut(waited_s)
    if imminent:
        from deltaguard.leases.imminent import IMMINENT_POLL_S

        return Sleep(IMMINENT_POLL_S if remaining is None else min(IMMINENT_POLL_S, remaining))
    if deferrable:
        return Defer(remaining)
    return Sleep(poll_s if remaining is None else min(poll_s, remaining))


#: Airflow's default ``[workers] min_heartbeat_interval``: how long a task supervisor may sleep before it
#: sees that the task process it watches has ended (see :func:`first_event_after_s`).
AIRFLOW_EXIT_POLL_S = 5.0

#: Seconds past the supervisor's exit poll for the executor's report of the exit to reach the scheduler.
#: Measured on the kept scheduler logs of 225 deferrals (benchmark sweeps and the real-scheduler tests,
#: LocalExecutor, 2 cores): from the task's deferral to the scheduler's receipt of that report, median
#: 0.44 s, 16 % over 5 s, worst 6.07 s (``docs/benchmarks.md``, "A deferred task failed by its own exit").
STALE_EXIT_MARGIN_S = 3.0


def first_event_after_s(exit_poll_s: float = AIRFLOW_EXIT_POLL_S) -> float:
    """Seconds from a trigger's start before it may fire its event.

    A deferring task's process ends, and its executor reports that end as a *success* of the try. If the
    trigger fires first and the scheduler re-queues the task before that report arrives, Airflow (3.3)
    takes the late report for the new run's and fails the task ("finished with state success, but the task
    instance's state attribute is queued"; apache/airflow issues 66374, 71580, 72716). The report is late
    when the task process closed its sockets before it could be reaped: the supervisor then sleeps its exit
    poll, ``[workers] min_heartbeat_interval``, before it looks again. A trigger started after the deferral
    that fires no sooner than that poll plus :data:`STALE_EXIT_MARGIN_S` comes after the report.

    :param exit_poll_s: the workers' ``[workers] min_heartbeat_interval``.
    """
    return max(0.0, exit_poll_s) + STALE_EXIT_MARGIN_S


def wait_reason(reasons: Sequence[str], exceptions: Sequence[str] = (), advice: Sequence[str] = ()) -> str:
    """``<reasons> [can raise X]; advice: <advice>`` - why a write waited, for the task log."""
    text = " ".join(r.strip() for r in reasons if r.strip())
    if exceptions:
        text += f" (can raise {', '.join(dict.fromkeys(exceptions))})"
    if advice:
        text += "; advice: " + " ".join(a.strip() for a in advice if a.strip())
    return text.strip()


@dataclass
class WaitState:
    """One try's wait so far: carried through deferrals (as the resume kwargs) and into the task result.

    :param started: when the try first asked (seconds since the epoch).
    :param behind: the writers it waited for, in the order first seen.
    :param explanation: the conflict model's reason from the first wait.
    :param request_id: the queued request to ask about again.
    """

    started: float
    behind: list[str] = field(default_factory=list)
    explanation: str | None = None
    request_id: str | None = None

    def waited_s(self, now: float | None = None) -> float:
        return (time.time() if now is None else now) - self.started

    def note(self, answer: Waiting) -> bool:
        """Record a wait answer; ``True`` when it is the first (whose reason the task logs)."""
        self.behind.extend(b.owner.describe() for b in answer.blockers)
        if self.explanation is not None:
            return False
        self.explanation = wait_reason(answer.reasons, [e.value for e in answer.exceptions], answer.advice)
        return True

    def to_kwargs(self) -> dict[str, object]:
        """The resume kwargs of a deferral (JSON-serialisable)."""
        return {
            "wait_started": self.started,
            "behind": list(dict.fromkeys(self.behind)),
            "explanation": self.explanation,
            "request_id": self.request_id,
        }
