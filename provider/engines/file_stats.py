"""Read the per-file column statistics of a Delta snapshot into the core's plain
:class:`~deltaguard.core.file_stats.FileStatsSummary` (ADR 0020).

Reads deltalake's add actions of the snapshot (``DeltaTable.get_add_actions(flatten=True)``: ``min.<col>``,
``max.<col>``, ``null_count.<col>`` per file) for the top-level columns of an integer, string or date type.
A value the core cannot compare exactly is left out, which the core reads as "no statistics" (the engine
then cannot prune that file either way, so the core assumes the file matches):

* strings of :data:`~deltaguard.core.file_stats.MAX_TRUSTED_STRING` characters or more (another writer may
  cut string statistics at 32 characters; delta-rs cuts them at 64 UTF-8 bytes, which shorter values may
  reach: those are kept, they are what the engine prunes on, and the core treats them as possible cuts where
  it bounds a new file, :func:`~deltaguard.core.file_stats.recorded_range`),
* anything of another type.

Which columns a file written *now* would record statistics for follows the table's current
``delta.dataSkippingStatsColumns`` or ``delta.dataSkippingNumIndexedCols`` (default 32 leading columns,
``-1`` all); when a nested column precedes a column, counting leaves is not attempted and the column counts
as not indexed.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable

from deltaguard.core.file_stats import (
    INTEGER_TYPES,
    MAX_TRUSTED_STRING,
    SUPPORTED_TYPES,
    ColumnStats,
    FileStats,
    FileStatsSummary,
    Value,
)

#: delta.dataSkippingNumIndexedCols when the property is absent
DEFAULT_INDEXED_COLUMNS = 32


def read_file_stats(table: DeltaTable, properties: dict[str, str]) -> FileStatsSummary:
    """The statistics of every live file of ``table`` at the version it is loaded at.

    :param table: an open deltalake table.
    :param properties: its table properties (for the indexed columns).
    """
    fields = list(table.schema().fields)
    types: list[tuple[str, str]] = []
    for f in fields:
        kind = getattr(f.type, "type", None)
        types.append((f.name, str(kind) if isinstance(kind, str) else "complex"))
    supported = [(name, kind) for name, kind in types if kind in SUPPORTED_TYPES]
    actions = pa.table(table.get_add_actions(flatten=True))
    names = set(actions.column_names)
    files: list[FileStats] = []
    for row in actions.to_pylist():
        columns: list[tuple[str, ColumnStats]] = []
        for name, kind in supported:
            if f"min.{name}" not in names and f"null_count.{name}" not in names:
                continue
            nulls = row.get(f"null_count.{name}")
            columns.append(
                (
                    name,
                    ColumnStats(
                        min=_value(row.get(f"min.{name}"), kind),
                        max=_value(row.get(f"max.{name}"), kind),
                        null_count=int(nulls) if nulls is not None else None,
                    ),
                )
            )
        records = row.get("num_records")
        files.append(
            FileStats(
                path=str(row["path"]),
                columns=tuple(columns),
                num_records=int(records) if records is not None else None,
            )
        )
    return FileStatsSummary(
        version=table.version(),
        column_types=tuple(types),
        files=tuple(files),
        indexed=indexed_columns(types, properties),
    )


def _value(raw: Any, kind: str) -> Value | None:
    if raw is None:
        return None
    if kind in INTEGER_TYPES:
        return int(raw) if isinstance(raw, int) and not isinstance(raw, bool) else None
    if kind == "date":
        return (
            raw.isoformat()
            if isinstance(raw, datetime.date) and not isinstance(raw, datetime.datetime)
            else None
        )
    if isinstance(raw, str) and len(raw) < MAX_TRUSTED_STRING:
        return raw
    return None


#: what delta-rs parses as a column count (Rust's ``i32::from_str``: a sign, ASCII digits, nothing else)
_INT32_TEXT = re.compile(r"[+-]?[0-9]+")


def _int32(text: str) -> int | None:
    """``text`` as delta-rs reads an integer table property, or ``None`` where it cannot. Python's
    ``int()`` also takes ``'4_0'``, ``' 4'`` and non-ASCII digits, which delta-rs refuses."""
    if not _INT32_TEXT.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**31) <= value < 2**31 else None


def indexed_columns(types: list[tuple[str, str]], properties: dict[str, str]) -> frozenset[str]:
    """The top-level columns a newly written file records statistics for.

    :param types: ``(column, type)`` in schema order (``"complex"`` for nested types).
    :param properties: the table properties.
    """
    lowered = {k.lower(): v for k, v in properties.items()}
    listed = lowered.get("delta.dataskippingstatscolumns")
    if listed is not None:
        wanted = {part.strip().strip("`") for part in listed.split(",") if part.strip()}
        return frozenset(name for name, _ in types if name in wanted)
    raw = lowered.get("delta.dataskippingnumindexedcols")
    count = DEFAULT_INDEXED_COLUMNS if raw is None else _int32(raw)
    if count is None:
        # delta-rs 1.6.6 falls back to its default for a value it cannot parse (measured); any column
        # counted here lets the statistics rule separate writes, so none is
        return frozenset()
    if count < 0:
        count = len(types) if all(kind != "complex" for _, kind in types) else 0
    chosen: list[str] = []
    for position, (name, kind) in enumerate(types):
        if position >= count or kind == "complex":
            break  # leaves of a nested column count one by one: not attempted
        chosen.append(name)
    return frozenset(chosen)
