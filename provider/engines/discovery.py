"""Read a Delta table's :class:`~deltaguard.core.table_config.TableConfig` and file statistics from its log,
through deltalake.

Works for every URI deltalake supports (local path, ``file://``, ``s3://``, ``abfss://``, ``gs://``, with
storage options). What is read:

* partition columns, properties (exactly as stored), protocol versions and reader/writer features, the
  current version: from deltalake's snapshot;
* identity columns: top-level schema fields whose metadata has ``delta.identity.*`` keys;
* generated columns: top-level schema fields with ``delta.generationExpression`` metadata (column ->
  expression), and the columns of type ``timestamp``/``timestamp_ntz`` (a literal compared with them
  depends on the writer's time zone);
* liquid clustering columns: the ``delta.clustering`` domain metadata. deltalake 1.6.6 has no API for
  domain metadata, so :func:`read_domain_metadata` replays the log itself through deltalake's own storage
  handler (same URIs and storage options): the newest checkpoint at or below the snapshot version
  (classic, multi-part or the top-level file of a v2 checkpoint), then the JSON commits after it. It is
  only read when the protocol lists the ``domainMetadata`` or ``clustering`` writer feature.

Anything the conflict model does not know -- a ``delta.*`` property it does not know by its exact key
(:func:`deltaguard.core.closed_world.is_known_property`), a table feature outside
:data:`~deltaguard.core.closed_world.KNOWN_TABLE_FEATURES`, a protocol version above
:data:`MAX_KNOWN_READER_VERSION`/:data:`MAX_KNOWN_WRITER_VERSION`, or domain metadata that could not be read
-- is listed in ``TableConfig.unknown`` with a logged warning; the model is then conservative on that table.
User properties without the ``delta.`` prefix (``owner``, ``comment``) are recorded and never unknown.

File statistics (:func:`read_file_stats`, ADR 0020): the per-file column statistics of a snapshot, read into
the core's plain :class:`~deltaguard.core.file_stats.FileStatsSummary`. Reads deltalake's add actions of the
snapshot (``DeltaTable.get_add_actions(flatten=True)``: ``min.<col>``, ``max.<col>``, ``null_count.<col>`` per
file) for the top-level columns of an integer, string or date type. A value the core cannot compare exactly is
left out, which the core reads as "no statistics" (the engine then cannot prune that file either way, so the
core assumes the file matches):

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

import contextlib
import datetime
import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from deltaguard.core.closed_world import KNOWN_TABLE_FEATURES, is_known_property
from deltaguard.core.file_stats import (
    INTEGER_TYPES,
    MAX_TRUSTED_STRING,
    SUPPORTED_TYPES,
    ColumnStats,
    FileStats,
    FileStatsSummary,
    Value,
)
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.errors import TableAccessError

log = logging.getLogger(__name__)

#: Newest protocol versions the model knows (3/7 introduced table features; anything newer is unknown).
MAX_KNOWN_READER_VERSION = 3
MAX_KNOWN_WRITER_VERSION = 7

#: The domain holding liquid clustering columns.
CLUSTERING_DOMAIN = "delta.clustering"

_IDENTITY_PREFIX = "delta.identity."
#: The schema field metadata key holding a generated column's expression.
GENERATION_EXPRESSION = "delta.generationExpression"
_PHYSICAL_NAME = "delta.columnMapping.physicalName"
_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_FILE = re.compile(
    r"^(\d{20})\.checkpoint(?:\.\d{10}\.\d{10}|\.[0-9a-fA-F-]{36})?\.(parquet|json)$"
)


def read_table_config(
    table_uri: str, storage_options: dict[str, str] | None = None, file_stats: bool = False
) -> TableConfig:
    """Read a table's configuration from its Delta log.

    :param table_uri: any URI deltalake supports.
    :param storage_options: deltalake storage options (credentials, endpoints, ...).
    :param file_stats: also read the snapshot's per-file column statistics (ADR 0020).
    :returns: the configuration; ``exists=False`` when no Delta table is at ``table_uri``.
    :raises TableAccessError: when the log exists but cannot be read (naming the URI and the cause).
    """
    return read_table(table_uri, storage_options, file_stats)[0]


def read_table(
    table_uri: str, storage_options: dict[str, str] | None = None, file_stats: bool = False
) -> tuple[TableConfig, DeltaTable | None]:
    """:func:`read_table_config`, and the open handle it was read from (``None``: no table), for a caller
    that goes on to use that snapshot.

    :raises TableAccessError: when the log exists but cannot be read (naming the URI and the cause).
    """
    try:
        table = DeltaTable(table_uri, storage_options=storage_options)
    except TableNotFoundError:
        return TableConfig(exists=False, uri=table_uri), None
    except (DeltaError, OSError, ValueError) as exc:
        raise TableAccessError(f"cannot read the Delta log of {table_uri}: {short_message(exc)}") from exc
    return config_from_table(table, table_uri, storage_options, file_stats=file_stats), table


def config_from_table(
    table: DeltaTable,
    table_uri: str | None = None,
    storage_options: dict[str, str] | None = None,
    file_stats: bool = False,
) -> TableConfig:
    """The configuration of an already-open table, at the version it is loaded at.

    :param table: an open deltalake table (possibly at an older version).
    :param table_uri: the URI for messages and for reading domain metadata (default: the table's own).
    :param storage_options: storage options for reading domain metadata.
    :param file_stats: also read the per-file column statistics of the same snapshot (ADR 0020); when they
        cannot be read the configuration carries none and the model uses its predicate-only rules.
    :raises TableAccessError: when the snapshot cannot be read.
    """
    uri = table_uri or table.table_uri
    try:
        metadata = table.metadata()
        protocol = table.protocol()
        schema = table.schema()
        version = table.version()
    except (DeltaError, OSError, ValueError) as exc:
        raise TableAccessError(f"cannot read the Delta log of {uri}: {short_message(exc)}") from exc
    properties = dict(metadata.configuration)
    reader_features = tuple(protocol.reader_features or ())
    writer_features = tuple(protocol.writer_features or ())
    unknown = (
        _unknown_properties(properties)
        + _unknown_features(reader_features + writer_features)
        + _unknown_protocol(protocol.min_reader_version, protocol.min_writer_version)
    )
    fields = list(schema.fields)
    identity = tuple(f.name for f in fields if any(str(k).startswith(_IDENTITY_PREFIX) for k in f.metadata))
    generated, timestamps = schema_columns((f.name, str(f.type), dict(f.metadata)) for f in fields)
    types = column_types(fields)
    clustering: tuple[str, ...] = ()
    if {"domainmetadata", "clustering"} & {f.lower() for f in writer_features}:
        try:
            domains = read_domain_metadata(table.table_uri, version, storage_options)
            clustering = _clustering_columns(domains.get(CLUSTERING_DOMAIN), fields)
        except (OSError, ValueError, KeyError, TypeError, DeltaError) as exc:
            unknown += (f"domainMetadata (unreadable: {short_message(exc)})",)
    stats: FileStatsSummary | None = None
    if file_stats:
        try:
            stats = read_file_stats(table, properties)
        except (DeltaError, OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("table %s: file statistics unreadable (%s); not using them", uri, short_message(exc))
    for item in unknown:
        log.warning(
            "table %s: %s is unknown to the conflict model; treating every write as conflicting", uri, item
        )
    return TableConfig(
        partition_columns=tuple(metadata.partition_columns),
        properties=properties,
        clustering_columns=clustering,
        identity_columns=identity,
        generated_columns=generated,
        timestamp_columns=timestamps,
        column_types=types,
        exists=True,
        version=version,
        min_reader_version=protocol.min_reader_version,
        min_writer_version=protocol.min_writer_version,
        reader_features=reader_features,
        writer_features=writer_features,
        unknown=tuple(dict.fromkeys(unknown)),
        uri=uri,
        file_stats=stats,
    )


def schema_columns(
    fields: Iterable[tuple[str, str, Mapping[str, Any]]],
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """Generated columns and timestamp columns of a schema's top-level fields.

    :param fields: ``(name, type, metadata)`` per top-level field; the type as deltalake or Spark print it
        (``PrimitiveType("timestamp")``, ``timestamp_ntz``, ``TimestampType()``, ``TimestampNTZType()``).
    :returns: ``(column, generation expression)`` pairs and the names of timestamp columns.
    """
    generated: list[tuple[str, str]] = []
    timestamps: list[str] = []
    for name, type_text, metadata in fields:
        expression = metadata.get(GENERATION_EXPRESSION)
        if expression is not None:
            # deltalake keeps metadata values as JSON text: a string arrives quoted
            text = str(expression)
            if text.startswith('"') and text.endswith('"'):
                with contextlib.suppress(ValueError):
                    text = str(json.loads(text))
            generated.append((name, text))
        if "timestamp" in type_text.lower():
            timestamps.append(name)
    return tuple(generated), tuple(timestamps)


def column_types(fields: Iterable[Any]) -> tuple[tuple[str, str], ...]:
    """``(column, Delta type)`` of a deltalake schema's top-level fields: a primitive's own name (``string``,
    ``long``, ``decimal(5,2)``, ...), ``complex`` for a struct, array or map (no partition column is one).

    :param fields: deltalake ``Field`` objects.
    """
    found: list[tuple[str, str]] = []
    for f in fields:
        kind = getattr(f.type, "type", None)
        found.append((f.name, kind.lower() if isinstance(kind, str) else "complex"))
    return tuple(found)


def read_domain_metadata(
    table_uri: str, version: int, storage_options: dict[str, str] | None = None
) -> dict[str, str]:
    """The live domain metadata of a table at ``version``: domain -> configuration string.

    Replays the newest checkpoint at or below ``version`` and the JSON commits after it, through
    deltalake's storage handler (so every deltalake URI and storage option works).

    :raises OSError: when a log file cannot be read; ``ValueError`` when one cannot be parsed.
    """
    import pyarrow.fs as pafs
    from deltalake.fs import DeltaStorageHandler

    fs = pafs.PyFileSystem(DeltaStorageHandler(table_uri, storage_options))
    commits: dict[int, str] = {}
    checkpoints: dict[int, list[str]] = {}
    for info in fs.get_file_info(pafs.FileSelector("_delta_log")):
        name = info.path.rsplit("/", 1)[-1]
        if match := _COMMIT_FILE.match(name):
            commits[int(match.group(1))] = info.path
        elif match := _CHECKPOINT_FILE.match(name):
            checkpoints.setdefault(int(match.group(1)), []).append(info.path)
    usable = [v for v in checkpoints if v <= version]
    start = max(usable) if usable else -1
    domains: dict[str, dict[str, Any]] = {}
    if start >= 0:
        for path in sorted(checkpoints[start]):
            for action in _checkpoint_domain_actions(fs, path):
                domains[action["domain"]] = action
    for commit_version in range(start + 1, version + 1):
        commit_path = commits.get(commit_version)
        if commit_path is None:
            raise ValueError(f"commit {commit_version} is missing from the log")
        with fs.open_input_stream(commit_path) as stream:
            for line in stream.read().decode("utf-8").splitlines():
                if line.strip():
                    action = json.loads(line).get("domainMetadata")
                    if action is not None:
                        domains[action["domain"]] = action
    return {name: str(a.get("configuration", "")) for name, a in domains.items() if not a.get("removed")}


def short_message(exc: BaseException) -> str:
    """An exception's message without the Rust backtrace deltalake sometimes appends."""
    text = str(exc)
    cut = re.search(r"\n\s+0: ", text)
    return (text[: cut.start()] if cut else text).strip()


def _checkpoint_domain_actions(fs: Any, path: str) -> list[dict[str, Any]]:
    if path.endswith(".json"):  # a v2 checkpoint's top-level file in JSON
        with fs.open_input_stream(path) as stream:
            lines = stream.read().decode("utf-8").splitlines()
        return [a for a in (json.loads(x).get("domainMetadata") for x in lines if x.strip()) if a is not None]
    import pyarrow.parquet as pq

    with fs.open_input_file(path) as handle:
        parquet = pq.ParquetFile(handle)
        if "domainMetadata" not in parquet.schema_arrow.names:
            return []
        column = parquet.read(columns=["domainMetadata"]).column("domainMetadata").to_pylist()
    return [a for a in column if a is not None and a.get("domain") is not None]


def _clustering_columns(configuration: str | None, fields: list[Any]) -> tuple[str, ...]:
    """Logical clustering column names from the ``delta.clustering`` domain configuration.

    Columns are stored as lists of path parts, by physical name when column mapping is on.
    """
    if not configuration:
        return ()
    paths = json.loads(configuration).get("clusteringColumns") or []
    physical_to_logical = {
        str(f.metadata[_PHYSICAL_NAME]): f.name for f in fields if _PHYSICAL_NAME in f.metadata
    }
    names = []
    for path in paths:
        parts = [path] if isinstance(path, str) else list(path)
        if parts:
            parts[0] = physical_to_logical.get(parts[0], parts[0])
        names.append(".".join(parts))
    return tuple(names)


def _unknown_properties(properties: dict[str, str]) -> tuple[str, ...]:
    return tuple(f"property {key}" for key in properties if not is_known_property(key))


def _unknown_protocol(reader: int, writer: int) -> tuple[str, ...]:
    """Protocol versions beyond the newest the model knows (reader 3, writer 7: table features)."""
    found = []
    if reader > MAX_KNOWN_READER_VERSION:
        found.append(f"protocol reader version {reader}")
    if writer > MAX_KNOWN_WRITER_VERSION:
        found.append(f"protocol writer version {writer}")
    return tuple(found)


def _unknown_features(features: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(
        f"feature {name}" for name in dict.fromkeys(features) if name.lower() not in KNOWN_TABLE_FEATURES
    )


# ------------------------------------------------------------------------------------------ file statistics

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
