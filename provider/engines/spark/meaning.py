"""Spark's own analyzer as the judge of partition predicates (ADR 0037).

:class:`SparkOracle` implements :class:`deltaguard.core.oracle.PredicateOracle` with the writer's own Spark
session, through calls that classic PySpark and Spark Connect both have: the witness rows are the cross
product of each partition column's candidate values as text, one inline table cast by Spark (``try_cast`` to
the column's type, under the session's time zone), rows holding a value the type cannot hold dropped; every
predicate is one expression of one ``selectExpr``, collected at once (a frame of literals: Spark's
optimizer evaluates it in the driver, no job reads it). Spark resolves the
predicate's names (case, backticks, dots) and coerces its literals (``spark.sql.ansi.enabled``) exactly as
it does for a write of that session, so the answer is about the write that will run, not about the model's
reading of Spark SQL.

delta-spark selects a write's files by the same analyzed expression evaluated on the partition values
(``OptimisticTransaction.filterFiles``, ``DeltaLog.filterFileList``), and its ``ConflictChecker`` matches a
winner's files against the loser's partition predicates the same way, so the row-level value of a predicate
on a witness row is what a write selects there (unlike delta-rs, whose DELETE casts a literal first).
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from deltaguard.core.oracle import AnswerCache, Truth
from deltaguard.core.table_config import TableConfig

#: Witness rows at most; a question needing more is not answered (the claim is then refuted).
MAX_ROWS = 4096
#: Partition types whose values a text can be cast to (Delta's names; Spark's parser reads them all).
_SIMPLE_TYPES = frozenset(
    {
        "string",
        "long",
        "bigint",
        "integer",
        "int",
        "short",
        "smallint",
        "byte",
        "tinyint",
        "boolean",
        "date",
        "double",
        "float",
        "timestamp",
        "timestamp_ntz",
    }
)
_DECIMAL = re.compile(r"decimal\(\s*\d+\s*,\s*\d+\s*\)")
#: Values every witness set of a type holds besides NULL and the candidates.
_EXTRA: dict[str, tuple[str, ...]] = {"string": ("",), "boolean": ("true", "false")}

#: Gives a session with the settings of the writes to judge, for the duration of one question.
SessionScope = Callable[[], contextlib.AbstractContextManager[Any]]


def spark_type(delta_type: str) -> str:
    """The type a witness text is cast to, as Spark SQL spells it.

    :param delta_type: the partition column's type (Delta's name, ``integer``, or Spark's, ``int``).
    :raises ValueError: for a type the oracle does not build witnesses of (the claim is then refuted).
    """
    kind = delta_type.strip().lower()
    if kind in _SIMPLE_TYPES or _DECIMAL.fullmatch(kind):
        return kind
    raise ValueError(f"no witness rows for a partition column of type {delta_type!r}")


def witness_texts(values: Sequence[str | None], delta_type: str) -> list[str | None]:
    """The texts to cast for one column: NULL first, then each candidate once, then the type's extras.

    :param values: the candidate values the model gives (``None``: NULL).
    :param delta_type: the column's type (decides the extras: the empty string, both booleans).
    """
    kind = delta_type.strip().lower()
    out: dict[str | None, None] = {None: None}
    for text in (*values, *_EXTRA.get(kind, ())):
        if text is not None:
            out[text] = None
    return list(out)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _text(value: str | None) -> str:
    """A SQL expression of the text ``value`` that no parser setting reads differently: its UTF-8 bytes as a
    hexadecimal binary literal, cast to STRING (``spark.sql.parser.escapedStringLiterals`` changes how a
    quoted literal's backslashes are read)."""
    if value is None:
        return "CAST(NULL AS STRING)"
    return f"CAST(X'{value.encode('utf-8').hex().upper()}' AS STRING)"


def witness_sql(columns: Sequence[tuple[str, str, Sequence[str | None]]]) -> str:
    """The query of the witness rows: the cross product of each column's texts as an inline table, each cast
    to its column's type by Spark (``try_cast``, in the session's time zone) and named as the table names it;
    a row holding a text its type cannot hold is dropped (``try_cast`` gives NULL for it whatever the ANSI
    mode, while the NULL text stays the NULL partition value).

    An inline table of literals is evaluated by Spark's analyzer and optimizer in the driver: no Spark job
    reads it.

    :param columns: ``(name, type, texts)`` per partition column (see :func:`witness_texts`).
    :raises ValueError: without columns, for more than :data:`MAX_ROWS` rows, or for a type without witnesses.
    """
    if not columns:
        raise ValueError("no partition columns to build witness rows of")
    size = 1
    for _, _, texts in columns:
        size *= len(texts)
    if size > MAX_ROWS:
        raise ValueError(f"{size} witness rows, more than {MAX_ROWS}")
    raw = [f"__text{index}" for index in range(len(columns))]
    typed = [f"try_cast({raw[i]} AS {spark_type(kind)})" for i, (_, kind, _) in enumerate(columns)]
    rows = ", ".join(
        "(" + ", ".join(_text(value) for value in row) + ")"
        for row in itertools.product(*(texts for _, _, texts in columns))
    )
    select = ", ".join(f"{typed[i]} AS {_quote(name)}" for i, (name, _, _) in enumerate(columns))
    keep = " AND ".join(f"({raw[i]} IS NULL OR {typed[i]} IS NOT NULL)" for i in range(len(columns)))
    return f"SELECT {select} FROM VALUES {rows} AS __witness({', '.join(raw)}) WHERE {keep}"


class SparkOracle:
    """Evaluate partition predicates with Spark on witness rows of the table's partition types.

    :param sessions: a session with the writes' own settings (ANSI mode, time zone, case sensitivity), held
        for one question.
    :param partition_columns: the table's partition columns, in order.
    :param types: the type of each partition column (lower-cased names).
    """

    #: the engine whose meaning it gives (the delta-rs rules do not take another engine's answers)
    engine = "delta-spark"

    def __init__(
        self, sessions: SessionScope, partition_columns: Sequence[str], types: Mapping[str, str]
    ) -> None:
        self.partition_columns = tuple(partition_columns)
        self.types = {column.lower(): types[column.lower()] for column in partition_columns}
        self._sessions = sessions
        self._answers = AnswerCache()

    @classmethod
    def for_table(
        cls, config: TableConfig, sessions: SessionScope, types: Mapping[str, str] | None = None
    ) -> SparkOracle | None:
        """The oracle of a partitioned table whose partition types are known (else ``None``).

        :param config: the table's configuration.
        :param sessions: see the class.
        :param types: partition column types (lower-cased names) when the configuration has none (a catalog
            table read through ``DESCRIBE DETAIL``).
        """
        if not config.exists or not config.partition_columns:
            return None
        found: dict[str, str] = {}
        for column in config.partition_columns:
            kind = config.column_type(column) or (types or {}).get(column.lower())
            if kind is None:
                return None
            found[column.lower()] = kind
        return cls(sessions, config.partition_columns, found)

    def evaluate(
        self, predicates: Sequence[str], candidates: Mapping[str, Sequence[str | None]]
    ) -> Sequence[tuple[Truth, ...]]:
        """See :meth:`deltaguard.core.oracle.PredicateOracle.evaluate` (answers are cached)."""
        return self._answers.answer(predicates, candidates, self._evaluate)

    def _evaluate(
        self, predicates: tuple[str, ...], given: Mapping[str, Sequence[str | None]]
    ) -> list[tuple[Truth, ...]]:
        columns = [
            (
                column,
                self.types[column.lower()],
                witness_texts(list(given.get(column.lower(), ())), self.types[column.lower()]),
            )
            for column in self.partition_columns
        ]
        query = witness_sql(columns)
        names = [f"__p{index}" for index in range(len(predicates))]
        with self._sessions() as spark:
            # selectExpr, not F.expr: pyspark.sql.functions builds the columns of the mode the process runs
            # in, and the engine may hold a Connect session beside a classic context
            rows = spark.sql(query).selectExpr(*predicates).toDF(*names).collect()
        return [tuple(_truth(value) for value in row) for row in rows]


def _truth(value: object) -> Truth:
    if value is None or isinstance(value, bool):
        return value
    # closed world: a predicate that is no boolean selects nothing the model may rely on
    raise ValueError(f"a partition predicate evaluated to {type(value).__name__}, not a boolean")
