"""The conflict model: may a candidate write run beside the writes already running on a table?

``pair_verdict`` judges two operations; ``decide`` judges a candidate against every running operation,
including the 3-way rule of the page's Japanese edition (WriteSerializable: a blind append conflicts when more than one
concurrent UPDATE/DELETE/MERGE may read the appended rows). Rules are looked up per engine
(:mod:`~deltaguard.core.rules.databricks`, :mod:`~deltaguard.core.rules.delta_spark`,
:mod:`~deltaguard.core.rules.deltars`) after the shared ones (:mod:`~deltaguard.core.rules.common`).
"""

from __future__ import annotations

import contextlib
import functools
import operator
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import replace
from types import ModuleType
from typing import cast

from deltaguard.core.decision import Decision, DeltaException, PairVerdict, Verdict
from deltaguard.core.facts import (
    OpFacts,
    Role,
    TableContext,
    build_facts,
    coercion_neutral,
    parser_neutral,
    with_generated_columns,
    zone_neutral,
)
from deltaguard.core.operations import Operation
from deltaguard.core.profiles import STORAGE_COORDINATION, EngineName, EngineProfile
from deltaguard.core.rules import databricks, delta_spark, deltars
from deltaguard.core.rules.common import commit_coordination_pair, ordered, shared_pair, unknown_settings_pair
from deltaguard.core.table_config import TableConfig

_ENGINES: dict[EngineName, ModuleType] = {
    EngineName.DATABRICKS: databricks,
    EngineName.DELTA_SPARK: delta_spark,
    EngineName.DELTA_RS: deltars,
}


def _rules(profile: EngineProfile) -> ModuleType:
    try:
        return _ENGINES[profile.name]
    except KeyError:  # pragma: no cover - EngineName is closed
        raise ValueError(f"unknown engine: {profile.name!r}") from None


def table_context(table: TableConfig, profile: EngineProfile) -> TableContext:
    """How the profile's engine reads the table (isolation level, row-level concurrency, problems).

    :param table: the table configuration.
    :param profile: the engine profile.
    """
    context: TableContext = _rules(profile).table_context(table, profile)
    return context


def _judge(a: OpFacts, b: OpFacts, ctx: TableContext, rules: ModuleType) -> PairVerdict:
    # A canonical order makes every verdict (reason text included) independent of the argument order.
    first, second = (a, b) if a.order_key <= b.order_key else (b, a)
    verdict: PairVerdict | None = shared_pair(first, second, ctx)
    if verdict is None:
        verdict = rules.pair(first, second, ctx)
    if ctx.caveats:
        verdict = replace(verdict, reason=f"{verdict.reason} ({'; '.join(ctx.caveats)})")
    return verdict


class _Contexts:
    """The table as each committing engine reads it, computed once per decision."""

    def __init__(self, table: TableConfig, profile: EngineProfile) -> None:
        self.table = table
        self.profile = profile
        self.known: dict[EngineProfile, TableContext] = {profile: table_context(table, profile)}

    def __call__(self, profile: EngineProfile) -> TableContext:
        found = self.known.get(profile)
        if found is None:
            found = self.known[profile] = table_context(self.table, profile)
        return found


@functools.lru_cache(maxsize=256)
def _rules_key(profile: EngineProfile) -> EngineProfile:
    """The profile as far as the pair rules see it: the session's zone and commit coordinator do not change
    an engine's pair rules, so profiles that differ only there are judged once. Cached: every pair of
    every decision asks it (a ``replace`` re-validates the profile's version each time)."""
    return replace(
        profile,
        session_time_zone=None,
        session_ansi=None,
        session_default_parser=None,
        session_unknown_settings=(),
        commit_coordination=STORAGE_COORDINATION,
    )


def _judge_all(a: OpFacts, b: OpFacts, contexts: _Contexts) -> PairVerdict:
    """The pair under every engine that commits one of the two (ADR 0012, mixed engines).

    Each engine checks a concurrent commit with its own rules, whoever wrote it (a delta-rs writer treats a
    delta-spark blind append as a conflict like any other append), so the pair is compatible only if every
    committing engine's rules say so.
    """
    engines: dict[EngineProfile, None] = {}
    seen: set[EngineProfile] = set()
    for candidate in (contexts.profile, *(f.op.engine for f in (a, b) if f.op.engine is not None)):
        rules_key = _rules_key(candidate)
        if rules_key not in seen:
            seen.add(rules_key)
            engines[candidate] = None
    first, second = a.op.engine or contexts.profile, b.op.engine or contexts.profile
    clash = commit_coordination_pair(first, second) or unknown_settings_pair(first, second)
    if clash is not None:
        return clash
    a, b, zones = zone_neutral(
        a, b, first.session_time_zone, second.session_time_zone, contexts.table.timestamp_columns
    )
    a, b, coerced = coercion_neutral(a, b, (first, second), contexts.table)
    a, b = parser_neutral(a, first), parser_neutral(b, second)
    verdict: PairVerdict | None = None
    for profile in engines:
        found = _judge(a, b, contexts(profile), _rules(profile))
        if profile != contexts.profile:
            found = replace(found, reason=f"when {profile.describe()} commits: {found.reason}")
        if verdict is None or (found.conflict and not verdict.conflict):
            verdict = found
        elif found.conflict and verdict.conflict:
            verdict = replace(
                verdict,
                exceptions=ordered(set(verdict.exceptions) | set(found.exceptions)),
                reason=f"{verdict.reason}; {found.reason}",
                advice=tuple(dict.fromkeys((*verdict.advice, *found.advice))),
            )
    assert verdict is not None
    if zones is not None and verdict.conflict:
        verdict = replace(verdict, reason=f"{verdict.reason} ({zones})")
    if coerced is not None and verdict.conflict:
        verdict = replace(verdict, reason=f"{verdict.reason} ({coerced})")
    unknown = tuple(dict.fromkeys((*a.unknown, *b.unknown)))
    if unknown and verdict.conflict:
        verdict = replace(
            verdict,
            reason=f"{verdict.reason} (not understood, judged as the whole table: {'; '.join(unknown)})",
        )
    return verdict


def pair_verdict(a: Operation, b: Operation, table: TableConfig, profile: EngineProfile) -> PairVerdict:
    """Whether ``a`` and ``b`` can conflict on ``table`` in either commit order (symmetric).

    :param a: one operation.
    :param b: the other operation.
    :param table: the table both write to.
    :param profile: the engine that commits them (unless an operation names its own ``engine``).
    :raises ValueError: on an unparsable predicate or MERGE condition (one-line message).
    """
    first = build_facts(with_generated_columns(a, table))
    second = build_facts(with_generated_columns(b, table))
    if first.order_key > second.order_key:
        first, second = second, first
    verdict = _judge_all(first, second, _Contexts(table, profile))
    notes = _generated_notes((a, b), (first.op, second.op))
    if notes and verdict.conflict:
        verdict = replace(verdict, reason=f"{verdict.reason} ({'; '.join(notes)})")
    return verdict


def _generated_notes(given: Sequence[Operation], judged: Sequence[Operation]) -> list[str]:
    """What :func:`with_generated_columns` added to the operations, for reasons."""
    notes = []
    for op in judged:
        original = next((g for g in given if g == replace(op, assignments=g.assignments)), None)
        added = op.assignments[len(original.assignments) :] if original is not None else ()
        if added:
            shown = ", ".join(f"{column} = {expression}" for column, expression in added)
            notes.append(
                f"{op.label or op.kind.value} also rewrites generated column {shown}, so its rows may move"
            )
    return notes


class _Overlap:
    """Memoised "may the reader read what the append adds" checks for one decide() call, per pair of facts
    (equal running operations share their facts, so a crowd of them is checked once)."""

    def __init__(self, ctx: TableContext) -> None:
        self.ctx = ctx
        self.cache: dict[tuple[int, int], bool] = {}

    def __call__(self, reader_index: int, reader: OpFacts, append_index: int, append: OpFacts) -> bool:
        key = (id(reader), id(append))  # both stay alive for the whole decide() call
        found = self.cache.get(key)
        if found is None:
            found = databricks.reads_appended_rows(reader, append, self.ctx)
            self.cache[key] = found
        return found


def _is_reader(f: OpFacts) -> bool:
    return f.role in (Role.READ_WRITE, Role.REWRITE)


def _multi_reader_rule(
    cand: OpFacts, running: Sequence[OpFacts], ctx: TableContext
) -> list[tuple[tuple[int, ...], str]]:
    """The Japanese edition's 3-way note; returns (running indexes, reason) for each conflict it finds."""
    found: list[tuple[tuple[int, ...], str]] = []
    overlap = _Overlap(ctx)
    candidate_index = -1
    cite = (
        "Isolation levels and write conflicts (Japanese edition), ConcurrentAppendException (Important): in WriteSerializable a blind append can conflict when "
        "more than one concurrent UPDATE/DELETE/MERGE may read the appended rows"
    )
    if cand.role is Role.APPEND:
        readers = tuple(
            i for i, r in enumerate(running) if _is_reader(r) and overlap(i, r, candidate_index, cand)
        )
        if len(readers) >= 2:
            found.append(
                (readers, f"{cite}: {len(readers)} running readers may read what {cand.name()} appends")
            )
        return found
    if not _is_reader(cand):
        return found
    named = [k for k, r in enumerate(running) if _is_reader(r)]  # in index order: the first one is named
    for j, append in enumerate(running):
        if append.role is not Role.APPEND or not overlap(candidate_index, cand, j, append):
            continue
        other = next((k for k in named if k != j and overlap(k, running[k], j, append)), None)
        if other is not None:
            found.append(
                (
                    (j,),
                    f"{cite}: {cand.name()} and running #{other} ({running[other].name()}) may both read what "
                    f"running #{j} ({append.name()}) appends",
                )
            )
    return found


def _advice_for_multi(cand: OpFacts) -> str:
    if cand.role is Role.APPEND:
        return "run the append when at most one UPDATE/DELETE/MERGE that may read its rows is running"
    return "make the UPDATE/DELETE/MERGE conditions exclude the rows being appended, or wait for the append"


def _reusable(verdict: PairVerdict, other: OpFacts) -> bool:
    """Whether ``verdict`` on (candidate, ``other``) also stands for the candidate beside any operation equal
    to ``other`` but for its label (:class:`OpFacts` compare so: an operation's label is not part of its
    equality, and the rules read no label). The label shows only in text, through ``name()``; a verdict
    whose text names ``other`` is not reused, so every reused verdict reads exactly as the one it saves."""
    name = other.name()
    return name not in verdict.reason and not any(name in item for item in verdict.advice)


#: A pair's verdict depends on the two operations (label included, for the text), the table and the profile.
_PairKey = tuple[object, ...]


class _TableMemo:
    """What a pass keeps per table and profile: pair verdicts by (candidate, its label, other, its label)
    and, when the text names neither, by (candidate, other); and each operation object's facts (by
    identity, the object kept alive with them)."""

    def __init__(self) -> None:
        self.pairs: dict[_PairKey, PairVerdict] = {}
        self.facts: dict[int, tuple[Operation, OpFacts]] = {}


class _PassMemo:
    """What :func:`pair_memo` keeps while a pass is open.

    :ivar tables: per (table, profile, the table's oracle), its :class:`_TableMemo`.
    :ivar canonical: per operation object (by identity, the object kept alive with it), the first operation
        seen equal to it (labels aside): grouping a decision's running operations then costs an identity
        lookup per operation, not an operation hash and comparison.
    """

    def __init__(self) -> None:
        self.tables: dict[_PairKey, _TableMemo] = {}
        self.canonical: dict[int, tuple[Operation, Operation]] = {}
        self.first_equal: dict[Operation, Operation] = {}


#: The open pass's memo (:func:`pair_memo`); ``None``: no pass is open.
_PASS: ContextVar[_PassMemo | None] = ContextVar("deltaguard_pair_memo", default=None)


@contextlib.contextmanager
def pair_memo() -> Iterator[None]:
    """Within the block, :func:`decide` keeps every pair verdict it reaches and gives it again for the same
    pair on the same table and profile: the same two operations with the same labels, or equal but for labels
    the verdict's text does not name (:func:`_reusable`, on both sides). A verdict is a function of exactly
    these, so a decision reads the same with or without the memo.

    For a caller that decides many requests one after another against mostly the same holders (the
    re-admission of a table's queue, ADR 0031): each distinct pair is judged once per pass, not once per
    decision, and each running operation is grouped with its equals once per pass. Kept per context
    (thread, task), so concurrent passes never share it; dropped at the end of the block.
    """
    token = _PASS.set(_PassMemo())
    try:
        yield
    finally:
        _PASS.reset(token)


def _table_memo(passed: _PassMemo | None, table: TableConfig, profile: EngineProfile) -> _TableMemo:
    """The open pass's memo of ``table`` under ``profile`` (a fresh one when no pass is open, or when the
    two cannot key a map). Looked up once per decide() call: a table configuration hashes all its fields.

    The engine's evaluator the configuration carries (``TableConfig.meaning``, ADR 0037) is part of the key
    although not of the configuration's equality: a verdict the hand reading reached alone is not the
    verdict with the engine's check, which may refute it, so the two never share a memo. The oracle object
    itself keys it (by identity unless it says otherwise), kept alive by the key."""
    if passed is None:
        return _TableMemo()
    key = (table, profile, table.meaning)
    try:
        found = passed.tables.get(key)
        if found is None:
            found = passed.tables[key] = _TableMemo()
        return found
    except TypeError:  # an unhashable configuration: no memo, every pair is judged
        return _TableMemo()


def _equal_groups(running: Sequence[Operation], passed: _PassMemo | None) -> dict[int, list[int]]:
    """The indexes of ``running`` grouped by operation equality (labels aside), each group keyed by the
    identity of its first-seen member's operation, groups in order of first appearance.

    An entry of the memo holds its operation, so an id found there is that very object (no other live
    object has its id): the lookups are by identity, done by ``map`` without a Python step per operation,
    and only operations new to the pass are hashed and compared.
    """
    canonical = passed.canonical if passed is not None else {}
    first_equal = passed.first_equal if passed is not None else {}
    if len(canonical) + len(running) > _MAX_PASS_OPS:  # a bounded memo: forgetting only costs a lookup
        canonical.clear()
        first_equal.clear()
    looked_up = list(map(canonical.get, map(id, running)))
    if None in looked_up:
        for index, entry in enumerate(looked_up):
            if entry is None:
                op = running[index]
                found = canonical.get(id(op))
                if found is None:
                    found = canonical[id(op)] = (op, first_equal.setdefault(op, op))
                looked_up[index] = found
    entries = cast("list[tuple[Operation, Operation]]", looked_up)  # every None was filled in above
    keys = list(map(id, map(_SECOND, entries)))
    distinct = dict.fromkeys(keys)
    if len(distinct) == 1:  # the crowd's case: one kind of operation
        return {keys[0]: list(range(len(keys)))}
    groups: dict[int, list[int]] = {key: [] for key in distinct}
    for index, key in enumerate(keys):
        groups[key].append(index)
    return groups


_SECOND = operator.itemgetter(1)


#: past this many operation objects a pass forgets their groups (and starts again)
_MAX_PASS_OPS = 100_000


class _LazyFacts(Sequence[OpFacts]):
    """The facts of each running operation, built when read (a reason names at most a few of them)."""

    def __init__(self, running: Sequence[Operation], table: TableConfig) -> None:
        self._running = running
        self._table = table

    def __len__(self) -> int:
        return len(self._running)

    def __getitem__(self, index: int) -> OpFacts:  # type: ignore[override]
        return build_facts(with_generated_columns(self._running[index], self._table))


def decide(
    candidate: Operation, running: Sequence[Operation], table: TableConfig, profile: EngineProfile
) -> Decision:
    """Decide whether ``candidate`` may start while ``running`` operations are in flight on ``table``.

    Facts (parsed predicates, roles) are computed once per distinct operation, then every pair is judged
    (once per distinct pair: running operations equal but for a label the verdict does not name share
    it), then multi-way rules are applied.

    :param candidate: the operation that wants to start.
    :param running: the operations already running on the same table.
    :param table: the table.
    :param profile: the engine that commits the writes.
    :raises ValueError: on an unparsable predicate or MERGE condition (one-line message), before any
        verdict is produced.
    """
    contexts = _Contexts(table, profile)
    ctx = contexts(profile)
    cand_op = with_generated_columns(candidate, table)
    cand = build_facts(cand_op)
    passed = _PASS.get()
    # Running operations equal but for their label are one group: judged once against the candidate (see
    # _reusable) and answered for every member. A queue of 1,000 appends costs one judgement and a pass
    # over the indexes, not 1,000 judgements.
    groups = _equal_groups(running, passed)
    table_memo = _table_memo(passed, table, profile)
    # Facts are built for every operation up front (as an unparsable one must raise before any verdict),
    # once per operation object (per pass, when one is open).
    # (An entry holds its operation, so an id found there is that very object.)
    known_facts = table_memo.facts
    ids = set(map(id, running))
    if len(known_facts) + len(ids) > _MAX_PASS_OPS:
        known_facts.clear()
    new = ids.difference(known_facts)
    if new:
        for op in running:
            if id(op) in new and id(op) not in known_facts:
                known_facts[id(op)] = (op, build_facts(with_generated_columns(op, table)))

    def facts_of(op: Operation) -> OpFacts:
        return known_facts[id(op)][1]

    others: Sequence[OpFacts] = _LazyFacts(running, table)
    if ctx.multi_reader_append:
        others = [facts_of(op) for op in running]

    conflicts: dict[int, None] = {}
    exceptions: set[DeltaException] = set()
    grouped: dict[str, list[int]] = {}
    advice: dict[str, None] = {}
    rules_used: dict[str, None] = {}
    any_conflict = False
    memo = table_memo.pairs
    cand_label = cand_op.label

    def judged(other: OpFacts) -> PairVerdict:
        """The pair's verdict, from the pass when it judged the same pair (the same labels, or labels the
        text does not name), else judged now."""
        exact = (cand_op, cand_label, other.op, other.op.label)
        loose = (cand_op, other.op)
        verdict = memo.get(exact) or memo.get(loose)
        if verdict is None:
            verdict = _judge_all(cand, other, contexts)
            memo[exact] = verdict
            if _reusable(verdict, other) and _reusable(verdict, cand):
                memo[loose] = verdict
        return verdict

    parts: list[tuple[PairVerdict, list[int]]] = []
    for members in groups.values():
        first = facts_of(running[members[0]])
        verdict = judged(first)
        if _reusable(verdict, first):
            parts.append((verdict, members))
            continue
        # The text names the operation: each label gets its own verdict (and its own text).
        by_label: dict[str | None, list[int]] = {}
        for index in members:
            by_label.setdefault(running[index].label, []).append(index)
        for same in by_label.values():
            parts.append((judged(facts_of(running[same[0]])), same))
    for verdict, members in parts:
        rules_used[verdict.rule] = None
        if verdict.conflict:
            any_conflict = True
            conflicts.update(dict.fromkeys(members))
            exceptions.update(verdict.exceptions)
            for item in verdict.advice:
                advice[item] = None
        grouped.setdefault(("C" if verdict.conflict else "N") + verdict.reason, []).extend(members)

    multi: list[tuple[tuple[int, ...], str]] = []
    if ctx.multi_reader_append and others:
        multi = _multi_reader_rule(cand, others, ctx)
    for indexes, _reason in multi:
        any_conflict = True
        for index in indexes:
            conflicts[index] = None
        exceptions.add(DeltaException.CONCURRENT_APPEND)
        advice[_advice_for_multi(cand)] = None
        rules_used["db.multi_reader_append"] = None

    reasons: list[str] = []
    # The order of the reasons is that of their first member in running order (as judging the members one
    # by one would meet them).
    for key, members in sorted(grouped.items(), key=lambda item: min(item[1])):
        is_conflict, text = key[0] == "C", key[1:]
        if any_conflict and not is_conflict:
            continue  # on a conflict, report what conflicts; compatible pairs are noise
        members.sort()  # groups were added whole: the members in running order
        reasons.append(
            f"{'conflicts with' if is_conflict else 'compatible with'} {_name_list(members, others)}: {text}"
        )
    reasons.extend(reason for _, reason in multi)
    if any_conflict:
        reasons.extend(_running_notes(candidate, cand_op, running, groups, table))
    if not running:
        reasons.append(f"no operation is running on the table ({profile.describe()})")
    return Decision(
        verdict=Verdict.CONFLICT if any_conflict else Verdict.NO_CONFLICT,
        exceptions=ordered(exceptions),
        conflicts_with=tuple(sorted(conflicts)),
        reasons=tuple(reasons),
        advice=tuple(_in_running_order(advice, parts, advice=True)),
        rules=tuple(_in_running_order(rules_used, parts, advice=False)),
    )


def _in_running_order(
    found: dict[str, None], parts: Sequence[tuple[PairVerdict, list[int]]], advice: bool
) -> list[str]:
    """Rule names (or, with ``advice``, the conflicts' advice items) in the order judging the running
    operations one by one would meet them, each at its first member's index and in its verdict's order;
    the multi-way rule's, which come after every pair's, last."""
    first: dict[str, tuple[int, int]] = {}
    for verdict, members in parts:
        items = (verdict.advice if verdict.conflict else ()) if advice else (verdict.rule,)
        for position, item in enumerate(items):
            at = (members[0], position)
            if item not in first or at < first[item]:
                first[item] = at
    late = (1 << 62, 0)
    return sorted(found, key=lambda item: first.get(item, late))


def _running_notes(
    candidate: Operation,
    cand_op: Operation,
    running: Sequence[Operation],
    groups: dict[int, list[int]],
    table: TableConfig,
) -> list[str]:
    """:func:`_generated_notes` of the candidate and every running operation, in running order, worked out
    once per operation object (an operation's note is the first given operation it matches, labels and
    assignments aside: among the groups' first members that is the same one as among all of ``running``)."""
    originals = (candidate, *(running[members[0]] for members in groups.values()))
    notes = _generated_notes(originals, (cand_op,))
    per_object: dict[int, list[str]] = {}
    for op in running:
        found = per_object.get(id(op))
        if found is None:
            found = per_object[id(op)] = _generated_notes(originals, (with_generated_columns(op, table),))
        notes.extend(found)
    return notes


def _name_list(indexes: list[int], others: Sequence[OpFacts], limit: int = 5) -> str:
    shown = ", ".join(f"running #{i} ({others[i].name()})" for i in indexes[:limit])
    if len(indexes) > limit:
        shown += f" and {len(indexes) - limit} more"
    return shown
