"""``python -m lab.fuzz.spark_meaning``: a differential fuzzer of what delta-spark predicates *mean*.

The delta-rs fuzzer of meaning (:mod:`lab.fuzz.meaning`) runs writes through delta-rs; this one asks Spark
itself. On generated partitioned tables (partition types INT, BIGINT, SMALLINT, TINYINT, STRING, DATE,
TIMESTAMP, TIMESTAMP_NTZ, BOOLEAN, DOUBLE, DECIMAL; plain, upper, mixed-case, dotted and spaced names),
session settings (``spark.sql.ansi.enabled`` on, off or not told to the model; session time zones,
including ones not told) and generated ``DELETE`` predicates (literals of every type and spelling, functions,
``<=>``, ``IN``, ``BETWEEN``, ``LIKE``/``ILIKE``/``RLIKE``, ``NOT``, ``AND``/``OR`` trees, data columns),
it compares the conflict model's verdict on pairs of DELETEs with Spark's own evaluation of both predicates.

The truth is computed independently of the model and of its Spark evaluator: one inline frame of witness
rows (fixed values per type, every literal of the pair cast by Spark to the column's type, and their
neighbours; crossed with a few data rows), both predicates evaluated on it by ``selectExpr`` in a session
with the case's settings (delta-spark selects a write's files by the same analysed expression evaluated on
the partition values: ``OptimisticTransaction.filterFiles``). Two DELETEs *meet* when some partition value
holds a row each predicate is ``TRUE`` on: a file of that partition holding both rows is removed by both, so
delta-spark fails one (``ConcurrentDeleteDeleteException``) whatever else it checks. A setting not told to the
model is evaluated under each value it may take, and the pair meets if it meets under any. The witness set
is finite, so a pair found apart is not proof of separation; a pair found meeting is proof of a conflict.

A pair the model calls ``no_conflict`` that meets is a candidate. The model is asked twice: with the hand
reading alone (``hand``, what ``deltaguard check`` without an engine gives) and with Spark's evaluator
attached (``oracle``, what the Spark engine's decisions give, ADR 0037). With ``--confirm`` each candidate is
run: both DELETEs on a real delta-spark table holding the meeting partition, each from version 0, and the
candidate is confirmed when both remove a common file.

Run (no Delta jars needed without ``--confirm``)::

    .venv/bin/python -m lab.fuzz.spark_meaning --seed 1 --minutes 5 --out /tmp/spark_meaning.json
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Delta type of each generated partition type -> (Spark SQL type, own-type literals used in predicates).
TYPES: dict[str, tuple[str, tuple[str, ...]]] = {
    "integer": ("INT", ("0", "1", "2", "-1", "10", "2147483647", "-2147483648")),
    "long": ("BIGINT", ("0", "5", "1099511627776", "-7", "1", "9223372036854775807")),
    "short": ("SMALLINT", ("0", "1", "-1", "32767", "2")),
    "byte": ("TINYINT", ("0", "1", "-1", "127", "2")),
    "string": (
        "STRING",
        ("'a'", "'b'", "'A'", "'01'", "'1'", "''", "'it\\'s'", "' 1'", "'1.0'", "'true'", "'2024-01-01'",
         "'" + "k" * 70 + "'", "'é'", "'a%'", "'a_'"),
    ),
    "date": ("DATE", ("DATE '2024-01-01'", "DATE '2024-01-02'", "DATE '2023-12-31'", "DATE '1970-01-01'")),
    "timestamp": (
        "TIMESTAMP",
        ("TIMESTAMP '2024-01-01 00:00:00'", "TIMESTAMP '2024-01-01 05:00:00'", "TIMESTAMP '2024-01-02 00:00:00'",
         "TIMESTAMP '2023-12-31 23:00:00'", "TIMESTAMP '2024-01-01 00:00:00.000001'"),
    ),
    "timestamp_ntz": (
        "TIMESTAMP_NTZ",
        ("TIMESTAMP_NTZ '2024-01-01 00:00:00'", "TIMESTAMP_NTZ '2024-01-02 00:00:00'",
         "TIMESTAMP_NTZ '2024-01-01 05:00:00'"),
    ),
    "boolean": ("BOOLEAN", ("true", "false")),
    "double": ("DOUBLE", ("0.0", "1.0", "1.5", "-0.0", "CAST('NaN' AS DOUBLE)", "1E10", "2.0")),
    "decimal(5,2)": ("DECIMAL(5,2)", ("1.00", "1.50", "-1.25", "0.00", "999.99")),
}  # fmt: skip
#: Literals of other types and spellings (the coercions are the point).
FOREIGN: tuple[str, ...] = (
    "'1'", "'01'", "'1.5'", "1.5", "1", "2", "1L", "1S", "1Y", "1BD", "1D", "1E0", "'1e0'", "' 1 '", "'+1'",
    "'-0'", "-0", "0.0", "'NaN'", "'Infinity'", "'true'", "'TRUE'", "true", "'2024-01-01'", "'2024-1-1'",
    "DATE '2024-01-02'", "TIMESTAMP '2024-01-01 00:00:00'", "'2024-01-01T00:00:00Z'",
    "'2024-01-01 00:00:00+01:00'", "'2024-01-01 05:00:00'", "TIMESTAMP_NTZ '2024-01-01 00:00:00'", "'a'",
    "'A'", "''", "X'31'", "2147483648", "CAST('1' AS INT)", "'1.00'", "1.50", "'2023-12-31 23:00'",
    "'2024-01-01 00:00:00.000001'", "-1", "'10'", "10",
    # spellings a hand reading may not know: trailing blanks, signs, exponents, intervals, casts, arithmetic
    "'1 '", "'\\t1'", "'0x1'", "'1_0'", "1e1", "'1E1'", "+1", "(1)", "1 + 0", "2 - 1", "'2024-01-01' || ''",
    "DATE '2024-01-01' + INTERVAL 1 DAY", "TIMESTAMP '2024-01-01 00:00:00' - INTERVAL 5 HOURS",
    "CAST('2024-01-01' AS DATE)", "CAST(1.9 AS INT)", "CAST('1.9' AS INT)", "CAST(NULL AS INT)", "NULL",
    "'2024-01-01 00:00:00 UTC'", "'2024-01-01 00:00:00Z'", "'2024-01-01T05:00'", "'20240101'", "'1.'", "'.5'",
    "'+Infinity'", "'-Infinity'", "'nan'", "'yes'", "'y'", "'t'", "'1.0E0'", "1.0E0", "0.5", "-0.5",
    # double quotes (text, or a column under spark.sql.ansi.doubleQuotedIdentifiers), backslashes
    '"1"', '"a"', '"v"', '"id"', '"2024-01-01"', "'a\\\\'", "'\\\\a'", "'\\u0061'", "'\\141'",
)  # fmt: skip
#: Names a partition column is stored under.
NAMES: tuple[str, ...] = ("k", "p", "P", "Region", "a.b", "my col", "DAY", "x_1", "Ünï")
#: Time zones a session may run in (fixed offsets, daylight saving, a half-hour offset, far east and west).
ZONES: tuple[str, ...] = ("UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "Pacific/Kiritimati")
#: The zones an untold zone is evaluated in: the extremes (UTC-11, UTC+14), a half-hour offset, UTC.
UNTOLD_ZONES: tuple[str, ...] = ("UTC", "Pacific/Pago_Pago", "Pacific/Kiritimati", "Asia/Kolkata")
#: Data columns every table holds besides its partition columns, and their witness values.
DATA_COLUMNS: tuple[tuple[str, str], ...] = (("id", "long"), ("v", "string"))
DATA_ROWS: tuple[tuple[str, str], ...] = (
    ("NULL", "NULL"), ("0", "'x'"), ("5", "''"), ("-1", "NULL"), ("1", "'a'"), ("2", "'1'"),
)  # fmt: skip
#: Witness partitions a predicate Spark refuses on the whole frame is asked about one by one (a refusal on
#: every one of them is taken as a refusal of the predicate: the DELETE fails before writing).
ROW_BY_ROW = 12
#: Share of the pairs the model calls conflicts that Spark is asked about too (for precision only).
PRECISION_SAMPLE = 0.1
#: Functions wrapped around a column (``{c}``) and the types they apply to (``None``: any).
FUNCTIONS: tuple[tuple[str, frozenset[str] | None], ...] = (
    ("lower({c})", frozenset({"string"})),
    ("upper({c})", frozenset({"string"})),
    ("trim({c})", frozenset({"string"})),
    ("substr({c}, 1, 1)", frozenset({"string"})),
    ("concat({c}, '')", frozenset({"string"})),
    ("length({c})", frozenset({"string"})),
    ("{c} + 0", frozenset({"integer", "long", "short", "byte", "double", "decimal(5,2)"})),
    ("{c} * 1", frozenset({"integer", "long", "short", "byte", "double", "decimal(5,2)"})),
    ("abs({c})", frozenset({"integer", "long", "short", "byte", "double", "decimal(5,2)"})),
    ("-{c}", frozenset({"integer", "long", "short", "byte", "double", "decimal(5,2)"})),
    ("year({c})", frozenset({"date", "timestamp", "timestamp_ntz"})),
    ("to_date({c})", frozenset({"date", "timestamp", "timestamp_ntz", "string"})),
    ("date_trunc('DAY', {c})", frozenset({"timestamp", "timestamp_ntz"})),
    ("CAST({c} AS STRING)", None),
    ("CAST({c} AS INT)", None),
    ("coalesce({c}, {lit})", None),
    ("nvl({c}, {lit})", None),
    ("if({c} IS NULL, {lit}, {c})", None),
    ("CASE WHEN {c} IS NULL THEN {lit} ELSE {c} END", None),
    ("nullif({c}, {lit})", None),
    ("greatest({c}, {lit})", None),
    ("least({c}, {lit})", None),
    ("CAST({c} AS DATE)", None),
    ("CAST({c} AS BOOLEAN)", None),
    ("CAST({c} AS DOUBLE)", None),
    ("{c} || ''", None),
    ("reverse({c})", frozenset({"string"})),
    ("ltrim({c})", frozenset({"string"})),
    ("{c} % 2", frozenset({"integer", "long", "short", "byte", "double", "decimal(5,2)"})),
    ("{c} div 1", frozenset({"integer", "long", "short", "byte"})),
    ("floor({c})", frozenset({"integer", "long", "short", "byte", "double", "decimal(5,2)"})),
    ("round({c})", frozenset({"integer", "long", "short", "byte", "double", "decimal(5,2)"})),
    ("date_add({c}, 0)", frozenset({"date", "timestamp", "timestamp_ntz", "string"})),
    ("month({c})", frozenset({"date", "timestamp", "timestamp_ntz"})),
    ("hour({c})", frozenset({"timestamp", "timestamp_ntz"})),
    ("unix_timestamp({c})", frozenset({"timestamp", "timestamp_ntz", "date"})),
)


@dataclass(frozen=True)
class Layout:
    """A generated table: partition columns as stored ``(name, Delta type)``."""

    partitions: tuple[tuple[str, str], ...]

    def config(self) -> Any:
        from deltaguard.core.table_config import TableConfig

        columns = (*self.partitions, *DATA_COLUMNS)
        return TableConfig(
            partition_columns=tuple(n for n, _ in self.partitions), column_types=columns, exists=True
        )


@dataclass(frozen=True)
class Settings:
    """A session's settings as Spark runs them and as the model is told them (``None``: not told).

    ``quoted`` is ``spark.sql.ansi.doubleQuotedIdentifiers`` (``spark.sql.parser.escapedStringLiterals`` is
    left off, so telling the model ``quoted=False`` tells it both parser settings are off).
    """

    ansi: bool | None
    zone: str | None
    quoted: bool | None = False

    def concrete(self) -> list[tuple[bool, str, bool]]:
        """Every (ANSI, zone, quoted) the session may run with: an untold setting takes each value."""
        ansis = [self.ansi] if self.ansi is not None else [True, False]
        zones = [self.zone] if self.zone is not None else list(UNTOLD_ZONES)
        quoted = [self.quoted] if self.quoted is not None else [False, True]
        return [(a, z, q) for a in ansis for z in zones for q in quoted]


@dataclass
class Predicate:
    """A generated predicate and the literals it holds per column (for witness values)."""

    text: str
    literals: dict[str, set[str]] = field(default_factory=dict)


def quote(name: str) -> str:
    return (
        name if name.replace("_", "").isalnum() and name.isascii() and not name[0].isdigit() else f"`{name}`"
    )


def spelled(rng: random.Random, name: str) -> str:
    """The column as one write spells it: another case (Spark resolves names case-insensitively), backticks."""
    choice = rng.random()
    text = name.lower() if choice < 0.2 else name.upper() if choice < 0.3 else name
    return f"`{text}`" if rng.random() < 0.3 else quote(text)


class Generator:
    """Generated layouts, settings and predicates from one random stream."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def layout(self) -> Layout:
        rng = self.rng
        count = 1 if rng.random() < 0.75 else 2
        names = rng.sample(NAMES, count)
        if count == 2 and names[0].lower() == names[1].lower():
            names = names[:1]
        return Layout(tuple((name, rng.choice(tuple(TYPES))) for name in names))

    def settings(self) -> Settings:
        rng = self.rng
        ansi = rng.choice((True, False, None))
        zone = rng.choice((*ZONES, None))
        draw = rng.random()
        return Settings(ansi, zone, False if draw < 0.5 else True if draw < 0.75 else None)

    def literal(self, kind: str) -> str:
        own = TYPES[kind][1]
        return self.rng.choice(own) if self.rng.random() < 0.6 else self.rng.choice(FOREIGN)

    def atom(self, layout: Layout) -> Predicate:
        rng = self.rng
        if rng.random() < 0.1:
            data = rng.choice(("id > 2", "id = 0", "v = 'x'", "id IS NULL", "v IS NOT NULL", "id <=> 5"))
            return Predicate(data)
        name, kind = rng.choice(layout.partitions)
        column = spelled(rng, name)
        lits: set[str] = set()

        def lit() -> str:
            text = self.literal(kind)
            if rng.random() < 0.15:
                # double quotes: text by default, a column under spark.sql.ansi.doubleQuotedIdentifiers
                # (the compared column itself, another partition column, a data column, or the text)
                draw = rng.random()
                if draw < 0.5:
                    inner = rng.choice([name, *(n for n, _ in layout.partitions)])
                elif draw < 0.75 or not text.startswith("'") or "\\" in text:
                    inner = rng.choice([n for n, _ in DATA_COLUMNS])
                else:
                    inner = text[1:-1]
                text = '"' + inner.replace('"', "") + '"'
            lits.add(text)
            return text

        if rng.random() < 0.2:
            wrappers = [f for f, kinds in FUNCTIONS if kinds is None or kind in kinds]
            column = rng.choice(wrappers).format(c=column, lit=lit())
        shape = rng.random()
        if shape < 0.3:
            op = rng.choice(("=", "=", "==", "<=>"))
            text = f"{column} {op} {lit()}" if rng.random() < 0.8 else f"{lit()} {op} {column}"
        elif shape < 0.42:
            items = [lit() for _ in range(rng.randint(1, 3))]
            if rng.random() < 0.15:
                items.append("NULL")
            text = f"{column} {'NOT ' if rng.random() < 0.25 else ''}IN ({', '.join(items)})"
        elif shape < 0.5:
            text = f"{column} {rng.choice(('<>', '!=', 'IS DISTINCT FROM', 'IS NOT DISTINCT FROM'))} {lit()}"
        elif shape < 0.65:
            text = f"{column} {rng.choice(('<', '<=', '>', '>='))} {lit()}"
        elif shape < 0.72:
            text = f"{column} {'NOT ' if rng.random() < 0.2 else ''}BETWEEN {lit()} AND {lit()}"
        elif shape < 0.8:
            text = f"{column} IS {'NOT ' if rng.random() < 0.5 else ''}NULL"
        elif shape < 0.87 and kind == "string":
            pattern = rng.choice(("'a%'", "'A%'", "'1%'", "'%'", "'_'", "'a'", "'k%'", "'^a'", "'a\\\\_'"))
            text = f"{column} {rng.choice(('LIKE', 'ILIKE', 'RLIKE', 'NOT LIKE'))} {pattern}"
        elif shape < 0.9 and kind == "boolean":
            text = rng.choice((column, f"NOT {column}", f"{column} IS TRUE", f"{column} IS NOT FALSE"))
        else:
            text = f"NOT ({column} {rng.choice(('=', '<=>', '<', '>='))} {lit()})"
        return Predicate(text, {name: lits})

    def predicate(self, layout: Layout, depth: int = 0) -> Predicate:
        rng = self.rng
        if depth >= 2 or rng.random() < 0.6:
            return self.atom(layout)
        left = self.predicate(layout, depth + 1)
        right = self.predicate(layout, depth + 1)
        literals = {k: set(v) for k, v in left.literals.items()}
        for k, v in right.literals.items():
            literals.setdefault(k, set()).update(v)
        glue = rng.random()
        if glue < 0.45:
            text = f"({left.text}) AND ({right.text})"
        elif glue < 0.85:
            text = f"({left.text}) OR ({right.text})"
        else:
            text = f"NOT (({left.text}) {rng.choice(('AND', 'OR'))} ({right.text}))"
        return Predicate(text, literals)

    def point(self, layout: Layout) -> Predicate:
        """One partition, as a user names it in a DELETE (the pair the model most often keeps apart)."""
        name, kind = self.rng.choice(layout.partitions)
        if self.rng.random() < 0.12:
            return Predicate(f"{quote(name)} IS NULL")
        value = self.rng.choice(TYPES[kind][1])
        return Predicate(f"{quote(name)} = {value}", {name: {value}})


# --- the truth: Spark's own evaluation on witness rows -------------------------------------------------


def _neighbours(cast: str, kind: str) -> list[str]:
    """Expressions next to a cast literal, so a range's edge lands on a witness."""
    if kind in ("integer", "long", "short", "byte", "decimal(5,2)", "double"):
        return [f"try_add({cast}, 1)", f"try_subtract({cast}, 1)"]
    if kind == "date":
        return [f"date_add({cast}, 1)", f"date_sub({cast}, 1)"]
    if kind in ("timestamp", "timestamp_ntz"):
        return [f"{cast} + INTERVAL 1 HOUR", f"{cast} - INTERVAL 1 HOUR", f"{cast} + INTERVAL 1 DAY"]
    if kind == "string":
        return [f"upper({cast})", f"lower({cast})", f"trim({cast})", f"concat({cast}, 'z')"]
    return []


def _key(name: str, kind: str) -> str:
    """A partition value's identity as text (an instant for timestamps: a local time may name two)."""
    column = f"`{name}`"
    return f"CAST(unix_micros({column}) AS STRING)" if kind == "timestamp" else f"CAST({column} AS STRING)"


class Truth:
    """Evaluates predicates on witness rows in a Spark session with given settings."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.queries = 0
        self.fallbacks = 0
        self.row_by_row = 0
        self.partly_refused = 0
        self.refused_by_analysis = 0
        #: candidate expressions Spark refuses to analyse (a binary literal cast to a number, ...)
        self.refused: set[str] = set()

    @contextlib.contextmanager
    def session(self, ansi: bool, zone: str, quoted: bool = False) -> Iterator[Any]:
        session = self.spark.newSession()
        session.conf.set("spark.sql.ansi.enabled", str(ansi).lower())
        session.conf.set("spark.sql.session.timeZone", zone)
        session.conf.set("spark.sql.ansi.doubleQuotedIdentifiers", str(quoted).lower())
        yield session

    def candidates(self, layout: Layout, literals: dict[str, set[str]]) -> list[list[str]]:
        """Per partition column, typed expressions of its witness values: fixed ones, every literal the
        predicates compare it with as Spark casts it, and their neighbours."""
        out: list[list[str]] = []
        for name, kind in layout.partitions:
            sql_type = TYPES[kind][0]
            exprs = [f"CAST(NULL AS {sql_type})"] + [f"try_cast({v} AS {sql_type})" for v in TYPES[kind][1]]
            for written in sorted(literals.get(name, ())):
                # a double-quoted literal's text as a witness value (under the setting it names a column)
                text = f"'{written[1:-1]}'" if written.startswith('"') else written
                cast = f"try_cast({text} AS {sql_type})"
                exprs += [cast, *(f"try_cast({n} AS {sql_type})" for n in _neighbours(cast, kind))]
                exprs.append(f"try_cast(try_cast({text} AS DOUBLE) AS {sql_type})")
                exprs.append(f"try_cast(try_cast({text} AS STRING) AS {sql_type})")
            out.append([e for e in dict.fromkeys(exprs) if e not in self.refused])
        return out

    def frame(self, session: Any, layout: Layout, candidates: list[list[str]]) -> Any:
        parts = []
        for index, exprs in enumerate(candidates):
            parts.append(
                f"(SELECT explode(array_distinct(array({', '.join(exprs)}))) AS c{index}) AS t{index}"
            )
        data = ", ".join(f"(CAST({i} AS BIGINT), CAST({v} AS STRING))" for i, v in DATA_ROWS)
        parts.append(f"(SELECT * FROM VALUES {data} AS d(id, v)) AS d")
        named = [f"c{i} AS `{name}`" for i, (name, _) in enumerate(layout.partitions)]
        return session.sql(f"SELECT {', '.join(named)}, id, v FROM {' CROSS JOIN '.join(parts)}")

    def _drop_refused(self, session: Any, candidates: list[list[str]]) -> list[list[str]]:
        kept: list[list[str]] = []
        for exprs in candidates:
            column: list[str] = []
            for expr in exprs:
                try:
                    session.sql(f"SELECT {expr}").collect()
                    self.queries += 1
                    column.append(expr)
                except Exception:
                    self.refused.add(expr)
            kept.append(column)
        return kept

    def selected(
        self, session: Any, layout: Layout, candidates: list[list[str]], predicates: Sequence[str]
    ) -> list[set[str] | None]:
        """Per predicate, the witness partitions (their keys) holding a row it is TRUE on; ``None`` when
        Spark refuses the predicate on every row (the DELETE fails before writing anything)."""
        keys = [_key(name, kind) for name, kind in layout.partitions]
        key_expr = f"concat_ws('|', {', '.join(f'coalesce({k}, chr(0))' for k in keys)}) AS key"
        try:
            frame = self.frame(session, layout, candidates)
            frame.selectExpr(key_expr).collect()
            self.queries += 1
        except Exception:
            candidates[:] = self._drop_refused(session, candidates)
            frame = self.frame(session, layout, candidates)
        return self._batch(frame, key_expr, list(predicates))

    def _batch(
        self, frame: Any, key_expr: str, predicates: list[str], analysed: bool = False
    ) -> list[set[str] | None]:
        """All predicates in one query. When Spark refuses it, the predicates it refuses to *analyse* are
        found one by one without running a job (refused on every row: ``None``), the rest asked again
        together, and halves of the list asked when one fails while running (a cast ANSI refuses on some
        row)."""
        try:
            rows = frame.selectExpr(key_expr, *(f"({p}) AS c{i}" for i, p in enumerate(predicates))).collect()
            self.queries += 1
            return [{r[0] for r in rows if r[i + 1] is True} for i in range(len(predicates))]
        except Exception:
            self.fallbacks += 1
        if not analysed and len(predicates) > 1:
            kept = [i for i, p in enumerate(predicates) if self._analyses(frame, p)]
            answers: list[set[str] | None] = [None] * len(predicates)
            if kept:
                got = self._batch(frame, key_expr, [predicates[i] for i in kept], analysed=True)
                for i, answer in zip(kept, got, strict=True):
                    answers[i] = answer
            return answers
        if len(predicates) == 1:
            return [self._one(frame, key_expr, predicates[0])]
        half = len(predicates) // 2
        return self._batch(frame, key_expr, predicates[:half], analysed) + self._batch(
            frame, key_expr, predicates[half:], analysed
        )

    def _analyses(self, frame: Any, predicate: str) -> bool:
        """Whether Spark analyses ``predicate`` on the frame (no job runs: an analysis error is the same on
        every row, so such a predicate selects nothing anywhere)."""
        try:
            frame.selectExpr(f"({predicate}) AS c")
        except Exception:
            self.refused_by_analysis += 1
            return False
        return True

    def _one(self, frame: Any, key_expr: str, predicate: str) -> set[str] | None:
        """A predicate Spark refuses on the whole frame, asked partition by partition: an error on a
        partition selects nothing there (a DELETE of a table holding it fails), but others may still be
        selected on tables without it. Refused on the NULL partition and on the first other one as well,
        it is taken as refused everywhere (a literal Spark will not cast fails whatever the rows)."""
        keyed = frame.selectExpr(key_expr, "*")
        keys = [k for (k,) in keyed.select("key").distinct().collect()]
        keys.sort(key=lambda k: "\0" not in k)
        chosen: set[str] = set()
        answered = False
        for index, key in enumerate(keys[:ROW_BY_ROW]):
            try:
                got = keyed.where(keyed["key"] == key).selectExpr(f"({predicate}) AS c").collect()
                self.queries += 1
            except Exception:
                if index == 1 and not answered:
                    break
                continue
            answered = True
            if any(r[0] is True for r in got):
                chosen.add(key)
        self.row_by_row += 1
        self.partly_refused += answered
        return chosen if answered else None


# --- the model -----------------------------------------------------------------------------------------


def model_verdict(a: str, b: str, config: Any, settings: Settings) -> tuple[bool | None, str]:
    """The model's verdict on two DELETEs: ``(conflict, reason)``; ``None`` when it refuses the text."""
    from deltaguard.core.model import pair_verdict
    from deltaguard.core.operations import Operation, OperationKind
    from deltaguard.core.profiles import EngineName, EngineProfile

    profile = EngineProfile(
        EngineName.DELTA_SPARK,
        "4.4.0",
        session_ansi=settings.ansi,
        session_time_zone=settings.zone,
        session_default_parser=None if settings.quoted is None else not settings.quoted,
    )
    try:
        verdict = pair_verdict(
            Operation(OperationKind.DELETE, predicate=a),
            Operation(OperationKind.DELETE, predicate=b),
            config,
            profile,
        )
    except ValueError as error:
        return None, str(error)
    return verdict.conflict, verdict.reason


def oracle_config(truth: Truth, config: Any, ansi: bool, zone: str, quoted: bool = False) -> Any:
    """``config`` with Spark's evaluator attached, asked in a session with these settings (those under which
    the pair met: the engine's evaluator runs in the session the write runs in, whose settings it knows)."""
    from deltaguard.engines.spark.meaning import SparkOracle

    return dataclasses.replace(
        config, meaning=SparkOracle.for_table(config, lambda: truth.session(ansi, zone, quoted))
    )


def confirm(
    session: Any,
    truth: Truth,
    layout: Layout,
    candidates: list[list[str]],
    key: str,
    a: str,
    b: str,
    root: Path,
) -> str:
    """Both DELETEs on a real delta-spark table holding the meeting partition, each from version 0:
    ``confirmed`` when both remove a common file, ``not confirmed`` otherwise, or the engine's error."""
    import uuid

    keys = [_key(name, kind) for name, kind in layout.partitions]
    key_expr = f"concat_ws('|', {', '.join(f'coalesce({k}, chr(0))' for k in keys)})"
    path = root / uuid.uuid4().hex
    table = f"delta.`{path}`"
    # The key is compared as a value, not spliced into SQL: the NULL partition's key holds a NUL character.
    keyed = truth.frame(session, layout, candidates).selectExpr(f"{key_expr} AS __key", "*")
    keyed.where(keyed["__key"] == key).drop("__key").createOrReplaceTempView("witness")
    partitioned = ", ".join(f"`{name}`" for name, _ in layout.partitions)
    try:
        session.sql(
            f"CREATE TABLE {table} USING DELTA PARTITIONED BY ({partitioned}) TBLPROPERTIES "
            "('delta.columnMapping.mode' = 'name', 'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5') "
            "AS SELECT * FROM witness"
        )
        removed = []
        for version, predicate in ((1, a), (3, b)):
            session.sql(f"DELETE FROM {table} WHERE {predicate}")
            log = path / "_delta_log" / f"{version:020d}.json"
            actions = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
            removed.append({x["remove"]["path"] for x in actions if "remove" in x})
            if version == 1:
                session.sql(f"RESTORE TABLE {table} TO VERSION AS OF 0")
    except Exception as error:
        return f"error: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
    return "confirmed" if removed[0] & removed[1] else "not confirmed"


# --- the run -------------------------------------------------------------------------------------------


@dataclass
class Summary:
    cases: int = 0
    pairs: int = 0
    refused_by_model: int = 0
    model_apart: int = 0
    conflicts_sampled: int = 0
    conflicts_sampled_apart_on_witnesses: int = 0
    hand_candidates: int = 0
    oracle_candidates: int = 0
    oracle_asked: int = 0
    confirmed: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    candidates: list[dict[str, Any]] = field(default_factory=list)


def run_case(
    gen: Generator,
    truth: Truth,
    spark: Any,
    summary: Summary,
    *,
    pairs: int,
    oracle: bool,
    predicates: int = 0,
    confirm_in: Path | None = None,
) -> None:
    layout = gen.layout()
    settings = gen.settings()
    config = layout.config()
    count = predicates or pairs + 4
    drawn = [gen.predicate(layout) if i % 3 else gen.point(layout) for i in range(count)]
    chosen = [(drawn[i % count], drawn[gen.rng.randrange(count)]) for i in range(pairs)]
    summary.cases += 1
    judged: list[tuple[Predicate, Predicate, bool | None, str]] = []
    for a, b in chosen:
        conflict, reason = model_verdict(a.text, b.text, config, settings)
        judged.append((a, b, conflict, reason))
    # Spark is asked only about what can show an unsound verdict (the pairs the model keeps apart) and,
    # for precision, about a sample of the pairs it calls conflicts.
    asked = [
        i
        for i, (_, _, conflict, _) in enumerate(judged)
        if conflict is False or (conflict and gen.rng.random() < PRECISION_SAMPLE)
    ]
    literals: dict[str, set[str]] = {}
    for i in asked:
        for p in judged[i][:2]:
            for k, v in p.literals.items():
                literals.setdefault(k, set()).update(v)
    meets: list[bool | None] = [None] * len(judged)
    where: dict[int, tuple[bool, str, bool, str]] = {}
    texts = sorted({t for i in asked for t in (judged[i][0].text, judged[i][1].text)})
    if texts:
        candidates = truth.candidates(layout, literals)
        for i in asked:
            meets[i] = False
        for ansi, zone, quoted in settings.concrete():
            with truth.session(ansi, zone, quoted) as session:
                sel = dict(zip(texts, truth.selected(session, layout, candidates, texts), strict=True))
            for i in asked:
                first, second = sel[judged[i][0].text], sel[judged[i][1].text]
                if first is not None and second is not None and first & second:
                    meets[i] = True
                    where.setdefault(i, (ansi, zone, quoted, sorted(first & second)[0]))
    for index, ((a, b, conflict, reason), meet) in enumerate(zip(judged, meets, strict=True)):
        summary.pairs += 1
        if conflict is None:
            summary.refused_by_model += 1
            continue
        if conflict:
            summary.reasons[reason.split(":")[0][:60]] += 1
            if meet is not None:
                summary.conflicts_sampled += 1
                summary.conflicts_sampled_apart_on_witnesses += not meet
            continue
        summary.model_apart += 1
        if not meet:
            continue
        summary.hand_candidates += 1
        found: dict[str, Any] = {
            "layout": [list(p) for p in layout.partitions],
            "settings": dataclasses.asdict(settings),
            "a": a.text,
            "b": b.text,
            "hand": reason,
            "meets": {
                "ansi": where[index][0],
                "zone": where[index][1],
                "quoted": where[index][2],
                "partition": where[index][3],
            },
        }
        if oracle:
            summary.oracle_asked += 1
            judged_config = oracle_config(truth, config, *where[index][:3])
            o_conflict, o_reason = model_verdict(a.text, b.text, judged_config, settings)
            found["oracle"] = o_reason
            if o_conflict is False:
                summary.oracle_candidates += 1
        if confirm_in is not None:
            ansi, zone, quoted, key = where[index]
            with truth.session(ansi, zone, quoted) as session:
                found["engine"] = confirm(session, truth, layout, candidates, key, a.text, b.text, confirm_in)
            summary.confirmed += found["engine"] == "confirmed"
        summary.candidates.append(found)


def local_session(*, with_delta: bool) -> Any:
    """A quiet ``local[1]`` session; with Delta's jars and extension when candidates are to be run."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "1",
        "spark.databricks.delta.snapshotPartitions": "1",
    }
    if with_delta:
        from deltaguard.engines.spark.session import worker_session

        spark = worker_session(master="local[1]", conf=conf, app_name="spark-meaning-fuzz")
    else:
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.master("local[1]")
        for key, value in conf.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("OFF")
    for name in ("SQLQueryContextLogger", "pyspark", "py4j"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    return spark


def fuzz(
    spark: Any,
    seed: int,
    *,
    cases: int = 0,
    minutes: float = 0.0,
    pairs: int = 60,
    predicates: int = 0,
    oracle: bool = True,
    confirm_in: Path | None = None,
    progress: Callable[[str], None] | None = None,
    every: int = 20,
) -> tuple[Summary, Truth]:
    """Generate and judge cases until ``cases`` are done (or, with ``cases`` 0, ``minutes`` have passed).

    :param spark: a Spark session (with Delta's jars when ``confirm_in`` is given).
    :param seed: the random seed (the cases are a function of it).
    :param pairs: DELETE pairs per generated table and settings.
    :param predicates: predicates drawn per table, the pairs made of them (0: ``pairs + 4``, every pair
        with a predicate of its own). Spark evaluates each predicate once, so more pairs of fewer
        predicates judge more of the model per Spark query.
    :param oracle: ask the model again with Spark's evaluator attached about each candidate.
    :param confirm_in: a scratch folder: run each candidate's DELETEs on delta-spark tables there.
    :param progress: called with a counted line every ``every`` cases.
    """
    gen = Generator(random.Random(seed))
    truth = Truth(spark)
    summary = Summary()
    started = time.monotonic()
    deadline = started + minutes * 60
    while (summary.cases < cases) if cases else (time.monotonic() < deadline):
        run_case(
            gen,
            truth,
            spark,
            summary,
            pairs=pairs,
            predicates=predicates,
            oracle=oracle,
            confirm_in=confirm_in,
        )
        if progress is not None and summary.cases % every == 0:
            progress(
                f"[{time.monotonic() - started:6.0f}s] cases {summary.cases} pairs {summary.pairs} "
                f"apart {summary.model_apart} hand {summary.hand_candidates} "
                f"oracle {summary.oracle_candidates} confirmed {summary.confirmed}"
            )
    return summary, truth


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.fuzz.spark_meaning", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--cases", type=int, default=0, help="stop after this many cases (0: by time)")
    parser.add_argument("--pairs", type=int, default=60, help="DELETE pairs per generated table and settings")
    parser.add_argument(
        "--predicates", type=int, default=0, help="predicates per table the pairs are made of (0: pairs + 4)"
    )
    parser.add_argument(
        "--no-oracle", action="store_true", help="do not ask the model with Spark's evaluator"
    )
    parser.add_argument("--confirm", action="store_true", help="run each candidate's DELETEs on delta-spark")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    spark = local_session(with_delta=args.confirm)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="deltaguard-spark-meaning-") as scratch:
        summary, truth = fuzz(
            spark,
            args.seed,
            cases=args.cases,
            minutes=args.minutes,
            pairs=args.pairs,
            predicates=args.predicates,
            oracle=not args.no_oracle,
            confirm_in=Path(scratch) if args.confirm else None,
            progress=lambda line: print(line, flush=True),
        )
    elapsed = time.monotonic() - started
    report = {
        "seed": args.seed,
        "seconds": round(elapsed, 1),
        "pairs_per_minute": round(summary.pairs / elapsed * 60),
        **{k: v for k, v in dataclasses.asdict(summary).items() if k not in ("reasons", "candidates")},
        "spark_queries": truth.queries,
        "spark_fallbacks": truth.fallbacks,
        "row_by_row": truth.row_by_row,
        "partly_refused": truth.partly_refused,
        "refused_by_analysis": truth.refused_by_analysis,
        "conflict_reasons": dict(summary.reasons.most_common(15)),
        "candidates": summary.candidates,
    }
    print(json.dumps({k: v for k, v in report.items() if k != "candidates"}, indent=1))
    for found in summary.candidates[:20]:
        print(json.dumps(found))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1, default=str))
    spark.stop()
    return 1 if summary.hand_candidates or summary.oracle_candidates else 0


if __name__ == "__main__":
    sys.exit(main())
