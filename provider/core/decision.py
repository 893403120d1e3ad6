"""The answer of the conflict model."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class DeltaException(StrEnum):
    """Conflict exceptions Delta raises at commit (class names as Delta spells them)."""

    CONCURRENT_APPEND = "ConcurrentAppendException"
    CONCURRENT_DELETE_READ = "ConcurrentDeleteReadException"
    CONCURRENT_DELETE_DELETE = "ConcurrentDeleteDeleteException"
    METADATA_CHANGED = "MetadataChangedException"
    PROTOCOL_CHANGED = "ProtocolChangedException"
    CONCURRENT_TRANSACTION = "ConcurrentTransactionException"


class Verdict(StrEnum):
    CONFLICT = "conflict"
    NO_CONFLICT = "no_conflict"


@dataclass(frozen=True)
class PairVerdict:
    """Whether two operations may run at once on one table, in either commit order.

    :param conflict: ``True`` if they can conflict (or silently corrupt data) in some commit order.
    :param exceptions: exception classes one of them could raise.
    :param reason: a human reason citing the rule (the Databricks page's section or probe evidence).
    :param advice: concrete changes that would make the pair compatible.
    :param rule: a stable identifier of the rule that decided (for tests, logs and the UI).
    """

    conflict: bool
    exceptions: tuple[DeltaException, ...] = ()
    reason: str = ""
    advice: tuple[str, ...] = ()
    rule: str = ""


@dataclass(frozen=True)
class Decision:
    """A candidate operation against the operations already running on the same table.

    :param verdict: ``conflict`` if the candidate can conflict with any running operation (or with a
        combination of them, such as two DML readers of a blind append), else ``no_conflict``.
    :param exceptions: exception classes that could be raised.
    :param conflicts_with: indexes into the running operations it conflicts with.
    :param reasons: human reasons, citing the rules.
    :param advice: concrete changes that would avoid the conflicts.
    :param rules: identifiers of the rules that decided.
    """

    verdict: Verdict
    exceptions: tuple[DeltaException, ...] = ()
    conflicts_with: tuple[int, ...] = ()
    reasons: tuple[str, ...] = ()
    advice: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()

    @property
    def conflict(self) -> bool:
        return self.verdict is Verdict.CONFLICT

    def to_json(self) -> dict[str, Any]:
        """The CLI contract: ``verdict``, ``exceptions``, ``conflicts_with``, ``reasons``, ``advice``."""
        return {
            "verdict": self.verdict.value,
            "exceptions": [e.value for e in self.exceptions],
            "conflicts_with": list(self.conflicts_with),
            "reasons": list(self.reasons),
            "advice": list(self.advice),
            "rules": list(self.rules),
        }
