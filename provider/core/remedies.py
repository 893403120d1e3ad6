"""Why two writes cannot run together, in one line, and the concrete changes that would let them.

The pair rules give a long reason (citing the Databricks page "Isolation levels and write conflicts", the
delta-spark ConflictChecker or probe evidence) and free-text advice. A page that shows a waiting task
needs less: one line naming the cause, and each change as a kind (so a page can group or mark it) with a
text that names the table's own columns. This module derives both from the model's own verdict and the
operations' parsed facts, so no page writes its own advice. Every change is checked before it is offered:
applied to the pair and its table (its ``<value>`` placeholders given two different values) and judged
again by :func:`~deltaguard.core.model.pair_verdict`; a change after which the pair still conflicts is not
offered (the UI's advice and ``deltaguard plan`` alike).

Only a pair the model says conflicts gets changes. Rules that are about the table or the engine rather than
the two conditions (``common.*``: a metadata change, table creation, a shared checkpoint, settings the model
does not understand) keep the model's advice as it is, as changes of kind ``sequence``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from deltaguard.core.decision import PairVerdict
from deltaguard.core.facts import OpFacts, build_facts
from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig

#: the longest one-line reason (the full reason stays one click away)
MAX_WHY = 110


class ChangeKind(StrEnum):
    """What a change touches."""

    PARTITION = "partition"
    PREDICATE = "predicate"
    MERGE_CONDITION = "merge_condition"
    LIQUID_CLUSTERING = "liquid_clustering"
    DELETION_VECTORS = "deletion_vectors"
    FILE_STATISTICS = "file_statistics"
    #: not about the conditions: run them one after the other, or fix the table/engine (the model's advice)
    SEQUENCE = "sequence"


@dataclass(frozen=True)
class Change:
    """One change that would let the pair run together.

    :param kind: what it touches.
    :param text: the change, naming the table's columns where the model knows them.
    """

    kind: ChangeKind
    text: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind.value, "text": self.text}


@dataclass(frozen=True)
class PairExplanation:
    """A pair verdict for people: the cause in one line, the changes, and the model's full reason.

    :param conflict: the model's verdict.
    :param rule: the rule that decided.
    :param why: the cause, one line of at most :data:`MAX_WHY` characters.
    :param changes: concrete changes (empty when the pair does not conflict).
    :param reason: the rule's full reason.
    :param advice: the rule's own advice, as it wrote it.
    """

    conflict: bool
    rule: str
    why: str
    changes: tuple[Change, ...]
    reason: str
    advice: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "conflict": self.conflict,
            "rule": self.rule,
            "why": self.why,
            "changes": [c.to_json() for c in self.changes],
            "reason": self.reason,
            "advice": list(self.advice),
        }


def explain_pair(a: Operation, b: Operation, table: TableConfig, profile: EngineProfile) -> PairExplanation:
    """The model's verdict on ``a`` and ``b`` with a one-line cause and concrete changes.

    :param a: the waiting operation.
    :param b: the operation it waits for.
    :param table: the table's configuration.
    :param profile: the engine that writes it.
    """
    verdict = pair_verdict(a, b, table, profile)
    return explain_verdict(verdict, a, b, table, profile)


def explain_verdict(
    verdict: PairVerdict, a: Operation, b: Operation, table: TableConfig, profile: EngineProfile
) -> PairExplanation:
    """:func:`explain_pair` for a verdict already computed (same parameters, plus the verdict)."""
    fa, fb = build_facts(a), build_facts(b)
    if not verdict.conflict:
        why = _one_line(
            f"{a.kind.value} and {b.kind.value} can run together: {_first_clause(verdict.reason)}"
        )
        return PairExplanation(False, verdict.rule, why, (), verdict.reason, verdict.advice)
    if verdict.rule.startswith("common.") or fa.unknown or fb.unknown:
        changes = tuple(Change(ChangeKind.SEQUENCE, text) for text in verdict.advice)
        cause = "; ".join((*fa.unknown, *fb.unknown)) or _first_clause(verdict.reason)
        why = _one_line(f"{a.kind.value} and {b.kind.value} cannot run together: {cause}")
        return PairExplanation(True, verdict.rule, why, changes, verdict.reason, verdict.advice)
    return PairExplanation(
        True,
        verdict.rule,
        _one_line(_data_cause(fa, fb, table)),
        _checked(_data_changes(fa, fb, table, profile), a, b, table, profile),
        verdict.reason,
        verdict.advice,
    )


def _data_cause(a: OpFacts, b: OpFacts, table: TableConfig) -> str:
    pair = f"{a.kind.value} and {b.kind.value}"
    if table.is_partitioned:
        return f"{pair} may touch the same partitions ({', '.join(table.partition_columns)})"
    if table.has_liquid_clustering:
        return f"{pair} may touch the same rows: their conditions are not provably disjoint"
    return f"{pair} may rewrite the same files: the table is not partitioned"


#: a change applied to the pair and its table: what the model judges again before the change is offered
_Apply = Callable[[Operation, Operation, TableConfig], tuple[Operation, Operation, TableConfig]]
#: the values two writes are given where a change says ``<value>`` (any two different values)
_VALUES = ("__value_1__", "__value_2__")


@dataclass(frozen=True)
class _Candidate:
    """A change, how to apply it, and whether it is only a fallback: offered when no smaller change of the
    same kind was."""

    change: Change
    apply: _Apply
    fallback: bool = False


def _checked(
    candidates: list[_Candidate], a: Operation, b: Operation, table: TableConfig, profile: EngineProfile
) -> tuple[Change, ...]:
    """The candidates' changes after which the model lets the pair run together, each change once.

    Each change is applied to the two operations and the table (its ``<value>`` placeholders given two
    different values) and judged again by :func:`pair_verdict`: a change that leaves the pair conflicting,
    or that the model cannot read, is not offered.
    """
    offered: dict[Change, None] = {}
    for candidate in candidates:
        if candidate.change in offered:
            continue
        if candidate.fallback and any(c.kind is candidate.change.kind for c in offered):
            continue
        try:
            changed = candidate.apply(a, b, table)
            if not pair_verdict(*changed, profile).conflict:
                offered[candidate.change] = None
        except ValueError:
            continue
    return tuple(offered)


def _restrict(op: Operation, column: str, value: str, *, inserts: bool = True) -> Operation:
    """``op`` touching only rows whose ``column`` is ``value`` (a MERGE: in its ON condition, and with
    ``inserts`` its inserted rows too)."""
    condition = f"{column} = '{value}'"
    if op.kind is OperationKind.MERGE:
        target = f"{op.target_alias}.{condition}"
        merged = f"({op.merge_condition}) AND {target}" if op.merge_condition else target
        added = op.inserts
        if inserts and op.inserts is not None and op.inserts != "":
            added = f"({op.inserts}) AND {condition}"
        elif inserts and op.inserts is None:
            added = condition
        return replace(op, merge_condition=merged, inserts=added)
    return replace(op, predicate=f"({op.predicate}) AND {condition}" if op.predicate else condition)


def _both(column: str) -> _Apply:
    def apply(a: Operation, b: Operation, table: TableConfig) -> tuple[Operation, Operation, TableConfig]:
        return _restrict(a, column, _VALUES[0]), _restrict(b, column, _VALUES[1]), table

    return apply


def _on_table(change_table: Callable[[TableConfig], TableConfig], then: _Apply | None = None) -> _Apply:
    def apply(a: Operation, b: Operation, table: TableConfig) -> tuple[Operation, Operation, TableConfig]:
        changed = change_table(table)
        return then(a, b, changed) if then is not None else (a, b, changed)

    return apply


def _merge_on(which: int, column: str) -> _Apply:
    def apply(a: Operation, b: Operation, table: TableConfig) -> tuple[Operation, Operation, TableConfig]:
        ops = [a, b]
        for index in (0, 1) if a == b else (which,):  # two equal MERGEs: the change names both
            ops[index] = _restrict(ops[index], column, _VALUES[index], inserts=False)
        return ops[0], ops[1], table

    return apply


def _with_properties(**properties: str) -> Callable[[TableConfig], TableConfig]:
    return lambda table: replace(table, properties={**table.properties, **properties})


_DV = {"delta.enableDeletionVectors": "true"}


def _data_changes(a: OpFacts, b: OpFacts, table: TableConfig, profile: EngineProfile) -> list[_Candidate]:
    column = _shared_column(a, b) or (table.partition_columns or table.clustering_columns or ("<column>",))[0]
    changes: list[_Candidate] = []
    for index, f in enumerate((a, b)):
        if f.kind is OperationKind.MERGE and f.scope.is_everything:
            target = (table.partition_columns or table.clustering_columns or (column,))[0]
            changes.append(
                _Candidate(
                    Change(
                        ChangeKind.MERGE_CONDITION,
                        f"add `{f.op.target_alias}.{target} = <value>` to the ON condition of {f.name()}",
                    ),
                    _merge_on(index, target),
                )
            )
    if table.is_partitioned:
        cols = ", ".join(table.partition_columns)
        changes.append(
            _Candidate(
                Change(ChangeKind.PREDICATE, f"give each write a condition on different {cols} values"),
                _both(table.partition_columns[0]),
            )
        )
        return changes
    if table.has_liquid_clustering and profile.name is EngineName.DATABRICKS:
        if not table.deletion_vectors_enabled:
            changes.append(
                _Candidate(
                    Change(
                        ChangeKind.DELETION_VECTORS,
                        "enable deletion vectors (delta.enableDeletionVectors = true) so row-level concurrency applies",
                    ),
                    _on_table(_with_properties(**_DV)),
                )
            )
        changes.append(
            _Candidate(
                Change(
                    ChangeKind.PREDICATE,
                    f"make the conditions provably disjoint on {', '.join(table.clustering_columns)}",
                ),
                _on_table(_with_properties(**_DV), _both(table.clustering_columns[0])),
            )
        )
        return changes
    # The smallest partitioning first: a column the conditions already keep apart needs no new condition.
    for mentioned in dict.fromkeys((*_columns(a), *_columns(b))):
        changes.append(
            _Candidate(
                Change(
                    ChangeKind.PARTITION,
                    f"partition the table by {mentioned}: the writes' conditions already keep them apart on it",
                ),
                _on_table(lambda t, c=mentioned: replace(t, partition_columns=(c,))),  # type: ignore[misc]
            )
        )
    changes.append(
        _Candidate(
            Change(ChangeKind.PARTITION, f"partition the table by {column}, then {_disjoint(column)}"),
            _on_table(lambda t: replace(t, partition_columns=(column,)), _both(column)),
            fallback=True,
        )
    )
    if profile.name is EngineName.DATABRICKS:
        if not table.deletion_vectors_enabled and profile.at_least(14, 2):
            changes.append(
                _Candidate(
                    Change(
                        ChangeKind.DELETION_VECTORS,
                        "or enable deletion vectors (delta.enableDeletionVectors = true): row-level concurrency then "
                        "keeps rows apart without partitions",
                    ),
                    _on_table(_with_properties(**_DV)),
                )
            )
        changes.append(
            _Candidate(
                Change(
                    ChangeKind.LIQUID_CLUSTERING,
                    f"or CLUSTER BY ({column}) with deletion vectors on, so row-level concurrency applies",
                ),
                _on_table(
                    lambda t: replace(_with_properties(**_DV)(t), clustering_columns=(column,)), _both(column)
                ),
            )
        )
    # Keeping file statistics apart (delta-rs, ADR 0020) depends on the files a table will hold, which no
    # change to the pair states: it is not offered, since it cannot be checked here.
    return changes


def _disjoint(column: str) -> str:
    return f"give each write a condition on a different {column} value"


def _shared_column(a: OpFacts, b: OpFacts) -> str | None:
    """A column both operations' conditions mention (or, failing that, one either mentions)."""
    ca, cb = _columns(a), _columns(b)
    both = [c for c in ca if c in cb]
    found = both or ca or cb
    return found[0] if found else None


def _columns(f: OpFacts) -> list[str]:
    # a MERGE's ON condition without target filter names join keys, not a column to split the table by
    text = f.scope.sql if not f.scope.is_everything else f.op.predicate
    if not text:
        return []
    try:
        tree = sqlglot.parse_one(text, dialect="spark")
    except SqlglotError:
        return []
    return list(dict.fromkeys(c.name for c in tree.find_all(exp.Column) if c.name))


def _first_clause(reason: str) -> str:
    """The reason up to its first explanation (a colon after the source, a parenthesis, a semicolon)."""
    text = " ".join(reason.split())
    head, sep, tail = text.partition(": ")
    if sep and len(head) < 60 and (head.startswith(("Databricks", "delta", "Delta")) or "Conflict" in head):
        text = tail
    for mark in (" (", "; ", ". "):
        text = text.split(mark, 1)[0]
    return text


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_WHY else flat[: MAX_WHY - 1].rstrip() + "…"
