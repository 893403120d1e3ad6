"""What a Delta commit wrote, read from the table's log: its schema and its output statistics.

Engine-independent: every engine (delta-rs, delta-spark, Databricks, a wrapped operator's own) records the
files it adds as ``add`` actions in ``_delta_log/<version>.json`` with their ``size`` and, where it collects
statistics, ``numRecords``; so the statistics of a write are read from its commit rather than from each
engine's differently named operation metrics (delta-rs 1.6.6 ``num_added_rows``, delta-spark
``numOutputRows``). The schema is the table's at that version.

The parsing functions are pure; :func:`read_commit_facts` reads through ``deltalake``. Lineage never fails
a committed write: every reader here returns ``None`` for what it cannot read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from deltaguard.core.delta_history import consistent_history

#: a task's commits to one table read for its statistics at most (a wrapped job that committed more has
#: its statistics left out rather than read from hundreds of log files)
MAX_COMMITS_READ = 50


@dataclass(frozen=True)
class SchemaField:
    """One column of a table schema, as OpenLineage's ``schema`` facet names it.

    :param name: the column name.
    :param type: the Delta type (``long``, ``string``, ``decimal(10,2)``, ``struct``, ``array``, ``map``).
    :param fields: the nested columns of a ``struct`` (also of an array's or a map value's struct).
    """

    name: str
    type: str
    fields: tuple[SchemaField, ...] = ()


@dataclass(frozen=True)
class OutputStatistics:
    """What a write added to the table (OpenLineage's ``outputStatistics`` facet).

    :param file_count: data files added.
    :param size: bytes of those files.
    :param row_count: rows in them; ``None`` when a file was written without statistics.
    """

    file_count: int
    size: int
    row_count: int | None

    def __add__(self, other: OutputStatistics) -> OutputStatistics:
        rows = None if self.row_count is None or other.row_count is None else self.row_count + other.row_count
        return OutputStatistics(self.file_count + other.file_count, self.size + other.size, rows)


@dataclass(frozen=True)
class CommitFacts:
    """The schema after a write and what its commit(s) added.

    :param schema: the table's columns at the written version (``None`` when unreadable).
    :param statistics: the added files of the write's commit(s) (``None`` when unreadable).
    """

    schema: tuple[SchemaField, ...] | None
    statistics: OutputStatistics | None


def schema_fields(schema: Mapping[str, Any]) -> tuple[SchemaField, ...]:
    """The columns of a Delta schema in its JSON form (the ``schemaString`` of a ``metaData`` action).

    :param schema: ``{"type": "struct", "fields": [{"name": ..., "type": ...}, ...]}``.
    """
    return tuple(_field(f) for f in schema.get("fields", ()))


def _field(field: Mapping[str, Any]) -> SchemaField:
    kind = field.get("type")
    return SchemaField(str(field.get("name", "")), _type_name(kind), _nested(kind))


def _type_name(kind: Any) -> str:
    if isinstance(kind, Mapping):
        return str(kind.get("type", "struct"))
    return str(kind)


def _nested(kind: Any) -> tuple[SchemaField, ...]:
    """The struct fields inside a complex type (a struct itself, an array's elements, a map's values)."""
    if not isinstance(kind, Mapping):
        return ()
    if kind.get("type") == "struct":
        return schema_fields(kind)
    if kind.get("type") == "array":
        return _nested(kind.get("elementType"))
    if kind.get("type") == "map":
        return _nested(kind.get("valueType"))
    return ()


def commit_statistics(lines: Iterable[str]) -> OutputStatistics:
    """The files one commit added: the ``add`` actions of its log file (one JSON action per line).

    :param lines: the lines of ``_delta_log/<version>.json``.
    """
    files = size = rows = 0
    rows_known = True
    for line in lines:
        if not line.strip():
            continue
        add = json.loads(line).get("add")
        if add is None:
            continue
        files += 1
        size += int(add.get("size") or 0)
        stats = add.get("stats")
        records = json.loads(stats).get("numRecords") if isinstance(stats, str) and stats else None
        if isinstance(records, int):
            rows += records
        else:
            rows_known = False
    return OutputStatistics(files, size, rows if rows_known else None)


def read_commit_facts(
    table_uri: str, version: int, storage_options: Mapping[str, str] | None, since: int | None = None
) -> CommitFacts:
    """The schema at ``version`` and the statistics of the commits after ``since`` up to ``version``.

    :param table_uri: the table as the engines open it (a path or URI).
    :param version: the version the write committed.
    :param storage_options: the table's storage options.
    :param since: the version before the write (default: ``version - 1``, one commit); the statistics are
        left out when more than :data:`MAX_COMMITS_READ` commits lie between.
    """
    import pyarrow.fs as pafs
    from deltalake import DeltaTable
    from deltalake.fs import DeltaStorageHandler

    options = dict(storage_options or {})
    schema: tuple[SchemaField, ...] | None
    try:
        table = DeltaTable(table_uri, storage_options=options or None, version=version)
        schema = schema_fields(json.loads(table.schema().to_json()))
    except Exception:  # a reader feature delta-rs lacks, no credentials here: lineage goes without it
        schema = None
    first = version if since is None else since + 1
    statistics: OutputStatistics | None = None
    if 0 < version - first + 1 <= MAX_COMMITS_READ:
        try:
            fs = pafs.PyFileSystem(DeltaStorageHandler(table_uri, options or None))
            statistics = _sum(_read_commit(fs, v) for v in range(first, version + 1))
        except Exception:  # a log file already cleaned up, a store that refuses the read
            statistics = None
    return CommitFacts(schema, statistics)


def _read_commit(fs: Any, version: int) -> OutputStatistics:
    with fs.open_input_stream(f"_delta_log/{version:020d}.json") as stream:
        return commit_statistics(stream.read().decode("utf-8").splitlines())


def _sum(parts: Iterable[OutputStatistics]) -> OutputStatistics:
    total = OutputStatistics(0, 0, 0)
    for part in parts:
        total = total + part
    return total


def openlineage_installed() -> bool:
    """Whether the OpenLineage provider is importable (only then are schema and statistics read)."""
    from importlib.util import find_spec

    try:
        return find_spec("airflow.providers.openlineage") is not None
    except ModuleNotFoundError:  # no airflow.providers at all
        return False


def facts_for_openlineage(
    table_uri: str, record: Any, storage_options: Mapping[str, str] | None, since: int | None = None
) -> CommitFacts | None:
    """The schema and statistics of a write, read now (in the task's process) if OpenLineage will ask.

    The OpenLineage listener calls ``get_openlineage_facets_on_complete`` from a forked child process, and
    delta-rs panics there ("Forked process detected ... the tokio runtime does not support forked
    processes"), measured with ``tests/e2e/test_lineage_assets.py``; so the log is read before the task
    returns, and only when the provider is installed.

    :param table_uri: the table as the engines open it.
    :param record: the write's :class:`~deltaguard.lineage.record.WriteRecord`.
    :param storage_options: the table's storage options.
    :param since: the version before the write (default: one commit when it committed, none otherwise).
    """
    if record.version is None or not openlineage_installed():
        return None
    wrote = record.committed and not record.duplicate
    if since is None or not wrote:
        since = record.version - 1 if wrote else record.version  # nothing written: no statistics
    return read_commit_facts(table_uri, record.version, storage_options, since=since)


def latest_commit(table_uri: str, storage_options: Mapping[str, str] | None) -> tuple[int, str] | None:
    """The table's current version and the operation of that commit; ``None`` when there is no table.

    :param table_uri: the table as the engines open it.
    :param storage_options: the table's storage options.
    """
    from deltalake import DeltaTable

    try:
        table = DeltaTable(table_uri, storage_options=dict(storage_options or {}) or None)
        # deltalake numbers history() from the loaded version: a commit landing in between would pair this
        # version with the next commit's operation, so the history is read while no commit lands
        version, history = consistent_history(table, since=table.version() - 1)
    except Exception:  # no table, or commits that kept landing: lineage goes without it
        return None
    operation = next((str(c.get("operation", "")) for c in history if int(c["version"]) == version), "")
    return version, operation
