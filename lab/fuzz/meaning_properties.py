"""Property spellings: the meaning fuzzer's generator of table properties as users really store them.

Known keys in another case (``delta.IsolationLevel``, ``DELTA.APPENDONLY``), unknown ``delta.*`` keys
(``delta.isolationLevel2``, ``delta.feature.madeUp``), booleans spelled otherwise than ``true``/``false``
(``TRUE``, ``True``, `` true``, ``1``), beside exact spellings. deltalake 1.6.6 refuses most of them at
creation ("Error parsing property"), so the table is created bare and the properties are set afterwards
(``alter.set_table_properties``), which stores them as spelled, as another engine or an older writer may.

Each case is one pair whose outcome on delta-rs depends on what the properties mean: an insert-if-absent
MERGE beside a blind append into the same partition (the isolation level), a DELETE, an UPDATE or an
insert-if-absent MERGE beside such an append, or a DELETE beside a DELETE of another partition (append-only).
The model is asked as the operators ask it (the configuration the engine reads, with its evaluator); a pair
it allows is run stale-concurrently on delta-rs, both orders, and is confirmed unsound when a commit fails
otherwise than serially or both commit into a state no serial order gives.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Spellings of each known key (the exact one weighted up).
KEYS: dict[str, tuple[str, ...]] = {
    "isolation": ("delta.isolationLevel",) * 3 + ("delta.IsolationLevel", "delta.isolationlevel", "DELTA.ISOLATIONLEVEL"),
    "append": ("delta.appendOnly",) * 2 + ("delta.appendonly", "delta.AppendOnly"),
    "vectors": ("delta.enableDeletionVectors",) * 2 + ("delta.EnableDeletionVectors",),
}  # fmt: skip
VALUES: dict[str, tuple[str, ...]] = {
    "isolation": ("Serializable", "WriteSerializable", "SnapshotIsolation", "snapshotIsolation", "serializable"),
    "append": ("true", "false", "TRUE", "True", " true", "1", "FALSE"),
    "vectors": ("true", "false", "TRUE", "False"),
}  # fmt: skip
#: Keys no engine knows, and user keys (no ``delta.`` prefix) no engine interprets.
OTHER: tuple[tuple[str, str], ...] = (
    ("delta.isolationLevel2", "SnapshotIsolation"),
    ("delta.fooBar", "1"),
    ("delta.feature.madeUp", "supported"),
    ("delta.checkpointinterval", "10"),
    ("owner", "ops"),
    ("Delta.comment", "x"),
)
#: The pairs each case may run (``write`` beside ``append`` into the same partition, or two DELETEs).
PAIRS: tuple[str, ...] = ("insert-if-absent", "delete", "update", "delete-delete")


def gen_property_layout(rng: random.Random) -> Any:
    """A table with one STRING partition column ``p`` (``a``, ``b``, ``c``) and generated properties."""
    from lab.fuzz.meaning import Layout

    properties: dict[str, str] = {}
    for family in rng.sample(tuple(KEYS), rng.randint(1, 2)):
        properties[rng.choice(KEYS[family])] = rng.choice(VALUES[family])
    if rng.random() < 0.3:
        key, value = rng.choice(OTHER)
        properties[key] = value
    return Layout((("p", "string"),), (("a",), ("b",), ("c",)), tuple(properties.items()))


@dataclass(frozen=True)
class PropertyCase:
    pair: str
    partition: str
    other: str

    def describe(self) -> dict[str, Any]:
        return {"kind": "properties", "pair": self.pair, "partition": self.partition, "other": self.other}


def gen_property_case(rng: random.Random) -> PropertyCase:
    partition, other = rng.sample(("a", "b", "c"), 2)
    return PropertyCase(rng.choice(PAIRS), partition, other)


def pair_specs(case: PropertyCase, layout: Any) -> tuple[Any, Any, Any]:
    """The two writes of the case, and what the model is told about the first (an insert-if-absent is
    the INSERT reading its table that SQL's ``INSERT ... WHERE NOT EXISTS`` is classified as, as in the
    conformance harness's ``INSERT_READING_TARGET``)."""
    from deltaguard.core.operations import Operation, OperationKind
    from deltaguard.engines import specs
    from lab.fuzz.meaning import _rows

    row = (case.partition,)
    index = layout.values.index(row)
    append = specs.AppendSpec(_rows(layout, row, [500]), partition_values={"p": case.partition})
    if case.pair == "insert-if-absent":
        write: Any = specs.MergeSpec(
            source=_rows(layout, row, [10 * index + 1, 600]),
            condition="t.id = s.id",
            target_partition_values={"p": case.partition},
            not_matched_insert_all=True,
        )
    elif case.pair == "delete":
        write = specs.DeleteSpec(predicate=f"p = '{case.partition}'")
    elif case.pair == "update":
        write = specs.UpdateSpec({"v": "'u'"}, f"p = '{case.partition}'")
    else:
        write = specs.DeleteSpec(predicate=f"p = '{case.partition}'")
        append = specs.DeleteSpec(predicate=f"p = '{case.other}'")
    if case.pair == "insert-if-absent":
        told = Operation(OperationKind.INSERT, predicate=f"p = '{case.partition}'", reads_target=True)
    else:
        told = write.operation()
    return write, append, told


def check_property_case(
    tables: Any, summary: Any, layout: Any, case: PropertyCase, root: Path, confirm: bool
) -> None:
    """Ask the model about the case's pair; run a pair it allows stale-concurrently on delta-rs."""
    from deltaguard.core.closed_world import property_problems
    from lab.fuzz.meaning import FuzzWrite, _error_class, confirm_pair, model_verdicts

    made = tables.base(layout)
    if made is None:
        summary.refused["layout not creatable"] += 1
        return
    base, config, _ = made
    first, second, told = pair_specs(case, layout)
    hand, oracle = model_verdicts(told, second.operation(), config, tables.engine.profile())
    if oracle or not confirm:
        return
    summary.allowed_run += 1
    try:
        outcome = confirm_pair(
            tables, base, FuzzWrite("A", lambda _uri: first), FuzzWrite("B", lambda _uri: second)
        )
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt | SystemExit | GeneratorExit):
            raise
        outcome = f"confirmation failed: {_error_class(error)}"
    if not outcome.startswith("confirmed"):
        return
    problems = property_problems(dict(layout.properties))
    label = f"properties {case.pair}: {'spelled otherwise' if problems else 'exact'}"
    summary.candidates["property"] += 1
    summary.by_class[label] += 1
    summary.confirmed[f"{label} (property)"] += 1
    summary.findings.append(
        {
            "layout": layout.describe(),
            "write": case.describe(),
            "partition": [case.partition],
            "model_allows": ["property"] + ([] if hand else ["hand"]),
            "class": label,
            "stale_concurrent": outcome,
        }
    )
