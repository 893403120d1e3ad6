"""``python -m lab.fuzz.meaning``: a differential fuzzer of *meaning* (no concurrency).

On generated partitioned delta-rs tables (partition types int/long/string/date/bool, with ``--wide`` also
short/byte/timestamp/timestamp_ntz/double; plain, upper/mixed
case, dotted and spaced names, NULL and empty-string partitions, long strings, property spellings, column
mapping ``name``/``id``) it runs one generated write (DELETE, UPDATE, MERGE, REPLACE WHERE, append, with
generated predicates and literals of every kind, including ones of another type than the column) through
:class:`~deltaguard.engines.deltars.engine.DeltaRsEngine`, exactly as the operators do, and reads the
partitions the commit really touched (its ``remove`` and ``add`` actions). For every touched partition it
asks the conflict model about the write beside a ``DELETE`` of that one partition: the engine's touch makes
that pair conflict on delta-rs, so a ``no_conflict`` is a candidate unsoundness. The model is asked twice:
with the hand-written reading alone (``hand``) and with delta-rs' evaluator confirming partition
disjointness (``oracle``, ADR 0037). It also reports where the model's own scope reading
(:func:`deltaguard.core.sql.predicates.provably_disjoint` over the write's read and write scopes) calls a
touched partition untouched (``scope``). Each candidate is then run stale-concurrently (both orders) and
counts as confirmed when a commit fails or both commit into a state no serial order gives.

With ``--families`` the cases are drawn from more generators (ADR 0037): sources that read the target
(:mod:`lab.fuzz.meaning_sources`), property spellings (:mod:`lab.fuzz.meaning_properties`), engine versions
never measured and session settings (:mod:`lab.fuzz.meaning_settings`). Every candidate is confirmed with the
conformance runner's serial and stale-concurrent executions (:func:`confirm_pair`).

Prints counted progress lines (also when not on a terminal) and a summary; saves every candidate as a
JSON reproducer under ``--save-dir``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

#: Delta type of each generated partition type, and its Arrow type.
TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "integer": pa.int32(),
    "long": pa.int64(),
    "date": pa.date32(),
    "boolean": pa.bool_(),
}
#: With ``--wide``, more partition types (their Arrow types): narrow integers, timestamps and DOUBLE.
WIDE_TYPES: dict[str, pa.DataType] = {
    "short": pa.int16(),
    "byte": pa.int8(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "double": pa.float64(),
}
ARROW_TYPES: dict[str, pa.DataType] = {**TYPES, **WIDE_TYPES}
_LONG = "k" * 70
_UTC = dt.UTC
#: Partition values per type the tables hold (``None``: the NULL partition).
VALUES: dict[str, tuple[Any, ...]] = {
    "string": ("a", "b", "A", "01", "1", "", None, _LONG, "2", "12", "it's"),
    "integer": (1, 2, -1, 10, 0, None),
    "long": (0, 5, 2**40, -7, None),
    "date": (dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2023, 12, 31), None),
    "boolean": (True, False, None),
    "short": (0, 1, -1, 300, None),
    "byte": (0, 1, 2, -1, None),
    "timestamp": (
        dt.datetime(2024, 1, 1, tzinfo=_UTC),
        dt.datetime(2024, 1, 1, 0, 0, 1, 500000, tzinfo=_UTC),
        dt.datetime(2024, 1, 2, tzinfo=_UTC),
        None,
    ),
    "timestamp_ntz": (dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, 12), dt.datetime(2023, 12, 31), None),
    "double": (0.0, 1.5, -1.0, 2.0, None),
}
#: Literals written in predicates beyond the column's own values: other types and spellings (coercion).
FOREIGN: tuple[str, ...] = (
    "'1'",
    "'01'",
    "'1.5'",
    "1.5",
    "1",
    "2",
    "'2024-1-1'",
    "'2024-01-01'",
    "DATE '2024-01-02'",
    "'true'",
    "true",
    "'a'",
    "'A'",
    "''",
    "' 1'",
    "-1",
    "'2024-01-01 00:00:00'",
    "10",
    "'10'",
)
#: With ``--wide``, more spellings: numbers that are not whole or whole in another form, typed numbers,
#: arithmetic, timestamps with and without a zone.
WIDE_FOREIGN: tuple[str, ...] = (
    ".5",
    "15e-1",
    "1.0",
    "1e0",
    "-0.5",
    "0.5",
    "'1.5'",
    "1.5D",
    "1L",
    "+1",
    "3/2",
    "1 + 0",
    "CAST(1.5 AS DOUBLE)",
    "2147483648",
    "TIMESTAMP '2024-01-01 00:00:00'",
    "TIMESTAMP '2024-01-01 00:00:00+00:00'",
    "TIMESTAMP '2024-01-01 01:00:00+01:00'",
    "'2024-01-01T00:00:00'",
    "'2024-01-01 00:00:01.5'",
    "DATE '2024-01-01'",
)
#: Names a partition column may be stored under (dotted, spaced, upper and mixed case).
NAMES: tuple[str, ...] = ("p", "q", "P", "Region", "a.b", "my col", "DAY", "x_1")
#: Property sets a table may carry (spellings the engine reads differently; column mapping modes).
PROPERTIES: tuple[dict[str, str], ...] = (
    {},
    {},
    {"delta.isolationLevel": "Serializable"},
    {"delta.IsolationLevel": "snapshotIsolation"},
    {"delta.isolationLevel": "WriteSerializable"},
    {"delta.columnMapping.mode": "name"},
    {"delta.columnMapping.mode": "id"},
    {"delta.appendOnly": "false"},
)


@dataclass(frozen=True)
class Layout:
    """A generated table: its partition columns (stored name, Delta type), values and properties."""

    partitions: tuple[tuple[str, str], ...]
    values: tuple[tuple[Any, ...], ...]
    properties: tuple[tuple[str, str], ...]
    #: ``(column, generation expression)`` of a generated partition column (``GENERATED ALWAYS AS``)
    generated: tuple[tuple[str, str], ...] = ()
    #: predicates also use :data:`WIDE_FOREIGN` (``--wide``)
    wide: bool = False

    def describe(self) -> dict[str, Any]:
        return {
            "partitions": [list(p) for p in self.partitions],
            "values": [[_jsonable(v) for v in row] for row in self.values],
            "properties": dict(self.properties),
            "generated": [list(g) for g in self.generated],
            **({"wide": True} if self.wide else {}),
        }


@dataclass
class Case:
    """One generated write and what it was generated from (for the reproducer)."""

    kind: str
    args: dict[str, Any]
    spec: Any = field(repr=False, default=None)


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.date) else value


def quote(name: str) -> str:
    """A column name in Spark SQL as a user writes it: bare when it can be, else in backticks."""
    return name if name.replace("_", "").isalnum() and not name[0].isdigit() else f"`{name}`"


def spelled(rng: random.Random, name: str) -> str:
    """The column as one write spells it: quoted or not, in another case (Delta names are case-insensitive)."""
    choice = rng.random()
    text = name.lower() if choice < 0.2 else name.upper() if choice < 0.3 else name
    return f"`{text}`" if rng.random() < 0.3 else quote(text)


def literal(value: Any, kind: str) -> str:
    """A partition value as a Spark SQL literal of the column's own type."""
    if value is None:
        return "NULL"
    if kind == "date":
        return f"DATE '{value.isoformat()}'"
    if kind == "boolean":
        return "true" if value else "false"
    if kind == "timestamp":
        return f"TIMESTAMP '{value.strftime('%Y-%m-%d %H:%M:%S.%f')}+00:00'"
    if kind == "timestamp_ntz":
        return f"CAST('{value.strftime('%Y-%m-%d %H:%M:%S.%f')}' AS TIMESTAMP_NTZ)"
    if kind == "string":
        return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)


def gen_layout(rng: random.Random, wide: bool = False) -> Layout:
    """A generated table; with ``wide`` its partition types also come from :data:`WIDE_TYPES`."""
    count = 1 if rng.random() < 0.7 else 2
    names = rng.sample(NAMES, count)
    if count == 2 and names[0].lower() == names[1].lower():
        names = names[:1]
    kinds = tuple(ARROW_TYPES if wide else TYPES)
    columns = tuple((name, rng.choice(kinds)) for name in names)
    per_column = [rng.sample(VALUES[kind], min(len(VALUES[kind]), rng.randint(2, 4))) for _, kind in columns]
    rows: list[tuple[Any, ...]] = [()]
    for values in per_column:
        rows = [(*row, value) for row in rows for value in values]
    return Layout(columns, tuple(rows), tuple(rng.choice(PROPERTIES).items()), wide=wide)


def gen_generated_layout(rng: random.Random) -> Layout:
    """A table partitioned by a generated column ``g = id % 3``: setting ``id`` moves rows between partitions."""
    return Layout(
        (("g", "long"),), ((0,), (1,), (2,)), tuple(rng.choice(PROPERTIES[:3]).items()), (("g", "id % 3"),)
    )


def gen_atom(rng: random.Random, layout: Layout) -> str:
    name, kind = rng.choice(layout.partitions)
    column = spelled(rng, name)
    if rng.random() < 0.15:
        return rng.choice(("id > 2", "id = 1", "v = 'x'", "id IS NULL"))
    pool = [literal(v, kind) for v in VALUES[kind] if v is not None]
    lit = (
        rng.choice(pool)
        if rng.random() < 0.75
        else rng.choice(FOREIGN + WIDE_FOREIGN if layout.wide else FOREIGN)
    )
    shape = rng.random()
    if shape < 0.45:
        return f"{column} = {lit}"
    if shape < 0.55:
        return f"{column} IN ({lit}, {rng.choice(pool)})"
    if shape < 0.63:
        return f"{column} <> {lit}"
    if shape < 0.78:
        return f"{column} {rng.choice(('<', '<=', '>', '>='))} {lit}"
    if shape < 0.83:
        return f"{column} BETWEEN {lit} AND {rng.choice(pool)}"
    if shape < 0.9:
        return f"{column} IS {'NOT ' if rng.random() < 0.5 else ''}NULL"
    if shape < 0.95 and kind == "string":
        return f"{column} LIKE '{rng.choice(('a', 'A', '1', 'k'))}%'"
    return f"NOT ({column} = {lit})"


def gen_predicate(rng: random.Random, layout: Layout, nested: bool = False) -> str:
    """One atom or two joined by AND / OR; with ``nested``, a tree of up to three levels (:func:`gen_tree`)."""
    if nested:
        return gen_tree(rng, layout, 3)
    first = gen_atom(rng, layout)
    roll = rng.random()
    if roll < 0.6:
        return first
    joiner = "AND" if roll < 0.8 else "OR"
    return f"({first}) {joiner} ({gen_atom(rng, layout)})"


def gen_tree(rng: random.Random, layout: Layout, depth: int) -> str:
    """A predicate tree of AND, OR and NOT over atoms, ``depth`` levels at most: the shapes whose exact
    reading drops a contradicting term (``p <> 'a' AND (p IS NULL OR p <> 'b')``), which an engine pruning
    with unknowns may keep."""
    roll = rng.random()
    if depth <= 1 or roll < 0.35:
        return gen_atom(rng, layout)
    if roll < 0.45:
        return f"NOT ({gen_tree(rng, layout, depth - 1)})"
    joiner = "AND" if roll < 0.75 else "OR"
    return f"({gen_tree(rng, layout, depth - 1)}) {joiner} ({gen_tree(rng, layout, depth - 1)})"


def _rows(layout: Layout, partition: tuple[Any, ...], ids: Sequence[int]) -> pa.Table:
    data: dict[str, pa.Array] = {
        "id": pa.array(list(ids), pa.int64()),
        "v": pa.array([f"v{i}" for i in ids], pa.string()),
    }
    for (name, kind), value in zip(layout.partitions, partition, strict=True):
        data[name] = pa.array([value] * len(ids), ARROW_TYPES[kind])
    return pa.table(data)


def gen_case(rng: random.Random, layout: Layout, nested: bool = False) -> Case:
    from deltaguard.engines import specs

    kind = rng.choices(("delete", "update", "merge", "replace_where", "append"), (4, 3, 3, 2, 1))[0]
    if layout.generated:
        # rows of a generated partition must follow its expression: only DELETE and UPDATE are generated
        kind = "update" if kind != "delete" else kind
        if kind == "update":
            predicate = gen_predicate(rng, layout, nested)
            updates = {"id": str(rng.randint(1, 40))} if rng.random() < 0.6 else {"v": "'u'"}
            return Case(
                kind, {"predicate": predicate, "updates": updates}, specs.UpdateSpec(updates, predicate)
            )
    if kind == "delete":
        predicate = gen_predicate(rng, layout, nested)
        return Case(kind, {"predicate": predicate}, specs.DeleteSpec(predicate=predicate))
    if kind == "update":
        predicate = gen_predicate(rng, layout, nested)
        name, column_kind = rng.choice(layout.partitions)
        if rng.random() < 0.5:
            # the spec names the column bare (as a user writes a dict key), in the case a user might use
            target = name if rng.random() < 0.7 else rng.choice((name.lower(), name.upper()))
            value = literal(rng.choice(VALUES[column_kind]), column_kind)
        else:
            target, value = "v", "'u'"
        updates = {target: value}
        return Case(kind, {"predicate": predicate, "updates": updates}, specs.UpdateSpec(updates, predicate))
    partition = rng.choice(layout.values)
    if kind == "append":
        return Case(
            kind,
            {"partition": [_jsonable(v) for v in partition]},
            specs.AppendSpec(_rows(layout, partition, [900])),
        )
    if kind == "replace_where":
        conjuncts = [
            f"{spelled(rng, name)} = {literal(value, k)}"
            if value is not None
            else f"{spelled(rng, name)} IS NULL"
            for (name, k), value in zip(layout.partitions, partition, strict=True)
        ]
        predicate = " AND ".join(conjuncts)
        return Case(
            kind,
            {"predicate": predicate, "partition": [_jsonable(v) for v in partition]},
            specs.ReplaceWhereSpec(source=_rows(layout, partition, [800]), predicate=predicate),
        )
    # MERGE: match on id within an explicit target partition (or without one), update and maybe insert
    name, column_kind = rng.choice(layout.partitions)
    target = layout.partitions.index((name, column_kind))
    value = partition[target]
    condition = "t.id = s.id"
    if value is not None and rng.random() < 0.8:
        condition += f" AND t.{spelled(rng, name)} = {literal(value, column_kind)}"
    insert = rng.random() < 0.4
    source = _rows(layout, partition, [1, 700])
    return Case(
        kind,
        {"condition": condition, "insert": insert, "partition": [_jsonable(v) for v in partition]},
        specs.MergeSpec(
            source=source, condition=condition, matched_update={"v": "s.v"}, not_matched_insert_all=insert
        ),
    )


def layout_of(saved: dict[str, Any]) -> Layout:
    """The layout a reproducer names (its ``layout`` field)."""
    partitions = tuple((str(name), str(kind)) for name, kind in saved["partitions"])
    values = tuple(
        tuple(_from_json(v, kind) for v, (_, kind) in zip(row, partitions, strict=True))
        for row in saved["values"]
    )
    generated = tuple((str(c), str(e)) for c, e in saved.get("generated", ()))
    return Layout(
        partitions, values, tuple(dict(saved["properties"]).items()), generated, bool(saved.get("wide"))
    )


def case_of(write: dict[str, Any], layout: Layout) -> Case:
    """The write a reproducer names (its ``write`` field), as :func:`gen_case` made it."""
    from deltaguard.engines import specs

    kind = write["kind"]
    args = {k: v for k, v in write.items() if k != "kind"}
    partition = tuple(
        _from_json(v, k) for v, (_, k) in zip(args.get("partition", ()), layout.partitions, strict=False)
    )
    spec: Any
    if kind == "delete":
        spec = specs.DeleteSpec(predicate=args["predicate"])
    elif kind == "update":
        spec = specs.UpdateSpec(dict(args["updates"]), args["predicate"])
    elif kind == "append":
        spec = specs.AppendSpec(_rows(layout, partition, [900]))
    elif kind == "replace_where":
        spec = specs.ReplaceWhereSpec(source=_rows(layout, partition, [800]), predicate=args["predicate"])
    else:
        spec = specs.MergeSpec(
            source=_rows(layout, partition, [1, 700]),
            condition=args["condition"],
            matched_update={"v": "s.v"},
            not_matched_insert_all=bool(args["insert"]),
        )
    return Case(kind, args, spec)


def _from_json(value: Any, kind: str) -> Any:
    if kind == "date" and isinstance(value, str):
        return dt.date.fromisoformat(value)
    if kind in ("timestamp", "timestamp_ntz") and isinstance(value, str):
        return dt.datetime.fromisoformat(value)
    return value


# ------------------------------------------------------------------------------------------- the engine side
class Tables:
    """One created base table per layout, reused by every case on it (each case writes a fresh copy)."""

    def __init__(self, root: Path) -> None:
        from deltaguard.engines.deltars.engine import DeltaRsEngine

        self.root = root
        self.engine = DeltaRsEngine()
        self.bases: dict[Layout, tuple[Path, Any, dict[str, str]] | None] = {}
        self.count = 0
        self._runner: Any = None

    def runner(self) -> Any:
        """The conformance runner the candidates are confirmed with (its copies under ``root/runs``)."""
        from lab.conformance.runner import GroupRunner

        if self._runner is None:
            (self.root / "runs").mkdir(parents=True, exist_ok=True)
            self._runner = GroupRunner(self.root / "runs")
        return self._runner

    def base(self, layout: Layout) -> tuple[Path, Any, dict[str, str]] | None:
        """The base table's path, its configuration as the operators read it and its physical names."""
        if layout not in self.bases:
            self.bases[layout] = self._create(layout)
        return self.bases[layout]

    def _create(self, layout: Layout) -> tuple[Path, Any, dict[str, str]] | None:
        from deltalake import DeltaTable, write_deltalake

        self.count += 1
        path = self.root / f"base{self.count}"
        if layout.generated:
            return self._create_generated(path, layout)
        data = pa.concat_tables(
            [_rows(layout, row, [10 * i + 1, 10 * i + 2]) for i, row in enumerate(layout.values)]
        )
        partition_by = [name for name, _ in layout.partitions]
        try:
            write_deltalake(
                str(path), data, partition_by=partition_by, configuration=dict(layout.properties) or None
            )
        except Exception:  # deltalake refuses keys it cannot parse: stored afterwards, as spelled
            shutil.rmtree(path, ignore_errors=True)
            try:
                write_deltalake(str(path), data, partition_by=partition_by)
                DeltaTable(str(path)).alter.set_table_properties(
                    dict(layout.properties), raise_if_not_exists=False
                )
            except Exception:  # the engine cannot create this layout: no case runs on it
                return None
        table = DeltaTable(str(path))
        physical = {
            str(f.metadata.get("delta.columnMapping.physicalName", f.name)): f.name
            for f in table.schema().fields
        }
        return path, self.engine.table_config(str(path)), physical

    def _create_generated(self, path: Path, layout: Layout) -> tuple[Path, Any, dict[str, str]] | None:
        from deltalake import DeltaTable, Field, Schema, write_deltalake

        generated = dict(layout.generated)
        fields = [Field("id", "long"), Field("v", "string")]
        for name, kind in layout.partitions:
            fields.append(Field(name, kind, metadata={"delta.generationExpression": generated[name]}))
        ids = [value + step for (value,) in layout.values for step in (3, 6)]
        try:
            DeltaTable.create(
                str(path),
                schema=Schema(fields),
                partition_by=[name for name, _ in layout.partitions],
                configuration=dict(layout.properties) or None,
            )
            write_deltalake(
                str(path),
                pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"v{i}" for i in ids])}),
                mode="append",
            )
        except Exception:
            return None
        return path, self.engine.table_config(str(path)), {}

    def run(self, base: Path, work: Path, spec: Any) -> None:
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(base, work)
        self.engine.write(str(work), spec)


def touched(work: Path, version: int, layout: Layout, physical: dict[str, str]) -> set[tuple[Any, ...]]:
    """The partitions (typed values, ``None`` for NULL) the commit after ``version`` removed or added files in."""
    log = work / "_delta_log" / f"{version + 1:020d}.json"
    found: set[tuple[Any, ...]] = set()
    for line in log.read_text().splitlines():
        action = json.loads(line)
        for key in ("add", "remove"):
            if key in action:
                raw = {
                    physical.get(k, k).lower(): v
                    for k, v in (action[key].get("partitionValues") or {}).items()
                }
                found.add(tuple(_typed(raw.get(name.lower()), kind) for name, kind in layout.partitions))
    return found


def _typed(text: str | None, kind: str) -> Any:
    if text is None or (text == "" and kind != "string"):
        return None
    if text == "":
        return None  # delta-rs logs an empty string as NULL
    if kind in ("integer", "long", "short", "byte"):
        return int(text)
    if kind == "double":
        return float(text)
    if kind in ("timestamp", "timestamp_ntz"):
        stamp = dt.datetime.fromisoformat(text.replace("T", " ").removesuffix("Z"))
        return stamp.replace(tzinfo=_UTC) if kind == "timestamp" else stamp
    if kind == "date":
        return dt.date.fromisoformat(text)
    if kind == "boolean":
        return text.lower() == "true"
    return text


def point(layout: Layout, partition: tuple[Any, ...]) -> str:
    """A predicate selecting exactly one partition."""
    return " AND ".join(
        f"{quote(name)} IS NULL" if value is None else f"{quote(name)} = {literal(value, kind)}"
        for (name, kind), value in zip(layout.partitions, partition, strict=True)
    )


# --------------------------------------------------------------------------------------------- the model side
def model_verdicts(op: Any, probe: Any, config: Any, profile: Any) -> tuple[bool, bool]:
    """Whether the model says ``conflict`` for the pair with the hand reading alone, and with the oracle."""
    from deltaguard.core.model import pair_verdict

    hand = pair_verdict(op, probe, dataclasses.replace(config, meaning=None), profile).conflict
    oracle = hand if config.meaning is None or hand else pair_verdict(op, probe, config, profile).conflict
    return hand, oracle


def scope_touches(op: Any, config: Any, partition_predicate: str) -> bool:
    """Whether the model's scope reading of ``op`` may touch the partition (read or write scopes)."""
    from deltaguard.core.facts import build_facts, with_generated_columns
    from deltaguard.core.sql.predicates import parse_predicate, provably_disjoint

    facts = build_facts(with_generated_columns(op, config))
    target = parse_predicate(partition_predicate)
    columns = config.partition_columns
    return any(
        p.is_everything or not provably_disjoint(p, target, columns) for p in (facts.scope, *facts.writes)
    )


# ----------------------------------------------------------------------------------------------- confirmation
@dataclass(frozen=True)
class FuzzWrite:
    """A write of a pair to confirm: its role and its spec at a table location (a source may name it)."""

    role: str
    make: Callable[[str], Any]

    def spec_at(self, uri: str) -> Any:
        return self.make(uri)


def confirm(tables: Tables, base: Path, root: Path, spec: Any, probe_spec: Any) -> str:
    """Run the write and the partition's DELETE stale-concurrently, both orders: how delta-rs ends."""
    return confirm_pair(
        tables, base, FuzzWrite("A", lambda _uri: spec), FuzzWrite("B", lambda _uri: probe_spec)
    )


def confirm_pair(tables: Tables, base: Path, first: FuzzWrite, second: FuzzWrite) -> str:
    """Run two writes stale-concurrently on copies of ``base``, both orders, with the conformance runner
    (:class:`lab.conformance.runner.GroupRunner`): confirmed when a stale commit fails otherwise than
    it fails serially, or both commit into a state no serial order gives."""
    from lab.conformance.cells import HARMFUL, Observed

    runner = tables.runner()
    serial = {"A,B": runner.serial(base, first, second), "B,A": runner.serial(base, second, first)}
    orders = (runner.concurrent(base, first, second, serial), runner.concurrent(base, second, first, serial))
    said = "; ".join(f"{o.order}: {o.observed.value}{f' ({o.kind})' if o.kind else ''}" for o in orders)
    if any(o.observed in HARMFUL for o in orders):
        return "confirmed: " + said
    if any(o.observed is Observed.NOT_RUN for o in orders):
        return "not confirmed: not run: " + said
    return "not confirmed: both orders commit and match a serial order"


def _rows_of(table: Any) -> list[tuple[Any, ...]]:
    from deltalake import QueryBuilder

    data = pa.table(QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all())
    return sorted(tuple(str(v) for v in row.values()) for row in data.to_pylist())


def replay(saved: dict[str, Any], root: Path) -> tuple[bool | None, bool]:
    """Run a reproducer again: whether the write still touches its partition on delta-rs (``None``: the
    engine now refuses the write as invalid before any lease), and whether the model (with the engine's
    evaluator, as the operators ask it) now says ``conflict`` beside that partition's DELETE. A source
    reproducer (:mod:`lab.fuzz.meaning_sources`) says whether its source still reads the table and whether
    the model now refuses the write beside its mirror."""
    from deltaguard.engines.specs import DeleteSpec

    if saved["write"].get("kind") == "source":
        from lab.fuzz.meaning_sources import replay_source

        return replay_source(saved, root)

    layout = layout_of(saved["layout"])
    case = case_of(saved["write"], layout)
    tables = Tables(root)
    made = tables.base(layout)
    if made is None:
        raise RuntimeError("delta-rs can no longer create the reproducer's table")
    base, config, physical = made
    from deltaguard.engines.errors import InvalidWriteError

    work = root / "work"
    partition = tuple(
        _from_json(v, k) for v, (_, k) in zip(saved["partition"], layout.partitions, strict=True)
    )
    hit: bool | None
    try:
        tables.run(base, work, case.spec)
    except InvalidWriteError:
        hit = None  # refused before any lease now: the write can no longer run beside anything
    else:
        version = config.version if config.version is not None else 0
        hit = partition in touched(work, version, layout, physical)
    probe = DeleteSpec(predicate=point(layout, partition)).operation()
    from deltaguard.core.model import pair_verdict

    return hit, pair_verdict(case.spec.operation(), probe, config, tables.engine.profile()).conflict


# ------------------------------------------------------------------------------------------------------ driver
@dataclass
class Summary:
    cases: int = 0
    executed: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    touched_pairs: int = 0
    read_checked: int = 0
    candidates: Counter[str] = field(default_factory=Counter)
    by_class: Counter[str] = field(default_factory=Counter)
    confirmed: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    findings: list[dict[str, Any]] = field(default_factory=list)
    #: cases per generator family
    families: Counter[str] = field(default_factory=Counter)
    #: source cases whose source the engine could read (judged against the truth)
    source_checked: int = 0
    #: precision: cases judged more strictly than the engine needs (a source read as the target that is not)
    cautious: Counter[str] = field(default_factory=Counter)
    #: pairs the model allowed that were run stale-concurrently (property spellings)
    allowed_run: int = 0


#: Literals that name a value of another type than an integer, boolean or date column (coercion).
_COERCING = ("1.5", "'01'", "' 1'", "'true'", "'2024-1-1'", "'2024-01-01 00:00:00'", "'1'", "'10'", "''")


def classify(layout: Layout, case: Case) -> str:
    """The features of a candidate's table and write, joined (a coarse class for the summary)."""
    names = [name for name, _ in layout.partitions]
    kinds = {kind for _, kind in layout.partitions}
    props = {k.lower(): v for k, v in layout.properties}
    text = json.dumps(case.args)
    features = []
    if any(token in text for token in _COERCING) and kinds - {"string"}:
        features.append(f"literal of another type on {'/'.join(sorted(kinds - {'string'}))}")
    elif "boolean" in kinds and any(ch.isdigit() for ch in text):
        features.append("number on boolean")
    if "delta.columnmapping.mode" in props:
        features.append("column mapping")
    if any("." in n for n in names):
        features.append("dotted name")
    if any(n != n.lower() for n in names):
        features.append("upper/mixed-case name")
    if any(" " in n for n in names):
        features.append("spaced name")
    features.append(f"{case.kind} on {'/'.join(kind for _, kind in layout.partitions)}")
    return " + ".join(features)


def fuzz(
    seed: int,
    cases: int,
    root: Path,
    *,
    confirm_candidates: bool = True,
    progress: Callable[[str], None] | None = None,
    every: int = 250,
    reads: int = 0,
    generated: bool = False,
    families: Sequence[str] = ("partitions",),
    nested: bool = False,
    wide: bool = False,
) -> Summary:
    """Run ``cases`` generated writes from ``seed``; see the module docstring.

    :param seed: the random seed (the whole run is a function of it).
    :param cases: how many writes to generate.
    :param root: a scratch directory for the tables.
    :param confirm_candidates: run each candidate stale-concurrently.
    :param progress: called with a counted progress line every ``every`` cases.
    :param reads: per case, at most this many untouched partitions the model (with the oracle) calls
        compatible are run stale-concurrently beside the write (what the write *read*); 0: none.
    :param generated: add tables partitioned by a generated column (``g = id % 3``).
    :param families: the generators each case is drawn from (:data:`FAMILIES`), evenly; ``partitions``
        alone draws exactly the cases of earlier runs of the seed.
    :param nested: predicates are trees of AND, OR and NOT up to three levels deep (:func:`gen_tree`), not
        one or two atoms (the cases of a seed then differ from a run without it).
    :param wide: partition types also from :data:`WIDE_TYPES`, literals also from :data:`WIDE_FOREIGN` (the
        cases of a seed then differ from a run without it).
    """
    unknown = set(families) - set(FAMILIES)
    if unknown or not families:
        raise ValueError(f"families must be among {', '.join(FAMILIES)}, not {sorted(unknown) or 'none'}")
    families = tuple(dict.fromkeys(families))

    rng = random.Random(seed)
    sampler = random.Random(seed + 1)  # reads are sampled apart, so --reads leaves the cases unchanged
    tables = Tables(root)
    layouts = [gen_layout(rng, wide) for _ in range(16)]
    if generated:
        # four of twenty layouts (the first sixteen stay those of the seed; the cases drawn on them differ)
        layouts += [gen_generated_layout(random.Random(seed + 2)) for _ in range(4)]
    summary = Summary()
    start = time.perf_counter()
    others = _Families(seed, families)
    for index in range(cases):
        family = families[0] if len(families) == 1 else others.picker.choice(families)
        summary.cases += 1
        summary.families[family] += 1
        if family != "partitions":
            others.run(family, tables, summary, root, confirm_candidates)
        else:
            layout = rng.choice(layouts)
            case = gen_case(rng, layout, nested)
            judge_case(tables, summary, layout, case, root, confirm_candidates, reads, sampler)
        if progress is not None and ((index + 1) % every == 0 or index + 1 == cases):
            elapsed = time.perf_counter() - start
            progress(
                f"[{index + 1}/{cases}] executed {summary.executed}, candidates "
                f"{dict(summary.candidates) or 'none'}, confirmed {sum(summary.confirmed.values())}, "
                f"read {summary.read_checked} run, {elapsed:.0f} s, "
                f"{60 * (index + 1) / max(elapsed, 1e-9):.0f} cases/min"
            )
    summary.seconds = time.perf_counter() - start
    return summary


def judge_case(
    tables: Tables,
    summary: Summary,
    layout: Layout,
    case: Case,
    root: Path,
    confirm_candidates: bool = False,
    reads: int = 0,
    sampler: random.Random | None = None,
) -> None:
    """Run one generated write on its layout's table and judge every partition it touched (into ``summary``).

    :param root: the scratch directory the tables and the write's copy live in.
    """
    from deltaguard.engines.specs import DeleteSpec

    made = tables.base(layout)
    if made is None:
        summary.refused["layout not creatable"] += 1
        return
    base, config, physical = made
    _one(
        tables,
        summary,
        layout,
        case,
        base,
        config,
        physical,
        root / "work",
        tables.engine.profile(),
        confirm_candidates,
        root,
        DeleteSpec,
        reads,
        sampler,
    )


#: The generators of cases: partition predicates (the first), sources that read the target, property
#: spellings, engine versions never measured, session settings.
FAMILIES: tuple[str, ...] = ("partitions", "sources", "properties", "versions", "settings")


class _Families:
    """The generators other than ``partitions``, each drawing from its own random stream of the seed."""

    def __init__(self, seed: int, families: Sequence[str]) -> None:
        from lab.fuzz import meaning_properties, meaning_sources

        self.picker = random.Random(f"{seed}-families")
        self.rngs = {family: random.Random(f"{seed}-{family}") for family in FAMILIES}
        self.source_layouts = [meaning_sources.gen_source_layout(self.rngs["sources"]) for _ in range(8)]
        self.property_layouts = [
            meaning_properties.gen_property_layout(self.rngs["properties"]) for _ in range(12)
        ]
        self.pairs: list[tuple[Any, Any, Any]] | None = None

    def run(self, family: str, tables: Tables, summary: Summary, root: Path, confirm: bool) -> None:
        from lab.fuzz import meaning_properties, meaning_settings, meaning_sources

        rng = self.rngs[family]
        if family == "sources":
            layout = rng.choice(self.source_layouts)
            case = meaning_sources.gen_source_case(rng, len(layout.values))
            meaning_sources.check_source_case(tables, summary, layout, case, root, confirm)
        elif family == "properties":
            layout = rng.choice(self.property_layouts)
            meaning_properties.check_property_case(
                tables, summary, layout, meaning_properties.gen_property_case(rng), root, confirm
            )
        elif family == "versions":
            version = meaning_settings.gen_version_case(rng)
            problems, cautious = meaning_settings.check_version(version, self._pairs(tables))
            if cautious:
                summary.cautious[f"version {version.family} {version.version!r}"] += 1
            self._report(summary, "version", f"version {version.family}", version.describe(), problems)
        else:
            settings = meaning_settings.gen_settings_case(rng)
            problems = meaning_settings.check_settings(settings)
            self._report(summary, "setting", f"settings {settings.family}", settings.describe(), problems)

    def _pairs(self, tables: Tables) -> list[tuple[Any, Any, Any]]:
        """Pairs the measured delta-rs profile allows, on property tables: DELETEs of two partitions and
        the property cases' pairs (the versions' verdicts are compared on them)."""
        from deltaguard.core.model import pair_verdict
        from deltaguard.engines.specs import DeleteSpec
        from lab.fuzz import meaning_properties

        if self.pairs is None:
            self.pairs = []
            for layout in self.property_layouts[:4]:
                made = tables.base(layout)
                if made is None:
                    continue
                config = dataclasses.replace(made[1], meaning=None)
                candidates = [
                    (DeleteSpec(predicate="p = 'a'").operation(), DeleteSpec(predicate="p = 'b'").operation())
                ]
                for pair in meaning_properties.PAIRS:
                    _, second, told = meaning_properties.pair_specs(
                        meaning_properties.PropertyCase(pair, "a", "b"), layout
                    )
                    candidates.append((told, second.operation()))
                for a, b in candidates:
                    for profile in (tables.engine.profile(),):
                        if not pair_verdict(a, b, config, profile).conflict:
                            self.pairs.append((a, b, config))
            if not self.pairs:  # a table no property spoils: two DELETEs of different partitions
                from deltaguard.core.table_config import TableConfig

                self.pairs.append(
                    (
                        DeleteSpec(predicate="p = 'a'").operation(),
                        DeleteSpec(predicate="p = 'b'").operation(),
                        TableConfig(partition_columns=("p",), column_types=(("p", "string"),)),
                    )
                )
        return self.pairs

    @staticmethod
    def _report(summary: Summary, flag: str, label: str, case: dict[str, Any], problems: list[str]) -> None:
        if not problems:
            return
        summary.candidates[flag] += 1
        summary.by_class[label] += 1
        summary.findings.append(
            {"write": case, "model_allows": [flag], "class": label, "problems": problems[:3]}
        )


def _one(
    tables: Tables,
    summary: Summary,
    layout: Layout,
    case: Case,
    base: Path,
    config: Any,
    physical: dict[str, str],
    work: Path,
    profile: Any,
    confirm_candidates: bool,
    root: Path,
    delete: Any,
    reads: int = 0,
    sampler: random.Random | None = None,
) -> None:
    try:
        operation = case.spec.operation()
        tables.run(base, work, case.spec)
    except BaseException as error:  # refused before or while writing (a panic too): nothing touched
        _reraise_interrupts(error)
        summary.refused[_error_class(error)] += 1
        return
    summary.executed += 1
    version = config.version if config.version is not None else 0
    if not (work / "_delta_log" / f"{version + 1:020d}.json").exists():
        return  # nothing committed (no matching rows)
    hit = touched(work, version, layout, physical)
    if reads and sampler is not None:
        _check_reads(tables, summary, layout, case, base, config, profile, root, delete, hit, reads, sampler)
    for partition in sorted(hit, key=repr):
        summary.touched_pairs += 1
        where = point(layout, partition)
        probe = delete(predicate=where)
        hand, oracle = model_verdicts(operation, probe.operation(), config, profile)
        scoped = scope_touches(operation, config, where)
        flags = [name for name, ok in (("hand", hand), ("oracle", oracle), ("scope", scoped)) if not ok]
        if not flags:
            continue
        for flag in flags:
            summary.candidates[flag] += 1
        kind = classify(layout, case)
        if flags == ["scope"] and None in partition:
            # delta-rs logs '' as NULL, and the rules widen what a stale write reads by NULL partitions
            kind = f"scope reading only, NULL partition ({kind})"
        summary.by_class[kind] += 1
        verdict = "not run"
        if confirm_candidates and ("hand" in flags or "oracle" in flags):
            try:
                verdict = confirm(tables, base, root, case.spec, probe)
            except BaseException as error:
                _reraise_interrupts(error)
                verdict = f"confirmation failed: {_error_class(error)}"
            if verdict.startswith("confirmed"):
                summary.confirmed[f"{kind} ({'+'.join(flags)})"] += 1
        summary.findings.append(
            {
                "layout": layout.describe(),
                "write": {"kind": case.kind, **case.args},
                "partition": [_jsonable(v) for v in partition],
                "probe": where,
                "model_allows": flags,
                "class": kind,
                "stale_concurrent": verdict,
            }
        )


def _check_reads(
    tables: Tables,
    summary: Summary,
    layout: Layout,
    case: Case,
    base: Path,
    config: Any,
    profile: Any,
    root: Path,
    delete: Any,
    hit: set[tuple[Any, ...]],
    reads: int,
    sampler: random.Random,
) -> None:
    """Run the write stale-concurrently beside DELETEs of partitions it did not touch that the model (as the
    operators ask it) calls compatible: a failure or a non-serial result means the write read the partition."""
    others = [p for p in layout.values if tuple(None if v == "" else v for v in p) not in hit]
    operation = case.spec.operation()
    for partition in sampler.sample(others, min(reads, len(others))):
        probe = delete(predicate=point(layout, partition))
        hand, oracle = model_verdicts(operation, probe.operation(), config, profile)
        if oracle:
            continue
        summary.read_checked += 1
        try:
            verdict = confirm(tables, base, root, case.spec, probe)
        except BaseException as error:
            _reraise_interrupts(error)
            verdict = f"confirmation failed: {_error_class(error)}"
        if not verdict.startswith("confirmed"):
            continue
        kind = classify(layout, case)
        summary.candidates["read"] += 1
        summary.confirmed[f"{kind} (read)"] += 1
        summary.findings.append(
            {
                "layout": layout.describe(),
                "write": {"kind": case.kind, **case.args},
                "partition": [_jsonable(v) for v in partition],
                "probe": point(layout, partition),
                "model_allows": ["read"] + (["hand"] if not hand else []),
                "class": kind,
                "stale_concurrent": verdict,
            }
        )


def _reraise_interrupts(error: BaseException) -> None:
    if isinstance(error, KeyboardInterrupt | SystemExit | GeneratorExit):
        raise error


def _error_class(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text[:70]}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.fuzz.meaning", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--every", type=int, default=250, help="a progress line every N cases")
    parser.add_argument("--no-confirm", action="store_true", help="do not run candidates stale-concurrently")
    parser.add_argument(
        "--generated", action="store_true", help="also tables partitioned by a generated column (g = id %% 3)"
    )
    parser.add_argument(
        "--reads",
        type=int,
        default=0,
        metavar="K",
        help="per case, run up to K untouched partitions the model calls compatible stale-concurrently (slow)",
    )
    parser.add_argument(
        "--nested", action="store_true", help="predicates as trees of AND, OR and NOT, up to three levels"
    )
    parser.add_argument(
        "--wide",
        action="store_true",
        help="also SHORT, BYTE, TIMESTAMP, TIMESTAMP_NTZ and DOUBLE partitions, and more literal spellings",
    )
    parser.add_argument(
        "--families",
        default="partitions",
        help=f"comma-separated generators, each case drawn evenly from them ({', '.join(FAMILIES)})",
    )
    parser.add_argument("--save-dir", type=Path, default=Path("lab/fuzz/meaning_findings"))
    parser.add_argument("--out", type=Path, default=None, help="also write the summary as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(dir="/dev/shm" if Path("/dev/shm").is_dir() else None) as scratch:
        summary = fuzz(
            args.seed,
            args.cases,
            Path(scratch),
            confirm_candidates=not args.no_confirm,
            progress=lambda line: print(line, flush=True),
            every=args.every,
            reads=args.reads,
            generated=args.generated,
            nested=args.nested,
            wide=args.wide,
            families=tuple(f.strip() for f in args.families.split(",") if f.strip()),
        )
    report = _report(summary, args.seed)
    for line in _lines(report):
        print(line, flush=True)
    if summary.findings:
        args.save_dir.mkdir(parents=True, exist_ok=True)
        for number, finding in enumerate(summary.findings):
            (args.save_dir / f"seed{args.seed}-{number:04d}.json").write_text(
                json.dumps(finding, indent=1) + "\n"
            )
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 1 if summary.confirmed else 0


def _report(summary: Summary, seed: int) -> dict[str, Any]:
    return {
        "seed": seed,
        "cases": summary.cases,
        "executed": summary.executed,
        "touched_partitions": summary.touched_pairs,
        "read_pairs_run": summary.read_checked,
        "seconds": round(summary.seconds, 1),
        "cases_per_minute": round(60 * summary.cases / max(summary.seconds, 1e-9)),
        "candidates": dict(summary.candidates),
        "by_class": dict(summary.by_class),
        "confirmed": dict(summary.confirmed),
        "refused": dict(summary.refused.most_common(12)),
        "families": dict(summary.families),
        "source_cases_judged": summary.source_checked,
        "allowed_pairs_run": summary.allowed_run,
        "more_cautious_than_needed": dict(summary.cautious),
    }


def _lines(report: dict[str, Any]) -> Iterator[str]:
    yield (
        f"seed {report['seed']}: {report['cases']} cases ({report['executed']} executed, "
        f"{report['touched_partitions']} touched partitions) in {report['seconds']} s = "
        f"{report['cases_per_minute']} cases/min"
    )
    yield f"candidates: {report['candidates'] or 'none'}"
    yield f"by class: {report['by_class'] or 'none'}"
    yield f"confirmed stale-concurrently: {report['confirmed'] or 'none'}"
    yield f"refused writes: {report['refused'] or 'none'}"


if __name__ == "__main__":
    sys.exit(main())
