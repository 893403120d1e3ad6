"""The Spark engine: every write of the conflict model through delta-spark's Python API.

Reviewed against delta-spark 4.4.1 (``delta/tables.py``, ``delta/exceptions``) and Delta's Scala options.
The statements themselves are in :mod:`deltaguard.engines.spark.ops`, spec checks in
:mod:`deltaguard.engines.spark.specs`.

* DataFrame writes (append, ``replaceWhere``, overwrite) carry ``txnAppId``/``txnVersion``/``userMetadata``
  writer options (``DeltaOptions``);
* everything else (MERGE, UPDATE, DELETE, OPTIMIZE, ``ALTER TABLE``, create) runs with the session confs
  ``spark.databricks.delta.write.txnAppId``/``txnVersion`` ("idempotent DML") and
  ``spark.databricks.delta.commitInfo.userMetadata``, set for the one statement and restored after, under a
  lock, because SQL confs are per session.

Idempotency follows the delta-rs engine's rule: if the table already recorded a transaction version
``>= app_version`` for ``app_id``, the write is a no-op reported as ``duplicate``. The recorded version is
read from the Delta log (``deltalake``'s ``transaction_version``); when the log cannot be read that way
(for example ``s3a://`` paths) delta-spark's own check still skips the commit, and the missing commit is
reported as a duplicate.

Leased commits without an idempotency pair carry the lease's fence app transaction in that one place
instead (ADR 0038, :mod:`deltaguard.engines.spark.engine_fence`): delta-spark then refuses a stale writer
whose lease was handed to a conflicting writer, and a write it skipped fails instead of passing as a no-op.

Conflicts (Python classes from ``delta.exceptions``, Py4J or Spark Connect wrappers) become
:class:`~deltaguard.engines.errors.DeltaConflictError` through :mod:`deltaguard.engines.spark.errors`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import threading
import time
import uuid
from collections.abc import Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

from deltaguard.core.delta_history import consistent_history
from deltaguard.core.oracle import PredicateOracle
from deltaguard.core.profiles import EngineName, EngineProfile, parse_version
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.base import DeltaEngine, WriteResult
from deltaguard.engines.errors import InvalidWriteError, SparkSetupError, TableAccessError
from deltaguard.engines.fencing import (
    check_fence,
    fenced_error,
    local_table_path,
    log_entry_written_at,
    spark_coordination,
)
from deltaguard.engines.spark import engine_fence
from deltaguard.engines.spark.errors import source_check_message, to_conflict_error
from deltaguard.engines.spark.job_fence import cancelled_when_lost
from deltaguard.engines.spark.ops import conf_get, history, table_exists
from deltaguard.engines.spark.runners import execute, operation_names, validate_spec
from deltaguard.engines.spark.session import ANSI_CONF, PARSER_CONFS, SESSION_TIME_ZONE_CONF, parse_ansi
from deltaguard.engines.spark.setup import check_delta_available, installed_version, is_connect
from deltaguard.engines.spark.target import SparkTarget
from deltaguard.engines.specs import WriteContext, WriteSpec, write_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from deltaguard.core.merge_scope import ScopeLimits, SourceKeys

ROW_LEVEL_PREVIEW_CONF = "spark.databricks.delta.rowLevelConcurrencyPreview"
DATABRICKS_VERSION_CONF = "spark.databricks.clusterUsageTags.sparkVersion"
DATABRICKS_ENGINE_CONF = "spark.databricks.clusterUsageTags.runtimeEngine"


SessionSource = Any  # a SparkSession or a zero-argument callable returning one


def _existing_connect_session() -> Any:
    """The Spark Connect session ``getOrCreate()`` would return instead of creating one (``None``: none)."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    return RemoteSparkSession.getActiveSession() or RemoteSparkSession._default_session


class SparkEngine(DeltaEngine):
    """Writes through delta-spark on a SparkSession (in the worker or over Spark Connect).

    :param spark: a SparkSession, or a zero-argument callable returning one (called once, lazily).
    :param conn_id: a ``spark`` connection: master URL and Databricks extras (``databricks-runtime``,
        ``photon``, ``row-level-preview``) for the profile.
    :param connect_conn_id: a ``spark_connect`` connection: use Spark Connect.
    :param connect_timeout_s: seconds to wait for the Connect server's first answer before
        :class:`~deltaguard.exceptions.SparkSetupError` (default
        :data:`~deltaguard.engines.spark.session.DEFAULT_CONNECT_TIMEOUT_S`).
    :param master: a master URL for a worker session (overrides the connection's).
    :param conf: extra Spark conf for a session this engine creates.
    :param profile: the engine profile, if known better than this engine can tell.
    :param databricks_runtime: the target is a Databricks cluster running this runtime (``"14.3"``).
    :param photon: the Databricks cluster runs Photon.
    :param row_level_preview: Databricks 14.0/14.1 with ``rowLevelConcurrencyPreview`` on.
    :param delta_version: the delta-spark version on the cluster (default: the installed wheel's).
    :param storage_options: deltalake storage options for reading the Delta log of path-based tables.
    :param history_scan: how many recent commits to search for this write's commit.
    :param session_per_write: run every write on a session of its own (``newSession()`` of a classic session,
        a new Spark Connect session on the same server), so writes through one engine run concurrently and
        each carries its own idempotency and commit-metadata confs. ``False``: all writes share the one
        session, one at a time.
    """

    name = "spark"

    def __init__(
        self,
        spark: SessionSource | None = None,
        *,
        conn_id: str | None = None,
        connect_conn_id: str | None = None,
        connect_timeout_s: float | None = None,
        master: str | None = None,
        conf: Mapping[str, str] | None = None,
        profile: EngineProfile | None = None,
        databricks_runtime: str | None = None,
        photon: bool | None = None,
        row_level_preview: bool | None = None,
        delta_version: str | None = None,
        storage_options: Mapping[str, str] | None = None,
        history_scan: int = 50,
        session_per_write: bool = True,
    ) -> None:
        if history_scan < 1:
            raise ValueError("history_scan must be at least 1")
        self._spark_source = spark
        self._conn_id = conn_id
        self._connect_conn_id = connect_conn_id
        self._connect_timeout_s = connect_timeout_s
        self._master = master
        self._conf = dict(conf or {})
        self._profile = profile
        self._databricks_runtime = databricks_runtime
        self._photon = photon
        self._row_level_preview = row_level_preview
        self._delta_version = delta_version
        self._storage_options = dict(storage_options or {})
        self._history_scan = history_scan
        self._session: SparkSession | None = None
        # True when this engine created the session (so close() stops it), False when handed in or borrowed
        self._owns_session = False
        self._checked = False
        self._session_per_write = session_per_write
        self._connect_url: str | None = None
        # Guards session creation, and the statements of a shared session (SQL confs are per session).
        self._lock = threading.RLock()

    # -- session -------------------------------------------------------------------------------------

    def session(self) -> SparkSession:
        """The SparkSession, created on first use and checked for Delta's jars.

        :raises SparkSetupError: if Delta cannot run on it (with how to add the jars).
        """
        with self._lock:
            if self._session is None:
                self._session = self._create_session()
            if not self._checked:
                check_delta_available(self._session)
                self._checked = True
            return self._session

    def close(self) -> None:
        """Release the session this engine created: a Spark Connect session is released on the server and
        its channel closed (its client would otherwise try to reach the server again at interpreter exit); a
        classic session's SparkContext is stopped. A session handed in (``spark``), the active session an
        engine without settings borrows, and a session ``getOrCreate()`` returned because it already existed
        are left running. Idempotent; the engine creates a new session if used again.
        """
        with self._lock:
            session, self._session = self._session, None
            owned, self._owns_session = self._owns_session, False
            self._checked = False
        if session is not None and owned:
            with contextlib.suppress(Exception):  # best effort: a session already gone has nothing to free
                session.stop()

    def check_setup(self) -> None:
        """Fail fast (before any lease) when Spark cannot run Delta writes; see :meth:`session`."""
        self.session()

    def _create_session(self) -> SparkSession:
        source = self._spark_source
        if source is not None:
            # A SparkSession is not callable; anything callable is a factory. Either way it is the caller's.
            return cast("SparkSession", source() if callable(source) else source)
        if self._connect_conn_id:
            from deltaguard.engines.spark.session import (
                DEFAULT_CONNECT_TIMEOUT_S,
                connect_session,
                connect_url,
            )

            self._connect_url = connect_url(self._connect_conn_id)
            existing = _existing_connect_session()
            session = connect_session(
                self._connect_conn_id,
                conf=self._conf,
                timeout_s=self._connect_timeout_s or DEFAULT_CONNECT_TIMEOUT_S,
            )
            self._owns_session = existing is None or session is not existing
            return session
        if self._conn_id is None and self._master is None:
            from pyspark.sql import SparkSession

            active = SparkSession.getActiveSession()
            if active is not None:
                return active
        from deltaguard.engines.spark.session import context_running, worker_session

        # getOrCreate() returns the process's running session rather than a new one: that one is not ours
        running = context_running()
        session = worker_session(self._conn_id, master=self._master, conf=self._conf)
        self._owns_session = not running
        return session

    # -- profile ---------------------------------------------------------------------------------------

    def profile(self) -> EngineProfile:
        """``databricks`` (runtime, Photon) for Databricks clusters, else ``delta-spark`` (its version).

        Sources, first match wins: the explicit ``profile``; the constructor's Databricks arguments; the
        ``spark`` connection's extras; an already-created session's Databricks cluster tags; the
        ``DATABRICKS_RUNTIME_VERSION`` variable (set on Databricks drivers); the delta-spark version.
        """
        if self._profile is not None:
            return self._profile
        runtime, photon, preview = self._databricks_runtime, self._photon, self._row_level_preview
        if runtime is None and self._conn_id:
            with contextlib.suppress(Exception):  # no Airflow/connection: fall through to other sources
                from deltaguard.engines.spark.session import get_connection_info

                info = get_connection_info(self._conn_id)
                runtime = info.databricks_runtime
                photon = info.photon if photon is None else photon
                preview = info.row_level_preview if preview is None else preview
        if runtime is None and self._session is not None:
            tag = conf_get(self._session, DATABRICKS_VERSION_CONF)
            if tag:
                runtime = tag
                if photon is None:
                    photon = "photon" in conf_get(self._session, DATABRICKS_ENGINE_CONF).lower()
                if preview is None:
                    preview = conf_get(self._session, ROW_LEVEL_PREVIEW_CONF).lower() == "true"
        runtime = runtime or os.environ.get("DATABRICKS_RUNTIME_VERSION") or None
        if runtime:
            version = ".".join(str(p) for p in parse_version(runtime)[:2])
            return EngineProfile(
                EngineName.DATABRICKS, version, photon=bool(photon), row_level_preview=bool(preview)
            )
        delta_version = self._delta_version or installed_version("delta-spark")
        if not delta_version:
            raise SparkSetupError("delta-spark is not installed; install airflow-provider-deltaguard[spark]")
        return EngineProfile(EngineName.DELTA_SPARK, delta_version)

    def commit_coordination(self, table_uri: str) -> str:
        """From the location's scheme and the session's log store (see
        :mod:`deltaguard.engines.fencing`); the driver is the session's ``spark.app.id``, so
        writes through one Spark Connect server share it and writes from separate sessions do not."""
        if self.profile().name is EngineName.DATABRICKS:
            return spark_coordination(table_uri, databricks=True, conf=lambda _key: "", driver=None)
        session = self.session()

        def setting(key: str) -> str:
            return str(self._conf.get(key) or conf_get(session, key))

        driver = conf_get(session, "spark.app.id") or self._connect_url or None
        return spark_coordination(table_uri, databricks=False, conf=setting, driver=driver)

    def session_time_zone(self) -> str | None:
        """``spark.sql.session.timeZone`` as this engine's writes run with it; ``None`` if unreadable.

        Spark reads a ``TIMESTAMP`` literal without zone in it (ADR 0001). Sessions deltaguard builds pin it
        (:data:`deltaguard.engines.spark.session.SMALL_SESSION_CONF`); see :meth:`_write_setting`.
        """
        return self._write_setting(SESSION_TIME_ZONE_CONF) or None

    def _write_setting(self, key: str, *, typed: bool = False) -> str:
        """A SQL setting as the session a write runs on has it (``""`` if unreadable).

        A classic session's writes run on its ``newSession()``, which starts from the context's settings and
        the session's initial options, not from settings changed at run time on the session it came from
        (measured on Spark 4.2: ``spark.conf.set`` of the ANSI mode or the zone on the parent is not seen by
        ``newSession()``), so that session is asked. A Connect write session gets the engine's conf, as the
        engine's own session did. Before any session exists, the engine's conf answers (Databricks without a
        session here).
        """
        configured = str(self._conf.get(key) or "").strip()
        if configured and self._session is None:
            return configured
        value = ""
        with contextlib.suppress(Exception):  # no session (Databricks without one), or conf unreadable
            session = self.session()
            if self._session_per_write and not is_connect(session):
                session = session.newSession()
            value = conf_get(session, key, typed=typed).strip()
        return value or configured

    def relation_location(self, name: str) -> str | None:
        """The ``Location`` ``DESCRIBE TABLE EXTENDED`` gives a table; ``None`` for a view or on any error."""
        try:
            rows = self.session().sql(f"DESCRIBE TABLE EXTENDED {name}").collect()
        except Exception:  # not a table of this catalog, or no session
            return None
        details = {str(row[0]).strip(): str(row[1] or "").strip() for row in rows if row[0] is not None}
        if details.get("Type", "").upper() == "VIEW":
            return None
        return details.get("Location") or None

    def session_ansi(self) -> bool | None:
        """``spark.sql.ansi.enabled`` as this engine's writes run with it (see :meth:`_write_setting`);
        ``None`` if unreadable."""
        return parse_ansi(self._write_setting(ANSI_CONF))

    def session_settings(self) -> Mapping[str, str] | None:
        """The settings set in the session this engine's writes run with (``spark.conf.getAll``, on the
        session :meth:`_write_setting` asks); ``{"spark.sql.<unreadable>": ...}`` when Spark cannot list them,
        which the conflict model then does not understand (closed world)."""
        try:
            session = self.session()
            if self._session_per_write and not is_connect(session):
                session = session.newSession()
            listed = session.conf.getAll
            return {str(k): str(v) for k, v in dict(listed).items()}
        except Exception as error:  # closed world: settings not listed are not known
            return {"spark.sql.<unreadable>": type(error).__name__}

    def session_default_parser(self) -> bool | None:
        """Both parser settings of :data:`~deltaguard.engines.spark.session.PARSER_CONFS` off in the session
        this engine's writes run with (see :meth:`_write_setting`); ``None`` if either is unreadable."""
        values = [parse_ansi(self._write_setting(key, typed=True)) for key in PARSER_CONFS]
        if any(value is True for value in values):
            return False
        return True if all(value is False for value in values) else None

    # -- table configuration -----------------------------------------------------------------------------

    def table_config(self, table_uri: str) -> TableConfig:
        """Path-based tables: the Delta log (:func:`deltaguard.engines.sources.read_judged_config`), falling
        back to Spark when deltalake cannot read the location; catalog names: ``DESCRIBE DETAIL``. Either
        way with the evaluators of :func:`deltaguard.engines.sources.attach_oracle` (ADR 0037).

        Checks the Spark setup first, so a missing-jars error surfaces before any lease.
        """
        from deltaguard.engines.sources import attach_oracle

        return attach_oracle(self._read_config(table_uri), self)

    def _read_config(self, table_uri: str) -> TableConfig:
        spark = self.session()
        target = SparkTarget.parse(table_uri)
        if target.path is not None:
            from deltaguard.engines.sources import read_judged_config

            try:
                return read_judged_config(target.path, self._storage_options or None, engine=self)
            except TableAccessError:
                pass  # e.g. s3a:// or abfss:// through Hadoop: ask Spark
            if not table_exists(spark, target):
                return TableConfig(exists=False, uri=table_uri)
        elif not spark.catalog.tableExists(target.name or ""):
            return TableConfig(exists=False, uri=table_uri)
        config, partition_types = self._describe_detail(spark, target)
        return self._with_oracle(config, partition_types)

    def predicate_oracle(
        self, config: TableConfig, partition_types: Mapping[str, str] | None = None
    ) -> PredicateOracle | None:
        """Spark's own evaluator of ``config``'s partition predicates (ADR 0037), ``None`` when the table is
        not partitioned or a partition column's type is unknown.

        It evaluates on a session made as each write's is (:meth:`_oracle_session`), so ANSI mode, time zone
        and name resolution are those of the write that will run.

        :param config: the table's configuration.
        :param partition_types: partition column types (lower-cased names) where ``config`` has none.
        """
        from deltaguard.engines.spark.meaning import SparkOracle

        return SparkOracle.for_table(config, self._oracle_session, partition_types)

    def _with_oracle(
        self, config: TableConfig, partition_types: Mapping[str, str] | None = None
    ) -> TableConfig:
        oracle = self.predicate_oracle(config, partition_types)
        return config if oracle is None else dataclasses.replace(config, meaning=oracle)

    @contextlib.contextmanager
    def _oracle_session(self) -> Iterator[SparkSession]:
        """A session with the settings this engine's writes run with, for one oracle question.

        Made as :meth:`_write_session` makes a write's, without taking the shared session's lock: a question
        only reads a frame of literals and sets no conf, and a decision must not wait for a write.
        """
        with self._session_like_a_write(self.session(), exclusive=False) as spark:
            yield spark

    def _describe_detail(
        self, spark: SparkSession, target: SparkTarget
    ) -> tuple[TableConfig, dict[str, str]]:
        """The configuration ``DESCRIBE DETAIL`` gives, and the partition columns' types from the schema."""
        from deltaguard.core.closed_world import KNOWN_TABLE_FEATURES, is_known_property
        from deltaguard.engines.discovery import schema_columns

        rows = spark.sql(f"DESCRIBE DETAIL {target.sql_reference()}").collect()
        if not rows:
            raise TableAccessError(f"DESCRIBE DETAIL returned nothing for {target.uri}")
        detail = rows[0].asDict(recursive=True)
        if str(detail.get("format", "delta")).lower() != "delta":
            raise TableAccessError(f"{target.uri} is a {detail.get('format')} table, not Delta")
        properties = detail.get("properties")
        if properties is None:
            shown = spark.sql(f"SHOW TBLPROPERTIES {target.sql_reference()}").collect()
            properties = {
                r["key"]: r["value"]
                for r in shown
                if not r["key"].startswith("delta.feature.")
                and r["key"] not in ("delta.minReaderVersion", "delta.minWriterVersion")
            }
        features = tuple(detail.get("tableFeatures") or ())
        unknown = tuple(f"property {k}" for k in properties if not is_known_property(k))
        unknown += tuple(f"feature {f}" for f in features if f.lower() not in KNOWN_TABLE_FEATURES)
        schema = spark.table(target.sql_reference()).schema
        identity = tuple(
            f.name for f in schema.fields if any(str(k).startswith("delta.identity.") for k in f.metadata)
        )
        generated, timestamps = schema_columns(
            (f.name, f.dataType.simpleString(), dict(f.metadata)) for f in schema.fields
        )
        version = self._latest_version(spark, target)
        partitions = tuple(detail.get("partitionColumns") or ())
        named = {f.name.lower(): f.dataType.simpleString() for f in schema.fields}
        partition_types = {c.lower(): named[c.lower()] for c in partitions if c.lower() in named}
        config = TableConfig(
            partition_columns=partitions,
            properties={str(k): str(v) for k, v in properties.items()},
            clustering_columns=tuple(detail.get("clusteringColumns") or ()),
            identity_columns=identity,
            generated_columns=generated,
            timestamp_columns=timestamps,
            exists=True,
            version=version,
            min_reader_version=detail.get("minReaderVersion"),
            min_writer_version=detail.get("minWriterVersion"),
            # DESCRIBE DETAIL lists reader and writer features together; every reader feature is also a
            # writer feature in Delta's protocol, so they all count as writer features here.
            writer_features=features,
            unknown=unknown,
            uri=target.uri,
        )
        return config, partition_types

    def read_source_keys(
        self, source: Any, columns: Collection[str], limits: ScopeLimits
    ) -> SourceKeys | None:
        """In Spark for what Spark builds, with Arrow for data in the worker
        (:func:`deltaguard.engines.spark.source_scope.read_spark_source_keys`); the MERGE's job checks the
        source it writes against the scope (``guarded_source``), so a source that changed since cannot
        write outside the claim."""
        from deltaguard.engines.spark.source_scope import read_spark_source_keys

        return read_spark_source_keys(self.session(), source, columns, limits)

    # -- validation ------------------------------------------------------------------------------------

    def validate(self, table_uri: str, spec: WriteSpec, config: TableConfig) -> None:
        """Check the spec (SQL parses, clauses make sense, partitions exist) and the Spark setup.

        :raises InvalidWriteError: for a malformed spec.
        :raises SparkSetupError: when Delta's jars are missing.
        """
        SparkTarget.parse(table_uri)
        validate_spec(spec, config)
        self.check_setup()

    # -- write -------------------------------------------------------------------------------------------

    def write(self, table_uri: str, spec: WriteSpec, context: WriteContext) -> WriteResult:
        target = SparkTarget.parse(table_uri)
        validate_spec(spec, None)
        spark = self.session()
        started = time.monotonic()
        expected = operation_names(spec)
        name = expected[0] if expected else ""
        before = self._latest_version(spark, target)
        if before is None and not spec.may_create():
            raise InvalidWriteError(
                f"no Delta table at {table_uri}; {write_name(spec)} needs an existing table"
            )
        idempotent = context.app_id is not None and context.app_version is not None
        if idempotent and before is not None:
            recorded = self._recorded_txn_version(spark, target, context.app_id or "")
            if recorded is not None and recorded >= (context.app_version or 0):
                return WriteResult(
                    table_uri,
                    before,
                    name,
                    {},
                    time.monotonic() - started,
                    duplicate=True,
                )
        fence_txn = None
        if not idempotent and before is not None and context.fence is not None:
            fence_txn = engine_fence.choose(
                context.fence, table_uri, spec, lambda apps: self._recorded_txn_versions(spark, target, apps)
            )
        # the fence travels in the one app transaction place of the write's options or session confs
        run_context = (
            context
            if fence_txn is None
            else dataclasses.replace(context, app_id=fence_txn.app_id, app_version=fence_txn.version)
        )
        metadata = dict(context.commit_metadata)
        if fence_txn is not None:
            # A fenced write's commit must be told from a successor's: delta-spark may skip it silently.
            metadata[engine_fence.COMMIT_ID_KEY] = uuid.uuid4().hex
        user_metadata = json.dumps(metadata, sort_keys=True) if metadata else None
        with (
            self._write_session(spark) as write_spark,
            cancelled_when_lost(write_spark, context, self._connect_url, self._connect_conn_id) as lost,
        ):
            try:
                if context.fence is not None:
                    check_fence(context.fence, table_uri)
                execute(write_spark, target, spec, run_context, user_metadata)
            except Exception as exc:
                if lost.is_set():
                    raise fenced_error(exc, table_uri) from exc
                refused = source_check_message(exc)
                if refused is not None:
                    raise InvalidWriteError(f"{refused}; nothing was written to {table_uri}") from exc
                conflict = to_conflict_error(exc, table_uri, engine=self.name)
                if conflict is not None:
                    fenced = (
                        None
                        if fence_txn is None
                        else engine_fence.refused_error(conflict, context.fence, table_uri)
                    )
                    raise (fenced or conflict) from exc
                raise
        elapsed = time.monotonic() - started
        commit = self._find_commit(spark, target, before, user_metadata, expected)
        if commit is None and fence_txn is not None:
            # delta-spark skips a write, silently, when the log holds its fence id at its version or above
            recorded = (self._recorded_txn_versions(spark, target, [fence_txn.app_id]) or {}).get(
                fence_txn.app_id
            )
            skipped = engine_fence.skipped_error(fence_txn, recorded, context.fence, table_uri)
            if skipped is not None:
                raise skipped
        if commit is None:
            # Nothing committed: delta-spark skipped an already-applied (app_id, app_version), or the write
            # was a no-op (OPTIMIZE with nothing to compact).
            version = self._latest_version(spark, target)
            return WriteResult(table_uri, version, name, {}, elapsed, duplicate=idempotent)
        after_commit = getattr(context.fence, "after_commit", None)
        if after_commit is not None:
            # The commit runs on the driver after the last job, unchecked (ADR 0018): a commit that landed
            # after the lease was lost, with another writer admitted, fails loudly.
            # The commit is placed by its log entry's write time where this process can read the table's
            # files (local paths), else by "now" (None), which is after the commit landed; never by
            # commitInfo.timestamp, which the driver stamps before it writes the entry.
            landed = (
                functools.partial(log_entry_written_at, table_uri, commit["version"])
                if local_table_path(table_uri) is not None
                else None
            )
            after_commit(table_uri, commit["version"], landed)
        return WriteResult(table_uri, commit["version"], commit["operation"], commit["metrics"], elapsed)

    # -- helpers ---------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _write_session(self, spark: SparkSession) -> Iterator[SparkSession]:
        """The session one write runs on: its own (see ``session_per_write``), else the shared one, locked."""
        with self._session_like_a_write(spark, exclusive=True) as own:
            yield own

    @contextlib.contextmanager
    def _session_like_a_write(self, spark: SparkSession, *, exclusive: bool) -> Iterator[SparkSession]:
        """A session made as a write's: its own (see ``session_per_write``), else the shared one, locked when
        ``exclusive``.

        A classic session's ``newSession()`` shares the SparkContext (no new JVM) but has its own SQL confs,
        temporary views and UDFs. Spark Connect sessions cannot make siblings (``newSession`` is not
        supported there); a new session on the same server URL can, and is released after the write.
        """
        shared = self._lock if exclusive else contextlib.nullcontext()
        if not self._session_per_write:
            with shared:
                yield spark
            return
        if not is_connect(spark):
            yield spark.newSession()
            return
        if self._connect_url is None:
            with shared:  # a Connect session handed in: its URL is unknown, share it
                yield spark
            return
        from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

        own = RemoteSparkSession.builder.remote(self._connect_url).create()
        try:
            for key, value in self._conf.items():
                own.conf.set(key, value)
            # typed as the classic session, as pyspark's own builder.remote() types the Connect one it returns
            yield cast("SparkSession", own)
        finally:
            # Release this session on the server and close its channel; stop() would also stop a local-mode
            # server. Best effort: the server expires idle sessions anyway.
            with contextlib.suppress(Exception):
                own.client.release_session()
            with contextlib.suppress(Exception):
                own.client.close()

    def _latest_version(self, spark: SparkSession, target: SparkTarget) -> int | None:
        """The table's current version, ``None`` when it does not exist."""
        rows = self._history(spark, target, 1)
        if rows is None:
            return None
        return int(rows[0]["version"]) if rows else None

    def _history(self, spark: SparkSession, target: SparkTarget, limit: int) -> list[Any] | None:
        """The newest ``limit`` commits (dicts or Rows with ``version``, ``operation``, ``operationMetrics``,
        ``userMetadata``), ``None`` when the table does not exist.

        Path-based tables: read from the Delta log by deltalake, which costs no Spark job (the commitInfo
        delta-spark wrote, as written), kept only when no commit landed while it was read
        (:mod:`deltaguard.core.delta_history`; commits that keep landing fall back to Spark); locations
        deltalake cannot read (``s3a://``, ...) and catalog names: ``DESCRIBE HISTORY`` through Spark.
        """
        if target.path is not None:
            try:
                from deltalake import DeltaTable as RsTable

                if RsTable.is_deltatable(target.path, self._storage_options or None):
                    table = RsTable(target.path, storage_options=self._storage_options or None)
                    # deltalake numbers history() rows from the loaded version, so a commit landing in
                    # between shifts every label (deltaguard.core.delta_history); DESCRIBE HISTORY below
                    # labels each commit by its log file's name
                    _, rows = consistent_history(table, since=max(table.version() - limit, -1))
                    return list(rows[:limit])
                if "://" not in target.path or target.path.startswith("file:"):
                    return None  # a local path without a Delta log: no table (yet)
            except Exception:  # deltalake cannot read every Hadoop location: ask Spark
                pass
        return self._sql_history(spark, target, limit)

    @staticmethod
    def _sql_history(spark: SparkSession, target: SparkTarget, limit: int) -> list[Any] | None:
        if not table_exists(spark, target):
            return None
        return history(spark, target, limit)

    def _recorded_txn_version(self, spark: SparkSession, target: SparkTarget, app_id: str) -> int | None:
        """The ``txn`` version the log holds for ``app_id`` (``None``: none, or the log is unreadable here)."""
        return (self._recorded_txn_versions(spark, target, [app_id]) or {}).get(app_id)

    def _recorded_txn_versions(
        self, spark: SparkSession, target: SparkTarget, app_ids: Collection[str]
    ) -> dict[str, int | None] | None:
        """The ``txn`` version the log holds for each of ``app_ids`` (``None``: none); ``None`` when the log
        cannot be read here."""
        location = target.path
        if location is None:
            with contextlib.suppress(Exception):
                rows = spark.sql(f"DESCRIBE DETAIL {target.sql_reference()}").select("location").collect()
                location = rows[0]["location"] if rows else None
        if not location:
            return None
        try:
            from deltalake import DeltaTable as RsTable

            table = RsTable(location, storage_options=self._storage_options or None)
            found = {app: table.transaction_version(app) for app in app_ids}
        except Exception:  # deltalake cannot read every Hadoop location; delta-spark still checks
            return None
        return {app: None if version is None else int(version) for app, version in found.items()}

    def _find_commit(
        self,
        spark: SparkSession,
        target: SparkTarget,
        before: int | None,
        user_metadata: str | None,
        expected: tuple[str, ...],
    ) -> dict[str, Any] | None:
        """This write's commit among the recent ones: newer than ``before``, with our ``userMetadata``
        (or, without metadata, the newest with an expected operation name)."""
        rows = self._history(spark, target, self._history_scan) or []
        floor = -1 if before is None else before
        for row in sorted(rows, key=lambda r: -int(r["version"])):
            if int(row["version"]) <= floor:
                break
            if user_metadata is not None and _field(row, "userMetadata") != user_metadata:
                continue
            if user_metadata is None and expected and _field(row, "operation") not in expected:
                continue
            return {
                "version": int(row["version"]),
                "operation": str(_field(row, "operation")),
                "metrics": _metrics(_field(row, "operationMetrics")),
                "timestamp": _epoch(_field(row, "timestamp")),
            }
        return None


def _field(row: Any, key: str) -> Any:
    """``row[key]`` of a deltalake history dict or a Spark Row; ``None`` when the commit has no such field."""
    try:
        return row[key]
    except (KeyError, ValueError):
        return None


def _epoch(stamp: Any) -> float | None:
    """A history row's ``timestamp`` in seconds since the epoch; ``None`` when absent.

    deltalake's history gives the commitInfo's milliseconds; ``DESCRIBE HISTORY`` a ``datetime`` (naive
    means the session's local time zone, which Python's ``timestamp()`` assumes too).
    """
    if stamp is None or isinstance(stamp, bool):
        return None
    if isinstance(stamp, int | float):
        return float(stamp) / 1000
    try:
        return float(stamp.timestamp())
    except (AttributeError, TypeError, ValueError, OSError):
        return None


def _metrics(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in (raw or {}).items():
        try:
            out[key] = int(value)
        except (TypeError, ValueError):
            out[key] = value
    return out
