"""What the differential fuzzer generates: table layouts, write statements and cases, all plain JSON.

A :class:`FuzzCase` is one table layout plus two or three write statements that start from the same
table version. Every statement carries the Spark SQL a user would write (what the SQL classifier sees)
and, where the write reaches delta-rs through a typed operator rather than ``DeltaSqlOperator``, the
engine-neutral spec arguments that operator builds. Cases are JSON-serialisable so a failing case can be
saved and replayed byte for byte.

The table is tiny on purpose: ids 1-12, ``p`` in ``a``/``b``/``c``, ``d`` one of three dates, ``v = id * 10``
and a struct ``s`` with fields ``k`` and ``n``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any

import pyarrow as pa

#: the table every case writes to, as the SQL names it
TABLE = "t"
#: the values of the initial rows
PARTITION_VALUES: tuple[str, ...] = ("a", "b", "c")
DATES: tuple[str, ...] = ("2024-01-01", "2024-01-02", "2024-01-03")
INITIAL_IDS: tuple[int, ...] = tuple(range(1, 13))
#: the columns a partitioned layout may be partitioned by, in the order they are declared
PARTITIONINGS: tuple[tuple[str, ...], ...] = ((), ("p",), ("d",), ("p", "d"))
#: ``delta.isolationLevel`` values the fuzzer sets (``None``: the property is absent)
ISOLATION_LEVELS: tuple[str | None, ...] = (
    None,
    "Serializable",
    "WriteSerializable",
    "SnapshotIsolation",
    "snapshotIsolation",
)

#: a string of 22 euro signs (66 UTF-8 bytes): delta-rs records its statistics cut to 64 bytes (21 signs as
#: the min, 20 signs and a kip as the max, ADR 0020), though it is short enough for the model's literals
LONG_TEXT = "\u20ac" * 22
#: between the recorded max of :data:`LONG_TEXT` and the text itself
LONG_BOUND = "\u20ac" * 21 + "\u20ad"
#: ``p`` values of the edge rows (``None``: NULL; ``''``: the empty string)
EDGE_P_VALUES: tuple[str | None, ...] = (None, "", LONG_TEXT, None, LONG_BOUND)
#: ids of the edge rows (``FuzzLayout.edge_rows``)
EDGE_IDS: tuple[int, ...] = (13, 14, 15, 16, 17)

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("p", pa.string()),
        pa.field("d", pa.date32()),
        pa.field("v", pa.int64()),
        pa.field("s", pa.struct([pa.field("k", pa.string()), pa.field("n", pa.int64())])),
    ]
)


def initial_row(row_id: int) -> dict[str, Any]:
    """The initial row with id ``row_id`` (JSON form: dates as ISO text)."""
    return {
        "id": row_id,
        "p": PARTITION_VALUES[(row_id - 1) % 3],
        "d": DATES[((row_id - 1) // 3) % 3],
        "v": row_id * 10,
        "s": {"k": f"k{row_id % 3}", "n": row_id},
    }


def edge_row(row_id: int) -> dict[str, Any]:
    """An edge row (ids 13-17): ``p`` NULL, empty, or a long multi-byte string, negative ``v``, NULL ``s``."""
    position = row_id - EDGE_IDS[0]
    return {
        "id": row_id,
        "p": EDGE_P_VALUES[position],
        "d": DATES[position % len(DATES)],
        "v": -(row_id * 10),
        "s": None if position % 2 else {"k": "", "n": -row_id},
    }


def to_arrow(rows: list[dict[str, Any]]) -> pa.Table:
    """JSON rows (dates as ISO text, struct as an object) as an Arrow table of :data:`SCHEMA`."""
    converted = [{**row, "d": dt.date.fromisoformat(row["d"]) if row.get("d") else None} for row in rows]
    return pa.Table.from_pylist(converted, schema=SCHEMA)


@dataclass(frozen=True)
class FuzzLayout:
    """How the table is laid out before the writes start.

    :param partition_by: partition columns (empty: unpartitioned).
    :param clustered: unpartitioned only: one file per date (else every file mixes dates and ``p`` values).
    :param deletion_vectors: ``delta.enableDeletionVectors = true``.
    :param isolation: the ``delta.isolationLevel`` value, ``None`` for absent.
    """

    partition_by: tuple[str, ...] = ()
    clustered: bool = False
    deletion_vectors: bool = False
    isolation: str | None = None
    #: also the edge rows (:func:`edge_row`): NULL / empty / long multi-byte ``p``, negative ``v``, NULL ``s``
    edge_rows: bool = False

    def properties(self) -> dict[str, str]:
        """The table properties the table is created with."""
        found: dict[str, str] = {}
        if self.isolation is not None:
            found["delta.isolationLevel"] = self.isolation
        if self.deletion_vectors:
            found["delta.enableDeletionVectors"] = "true"
        return found

    def initial_commits(self) -> list[list[dict[str, Any]]]:
        """The initial rows, one list per commit: per date when clustered, else two mixed commits."""
        rows = [initial_row(i) for i in INITIAL_IDS]
        if self.edge_rows:
            rows += [edge_row(i) for i in EDGE_IDS]
        if self.clustered:
            return [[r for r in rows if r["d"] == date] for date in DATES]
        return [[r for r in rows if r["id"] % 2 == 1], [r for r in rows if r["id"] % 2 == 0]]

    def describe(self) -> str:
        parts = [f"partitioned by {', '.join(self.partition_by)}" if self.partition_by else "unpartitioned"]
        if not self.partition_by:
            parts.append("clustered by date" if self.clustered else "mixed files")
        parts.append("DV on" if self.deletion_vectors else "DV off")
        parts.append(f"isolation {self.isolation or '(absent)'}")
        if self.edge_rows:
            parts.append("edge rows")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        found = {**asdict(self), "partition_by": list(self.partition_by)}
        if not self.edge_rows:
            del found["edge_rows"]  # cases saved before edge rows existed stay byte for byte the same
        return found

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> FuzzLayout:
        return cls(
            partition_by=tuple(value.get("partition_by", ())),
            clustered=bool(value.get("clustered", False)),
            deletion_vectors=bool(value.get("deletion_vectors", False)),
            isolation=value.get("isolation"),
            edge_rows=bool(value.get("edge_rows", False)),
        )


@dataclass(frozen=True)
class FuzzStatement:
    """One write of a case.

    :param sql: the Spark SQL statement a user would write for it (always given to the SQL classifier).
    :param path: ``sql``: run on delta-rs as ``DeltaSqlOperator`` runs it (classified, then translated by
        :mod:`deltaguard.engines.sql_translate`); ``spec``: run as the typed operator runs it (the spec below,
        judged by ``spec.operation()`` as well as by the classified SQL).
    :param spec: for ``path == "spec"``: the spec's type (``append``, ``merge``, ``replace_where``,
        ``overwrite``) and arguments, rows as JSON. A ``select`` argument is a query over the target table
        that the engine evaluates on the write's own (possibly stale) snapshot to produce the source rows,
        which is how a self-reading write behaves.
    :param tags: what the statement exercises (``moves_rows``, ``self_read``, ``struct_field``, ...), for
        classing findings.
    """

    sql: str
    path: str = "sql"
    spec: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """The statement's leading words (``DELETE``, ``MERGE``, ``INSERT OVERWRITE`` ...), for summaries."""
        words = self.sql.split()
        if words[:2] == ["INSERT", "OVERWRITE"]:
            return "INSERT OVERWRITE"
        if words[0] == "INSERT" and "REPLACE" in words[:5]:
            return "REPLACE WHERE"
        if words[0] == "INSERT" and "self_read" in self.tags:
            return "INSERT SELECT"
        return words[0]

    def to_json(self) -> dict[str, Any]:
        return {"sql": self.sql, "path": self.path, "spec": self.spec, "tags": list(self.tags)}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> FuzzStatement:
        return cls(
            sql=value["sql"],
            path=value.get("path", "sql"),
            spec=dict(value.get("spec", {})),
            tags=tuple(value.get("tags", ())),
        )


@dataclass(frozen=True)
class FuzzCase:
    """A layout and the two or three writes that start from the same version of it."""

    layout: FuzzLayout
    statements: tuple[FuzzStatement, ...]

    @property
    def roles(self) -> tuple[str, ...]:
        """``A``, ``B`` (and ``C``): the names the statements go by in orders and outcomes."""
        return tuple("ABC"[: len(self.statements)])

    def tags(self) -> tuple[str, ...]:
        """Every statement's tags plus the layout's, sorted and without repeats."""
        found = {tag for statement in self.statements for tag in statement.tags}
        found.add("partitioned" if self.layout.partition_by else "unpartitioned")
        if len(self.layout.partition_by) > 1:
            found.add("two_partition_columns")
        if self.layout.clustered:
            found.add("clustered_files")
        if self.layout.deletion_vectors:
            found.add("deletion_vectors")
        if self.layout.edge_rows:
            found.add("edge_rows")
        if len(self.statements) > 2:
            found.add("triple")
        return tuple(sorted(found))

    def to_json(self) -> dict[str, Any]:
        return {"layout": self.layout.to_json(), "statements": [s.to_json() for s in self.statements]}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> FuzzCase:
        return cls(
            layout=FuzzLayout.from_json(value["layout"]),
            statements=tuple(FuzzStatement.from_json(s) for s in value["statements"]),
        )
