"""The interface through which an engine's own evaluator answers what a partition predicate means.

Kept apart from :mod:`deltaguard.core.meaning` (which uses it) so the table configuration can carry an
oracle without importing the conflict rules. See ADR 0037.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Protocol, runtime_checkable

log = logging.getLogger(__name__)

#: A truth value in SQL's three-valued logic (``None``: NULL, unknown).
Truth = bool | None


@runtime_checkable
class PredicateOracle(Protocol):
    """An engine's own evaluator of partition predicates on witness partition rows."""

    def evaluate(
        self, predicates: Sequence[str], candidates: Mapping[str, Sequence[str | None]]
    ) -> Sequence[tuple[Truth, ...]]:
        """Evaluate every predicate on every witness row.

        :param predicates: Spark SQL boolean expressions over partition columns only (as the model reads
            them; the oracle renders them for its engine).
        :param candidates: per partition column (lower-cased), candidate values as text (``None``: NULL).
            The oracle casts them to the column's type, drops those the type cannot hold, and adds values
            of its own (NULL, the empty string, both booleans, ...); witness rows combine them.
        :returns: one tuple per witness row, one truth value per predicate, in order.
        :raises Exception: anything the engine cannot answer (the caller then refutes the claim).
        """
        ...  # pragma: no cover - a protocol


class Unconfirmed:
    """An engine's evaluator that is not at hand: it answers no question, so every partition separation it
    is asked to confirm is refused with ``why`` (closed world, ADR 0036). Stands in for the evaluator of a
    configuration read back where the engine's cannot be had (a lease store read by another process,
    ADR 0037).

    :param why: what the refusal says.
    """

    def __init__(self, why: str) -> None:
        self.why = why

    def evaluate(
        self, predicates: Sequence[str], candidates: Mapping[str, Sequence[str | None]]
    ) -> Sequence[tuple[Truth, ...]]:
        """Refuse: :raises LookupError: always, with ``why``."""
        raise LookupError(self.why)


#: Answers an oracle keeps at most (a decision asks a handful; the set is dropped when full).
_CACHE = 512


class AnswerCache:
    """The answers one oracle gave, per question (predicates and candidates), shared by threads.

    An engine's oracle keeps one: a scheduler that re-checks a queue asks the same questions again, and an
    answer is a function of the question and the table's partition types, which the oracle fixes.
    """

    def __init__(self) -> None:
        self._answers: dict[tuple[object, ...], Sequence[tuple[Truth, ...]]] = {}
        self._lock = threading.Lock()

    def answer(
        self,
        predicates: Sequence[str],
        candidates: Mapping[str, Sequence[str | None]],
        ask: Callable[[tuple[str, ...], Mapping[str, Sequence[str | None]]], Sequence[tuple[Truth, ...]]],
    ) -> Sequence[tuple[Truth, ...]]:
        """The kept answer to the question, else ``ask(predicates, candidates)``'s, kept.

        :param predicates: as :meth:`PredicateOracle.evaluate`.
        :param candidates: as :meth:`PredicateOracle.evaluate`.
        :param ask: the engine's evaluation.
        """
        key = (tuple(predicates), tuple(sorted((c, tuple(v)) for c, v in candidates.items())))
        with self._lock:
            found = self._answers.get(key)
        if found is None:
            unasked = _UNASKED.get()
            if unasked is not None:
                question = (tuple(predicates), {c: tuple(v) for c, v in candidates.items()})
                unasked.append(lambda: self.answer(*question, ask))
                raise LookupError("not asked while a lease store transaction is open")
            found = ask(tuple(predicates), candidates)
            with self._lock:
                if len(self._answers) >= _CACHE:
                    self._answers.clear()
                self._answers[key] = found
        return found


#: while set (a lease store transaction's body runs), the questions an :class:`AnswerCache` was asked and had
#: no kept answer for; ``None``: an oracle asks its engine
_UNASKED: ContextVar[list[Callable[[], object]] | None] = ContextVar("deltaguard_unasked", default=None)


@contextlib.contextmanager
def kept_answers_only() -> Iterator[list[Callable[[], object]]]:
    """Within, an oracle that keeps its answers (:class:`AnswerCache`) gives kept answers only.

    Asking an engine takes from milliseconds (delta-rs) to seconds (a Spark session, a Connect server), far
    too long to hold a lease store's locks for (SQLite's lock is the whole store's). A question with no kept
    answer is refused (:class:`LookupError`: whatever the engine does not answer separates nothing, closed
    world) and added to the yielded list; :class:`UnaskedQuestions` asks them once the transaction ended.
    An oracle that keeps no answers is asked as before.
    """
    unasked: list[Callable[[], object]] = []
    token = _UNASKED.set(unasked)
    try:
        yield unasked
    finally:
        _UNASKED.reset(token)


def questions_refused() -> bool:
    """Whether the body running under :func:`kept_answers_only` refused a question so far (a verdict reached
    so is more conservative than the engine's answer would make it, and is not worth remembering)."""
    return bool(_UNASKED.get())


class UnaskedQuestions(Exception):
    """Questions for engines' evaluators refused inside a lease store transaction, which this ends (nothing
    it wrote is kept); the caller asks them (:meth:`ask`) outside it and runs the transaction again.

    :param questions: what :func:`kept_answers_only` collected.
    """

    def __init__(self, questions: Sequence[Callable[[], object]]) -> None:
        super().__init__(f"{len(questions)} questions for an engine's evaluator, asked after the transaction")
        self.questions = tuple(questions)

    def ask(self) -> None:
        """Ask each question of its engine, keeping the answer; one the engine cannot answer is left unkept
        (the next transaction refuses it again)."""
        for question in self.questions:
            try:
                question()
            except Exception as exc:  # refused again inside the transaction, as an engine error would be
                log.debug("an engine's evaluator did not answer: %s", exc)
