"""What one committed write tells lineage: how its table is named, what it wrote, the record of it.

Pure (no Airflow, no OpenLineage), so the rules can be tested without either installed; the asset event's
``extra`` and the OpenLineage facets are both built from one :class:`WriteRecord`, so they cannot disagree.

What a commit wrote (:func:`read_commit_facts`) is read from the table's log, engine-independent: every
engine records the files it adds as ``add`` actions in ``_delta_log/<version>.json`` with their ``size``
and, where it collects statistics, ``numRecords``; so a write's statistics are read from its commit rather
than from each engine's differently named operation metrics (delta-rs 1.6.6 ``num_added_rows``, delta-spark
``numOutputRows``). The schema is the table's at that version.

A table is named as OpenLineage's dataset naming spec names a location (``namespace = scheme://authority``,
``name = path``), and its asset URI is its storage URI in the spelling the storage providers' own assets use
(``file:///abs/path``, ``s3://bucket/key``, ``gs://bucket/path``,
``abfss://container@account.dfs.core.windows.net/path``), one spelling per table, so a deltaguard write and
another operator's asset on the same location meet in one lineage node (the table of schemes and their
sources: ADR 0022).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from deltaguard.core.delta_history import consistent_history
from deltaguard.core.locations import normalise_location

#: schemes spelled another way by the providers that own the storage (Hadoop's S3 connectors; object_store's
#: ``gcs``) -> the spelling of the OpenLineage spec and of the amazon and google providers' assets
_SCHEME_ALIASES: dict[str, str] = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}
#: object_store's short Azure forms ``az://container/path`` / ``azure://container/path`` / ``adl://``:
#: the account comes from the storage options
_AZURE_SHORT = frozenset({"az", "azure", "adl"})
#: storage-option keys object_store (delta-rs) reads the Azure account name from
_AZURE_ACCOUNT_KEYS = ("azure_storage_account_name", "account_name", "AZURE_STORAGE_ACCOUNT_NAME")
#: a ``delta+`` prefix on a source URI forces the Delta reader (:mod:`deltaguard.engines.sources`)
_DELTA_PREFIX = "delta+"


@dataclass(frozen=True)
class DatasetName:
    """An OpenLineage dataset's identity.

    :param namespace: the data source (``s3://bucket``, ``file``).
    :param name: the dataset within it (``warehouse/sales``, ``/data/sales``).
    """

    namespace: str
    name: str


def canonical_uri(location: str, storage_options: Mapping[str, str] | None = None) -> str:
    """One ``scheme://authority/path`` spelling of a table location (also the table's asset URI).

    :param location: an absolute path or a URI (``/data/t``, ``file:/data/t``, ``s3a://B/wh/t/``).
    :param storage_options: the table's storage options; only the Azure account name is read, to spell
        ``az://container/path`` as ``abfss://container@account.dfs.core.windows.net/path``.
    :raises ValueError: on a relative path or a URI without an authority where one is needed.
    """
    text = normalise_location(location)
    if text.startswith("/"):
        return "file://" + quote(text, safe="/")
    parts = urlsplit(text)
    scheme = _SCHEME_ALIASES.get(parts.scheme, parts.scheme)
    if not scheme:
        raise ValueError(f"table location {location!r} is neither an absolute path nor a URI")
    if scheme == "file":  # file://host/path (a remote host; normalise_location keeps it)
        return f"file://{parts.netloc}{parts.path}"
    if scheme in _AZURE_SHORT:
        account = next((str(v) for k, v in (storage_options or {}).items() if k in _AZURE_ACCOUNT_KEYS), "")
        if account and parts.netloc and "@" not in parts.netloc:
            return f"abfss://{parts.netloc}@{account.lower()}.dfs.core.windows.net{parts.path}"
    if not parts.netloc and scheme != "memory":
        raise ValueError(f"table location {location!r} has no bucket, container or host")
    return f"{scheme}://{parts.netloc}{parts.path}"


def dataset_name(location: str, storage_options: Mapping[str, str] | None = None) -> DatasetName:
    """The OpenLineage dataset naming a table or file location (see the module's table).

    :param location: an absolute path or a URI.
    :param storage_options: see :func:`canonical_uri`.
    """
    uri = canonical_uri(location, storage_options)
    parts = urlsplit(uri)
    if parts.scheme == "file":
        # the spec's local file system: namespace "file" (a remote host keeps it: file://host)
        return DatasetName(f"file://{parts.netloc}" if parts.netloc else "file", unquote(parts.path) or "/")
    return DatasetName(f"{parts.scheme}://{parts.netloc}", unquote(parts.path).lstrip("/"))


def source_location(source: object) -> str | None:
    """The location a write reads its rows from, when the source is one (a URI or path string).

    ``None`` for a callable, a DataFrame or anything else whose origin deltaguard cannot see: lineage then
    names no input rather than a wrong one.

    :param source: the operator's ``source`` (rendered).
    """
    if not isinstance(source, str) or not source.strip():
        return None
    text = source.strip()
    if text.lower().startswith(_DELTA_PREFIX):
        text = text[len(_DELTA_PREFIX) :]
    try:
        canonical_uri(text)
    except ValueError:
        return None
    return text


# -------------------------------------------------------------------------------------- the record of a write


#: Delta operation names (the commit's ``operation``) after which the table is a new table or has a new
#: shape, as OpenLineage's ``LifecycleStateChange`` names it; other writes change rows only. delta-rs 1.6.6
#: names, measured on real tables (``tests/lineage/test_lifecycle.py`` runs each kind of write and checks
#: the name its commit records): ``CREATE TABLE``, ``CREATE OR REPLACE TABLE``, ``ADD COLUMN``,
#: ``CHANGE COLUMN`` (``drop_column_not_null``), ``SET TBLPROPERTIES``, ``ADD CONSTRAINT``,
#: ``DROP CONSTRAINT``, ``ADD FEATURE``, ``UPDATE TABLE METADATA`` (name, description),
#: ``UPDATE FIELD METADATA``, ``RESTORE``; row writes are ``WRITE``, ``MERGE``, ``UPDATE``, ``DELETE``,
#: ``OPTIMIZE`` (compaction and Z-order), ``VACUUM START``/``VACUUM END``. delta-spark's names are those of
#: its ``DeltaOperations`` (``ADD COLUMNS``, ``CREATE TABLE AS SELECT``, ``UNSET TBLPROPERTIES``, ...).
_LIFECYCLE: dict[str, str] = {
    # a new table
    "CREATE TABLE": "CREATE",
    "CREATE TABLE AS SELECT": "CREATE",
    "CLONE": "CREATE",
    # a table replaced, or its contents set back to an older version
    "CREATE OR REPLACE TABLE": "OVERWRITE",
    "CREATE OR REPLACE TABLE AS SELECT": "OVERWRITE",
    "REPLACE TABLE": "OVERWRITE",
    "REPLACE TABLE AS SELECT": "OVERWRITE",
    "RESTORE": "OVERWRITE",
    # a new shape, properties, constraints or features
    "ADD COLUMN": "ALTER",
    "ADD COLUMNS": "ALTER",
    "CHANGE COLUMN": "ALTER",
    "CHANGE COLUMNS": "ALTER",
    "REPLACE COLUMNS": "ALTER",
    "RENAME COLUMN": "ALTER",
    "DROP COLUMNS": "ALTER",
    "SET TBLPROPERTIES": "ALTER",
    "UNSET TBLPROPERTIES": "ALTER",
    "ADD CONSTRAINT": "ALTER",
    "DROP CONSTRAINT": "ALTER",
    "ADD FEATURE": "ALTER",
    "DROP FEATURE": "ALTER",
    "UPGRADE PROTOCOL": "ALTER",
    "UPDATE TABLE METADATA": "ALTER",
    "UPDATE FIELD METADATA": "ALTER",
    "CLUSTER BY": "ALTER",
    "TRUNCATE": "TRUNCATE",
}


@dataclass(frozen=True)
class WriteRecord:
    """One write as lineage reports it.

    :param table_uri: the table's canonical URI (:func:`~deltaguard.lineage.record.canonical_uri`), also
        its asset URI.
    :param output: the table as an OpenLineage dataset.
    :param version: the table version the write committed (or, when nothing was committed, read).
    :param operation: the Delta operation in the commit (``WRITE``, ``MERGE``, ``DELETE``, ...).
    :param committed: ``False`` when the write changed nothing and made no commit.
    :param duplicate: ``True`` when an earlier try had committed this write already.
    :param mode: ``overwrite`` for a whole-table overwrite (a Delta ``WRITE`` in overwrite mode).
    :param app_id: the app transaction id the write ran under.
    :param inputs: the source locations the write read, where known, as OpenLineage datasets.
    :param input_uris: the same locations as canonical URIs (their asset URIs).
    :param metrics: the engine's numeric operation metrics.
    """

    table_uri: str
    output: DatasetName
    version: int | None
    operation: str
    committed: bool = True
    duplicate: bool = False
    mode: str | None = None
    app_id: str | None = None
    inputs: tuple[DatasetName, ...] = ()
    input_uris: tuple[str, ...] = ()
    metrics: Mapping[str, int | float] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        table_uri: str,
        result: Any,
        *,
        storage_options: Mapping[str, str] | None = None,
        inputs: Sequence[str] = (),
        mode: str | None = None,
        app_id: str | None = None,
    ) -> WriteRecord:
        """From an engine's :class:`~deltaguard.engines.base.WriteResult` (read by attribute).

        :param table_uri: the table as the operator resolved it.
        :param result: the write's result.
        :param storage_options: the table's storage options (see :func:`canonical_uri`).
        :param inputs: source locations (paths or URIs) the write read.
        :param mode: the write's mode when it is an overwrite.
        :param app_id: the app transaction id.
        """
        metrics = {
            str(k): v
            for k, v in dict(getattr(result, "metrics", None) or {}).items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
        version = getattr(result, "version", None)
        return cls(
            table_uri=canonical_uri(table_uri, storage_options),
            output=dataset_name(table_uri, storage_options),
            version=None if version is None else int(version),
            operation=str(getattr(result, "operation", "") or ""),
            committed=bool(getattr(result, "committed", True)),
            duplicate=bool(getattr(result, "duplicate", False)),
            mode=mode,
            app_id=app_id,
            inputs=tuple(dataset_name(i) for i in inputs),
            input_uris=tuple(canonical_uri(i) for i in inputs),
            metrics=metrics,
        )

    @property
    def lifecycle(self) -> str | None:
        """OpenLineage's lifecycle state change of the table (``CREATE``, ``OVERWRITE``, ``ALTER``, ...),
        ``None`` when only rows changed or nothing was committed."""
        if not self.committed or self.duplicate:
            return None
        if self.version == 0:  # the first commit creates the table, whatever the operation
            return "CREATE"
        if self.mode == "overwrite":
            return "OVERWRITE"
        return _LIFECYCLE.get(self.operation.upper())

    def asset_extra(self) -> dict[str, Any]:
        """The ``extra`` of the table's asset event (JSON: what a downstream DAG may read)."""
        return {
            "table_uri": self.table_uri,
            "version": self.version,
            "operation": self.operation,
            "committed": self.committed,
            "duplicate": self.duplicate,
            "app_id": self.app_id,
        }


# ---------------------------------------------------------------------------------------- what a commit wrote


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
            statistics = OutputStatistics(0, 0, 0)
            for read in range(first, version + 1):
                with fs.open_input_stream(f"_delta_log/{read:020d}.json") as stream:
                    statistics += commit_statistics(stream.read().decode("utf-8").splitlines())
        except Exception:  # a log file already cleaned up, a store that refuses the read
            statistics = None
    return CommitFacts(schema, statistics)


@functools.cache  # installed or not for the life of the process: looked up once, not once per write
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
