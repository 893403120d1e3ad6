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
from typing import Protocol, TypeVar, runtime_checkable

log = logging.getLogger(__name__)

_V = TypeVar("_V")

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
        #: errors of questions asked outside a store transaction, given once to the transaction that
        #: refused them (so its refusal names the engine's error), then asked again by the next decision
        self._failures: dict[tuple[object, ...], Exception] = {}
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
        within = _ROUND.get()
        with self._lock:
            found = self._answers.get(key)
            failed = self._failures.pop(key, None) if found is None and within is not None else None
        if found is None:
            if failed is not None:
                if within is not None:
                    within.refused = True
                raise failed
            if within is not None:
                question = (tuple(predicates), {c: tuple(v) for c, v in candidates.items()})
                within.unasked.append(lambda: self._ask_outside(key, *question, ask))
                if within.exploring:
                    # a round that will not commit: one witness row every predicate is FALSE on lets the
                    # decision go on to its next questions, so that they are asked together
                    return [tuple(False for _ in predicates)]
                raise LookupError("not asked while a lease store transaction is open")
            found = ask(tuple(predicates), candidates)
            self._keep(self._answers, key, found)
        return found

    def _keep(self, kept: dict[tuple[object, ...], _V], key: tuple[object, ...], value: _V) -> None:
        with self._lock:
            if len(kept) >= _CACHE:
                kept.clear()
            kept[key] = value

    def _ask_outside(
        self,
        key: tuple[object, ...],
        predicates: tuple[str, ...],
        candidates: Mapping[str, Sequence[str | None]],
        ask: Callable[[tuple[str, ...], Mapping[str, Sequence[str | None]]], Sequence[tuple[Truth, ...]]],
    ) -> None:
        try:
            self.answer(predicates, candidates, ask)
        except Exception as exc:
            self._keep(self._failures, key, exc)
            raise


class _Round:
    """One store transaction's body under :func:`kept_answers_only`: the questions it met with no kept answer,
    and whether it explores (will not commit if it meets any)."""

    def __init__(self, exploring: bool) -> None:
        self.exploring = exploring
        self.unasked: list[Callable[[], object]] = []
        #: a question was refused with the error its engine gave when asked outside
        self.refused = False


#: the transaction body running in this context (``None``: an oracle asks its engine)
_ROUND: ContextVar[_Round | None] = ContextVar("deltaguard_oracle_round", default=None)


@contextlib.contextmanager
def kept_answers_only(*, exploring: bool) -> Iterator[list[Callable[[], object]]]:
    """Within, an oracle that keeps its answers (:class:`AnswerCache`) gives kept answers only.

    Asking an engine takes from milliseconds (delta-rs) to seconds (a Spark session, a Connect server), far
    too long to hold a lease store's locks for (SQLite's lock is the whole store's). A question with no kept
    answer is added to the yielded list, for :class:`UnaskedQuestions` to ask once the transaction ended.
    Exploring, it is answered as separating (the transaction then must not commit, and nothing decided in it
    may be remembered: :func:`questions_unasked`), so that one round collects a decision's questions;
    otherwise it is refused (:class:`LookupError`: what the engine did not answer separates nothing). An
    oracle that keeps no answers is asked as before.

    :param exploring: whether the transaction will be ended if it meets a question with no kept answer.
    """
    within = _Round(exploring)
    token = _ROUND.set(within)
    try:
        yield within.unasked
    finally:
        _ROUND.reset(token)


def questions_unasked() -> bool:
    """Whether the body running under :func:`kept_answers_only` met a question its engine did not answer so
    far (no kept answer, or the engine's error): what it decides rests on answers no engine gave (refused,
    or assumed while exploring) and must not be remembered beyond its transaction."""
    within = _ROUND.get()
    return within is not None and (bool(within.unasked) or within.refused)


class UnaskedQuestions(Exception):
    """Questions for engines' evaluators refused inside a lease store transaction, which this ends (nothing
    it wrote is kept); the caller asks them (:meth:`ask`) outside it and runs the transaction again.

    :param questions: what :func:`kept_answers_only` collected.
    """

    def __init__(self, questions: Sequence[Callable[[], object]]) -> None:
        super().__init__(f"{len(questions)} questions for an engine's evaluator, asked after the transaction")
        self.questions = tuple(questions)

    def ask(self) -> None:
        """Ask each question of its engine, keeping the answer; an engine's error is kept for the next
        transaction, which refuses the question naming it."""
        for question in self.questions:
            try:
                question()
            except Exception as exc:  # the transaction refuses the question with this error (closed world)
                log.warning("deltaguard: the engine's evaluator of partition predicates failed: %s", exc)
