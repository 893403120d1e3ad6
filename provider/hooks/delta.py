"""The ``delta`` connection: a base URI for tables plus the storage options delta-rs needs."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

from airflow.sdk import BaseHook

from deltaguard.engines.base import DeltaEngine, EngineSettings, build_engine, canonical_engine_name
from deltaguard.hooks.cloud_credentials import AWS_CONN_EXTRA, aws_storage_options
from deltaguard.writes.table_uri import check_table_uri, resolve_table_uri

if TYPE_CHECKING:
    from deltaguard.core.table_config import TableConfig

#: extras keys naming the Spark connections the Spark engine uses
SPARK_EXTRAS = ("spark_conn_id", "spark_connect_conn_id")
#: extras keys that configure deltaguard itself rather than object storage
_RESERVED_EXTRAS = frozenset({"storage_options", "engine", AWS_CONN_EXTRA, *SPARK_EXTRAS})


class WriteTable(NamedTuple):
    """What a write reads of its table before asking for a lease (:meth:`DeltaTableHook.write_table_config`).

    :param config: the configuration the lease request carries.
    :param read_version: the version the write then pins (``None``: it reads the newest one).
    :param snapshot: the open delta-rs handle ``config`` was read from when the write pins it, else ``None``.
    """

    config: TableConfig
    read_version: int | None
    snapshot: Any = None


class _WithStorageOptions(Protocol):
    """What :meth:`DeltaTableHook.write_table_config` reads of a delta-rs engine besides its name."""

    storage_options: dict[str, str] | None


class DeltaTableHook(BaseHook):
    """Turns a ``delta`` connection into table URIs, ``deltalake`` storage options and an engine.

    Connection fields: ``host`` = base URI (``s3://bucket/warehouse``, ``file:///data/delta``);
    extras = ``{"storage_options": {...}}`` (or the storage options as top-level keys), optionally
    ``{"aws_conn_id": ...}`` (credentials, region and endpoint from an Airflow ``aws`` connection; explicit
    storage options win), ``{"engine": "delta-rs" | "spark"}`` and the Spark engine's connections ``{"spark_conn_id": ...}`` /
    ``{"spark_connect_conn_id": ...}``. Without a connection id, table names must be absolute URIs.

    :param delta_conn_id: the Airflow connection id, or ``None`` for no connection.
    """

    conn_name_attr = "delta_conn_id"
    default_conn_name = "delta_default"
    conn_type = "delta"
    hook_name = "Delta Lake tables"

    def __init__(self, delta_conn_id: str | None = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delta_conn_id = delta_conn_id
        self._loaded = False
        self._base_uri: str | None = None
        self._extras: dict[str, Any] = {}

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        from deltaguard.get_provider_info import DELTA_UI_FIELD_BEHAVIOUR

        return copy.deepcopy(DELTA_UI_FIELD_BEHAVIOUR)

    def _load(self) -> None:
        if self._loaded:
            return
        if self.delta_conn_id:
            conn = self.get_connection(self.delta_conn_id)
            self._base_uri = (conn.host or "").strip() or None
            self._extras = _parse_extras(conn.extra)
        self._loaded = True

    @property
    def base_uri(self) -> str | None:
        """The connection's base URI (``None`` without a connection)."""
        self._load()
        return self._base_uri

    @property
    def storage_options(self) -> dict[str, str]:
        """``deltalake`` storage options from the connection extras (values as strings)."""
        self._load()
        nested = self._extras.get("storage_options")
        if isinstance(nested, str):  # a form or an env URI may carry the object as JSON text
            nested = _parse_extras(nested) if nested.strip() else None
        if nested is not None and not isinstance(nested, Mapping):
            raise ValueError(f"connection {self.delta_conn_id!r}: extra 'storage_options' must be an object")
        flat = {k: v for k, v in self._extras.items() if k not in _RESERVED_EXTRAS}
        explicit = {str(k): str(v) for k, v in {**flat, **dict(nested or {})}.items()}
        aws_conn_id = self._extra_str(AWS_CONN_EXTRA)
        if not aws_conn_id:
            return explicit
        # delta-rs reads option names in any case: a key written here replaces the resolved one
        written = {key.lower() for key in explicit}
        resolved = {k: v for k, v in aws_storage_options(aws_conn_id).items() if k.lower() not in written}
        return {**resolved, **explicit}

    @property
    def engine_name(self) -> str | None:
        """The engine the connection asks for, if any."""
        self._load()
        name = self._extras.get("engine")
        return str(name) if name else None

    def table_uri(self, table: str) -> str:
        """Resolve ``table`` (URI, absolute path, or name relative to the base URI)."""
        return resolve_table_uri(table, self.base_uri)

    def spark_connections(
        self, spark_conn_id: str | None = None, spark_connect_conn_id: str | None = None
    ) -> tuple[str | None, str | None]:
        """The ``(spark, spark_connect)`` connection ids for the Spark engine.

        The pair is taken whole from the first level that names either: the arguments (the task's), the
        connection extras ``spark_conn_id``/``spark_connect_conn_id``, then ``[deltaguard] spark_conn_id``
        / ``spark_connect_conn_id``. Taking it whole keeps a task's ``spark_conn_id`` from being overridden
        by a Spark Connect connection configured further out (the engine prefers Spark Connect).

        :param spark_conn_id: the task's ``spark`` connection, if it names one.
        :param spark_connect_conn_id: the task's ``spark_connect`` connection, if it names one.
        """
        from deltaguard import config

        if spark_conn_id or spark_connect_conn_id:
            return spark_conn_id or None, spark_connect_conn_id or None
        self._load()
        extras = tuple(map(self._extra_str, SPARK_EXTRAS))
        if any(extras):
            return extras[0], extras[1]
        return config.spark_conn_ids()

    def _extra_str(self, key: str) -> str | None:
        value = self._extras.get(key)
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ValueError(
                f"connection {self.delta_conn_id!r}: extra {key!r} must be a connection id string"
            )
        return value.strip() or None

    def engine_settings(
        self, spark_conn_id: str | None = None, spark_connect_conn_id: str | None = None
    ) -> EngineSettings:
        """Storage options and Spark connections for the engine (see :meth:`spark_connections`), and
        ``[deltaguard] spark_connect_timeout`` when a Spark Connect connection is named."""
        from deltaguard import config

        spark, connect = self.spark_connections(spark_conn_id, spark_connect_conn_id)
        return EngineSettings(
            storage_options=self.storage_options or None,
            spark_conn_id=spark,
            spark_connect_conn_id=connect,
            spark_connect_timeout_s=config.spark_connect_timeout() if connect else None,
        )

    def engine_choice(self, name: str | None = None) -> str:
        """The canonical engine name: ``name``, else the connection's ``engine`` extra, else
        ``[deltaguard] default_engine``."""
        from deltaguard import config

        return canonical_engine_name(name or self.engine_name or config.default_engine())

    def get_engine(
        self,
        name: str | None = None,
        *,
        spark_conn_id: str | None = None,
        spark_connect_conn_id: str | None = None,
    ) -> DeltaEngine:
        """Build the engine (:meth:`engine_choice`) through :func:`~deltaguard.engines.base.build_engine`.

        Engines taking ``storage_options`` receive the connection's; Spark engines receive the Spark
        connections of :meth:`spark_connections`. Only ``engine="spark"`` imports PySpark.

        :param name: the task's engine, if it names one.
        :param spark_conn_id: the task's ``spark`` connection, if it names one.
        :param spark_connect_conn_id: the task's ``spark_connect`` connection, if it names one.
        """
        return build_engine(
            self.engine_choice(name), self.engine_settings(spark_conn_id, spark_connect_conn_id)
        )

    def write_table_config(self, engine: DeltaEngine, uri: str, *, file_stats: bool | None) -> WriteTable:
        """The configuration a write's lease request carries, the version the write then pins and the
        handle it was read from (the log is opened once for both).

        With ``file_stats``, a delta-rs write reads the table's per-file statistics and pins their version
        (ADR 0020): delta-rs only (the profile that uses them, and the engine that can write from a given
        version). Otherwise the engine's own read, pinning nothing.

        :param engine: the write's engine.
        :param uri: the table URI.
        :param file_stats: the task's ``file_stats`` choice; ``None``: ``[deltaguard] file_stats``.
        """
        from deltaguard import config
        from deltaguard.engines.sources import engine_table_config, read_judged_table, writes_from_snapshot

        if getattr(engine, "name", None) != "delta-rs" or not writes_from_snapshot(engine):
            return WriteTable(engine_table_config(engine, uri), None)
        if not (file_stats if file_stats is not None else config.file_stats()):
            return WriteTable(engine_table_config(engine, uri), None)
        # a delta-rs engine by name (one given as ``module:Class`` need not subclass DeltaRsEngine) has them
        storage_options = cast("_WithStorageOptions", engine).storage_options
        table_config, snapshot = read_judged_table(uri, storage_options, engine=engine, file_stats=True)
        if table_config.file_stats is None:
            return WriteTable(table_config, None)
        return WriteTable(table_config, table_config.version, snapshot)

    def test_connection(self) -> tuple[bool, str]:
        """Airflow's *Test* button: can the connection's Base URI be listed with its storage options?

        The location is listed through delta-rs' object store (the same client and options the delta-rs
        engine writes with); when it holds a ``_delta_log`` the table's version is reported too. The engine
        named in the extras must be known. Nothing is written.

        :returns: ``(True, what was found)`` or ``(False, why not)``.
        """
        from deltalake import DeltaTable
        from deltalake.fs import DeltaStorageHandler
        from pyarrow.fs import FileSelector

        try:
            engine = self.engine_choice()
            if not self.base_uri:
                return False, "no Base URI to test: set one, or name every table by its absolute URI"
            location = check_table_uri(self.base_uri, table_location=False)
            options = self.storage_options or None
            listing = DeltaStorageHandler(location, options).get_file_info_selector(
                FileSelector("", allow_not_found=False, recursive=False)
            )
            names = {PurePosixPath(entry.path).name for entry in listing}
            if "_delta_log" in names:
                version = DeltaTable(location, storage_options=options).version()
                return True, f"{location}: Delta table at version {version} (engine {engine})"
            return True, f"{location}: reachable, {len(names)} entries (engine {engine})"
        except Exception as exc:  # the button shows the reason; any failure means "not usable"
            return False, f"{type(exc).__name__}: {exc}"


def _parse_extras(extra: str | Mapping[str, Any] | None) -> dict[str, Any]:
    if not extra:
        return {}
    if isinstance(extra, Mapping):
        return dict(extra)
    try:
        parsed = json.loads(extra)
    except json.JSONDecodeError as exc:
        raise ValueError(f"delta connection extras are not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ValueError("delta connection extras must be a JSON object")
    return parsed
