"""Sources that read the target: the meaning fuzzer's generator of writes whose source is their own table.

A MERGE or an append whose source is the table it writes reads that table while it runs (ADR 0012; the
page "Isolation levels and write conflicts": such an INSERT has MERGE's concurrency). The model only knows
it when :func:`deltaguard.engines.sources.with_target_reads` says so, from the source as the operator
holds it. This generator spells the target in every way a user may (the path as given, a trailing slash, a
doubled slash, ``file://`` and ``file:`` URIs, ``..`` and ``.`` segments, a path relative to the working
directory, percent-encoding, the ``delta+`` prefix, a symlink to the table, to its parent, a chain of
symlinks, a partition directory inside it) and carries it in every way a source may come (the string itself,
a callable reading it, a lazy frame exporting an Arrow stream, a
frame with ``toArrow()``, a Spark SQL statement reading it as ``delta.`<location>```, through a catalog name
the catalog places there -- an alias of the table -- or through a view). Two controls read something else: a
copy of the table beside it, and rows read from it into memory before the write.

The truth is the engine's: the source is resolved with the engine's own reader
(:func:`deltaguard.engines.sources.resolve_source`) before and after a marker row is appended to the
table; the source reads the target exactly when the marker changes what it yields. A case is a candidate
when the source reads the target and the model, asked as the operators ask it, says the write reads nothing
of it. Each write has a mirror (the same source, partitions swapped: two MERGEs copying ``a`` into ``b`` and
``b`` into ``a``; two appends each duplicating the table); when the model lets the pair run at once, it is
run stale-concurrently on delta-rs (:func:`lab.fuzz.meaning.confirm_pair`), both orders, with the stale
write's source read at its snapshot, and confirmed when a commit fails or both commit into a state no
serial order gives.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

#: How the source names the target's location (``copy``: a copy beside it, the control).
SPELLINGS: tuple[str, ...] = (
    "exact",
    "trailing slash",
    "double slash",
    "file URI",
    "file: URI",
    "dot-dot",
    "dot segment",
    "relative",
    "percent-encoded",
    "delta+ prefix",
    "symlink",
    "symlink to parent",
    "symlink chain",
    "partition directory",
    "copy",
)
#: How the source is carried (``in memory``: rows read before the write, the control).
CARRIERS: tuple[str, ...] = ("path", "callable", "lazy frame", "toArrow frame", "in memory")
#: Carriers of a Spark SQL statement reading the source as a relation: ``delta.`<location>``` (``parquet.``
#: for a partition directory), a catalog name the catalog places at the location (an alias of the table),
#: a view over it (the catalog gives no location). delta-rs cannot run these statements: the model judges
#: the statement, the engine's truth and confirmation come from the same write with the location as a path.
SQL_CARRIERS: tuple[str, ...] = ("SQL path", "SQL catalog name", "SQL view")
#: How the operator names the table it writes.
TARGET_SPELLINGS: tuple[str, ...] = ("exact", "file URI", "trailing slash")
#: Spellings whose reading does not carry the partition column (the files of one partition directory).
_WITHOUT_PARTITION = frozenset({"partition directory"})


def read_source(source: Any) -> pa.Table:
    """``source`` as the engine reads it (its own reader, fully materialised)."""
    from deltaguard.engines.sources import materialize, resolve_source

    return materialize(resolve_source(source))


class LazyFrame:
    """A lazy frame: reads its location only when the engine asks for its Arrow stream."""

    def __init__(self, location: str) -> None:
        self.location = location

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return read_source(self.location).__arrow_c_stream__(requested_schema)


class ArrowFrame:
    """A frame with ``toArrow()`` (as a Spark DataFrame has): reads its location when converted."""

    def __init__(self, location: str) -> None:
        self.location = location

    def toArrow(self) -> pa.Table:  # the name the engine's reader looks for
        return read_source(self.location)


@dataclass(frozen=True)
class SourceCase:
    """One generated write reading a source, and its mirror.

    :param shape: ``merge`` (copy one partition's ``v`` into another's rows) or ``append`` (append the
        source's rows).
    :param spelling: how the source names the location (:data:`SPELLINGS`).
    :param carrier: how the source is carried (:data:`CARRIERS`).
    :param target: how the operator names the written table (:data:`TARGET_SPELLINGS`).
    :param source_row: index of the partition (layout row) the source's rows come from.
    :param target_row: index of the partition the write changes.
    """

    shape: str
    spelling: str
    carrier: str
    target: str
    source_row: int
    target_row: int

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "source",
            "shape": self.shape,
            "spelling": self.spelling,
            "carrier": self.carrier,
            "target": self.target,
            "source_row": self.source_row,
            "target_row": self.target_row,
        }

    @property
    def control(self) -> bool:
        """A case built to read something else than the target."""
        return self.spelling == "copy" or self.carrier == "in memory"


def gen_source_case(rng: random.Random, rows: int) -> SourceCase:
    """A source case on a layout with ``rows`` partitions (at least two)."""
    source_row, target_row = rng.sample(range(rows), 2)
    spelling = rng.choice(SPELLINGS)
    shape = "merge" if spelling in _WITHOUT_PARTITION or rng.random() < 0.6 else "append"
    if spelling in _WITHOUT_PARTITION:
        carrier = rng.choice(("path", "SQL path"))
    else:
        carrier = rng.choice(CARRIERS + SQL_CARRIERS)
    return SourceCase(shape, spelling, carrier, rng.choice(TARGET_SPELLINGS), source_row, target_row)


def source_case_of(saved: dict[str, Any]) -> SourceCase:
    """The case a reproducer names (its ``write`` field)."""
    return SourceCase(
        str(saved["shape"]),
        str(saved["spelling"]),
        str(saved["carrier"]),
        str(saved["target"]),
        int(saved["source_row"]),
        int(saved["target_row"]),
    )


class Places:
    """Makes the paths a spelling needs beside the tables (symlinks, a copy), each under a fresh name."""

    def __init__(self, root: Path) -> None:
        self.links = root / "links"
        self.links.mkdir(parents=True, exist_ok=True)
        self.copies = root / "copies"
        self.copies.mkdir(parents=True, exist_ok=True)
        self._names = itertools.count()

    def fresh(self, stem: str) -> Path:
        return self.links / f"{stem}{next(self._names)}"

    def spell(self, spelling: str, location: Path, partition_dir: str | None) -> str:
        """``location`` as the source names it."""
        text = str(location)
        if spelling == "exact":
            return text
        if spelling == "trailing slash":
            return text + "/"
        if spelling == "double slash":
            return f"{location.parent}//{location.name}"
        if spelling == "file URI":
            return "file://" + text
        if spelling == "file: URI":
            return "file:" + text
        if spelling == "dot-dot":
            climb = location.parent / ".up"
            climb.mkdir(exist_ok=True)
            return f"{climb}/../{location.name}"
        if spelling == "dot segment":
            return f"{location.parent}/./{location.name}"
        if spelling == "relative":
            return os.path.relpath(text)
        if spelling == "percent-encoded":
            return f"file://{location.parent}/{location.name[:-1]}%{ord(location.name[-1]):02X}"
        if spelling == "delta+ prefix":
            return "delta+" + text
        if spelling == "symlink":
            link = self.fresh("l")
            link.symlink_to(location, target_is_directory=True)
            return str(link)
        if spelling == "symlink to parent":
            link = self.fresh("d")
            link.symlink_to(location.parent, target_is_directory=True)
            return str(link / location.name)
        if spelling == "symlink chain":
            first = self.fresh("c")
            first.symlink_to(location, target_is_directory=True)
            second = self.fresh("c")
            second.symlink_to(first, target_is_directory=True)
            return str(second)
        if spelling == "partition directory":
            if partition_dir is None:
                raise ValueError("no partition directory to read")
            return f"{text}/{partition_dir}"
        if spelling == "copy":
            copy = self.copies / f"{location.name}-copy{next(self._names)}"
            shutil.copytree(location, copy)
            return str(copy)
        raise ValueError(f"unknown spelling {spelling!r}")


def carry(carrier: str, location: str) -> Any:
    """The source as the write is handed it."""
    if carrier == "path":
        return location
    if carrier == "callable":
        return lambda: read_source(location)
    if carrier == "lazy frame":
        return LazyFrame(location)
    if carrier == "toArrow frame":
        return ArrowFrame(location)
    if carrier == "in memory":
        return read_source(location)
    raise ValueError(f"unknown carrier {carrier!r}")


def target_uri(spelling: str, location: Path) -> str:
    """The table as the operator names it."""
    if spelling == "file URI":
        return "file://" + str(location)
    if spelling == "trailing slash":
        return str(location) + "/"
    return str(location)


def make_spec(
    case: SourceCase,
    layout: Any,
    places: Places,
    partition_dirs: dict[int, str],
    base: Path,
    mirror: bool = False,
) -> Callable[[str], Any]:
    """The write (or its mirror) at a table location: a spec whose source reads that location as spelled.

    :param case: the case.
    :param layout: the table (a :class:`lab.fuzz.meaning.Layout` with one partition column).
    :param places: where symlinks and copies go.
    :param partition_dirs: each layout row's partition directory, relative to the table.
    :param base: the table as it is before any write (rows ``in memory`` are read from it, once).
    :param mirror: the mirror write (source and target partitions swapped).
    """
    from deltaguard.engines import specs
    from lab.fuzz.meaning import literal, quote

    (name, kind) = layout.partitions[0]
    source_row, target_row = (
        (case.target_row, case.source_row) if mirror else (case.source_row, case.target_row)
    )

    held = (
        read_source(places.spell(case.spelling, base, partition_dirs.get(source_row)))
        if case.carrier == "in memory"
        else None
    )

    # a copy is another table, made once from the table as it is before any write
    elsewhere = places.spell("copy", base, None) if case.spelling == "copy" else None

    def at(uri: str) -> Any:
        if held is not None:
            source: Any = held
        else:
            spelled = elsewhere or places.spell(case.spelling, Path(uri), partition_dirs.get(source_row))
            source = carry(case.carrier, spelled)
        if case.shape == "append":
            return specs.AppendSpec(source=source)
        condition = f"t.id = s.id + {10 * (target_row - source_row)}"
        if case.spelling not in _WITHOUT_PARTITION:
            condition += f" AND s.{quote(name)} = {literal(layout.values[source_row][0], kind)}"
        return specs.MergeSpec(
            source=source,
            condition=condition,
            target_partition_values={name: layout.values[target_row][0]},
            matched_update={"v": "s.v"},
        )

    return at


#: The catalog name a ``SQL catalog name`` or ``SQL view`` case reads.
ALIAS = "lake.orders_alias"


def sql_spec(
    case: SourceCase, layout: Any, table: Path, location: str, mirror: bool = False
) -> tuple[Any, Callable[[str], str | None]]:
    """The case as a Spark SQL statement reading ``location`` (as the ``path`` case spells it), classified
    as the SQL operator classifies it, and the engine's catalog lookup the statement is judged with.

    :param case: the case (a :data:`SQL_CARRIERS` carrier).
    :param layout: the table.
    :param table: where the statement writes.
    :param location: the source's location as spelled.
    :param mirror: the mirror write.
    """
    from deltaguard.core.sql.classify import classify_sql
    from deltaguard.engines.specs import SqlSpec
    from lab.fuzz.meaning import literal, quote

    (name, kind) = layout.partitions[0]
    source_row, target_row = (
        (case.target_row, case.source_row) if mirror else (case.source_row, case.target_row)
    )
    path = location.removeprefix("delta+")
    if case.carrier == "SQL path":
        relation = f"{'parquet' if case.spelling in _WITHOUT_PARTITION else 'delta'}.`{path}`"
    else:
        relation = ALIAS
    column = quote(name)
    if case.shape == "append":
        sql = f"INSERT INTO delta.`{table}` SELECT * FROM {relation}"
    else:
        condition = f"t.id = s.id + {10 * (target_row - source_row)}"
        if case.spelling not in _WITHOUT_PARTITION:
            condition += f" AND s.{column} = {literal(layout.values[source_row][0], kind)}"
        condition += f" AND t.{column} = {literal(layout.values[target_row][0], kind)}"
        sql = (
            f"MERGE INTO delta.`{table}` AS t USING {relation} AS s ON {condition} "
            "WHEN MATCHED THEN UPDATE SET v = s.v"
        )
    names = {f"`{part}`" for part in ALIAS.split(".")}

    def locate(reference: str) -> str | None:
        if case.carrier != "SQL catalog name" or set(reference.split(".")) != names:
            return None  # a view, or a name this catalog does not hold
        return path

    return SqlSpec(sql=sql, classified=classify_sql(sql).operation), locate


def partition_directories(table: Path, layout: Any) -> dict[int, str]:
    """Each layout row's partition directory, as the table's first commit wrote it."""
    import json

    from lab.fuzz.meaning import _typed

    (name, kind) = layout.partitions[0]
    found: dict[int, str] = {}
    log = table / "_delta_log" / f"{0:020d}.json"
    for line in log.read_text().splitlines():
        add = json.loads(line).get("add")
        if not add or "/" not in add["path"]:
            continue
        value = _typed((add.get("partitionValues") or {}).get(name), kind)
        for index, row in enumerate(layout.values):
            if row[0] == value:
                found[index] = add["path"].rsplit("/", 1)[0]
    return found


def reads_target(make: Callable[[str], Any], work: Path, marker: pa.Table) -> bool | None:
    """Whether the write's source reads the table at ``work``: the engine's reader, before and after a
    marker row is appended to the table (``None``: the engine cannot read the source at all)."""
    from deltalake import write_deltalake

    def rows() -> pa.Table | None:
        try:
            return read_source(make(str(work)).source)
        except Exception:  # the engine refuses the source: nothing is read
            return None

    before = rows()
    if before is None:
        return None
    write_deltalake(str(work), marker, mode="append")
    after = rows()
    return after is None or after.num_rows != before.num_rows


def gen_source_layout(rng: random.Random) -> Any:
    """A table with one partition column and at least two non-NULL partitions (the source's and the
    write's), under one of the isolation levels deltalake 1.6.6 reads."""
    from lab.fuzz.meaning import NAMES, TYPES, VALUES, Layout

    name, kind = rng.choice(NAMES), rng.choice(tuple(TYPES))
    pool = [v for v in VALUES[kind] if v is not None and v != ""]
    values = rng.sample(pool, min(len(pool), rng.randint(2, 4)))
    properties = rng.choice(
        ({}, {}, {"delta.isolationLevel": "Serializable"}, {"delta.isolationLevel": "WriteSerializable"})
    )
    return Layout(((name, kind),), tuple((v,) for v in values), tuple(properties.items()))


@dataclass
class Judged:
    """A source case as the operators judge it and as the engine reads it.

    :param write: the write at a table location.
    :param mirror: its mirror at a table location.
    :param base: the table before any write.
    :param reads_target: whether the model is told the write reads its table.
    :param why: why it is (``None``: it is not).
    :param verdict: the model's verdict on the write beside its mirror.
    :param truth: whether the engine's reader reads the table through the source (``None``: it cannot
        read the source at all).
    """

    write: Callable[[str], Any]
    mirror: Callable[[str], Any]
    base: Path
    reads_target: bool
    why: str | None
    verdict: Any
    truth: bool | None


def judge(tables: Any, layout: Any, case: SourceCase, root: Path) -> Judged | str:
    """Judge one source case as the operators would and find what the engine reads; a string says why the
    case could not be judged (the layout, the spec or the source refused)."""
    from deltaguard.core.model import pair_verdict
    from deltaguard.engines.sources import with_target_reads
    from lab.fuzz.meaning import _error_class, _rows

    made = tables.base(layout)
    if made is None:
        return "layout not creatable"
    base, config, _ = made
    if not hasattr(tables, "places"):
        tables.places = Places(root / "places")
    places = tables.places
    dirs = partition_directories(base, layout)
    sql = case.carrier in SQL_CARRIERS
    executed = dataclasses.replace(case, carrier="path") if sql else case
    try:
        write = make_spec(executed, layout, places, dirs, base)
        mirror = make_spec(executed, layout, places, dirs, base, mirror=True)
    except Exception:  # rows in memory the engine cannot read from this spelling
        return f"source not readable ({case.spelling})"
    work = root / "source-work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(base, work)
    uri = target_uri(case.target, work)
    try:
        spec, other = write(str(work)), mirror(str(work))
        locate = None
        if sql:
            (spec, located), (other, _) = (
                sql_spec(case, layout, work, str(spec.source), mirror=m) for m in (False, True)
            )
            locate = located
        operation, why = with_target_reads(spec.operation(), spec, uri, locate)
        mirrored, _ = with_target_reads(other.operation(), other, uri, locate)
        verdict = pair_verdict(operation, mirrored, config, tables.engine.profile())
    except Exception as error:  # a write the model or spec refuses runs nowhere
        return _error_class(error)
    marker = _rows(layout, layout.values[case.source_row], [99_999])
    truth = reads_target(write, work, marker)
    shutil.rmtree(work, ignore_errors=True)
    return Judged(write, mirror, base, operation.reads_target, why, verdict, truth)


def replay_source(saved: dict[str, Any], root: Path) -> tuple[bool | None, bool]:
    """Run a source reproducer again: whether the engine still reads the table through the source
    (``None``: it cannot read the source), and whether the model now says ``conflict`` for the write
    beside its mirror."""
    from lab.fuzz.meaning import Tables, layout_of

    judged = judge(Tables(root), layout_of(saved["layout"]), source_case_of(saved["write"]), root)
    if isinstance(judged, str):
        raise RuntimeError(f"the reproducer can no longer be judged: {judged}")
    return judged.truth, bool(judged.verdict.conflict)


def check_source_case(
    tables: Any, summary: Any, layout: Any, case: SourceCase, root: Path, confirm: bool
) -> None:
    """Judge one source case (:func:`judge`), count it, and confirm a candidate stale-concurrently.

    :param tables: the fuzzer's tables (:class:`lab.fuzz.meaning.Tables`).
    :param summary: the run's summary (:class:`lab.fuzz.meaning.Summary`).
    :param layout: the table.
    :param case: the case.
    :param root: the scratch directory.
    :param confirm: run the pair stale-concurrently when the model lets it run at once.
    """
    from lab.fuzz.meaning import FuzzWrite, _error_class, _jsonable, confirm_pair

    judged = judge(tables, layout, case, root)
    if isinstance(judged, str):
        summary.refused[judged] += 1
        return
    if judged.truth is None:
        summary.refused[f"source not readable ({case.spelling})"] += 1
        return
    truth, verdict, why, base = judged.truth, judged.verdict, judged.why, judged.base
    write, mirror = judged.write, judged.mirror
    summary.source_checked += 1
    label = f"source {case.shape}: {case.spelling} via {case.carrier}"
    if not truth:
        if judged.reads_target:
            summary.cautious[label] += 1  # precision: judged as reading a table it does not read
        return
    flags = []
    if not judged.reads_target:
        flags.append("source")
    if not verdict.conflict:
        flags.append("source pair")
    if not flags:
        return
    for flag in flags:
        summary.candidates[flag] += 1
    summary.by_class[label] += 1
    outcome = "not run"
    if confirm and not verdict.conflict:
        try:
            outcome = confirm_pair(tables, base, FuzzWrite("A", write), FuzzWrite("B", mirror))
        except BaseException as error:
            if isinstance(error, KeyboardInterrupt | SystemExit | GeneratorExit):
                raise
            outcome = f"confirmation failed: {_error_class(error)}"
        if outcome.startswith("confirmed"):
            summary.confirmed[f"{label} ({'+'.join(flags)})"] += 1
    summary.findings.append(
        {
            "layout": layout.describe(),
            "write": case.describe(),
            "partition": [_jsonable(v) for v in layout.values[case.source_row]],
            "model_allows": flags,
            "model_reason": verdict.reason,
            "reads_target_reason": why,
            "class": label,
            "stale_concurrent": outcome,
        }
    )
