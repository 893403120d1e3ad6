"""How an engine's commit is fenced and coordinated: the lease's fence, the commit's coordinator, when a commit
landed, the fence for remote work, and an engine's lifetime.

* :class:`CommitFence` (ADR 0018): a writer hands it to the engine in
  :class:`~deltaguard.engines.specs.WriteContext`; the engine calls :meth:`CommitFence.check` as late before
  its commit as it can and registers a way to cancel its running work with :meth:`CommitFence.on_lost`.
  delta-rs stages appends and overwrites (:mod:`deltaguard.engines.deltars.staged`: data files first, the
  check, then the commit); its other writes run in one Rust call, so a source is handed over as a stream whose
  end runs the check (:func:`fenced_source`) and writes without a source are checked just before the call.
  Spark runs each write under its own job group or operation tag, checks right before the statement that
  commits, and registers a cancel with ``on_lost``. Where a window remains, engines report the commit to the
  fence's optional ``after_commit``, which fails a commit that landed after the lease was lost with another
  writer admitted (``LateCommitError``).
* :func:`deltars_coordination` and friends: what makes an engine's commits exclusive of other writers' (Delta
  Lake's "Storage configuration" page: a log store needs mutual exclusion). Where the storage refuses to
  create an existing file (HDFS' rename, conditional puts, delta-rs' put-if-absent) every writer is excluded
  from every other; else the log store excludes only the commits it sees itself (delta-spark's
  ``S3SingleDriverLogStore``, ``HDFSLogStore`` on local files whose lock covers one JVM,
  ``S3DynamoDBLogStore`` for the drivers sharing its table). The result is a coordinator name; two writes may
  commit at once only when they name the same one
  (:func:`deltaguard.core.rules.common.commit_coordination_pair`). Unknown means not coordinated.
* :func:`log_entry_written_at`: when a commit's log entry landed, as the storage reports it.
  ``commitInfo.timestamp`` is chosen by the writer when it builds the commit, so a writer stopped before
  writing the entry carries an early time. Local files: the later of ``st_mtime`` and ``st_ctime`` (delta-rs
  links a temporary file to the version's name, and the link sets ``st_ctime``, which no writer can choose;
  measured on deltalake 1.6.6); object stores: the object's ``last_modified`` through deltalake's storage
  handler. The caller allows a clock skew (:attr:`deltaguard.leases.keeper.LeaseKeeper.clock_skew_s`).
* :class:`RemoteFenceByKind` (ADR 0033): dispatches a handle of holders' server-side work
  (:mod:`deltaguard.leases.remote_work`) to the engine that understands it; only Spark Connect records
  handles. The engines import nothing of the leases: the protocol is structural.
* :func:`engine_released`: an engine lives as long as the task try that built it."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

import pyarrow as pa

from deltaguard.core.profiles import SINGLE_DRIVER_COORDINATION, STORAGE_COORDINATION
from deltaguard.exceptions import CommitFencedError

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------- the commit fence


class CommitFence(Protocol):
    """What a writer gives the engine to fence its commit."""

    def check(self) -> None:
        """Return if the writer's lease is certainly live for the commit; raise otherwise.

        :raises deltaguard.engines.errors.CommitFencedError: the lease is lost or not certainly live.
        """

    def on_lost(self, cancel: Callable[[], None]) -> Callable[[], None]:
        """Call ``cancel`` (once, from another thread) if the lease is lost; return an unregister function."""

    # Optional: ``after_commit(table_uri, version, committed_at)``, called by an engine once its commit
    # landed, ``committed_at`` the storage's write time of the log entry, a zero-argument callable that
    # reads it, or None (unknown); raises ``LateCommitError`` when the commit may have landed after the lease was lost with
    # another writer admitted (the keeper implements it; engines look it up with ``getattr``).


class FenceTrip:
    """Remembers the fence failure raised inside a stream that the engine consumed.

    delta-rs turns a Python exception raised while it pulls the stream into a generic ``DeltaError``; the
    engine re-raises the remembered :class:`CommitFencedError` instead.
    """

    def __init__(self) -> None:
        self.error: BaseException | None = None


def fenced_source(
    data: pa.Table | pa.RecordBatchReader, fence: CommitFence, trip: FenceTrip
) -> pa.RecordBatchReader:
    """``data`` as a stream whose end checks ``fence`` before the consumer sees it end.

    :param data: the resolved source.
    :param fence: the writer's fence.
    :param trip: receives the fence's error, if it raises.
    """
    batches = data.to_batches() if isinstance(data, pa.Table) else data

    def stream() -> Iterator[pa.RecordBatch]:
        yield from batches
        try:
            fence.check()
        except BaseException as exc:
            trip.error = exc
            raise

    return pa.RecordBatchReader.from_batches(data.schema, stream())


def check_fence(fence: CommitFence, table_uri: str) -> None:
    """Run ``fence.check()``; any failure becomes a :class:`CommitFencedError` naming the table."""
    try:
        fence.check()
    except Exception as exc:
        raise fenced_error(exc, table_uri) from exc


def fenced_error(cause: BaseException, table_uri: str) -> CommitFencedError:
    """``cause`` as the error a fenced write raises."""
    if isinstance(cause, CommitFencedError):
        return cause
    return CommitFencedError(f"write to {table_uri} stopped before its commit: {cause}")


S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
# ---------------------------------------------------------------------------------------- commit coordination


#: schemes whose storage refuses to create an existing commit file for delta-spark's default log store
#: (HDFS rename; GCS preconditions in ``GCSLogStore``; ADLS Gen2 rename without overwrite)
_SPARK_EXCLUSIVE_SCHEMES = frozenset({"hdfs", "gs", "abfs", "abfss"})
#: the log stores that keep that exclusion (the defaults for those schemes)
_SPARK_STORAGE_LOG_STORES = frozenset(
    {
        "io.delta.storage.HDFSLogStore",
        "io.delta.storage.GCSLogStore",
        "io.delta.storage.AzureLogStore",
        "org.apache.spark.sql.delta.storage.HDFSLogStore",
        "org.apache.spark.sql.delta.storage.GCSLogStore",
        "org.apache.spark.sql.delta.storage.AzureLogStore",
    }
)
_DYNAMODB_LOG_STORE = "io.delta.storage.S3DynamoDBLogStore"
_DYNAMODB_TABLE_CONF = "spark.io.delta.storage.S3DynamoDBLogStore.ddb.tableName"
_DYNAMODB_REGION_CONF = "spark.io.delta.storage.S3DynamoDBLogStore.ddb.region"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def scheme_of(table_uri: str) -> str:
    """The URI scheme in lower case (``file`` for a plain path).

    :param table_uri: a table location.
    """
    match = _SCHEME.match(table_uri)
    if match is None or len(match.group(1)) == 1:  # no scheme, or a Windows drive letter
        return "file"
    return match.group(1).lower()


def single_driver(driver: str) -> str:
    """The coordinator of a log store that excludes only the commits of one driver.

    :param driver: what identifies the driver (a Spark application id, a Spark Connect URL).
    """
    return f"{SINGLE_DRIVER_COORDINATION}:{driver}"


def uncoordinated() -> str:
    """A coordinator nobody else shares: every other write on the table conflicts with this one."""
    return f"{SINGLE_DRIVER_COORDINATION}:unshared-{uuid.uuid4().hex}"


def deltars_coordination(table_uri: str, storage_options: Mapping[str, str] | None) -> str:
    """delta-rs: the storage's put-if-absent, unless S3 renames were declared unsafe.

    delta-rs 1.x commits with a put-if-absent on every object store (S3's conditional writes included) and
    a no-replace rename on local files. ``AWS_S3_ALLOW_UNSAFE_RENAME`` asks it to skip that guarantee.

    :param table_uri: the table location.
    :param storage_options: the delta-rs storage options the writes use.
    """
    if scheme_of(table_uri) in S3_SCHEMES:
        options = {k.lower(): str(v).strip().lower() for k, v in (storage_options or {}).items()}
        if options.get("aws_s3_allow_unsafe_rename") in ("true", "1", "yes"):
            return uncoordinated()
    return STORAGE_COORDINATION


def spark_coordination(
    table_uri: str, *, databricks: bool, conf: Callable[[str], str], driver: str | None
) -> str:
    """delta-spark or Databricks: from the location's scheme and the session's log store settings.

    :param table_uri: the table location (a catalog table's storage location).
    :param databricks: the session is a Databricks cluster.
    :param conf: reads a Spark setting (``""`` when unset).
    :param driver: the driver's identity (``spark.app.id``), or ``None`` when unknown.
    """
    scheme = scheme_of(table_uri)
    if databricks:
        return "databricks" if scheme in S3_SCHEMES else STORAGE_COORDINATION
    log_store = (
        conf(f"spark.delta.logStore.{scheme}.impl").strip() or conf("spark.delta.logStore.class").strip()
    )
    if log_store == _DYNAMODB_LOG_STORE:
        table = conf(_DYNAMODB_TABLE_CONF).strip() or "delta_log"
        region = conf(_DYNAMODB_REGION_CONF).strip() or "us-east-1"
        return f"dynamodb:{region}/{table}"
    if scheme in _SPARK_EXCLUSIVE_SCHEMES and (not log_store or log_store in _SPARK_STORAGE_LOG_STORES):
        return STORAGE_COORDINATION
    # S3's single-driver store, local files, Azure Blob (wasb: rename is copy and delete), any other
    # scheme or custom log store: exclusive within this driver at best.
    return single_driver(driver) if driver else uncoordinated()


# ------------------------------------------------------------------------------------ when a log entry landed


def log_entry_path(version: int) -> str:
    """The log entry of ``version``, relative to the table root."""
    return f"_delta_log/{version:020d}.json"


def local_table_path(table_uri: str) -> str | None:
    """The directory of a table on the local file system, or ``None`` for other storage."""
    if scheme_of(table_uri) != "file":
        return None
    if table_uri.startswith("file:"):
        return unquote(urlparse(table_uri).path)
    return table_uri


def log_entry_written_at(
    table_uri: str, version: int, storage_options: Mapping[str, str] | None = None
) -> float | None:
    """Seconds since the epoch at which the storage wrote ``version``'s log entry; ``None`` if unknown.

    :param table_uri: the table.
    :param version: the committed version.
    :param storage_options: deltalake storage options for the table.
    """
    local = local_table_path(table_uri)
    try:
        if local is not None:
            stat = os.stat(os.path.join(local, log_entry_path(version)))
            return max(stat.st_mtime, stat.st_ctime)
        from deltalake.fs import DeltaStorageHandler

        handler = DeltaStorageHandler(table_uri, options=dict(storage_options or {}))
        info = handler.get_file_info([log_entry_path(version)])[0]
        mtime_ns = info.mtime_ns
        return None if mtime_ns is None else mtime_ns / 1e9
    except FileNotFoundError:  # e.g. a catalog table's name read as a path
        return None
    except Exception as exc:  # unknown: the caller falls back to a time known to be after the commit
        log.warning("deltaguard: cannot read when version %d of %s was written: %s", version, table_uri, exc)
        return None


# ------------------------------------------------------------------------------------------------ remote work


def connection_url(handle: Mapping[str, str]) -> str:
    """The URL to reach a handle's endpoint: its ``conn_id`` connection's (which may carry a token), when
    that connection still points at the same endpoint; else the recorded endpoint."""
    from deltaguard.engines.spark.connect_fence import endpoint_of

    endpoint = handle["endpoint"]
    conn_id = handle.get("conn_id")
    if conn_id:
        with contextlib.suppress(Exception):  # no Airflow, or the connection is gone: the endpoint itself
            from deltaguard.engines.spark.session import connect_url

            url = connect_url(conn_id)
            if endpoint_of(url) == endpoint:
                return url
    return f"{endpoint}/;use_ssl=true" if handle.get("use_ssl") == "true" else endpoint


class RemoteFenceByKind:
    """Fences every handle kind an engine of deltaguard records (``spark_connect``).

    :param timeout_s: how long a Spark Connect fence waits for interrupted operations to end.
    """

    def __init__(self, timeout_s: float = 45.0) -> None:
        self.timeout_s = timeout_s

    def fence(self, handle: Mapping[str, str]) -> str:
        """Stop the work ``handle`` names and confirm it ended (see the kind's fence).

        :raises Exception: the end could not be confirmed, or the kind is unknown.
        """
        from deltaguard.engines.spark.connect_fence import KIND, SparkConnectFence

        if handle.get("kind") == KIND:
            return SparkConnectFence(connection_url, timeout_s=self.timeout_s).fence(handle)
        raise ValueError(f"no fence for server-side work of kind {handle.get('kind')!r}")


def default_remote_fence() -> RemoteFenceByKind:
    """The fence the lease hooks give their lease manager."""
    return RemoteFenceByKind()


# --------------------------------------------------------------------------------------- an engine's lifetime


def close_engine(engine: Any) -> None:
    """``engine.close()``, logging rather than raising what it raises.

    A failure to release a session must neither turn a committed write into a failed task (a retry would
    only find its own commit) nor hide the error that ended a failed one.

    :param engine: a :class:`~deltaguard.engines.base.DeltaEngine`, or ``None`` (nothing to release).
    """
    if engine is None:
        return
    try:
        engine.close()
    except Exception:
        log.warning("deltaguard: could not release the %s engine's resources", engine.name, exc_info=True)


@contextlib.contextmanager
def engine_released(holder: Any) -> Iterator[None]:
    """Close ``holder.resolved_engine`` when the block ends: on success, on failure, and when the task
    defers (``TaskDeferred`` passes through; the resumed try builds its engine again).

    :param holder: the operator; its ``resolved_engine`` is read at exit, since the block creates it.
    """
    try:
        yield
    finally:
        close_engine(getattr(holder, "resolved_engine", None))
