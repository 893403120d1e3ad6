"""What delta-rs' own DataFusion says of SQL: the meaning of partition predicates, and whether a write's
conditions and expressions plan on the table.

Partition predicates (ADR 0037): :class:`DataFusionOracle` implements
:class:`deltaguard.core.oracle.PredicateOracle`: it writes the witness partition rows, with the table's
partition column types, as one small Delta file in ``/dev/shm`` and asks delta-rs twice: DataFusion
(``deltalake.QueryBuilder``) for the value of every predicate on every row (TRUE, FALSE or NULL), and
delta-rs' own DELETE, on a copy, which rows the predicate selects as a write (delta-rs casts a literal to the
column's type before it selects, which a query does not). A row a DELETE selects counts as TRUE. The
predicates are rendered for DataFusion exactly as the delta-rs engine renders a write's predicate before
running it.

Planning (:func:`check_planned`, :func:`planned_texts`): sqlglot reads any function name and any comparison,
so ``pg_sleep(5) = 1``, ``load_file('/etc/passwd')`` or ``id = 'abc'`` on a BIGINT column would pass every
sqlglot check and fail inside delta-rs as a raw ``DeltaError``, which Airflow retries. Here each text is
planned by DataFusion (the SQL engine delta-rs runs predicates and UPDATE expressions with), against the
table's real schema, as ``SELECT (<text>) FROM t LIMIT 0``: planning resolves every function and column, and
DataFusion's constant folding casts the literals, so an unknown function, an unknown column or a literal that
cannot take the column's type is refused before any lease, without reading a data file. Planning takes about a
millisecond per text (measured with deltalake 1.6.6).

What planning cannot see still fails at write time (a cast that fails on some row's value, a comparison
delta-rs' file skipping cannot evaluate).
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from deltalake.exceptions import DeltaError

from deltaguard.core.oracle import AnswerCache, Truth
from deltaguard.core.sql.literals import DATAFUSION, render_sql
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.engines.specs import DeleteSpec, ReplaceWhereSpec, UpdateSpec, WriteSpec

#: Witness rows at most; a question needing more is not answered (the claim is then refuted).
MAX_ROWS = 4096
#: Witness tables live in memory where the machine has a writable tmpfs there.
_SHM = Path("/dev/shm")
#: The witness row id column.
_ID = "__witness"

_DECIMAL = re.compile(r"decimal\((\d+)\s*,\s*(\d+)\)")
_ARROW_TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "boolean": pa.bool_(),
    "date": pa.date32(),
    "double": pa.float64(),
    "float": pa.float32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}
#: Values every witness set of a type holds besides NULL (the empty string is logged as NULL by delta-rs).
_EXTRA: dict[str, tuple[str, ...]] = {"string": ("",), "boolean": ("true", "false")}


def arrow_type(delta_type: str) -> pa.DataType:
    """The Arrow type delta-rs reads a partition column of this Delta type as.

    :raises ValueError: for a type the oracle does not handle (the claim is then refuted).
    """
    kind = delta_type.strip().lower()
    if kind in _ARROW_TYPES:
        return _ARROW_TYPES[kind]
    match = _DECIMAL.fullmatch(kind)
    if match:
        return pa.decimal128(int(match[1]), int(match[2]))
    raise ValueError(f"no witness rows for a partition column of type {delta_type!r}")


def _typed(values: Sequence[str | None], kind: pa.DataType, extra: Sequence[str]) -> list[Any]:
    """The candidate texts the column's type can hold, as Python values of that type (NULL included)."""
    out: dict[Any, None] = {None: None}
    for text in (*values, *extra):
        if text is None:
            continue
        try:
            value = pa.array([text], pa.string()).cast(kind, safe=True)[0].as_py()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            continue  # no row of this column can hold it
        out[value] = None
    return list(out)


class DataFusionOracle:
    """Evaluate partition predicates with delta-rs' DataFusion on witness rows of the table's types.

    :param partition_columns: the table's partition columns, in order.
    :param types: the Delta type of each partition column (lower-cased names).
    """

    #: the engine whose meaning it gives (the delta-rs rules use no other engine's evaluator)
    engine = "delta-rs"

    def __init__(self, partition_columns: Sequence[str], types: Mapping[str, str]) -> None:
        self.partition_columns = tuple(partition_columns)
        self.types = {column.lower(): types[column.lower()] for column in partition_columns}
        self._answers = AnswerCache()

    @classmethod
    def for_table(cls, config: TableConfig) -> DataFusionOracle | None:
        """The oracle of a partitioned table whose partition types are known (else ``None``)."""
        if not config.exists or not config.partition_columns or config.column_types is None:
            return None
        types: dict[str, str] = {}
        for column in config.partition_columns:
            kind = config.column_type(column)
            if kind is None:
                return None
            types[column.lower()] = kind
        return cls(config.partition_columns, types)

    def evaluate(
        self, predicates: Sequence[str], candidates: Mapping[str, Sequence[str | None]]
    ) -> Sequence[tuple[Truth, ...]]:
        """See :meth:`deltaguard.core.meaning.PredicateOracle.evaluate` (answers are cached)."""
        return self._answers.answer(predicates, candidates, self._evaluate)

    def _evaluate(
        self, predicates: tuple[str, ...], given: Mapping[str, Sequence[str | None]]
    ) -> list[tuple[Truth, ...]]:
        columns: list[tuple[str, list[Any]]] = []
        size = 1
        for column in self.partition_columns:
            kind = self.types[column.lower()]
            values = _typed(list(given.get(column.lower(), ())), arrow_type(kind), _EXTRA.get(kind, ()))
            columns.append((column, values))
            size *= len(values)
        if size > MAX_ROWS:
            raise ValueError(f"{size} witness rows, more than {MAX_ROWS}")
        rows = list(itertools.product(*(values for _, values in columns)))
        data = {_ID: pa.array(range(len(rows)), pa.int64())}
        for index, (column, _) in enumerate(columns):
            data[column] = pa.array([row[index] for row in rows], arrow_type(self.types[column.lower()]))
        rendered = [render_sql(text, DATAFUSION) for text in predicates]
        select = ", ".join(f"({text}) AS __p{index}" for index, text in enumerate(rendered))
        where = _SHM if os.access(_SHM, os.W_OK) else Path(tempfile.gettempdir())
        path = where / f"deltaguard-witness-{uuid.uuid4().hex}"
        try:
            # One file holding every witness row: what delta-rs' DELETE keeps of it names the rows it selects.
            write_deltalake(str(path), pa.table(data))
            result = pa.table(
                QueryBuilder()
                .register("witness", DeltaTable(str(path)))
                .execute(f"SELECT {_ID}, {select} FROM witness")
                .read_all()
            )
            everything = set(range(len(rows)))
            selected = [
                everything - _kept_by_delete(path, text, index) for index, text in enumerate(rendered)
            ]
        finally:
            shutil.rmtree(path, ignore_errors=True)
        if len(result) != len(rows):
            raise ValueError(f"the engine returned {len(result)} of {len(rows)} witness rows")
        ids = result.column(_ID).to_pylist()
        answers = [result.column(f"__p{index}").to_pylist() for index in range(len(predicates))]
        return [
            tuple(
                True if ids[row] in selected[index] else answers[index][row]
                for index in range(len(predicates))
            )
            for row in range(len(result))
        ]


def _kept_by_delete(base: Path, predicate: str, index: int) -> set[int]:
    """The witness rows delta-rs' own DELETE of ``predicate`` keeps.

    A write's selection is not the row-level value of its predicate: delta-rs casts a literal to the
    column's type first (``DELETE WHERE p = 1.5`` on an INT column deletes the rows of ``p = 1``, and
    ``q >= 2`` on a BOOLEAN column those of ``q = true``; measured on deltalake 1.6.6), so a DELETE of a
    copy of the witness table is asked which rows it selects.
    """
    work = base.with_name(f"{base.name}-{index}")
    try:
        shutil.copytree(base, work)
        table = DeltaTable(str(work))
        table.delete(predicate)
        kept = QueryBuilder().register("witness", DeltaTable(str(work))).execute(f"SELECT {_ID} FROM witness")
        return {int(value) for value in pa.table(kept.read_all()).column(_ID).to_pylist()}
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------------------------------- planning


#: How many characters of a text a message quotes.
_SHOWN = 200


def planned_texts(spec: WriteSpec) -> Iterator[tuple[str, str]]:
    """The texts of ``spec`` that name only the target table's columns: ``(what, Spark SQL text)``.

    A MERGE's texts also name its source, which is not a table here: they are left to the engine.
    """
    if isinstance(spec, UpdateSpec):
        if spec.predicate is not None:
            yield "UPDATE predicate", spec.predicate
        for column, expression in spec.updates.items():
            yield f"UPDATE expression for {column!r}", expression
    elif isinstance(spec, DeleteSpec | ReplaceWhereSpec) and spec.predicate is not None:
        yield f"{'DELETE' if isinstance(spec, DeleteSpec) else 'replaceWhere'} predicate", spec.predicate


def check_planned(table: DeltaTable, spec: WriteSpec, render: Callable[[str], str | None]) -> None:
    """Plan every text of ``spec`` (:func:`planned_texts`) with DataFusion against ``table``.

    :param table: the open table the write will change.
    :param spec: the write, already checked by its own ``validate``.
    :param render: renders a Spark SQL text for DataFusion, as the write's runner will
        (``str -> str | None``).
    :raises InvalidWriteError: naming the text and DataFusion's reason.
    """
    texts = list(planned_texts(spec))
    if not texts:
        return
    builder = QueryBuilder().register("t", table)
    for what, text in texts:
        rendered = render(text)
        if rendered is None:
            continue
        try:
            builder.execute(f"SELECT ({rendered}) AS deltaguard_checked FROM t LIMIT 0").read_all()
        except DeltaError as exc:
            raise InvalidWriteError(f"{what} {_shown(text)} cannot run on delta-rs: {_reason(exc)}") from None


def _reason(exc: Exception) -> str:
    """DataFusion's reason on one line, without its backtrace or its guess at what was meant."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    kept = [line for line in lines if not line.startswith("Did you mean") and not line[:1].isdigit()]
    text = " ".join(kept) or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."


def _shown(text: str) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= _SHOWN else flat[:_SHOWN] + "...")
