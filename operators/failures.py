"""The failures of a deltaguard task that Airflow must not retry (``AirflowFailException``)."""

from __future__ import annotations

from airflow.sdk.exceptions import AirflowFailException

from deltaguard.exceptions import InvalidWriteError, LateCommitError, WrappedLeaseLostError

__all__ = ["InvalidTaskInputError", "LateCommitFailure", "WrappedLeaseLostFailure"]


class InvalidTaskInputError(AirflowFailException, InvalidWriteError):
    """The task's input cannot succeed on any try: Airflow fails the task without spending its retries.

    Also an :class:`~deltaguard.exceptions.InvalidWriteError`, so callers catching deltaguard's error catch it.
    """


class LateCommitFailure(AirflowFailException, LateCommitError):
    """A commit landed after the task's lease was lost: Airflow fails the task without a retry.

    A retry would find the write's own commit by its app transaction and end as a successful duplicate,
    hiding that the table may hold a write made outside its lease (ADR 0018). The table is flagged in the
    decision log and the UI; someone has to look at it.
    """


class WrappedLeaseLostFailure(AirflowFailException, WrappedLeaseLostError):
    """Wrapped work ended after its lease was lost: Airflow fails the task without a retry.

    A retry would run the wrapped work again, which deltaguard cannot make idempotent (ADR 0021).
    """
