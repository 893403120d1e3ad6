"""Whether a write's source reads the table it writes (ADR 0012: such a write reads the whole table).

A MERGE or an append whose source is its own target reads the target as it runs: two MERGEs copying
partition ``b`` into ``a`` and ``a`` into ``b`` both commit on delta-rs 1.6.6 and swap the values, and
``INSERT INTO t PARTITION (p='b') SELECT ... FROM <t through a symlink> WHERE p='a'`` and its mirror both
commit on delta-spark 4.4.0 ("Isolation levels and write conflicts": an INSERT that reads its table has
MERGE's concurrency). The model sees that only if it is told (``Operation.reads_target``).

Closed world: a source is known not to read the target only when it is data already in memory (a
``pyarrow.Table``, a pandas ``DataFrame``) or a location that is neither the target nor inside it nor
around it, compared by :func:`deltaguard.writes.table_uri.table_key` (symlinks, ``file:`` spellings,
``..`` segments, trailing slashes, object-store scheme aliases); a relative path, read from whatever
directory the write runs in, may be the target. A callable, a Spark or other lazy
DataFrame, a reader or a stream may read anything, the target included.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from deltaguard.core.operations import Operation
from deltaguard.engines.held_sources import unwrap_source
from deltaguard.engines.sources import DELTA_PREFIX
from deltaguard.engines.specs import SqlSpec, WriteSpec
from deltaguard.writes.table_uri import table_key, uri_scheme


def _overlaps(first: str, second: str) -> bool:
    """One location is the other, or holds it (a parent directory read recursively, a partition inside)."""
    a, b = first.rstrip("/"), second.rstrip("/")
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def location_reads_target(location: str, table_uri: str) -> bool:
    """Whether reading ``location`` reads files of the table at ``table_uri``.

    A relative path may be the target: the engine reads it from the working directory of the process that
    runs the write (deltalake and pyarrow open ``lake/t`` there; measured on deltalake 1.6.6 with the
    meaning fuzzer's sources), which is not known where the write is judged, so it cannot be placed.

    :param location: a source path or URI (``delta+`` prefix allowed).
    :param table_uri: the target table.
    """
    if _is_relative(location):
        return True
    return _overlaps(table_key(location.removeprefix(DELTA_PREFIX)), table_key(table_uri))


def _is_relative(location: str) -> bool:
    """A local path without a leading ``/`` (nor a scheme): it names a place only with a working directory."""
    text = location.removeprefix(DELTA_PREFIX).strip()
    return uri_scheme(text) is None and not text.startswith("/")


def source_reads_target(source: Any, table_uri: str, *, declared_apart: bool = False) -> str | None:
    """Why ``source`` may read the table at ``table_uri`` while the write runs, or ``None`` when it
    provably does not.

    :param source: a spec's source (possibly held in a :class:`~deltaguard.engines.held_sources.CallableSource`).
    :param table_uri: the target table.
    :param declared_apart: the task's author states that the source does not read the target
        (``source_reads_target=False``): a source computed as the write runs is taken at its author's word,
        while a location is still compared with the target, since that needs no one's word.
    """
    raw = unwrap_source(source)
    if raw is None or isinstance(raw, pa.Table) or _is_pandas(raw):
        return None
    if isinstance(raw, str | os.PathLike):
        raw = os.fspath(raw)
        if _is_relative(raw):
            return f"its source {raw!r} is a relative path, read from the working directory: it may be the target"
        if location_reads_target(raw, table_uri):
            return f"its source {raw!r} is the target table (or inside it)"
        return None
    if declared_apart:
        return None
    kind = type(raw).__name__
    return (
        f"its source (a {kind}) is computed as the write runs and may read the target table "
        "(source_reads_target=False says it does not)"
    )


def sql_reads_target(
    sql: str, table_uri: str, locate: Callable[[str], str | None] | None = None
) -> str | None:
    """Why a Spark SQL statement may read the table at ``table_uri`` through a relation other than its
    target reference, or ``None``.

    A path relation (``delta.`/lake/link```, ``parquet.`/lake/t/p=a```) is resolved with the filesystem. A
    catalog name is resolved with ``locate`` (the engine's catalog: its location, ``None`` for a view or a
    name it cannot resolve, which may read anything); without ``locate`` catalog names are left to the
    classifier (:mod:`deltaguard.core.sql.classify`), which counts any name that could be the target.

    :param sql: the statement.
    :param table_uri: the table the statement writes.
    :param locate: the engine's catalog lookup, when it has one.
    """
    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except (SqlglotError, RecursionError):
        return "a statement that does not parse may read the target"  # the classifier refuses it first
    target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        if table is target:
            continue
        path = _relation_path(table)
        if path is not None:
            if location_reads_target(path, table_uri):
                return f"it reads {path!r}, which is the target table (or inside it)"
            continue
        if locate is None or not isinstance(table.this, exp.Identifier):
            continue
        name = ".".join(part.name for part in table.parts)
        if len(table.parts) == 1 and name.lower() in ctes:
            continue
        location = locate(".".join(_quoted(part.name) for part in table.parts))
        if location is None:
            return (
                f"it reads {name}, whose location is not known (a view or a name the catalog cannot resolve)"
            )
        if location_reads_target(location, table_uri):
            return f"it reads {name}, which is stored at the target's location"
    return None


def _quoted(part: str) -> str:
    return "`" + part.replace("`", "``") + "`"


def _relation_path(table: exp.Table) -> str | None:
    """The path of ``format.`path``` (any format), or ``None`` for a catalog name."""
    parts = table.parts
    if len(parts) == 2 and ("/" in parts[1].name or ":" in parts[1].name):
        return parts[1].name
    return None


def with_target_reads(
    operation: Operation,
    spec: WriteSpec,
    table_uri: str,
    locate: Callable[[str], str | None] | None = None,
    declared: bool | None = None,
) -> tuple[Operation, str | None]:
    """``operation`` marked as reading its own table when the spec's source (or SQL) may read it, and why.

    :param operation: what the model was going to be told.
    :param spec: the write.
    :param table_uri: the table it writes.
    :param locate: the engine's catalog lookup (:meth:`~deltaguard.engines.base.DeltaEngine.relation_location`).
    :param declared: the task's ``source_reads_target``: ``True`` marks the write whatever its source,
        ``False`` takes a computed source at its author's word (:func:`source_reads_target`), ``None``
        assumes a computed source may read the target.
    :returns: the operation to judge, and the reason it was marked (``None``: unchanged).
    """
    if operation.reads_target:
        return operation, None
    if declared is True:
        return dataclasses.replace(operation, reads_target=True), "the task says its source reads the target"
    if isinstance(spec, SqlSpec):
        why = sql_reads_target(spec.sql, table_uri, locate)
    else:
        source = getattr(spec, "source", None)
        why = (
            None
            if source is None
            else source_reads_target(source, table_uri, declared_apart=declared is False)
        )
    if why is None:
        return operation, None
    return dataclasses.replace(operation, reads_target=True), why


def _is_pandas(source: Any) -> bool:
    module = type(source).__module__
    return module.startswith("pandas") and type(source).__name__ == "DataFrame"
