"""The delta-rs engine: writes through ``deltalake`` (no JVM), with idempotency and typed conflicts.

See ``docs/adr/0002-delta-rs-engine.md`` for the idempotency scheme, how the committed version is found
and the error mapping.
"""

from __future__ import annotations

import functools
import logging
import re
import time
import uuid
from collections.abc import Collection, Sequence
from typing import Any

import deltalake
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError, DeltaError, SchemaMismatchError, TableNotFoundError
from deltalake.transaction import CommitProperties, Transaction

from deltaguard.core.delta_history import consistent_history
from deltaguard.core.merge_scope import ScopeLimits, SourceKeys
from deltaguard.core.oracle import PredicateOracle
from deltaguard.core.profiles import DELTA_RS_TIME_ZONE, EngineName, EngineProfile
from deltaguard.core.sql.literals import SPARK
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.base import DeltaEngine, WriteResult, validate_context, validate_spec
from deltaguard.engines.conflict_messages import parse_conflict_kind
from deltaguard.engines.deltars.meaning import planned_texts
from deltaguard.engines.deltars.ops import RUNNERS, DeltaRsRunner, OpContext, check_for_delta_rs
from deltaguard.engines.discovery import short_message
from deltaguard.engines.errors import (
    CommitFencedError,
    ConflictKind,
    DeltaConflictError,
    EnginePanicError,
    InvalidWriteError,
    TableAccessError,
)
from deltaguard.engines.fencing import (
    FenceTrip,
    check_fence,
    deltars_coordination,
    fenced_error,
    fenced_source,
    log_entry_written_at,
)
from deltaguard.engines.specs import WriteContext, WriteSpec

log = logging.getLogger(__name__)

#: Commit metadata keys deltaguard records in every commit it makes.
COMMIT_ID_KEY = "deltaguard.commit_id"
APP_ID_KEY = "deltaguard.app_id"
APP_VERSION_KEY = "deltaguard.app_version"
OPERATION_KEY = "deltaguard.operation"
#: the fence app id of the lease a commit was made under (ADR 0038): tells a fellow successor's commit from
#: the lost lease's own late one
FENCE_ID_KEY = "deltaguard.fence_id"

#: deltalake messages that mean "this write is wrong", not "the table is unreachable" or "a conflict".
_BAD_INPUT = re.compile(
    r"sql parser error|schema error|no field named|cast error|invalid data found|failed validation check|"
    r"schema mismatch|type mismatch|append-only|cannot cast|invalid (argument|expression)|unqualified field",
    re.IGNORECASE,
)
#: CommitFailedError messages that are about what delta-rs supports, not about a concurrent writer.
_UNSUPPORTED = re.compile(
    r"unsupported (table|reader|writer) features|does not support (reader|writer) version", re.I
)


class DeltaRsEngine(DeltaEngine):
    """Execute writes with delta-rs (the ``deltalake`` package).

    :param storage_options: deltalake storage options used for every table and Delta source.
    :param max_commit_retries: default number of times delta-rs may rebase a non-conflicting commit
        (``None``: delta-rs' default, 15); ``WriteContext.max_commit_retries`` overrides it per write.
        delta-rs' OPTIMIZE ignores it.
    :param history_scan_limit: how many recent commits are searched to find a commit by its
        ``deltaguard.commit_id`` or an original commit by its ``(app_id, app_version)``.
    """

    name = "delta-rs"
    trusts_validated_version = True  # write() validates again on a table that moved past validated_version

    def __init__(
        self,
        storage_options: dict[str, str] | None = None,
        max_commit_retries: int | None = None,
        history_scan_limit: int = 1000,
        file_stats: bool = False,
    ) -> None:
        if max_commit_retries is not None and max_commit_retries < 0:
            raise ValueError("max_commit_retries must be >= 0")
        if history_scan_limit < 1:
            raise ValueError("history_scan_limit must be >= 1")
        self.storage_options = dict(storage_options) if storage_options else None
        self.max_commit_retries = max_commit_retries
        self.history_scan_limit = history_scan_limit
        # Off by default: statistics may decide only for a write that commits from their very snapshot and
        # against running writes that read no newer one (ADR 0020); the write operators arrange both.
        self.file_stats = file_stats

    def profile(self) -> EngineProfile:
        return EngineProfile(EngineName.DELTA_RS, deltalake.__version__)

    def commit_coordination(self, table_uri: str) -> str:
        return deltars_coordination(table_uri, self.storage_options)

    def session_time_zone(self) -> str | None:
        # DataFusion reads timestamp text without zone as UTC (measured, ADR 0001)
        return DELTA_RS_TIME_ZONE

    def table_config(self, table_uri: str) -> TableConfig:
        from deltaguard.engines.sources import read_judged_config

        return read_judged_config(table_uri, self.storage_options, engine=self, file_stats=self.file_stats)

    def predicate_oracle(self, config: TableConfig) -> PredicateOracle | None:
        """delta-rs' own evaluator (:class:`~deltaguard.engines.deltars.meaning.DataFusionOracle`)."""
        from deltaguard.engines.deltars.meaning import DataFusionOracle

        return DataFusionOracle.for_table(config)

    def read_source_keys(
        self, source: Any, columns: Collection[str], limits: ScopeLimits
    ) -> SourceKeys | None:
        # run_merge checks the source it writes against the scope (source_keys.check_source_in_scope)
        from deltaguard.engines.sources import read_source_keys

        return read_source_keys(source, columns, limits, self.storage_options)

    def open_table(self, table_uri: str, version: int | None = None) -> DeltaTable:
        """Open a handle on the table, optionally at an older version.

        Pass it to :meth:`write` as ``snapshot`` to commit from that version: the conformance harness opens
        two handles at the same version, commits through one, then writes through the stale other.

        :raises TableAccessError: when there is no table or the log cannot be read.
        """
        table = self._load(table_uri, version)
        if table is None:
            raise TableAccessError(f"no Delta table at {table_uri}")
        return table

    def validate(
        self, table_uri: str, spec: WriteSpec, config: TableConfig, *, snapshot: DeltaTable | None = None
    ) -> None:
        """The spec's own checks against ``config`` (with its columns when it lists them, as :meth:`write`
        checks them) and what delta-rs adds; a :class:`WriteContext` naming ``config.version`` as
        ``validated_version`` lets :meth:`write` skip them when it commits from that version.

        :param snapshot: the open handle ``config`` was read from, if the caller holds one: DataFusion plans
            an UPDATE's, a DELETE's or a replaceWhere's texts on it instead of on a handle opened here (an
            open reads the Delta log).
        """
        # User conditions are Spark SQL, read as the conflict model reads them; deltars_ops renders them for
        # DataFusion (ADR 0012).
        runner = RUNNERS.runner(spec)  # an unsupported spec is refused first
        columns = None if config.column_types is None else [name for name, _ in config.column_types]
        validate_spec(spec, config, columns, dialect=SPARK)
        table = None
        if config.exists and any(planned_texts(spec)):  # DataFusion plans them on the table
            table = snapshot if snapshot is not None else self._load(table_uri)
        check_for_delta_rs(spec, runner, table)

    def write(
        self,
        table_uri: str,
        spec: WriteSpec,
        context: WriteContext | None = None,
        *,
        snapshot: DeltaTable | None = None,
    ) -> WriteResult:
        """Validate, then execute and commit one write.

        :param table_uri: the table.
        :param spec: what to write.
        :param context: idempotency pair, commit metadata, retries (default: none of them); with a
            ``validated_version`` equal to the version written from, the spec is not checked again.
        :param snapshot: an open handle to commit from (e.g. from :meth:`open_table` at an older version);
            default: the table's latest version. The handle is left at the table's newest version (the one
            it committed, unless another writer committed since), read to find the commit.
        :raises InvalidWriteError: before anything is written, when the spec or context is bad (and when
            delta-rs rejects the data before committing).
        :raises DeltaConflictError: when the commit conflicts with a concurrent one.
        :raises TableAccessError: when the log cannot be read or delta-rs cannot write this table.
        """
        started = time.perf_counter()
        context = context or WriteContext()
        validate_context(context)
        runner = RUNNERS.runner(spec)  # UnsupportedWriteError before anything is read or written
        table = snapshot if snapshot is not None else self._load(table_uri)
        # A retry is recognised before the spec is checked against the table, which it may have changed
        # (a retried ADD COLUMNS would otherwise fail with "column already exists").
        if table is not None and context.app_id is not None and context.app_version is not None:
            original = self._already_committed(table, runner, context.app_id, context.app_version)
            if original is not None:
                version, info = original
                return _result(table_uri, runner, version, info, None, started, duplicate=True)

        before = table.version() if table is not None else None
        if context.validated_version is None or before != context.validated_version:
            config, columns = self._light_config(table_uri, table)
            validate_spec(spec, config, columns, dialect=SPARK)
            check_for_delta_rs(spec, runner, table)

        commit_id = uuid.uuid4().hex
        properties = self._commit_properties(spec, context, commit_id, table)
        fence, trip = context.fence, FenceTrip()
        wrap = None
        if fence is not None:
            # One check before delta-rs starts (the only one for writes without a source), one when delta-rs
            # has pulled the source's last batch (ADR 0018).
            check_fence(fence, table_uri)
            wrap = functools.partial(fenced_source, fence=fence, trip=trip)
        panic: BaseException | None = None
        landed_anyway: tuple[int, dict[str, Any] | None] | None = None  # found although the call failed
        # taken before the call: a failed commit brings the handle to the newest version (_landed_despite)
        unread = _replaced_ids_unread(fence, table)
        try:
            metrics = runner.run(
                spec,
                OpContext(table, table_uri, properties, self.storage_options, fence_source=wrap, fence=fence),
            )
        except Exception as exc:
            if trip.error is not None:
                raise fenced_error(trip.error, table_uri) from trip.error
            landed_anyway = self._landed_despite(exc, table_uri, commit_id, before, table=table)
            if landed_anyway is None:
                # deltalake errors become deltaguard's typed errors; anything else propagates untouched.
                translated = self._translate(exc, table_uri)
                if translated is exc:
                    raise
                refused = _refused_by_engine_fence(translated, fence, table_uri)
                if refused is not None:
                    raise refused from exc
                if self._refused_by_a_fellow_successor(translated, fence, table_uri, before, unread):
                    # nothing committed, and no conflict stands: write again from the table as it is now,
                    # which holds the replaced ids, so this commit no longer carries them (ADR 0038)
                    return self.write(table_uri, spec, context)
                raise translated from exc
            metrics = {}
        except BaseException as exc:
            if not is_panic(exc):
                raise
            # A Rust panic reaches Python as pyo3's PanicException, a BaseException no handler above
            # expects (measured on deltalake 1.6.6: a stale DELETE/UPDATE/MERGE on a column-mapped table).
            # Whether the commit landed is read from the log below, like any write.
            panic, metrics = exc, {}

        read_version = before if before is not None else -1
        # a failed call's commit was looked for already: the log is not read again for it
        found = landed_anyway
        if found is None:
            found = self._locate_commit(table_uri, table, commit_id, read_version)
        if found is None and panic is not None:
            raise EnginePanicError(short_message(panic), table_uri, self.name) from panic
        if found is None:
            # delta-rs commits nothing when a DELETE/UPDATE/MERGE/OPTIMIZE changes nothing.
            return WriteResult(
                table_uri=table_uri,
                version=before,
                operation=runner.operation,
                metrics=metrics or {},
                elapsed_s=time.perf_counter() - started,
                committed=False,
            )
        committed_version, info = found
        after_commit = getattr(fence, "after_commit", None)
        if after_commit is not None:
            # The window from the last check to the commit cannot be closed for every write (ADR 0018): a
            # commit that landed after the lease was lost, with another writer admitted, fails loudly. The
            # commit is placed by when the storage wrote its log entry, never by commitInfo.timestamp,
            # which delta-rs stamps before a writer may stop; read only if the lease turns out lost.
            landed = functools.partial(
                log_entry_written_at, table_uri, committed_version, self.storage_options
            )
            after_commit(table_uri, committed_version, landed)
        return _result(table_uri, runner, committed_version, info, metrics, started)

    # -- helpers ---------------------------------------------------------------------------------------

    def _load(self, table_uri: str, version: int | None = None) -> DeltaTable | None:
        try:
            return DeltaTable(table_uri, version=version, storage_options=self.storage_options)
        except TableNotFoundError:
            return None
        except (DeltaError, OSError, ValueError) as exc:
            raise TableAccessError(f"cannot read the Delta log of {table_uri}: {short_message(exc)}") from exc

    def _newest(self, table_uri: str, table: DeltaTable) -> DeltaTable:
        try:
            table.update_incremental()
        except (DeltaError, OSError, ValueError) as exc:
            raise TableAccessError(f"cannot read the Delta log of {table_uri}: {short_message(exc)}") from exc
        return table

    def _light_config(self, table_uri: str, table: DeltaTable | None) -> tuple[TableConfig, list[str] | None]:
        """What validation needs, from the already-open handle (no extra log reads)."""
        if table is None:
            return TableConfig(exists=False, uri=table_uri), None
        try:
            partitions = tuple(table.metadata().partition_columns)
            columns = [field.name for field in table.schema().fields]
        except (DeltaError, OSError, ValueError) as exc:
            raise TableAccessError(f"cannot read the Delta log of {table_uri}: {short_message(exc)}") from exc
        return TableConfig(
            partition_columns=partitions, exists=True, version=table.version(), uri=table_uri
        ), columns

    def _commit_properties(
        self, spec: WriteSpec, context: WriteContext, commit_id: str, table: DeltaTable | None
    ) -> CommitProperties:
        metadata: dict[str, Any] = dict(context.commit_metadata)
        metadata[COMMIT_ID_KEY] = commit_id
        metadata[OPERATION_KEY] = spec.operation().kind.value
        transactions: list[Transaction] = []
        now_ms = int(time.time() * 1000)
        if context.app_id is not None and context.app_version is not None:
            metadata[APP_ID_KEY] = context.app_id
            metadata[APP_VERSION_KEY] = context.app_version
            # The Transaction action makes a concurrent duplicate fail with ConcurrentTransaction.
            transactions.append(Transaction(context.app_id, context.app_version, now_ms))
        fence_ids = getattr(context.fence, "fence_app_ids", None)
        if fence_ids is not None:
            # The engine fence (ADR 0038): the lease's own id and those of the leases it replaced. delta-rs
            # refuses a commit when a concurrent winning commit carries one of the same ids. A replaced id
            # the snapshot read already holds is left out: a commit carrying it landed at or before that
            # snapshot, after the lost lease's read, so that lease's late commit already meets it; carrying it
            # again would only make compatible writers that started after it refuse each other.
            own, *replaced = fence_ids()
            metadata[FENCE_ID_KEY] = own
            already = {
                app for app in replaced if table is not None and table.transaction_version(app) is not None
            }
            transactions += [Transaction(app, 1, now_ms) for app in (own, *replaced) if app not in already]
        retries = (
            context.max_commit_retries if context.max_commit_retries is not None else self.max_commit_retries
        )
        if table is None:
            # A write that creates the table has no snapshot to rebase on: delta-rs' retry after "version 0
            # exists" re-sends the same actions as version 1, so a lost answer to the creation left the
            # write in the log twice (measured on deltalake 1.6.6 with moto behind a dropping proxy). With
            # no retry the call fails and the write's own commit is looked for in the log instead.
            retries = 0
        return CommitProperties(
            custom_metadata=metadata, max_commit_retries=retries, app_transactions=transactions or None
        )

    def _refused_by_a_fellow_successor(
        self,
        error: Exception,
        fence: Any,
        table_uri: str,
        read_version: int | None,
        unread: Sequence[str],
    ) -> bool:
        """Whether a live lease's ``ConcurrentTransaction`` refusal came only from a fellow successor.

        Compatible writers granted together after one lease ended both carry its id; read from the same
        snapshot, the second to commit meets the first's commit carrying that id and delta-rs refuses it,
        though the two may run side by side (measured in the production-shaped run: three MERGEs into other
        partitions, granted after two leases on their table expired, refused each other). It is that case
        when the table now holds a replaced id the write's snapshot did not, and every commit since that
        snapshot was made under another live lease (its ``deltaguard.fence_id``): none under this lease (a
        duplicate) nor under a replaced one (the lost holder's late commit: that refusal stands, and the task's
        retry reads the table again).

        :param read_version: the version the write read (``None``: it created the table).
        :param unread: the replaced leases' ids its snapshot did not hold (:func:`_replaced_ids_unread`).
        """
        if not isinstance(error, DeltaConflictError) or error.kind is not ConflictKind.CONCURRENT_TRANSACTION:
            return False
        fence_ids = getattr(fence, "fence_app_ids", None)
        if fence_ids is None or read_version is None or not unread:
            return False
        own, *replaced = fence_ids()
        now = self._load(table_uri)
        if now is None or now.transaction_version(own) is not None:
            return False
        if not any(now.transaction_version(app) is not None for app in unread):
            return False
        _, winners = consistent_history(now, since=read_version)
        fenced_by = [info.get(FENCE_ID_KEY) for info in winners]
        return bool(fenced_by) and all(f is not None and f != own and f not in replaced for f in fenced_by)

    def _already_committed(
        self, table: DeltaTable, runner: DeltaRsRunner, app_id: str, app_version: int
    ) -> tuple[int, dict[str, Any] | None] | None:
        """``(version, commitInfo)`` of the earlier commit of this ``(app_id, >= app_version)``, else ``None``."""
        recorded = table.transaction_version(app_id)
        if recorded is not None and recorded >= app_version:
            found = self._search_history(
                table, lambda info: _app_matches(info, app_id, app_version, exact=True)
            )
            return found if found is not None else (table.version(), None)
        if not runner.records_app_transaction:
            # delta-rs 1.6.6 drops app transactions from OPTIMIZE commits; the commit metadata still
            # carries the pair, so a retried OPTIMIZE is recognised from the history instead.
            return self._search_history(
                table, lambda info: _app_matches(info, app_id, app_version, exact=False)
            )
        return None

    def _search_history(self, table: DeltaTable, predicate: Any) -> tuple[int, dict[str, Any]] | None:
        for info in table.history(limit=self.history_scan_limit):
            if predicate(info):
                return int(info["version"]), info
        return None

    def _locate_commit(
        self, table_uri: str, table: DeltaTable | None, commit_id: str, read_version: int
    ) -> tuple[int, dict[str, Any] | None] | None:
        """Find our commit by its unique id; ``None`` when the write committed nothing.

        A commit made from ``read_version`` can only land above it, so exactly the commits since then are
        searched -- right even when other writers committed before or after ours. ``table``, the handle the
        write read, is brought to the newest version (only the commits after its own are read); without
        one (the write created the table) the log is opened.
        """
        latest = self._load(table_uri) if table is None else self._newest(table_uri, table)
        if latest is None:
            return None
        newest = latest.version()
        if newest <= read_version:
            return None
        window = newest - read_version
        if window > self.history_scan_limit:
            log.warning(
                "%d commits landed on %s during the write; searching only the newest %d for commit %s",
                window,
                table_uri,
                self.history_scan_limit,
                commit_id,
            )
            window = self.history_scan_limit
        # history() numbers its rows from the loaded version: read it only while no commit lands, so our
        # commit's version is its own (deltaguard.core.delta_history)
        _, rows = consistent_history(latest, since=max(newest - window, read_version))
        for info in rows:
            if info.get(COMMIT_ID_KEY) == commit_id:
                return int(info["version"]), dict(info)
        return None

    def _landed_despite(
        self,
        exc: Exception,
        table_uri: str,
        commit_id: str,
        before: int | None,
        *,
        table: DeltaTable | None = None,
    ) -> tuple[int, dict[str, Any] | None] | None:
        """Our commit (``(version, commitInfo)``, as :meth:`_locate_commit` finds it), if it is in the log
        although the call failed; else ``None``. The caller reports the commit found: the log is read once.

        The outcome of a commit is unknown when the answer to its log-entry write is lost (an object store
        timeout after the PUT landed): delta-rs then fails the call, or tries the commit again at the next
        version, where a winning commit carrying the same app transaction (the lease's fence id, ADR 0038,
        or the task's idempotency id) refuses it. Either way the log says whether the first attempt landed;
        it is read before the error is believed, so a commit that landed is reported as committed and no
        retry writes it again.

        :param table: the handle the write read (``None``: the write created the table, the log is opened);
            it is brought to the newest version, reading only the commits after its own.
        """
        try:
            found = self._locate_commit(table_uri, table, commit_id, before if before is not None else -1)
        except Exception as read_error:  # the log cannot be read: the error stands
            log.warning("deltaguard: could not look for commit %s after %s: %s", commit_id, exc, read_error)
            return None
        if found is not None:
            log.warning(
                "deltaguard: the write to %s failed (%s) but its commit landed as version %d; reporting it",
                table_uri,
                short_message(exc),
                found[0],
            )
        return found

    def _translate(self, exc: Exception, table_uri: str) -> Exception:
        if isinstance(exc, InvalidWriteError | DeltaConflictError | TableAccessError):
            return exc
        message = short_message(exc)
        if isinstance(exc, CommitFailedError):
            if _UNSUPPORTED.search(message):
                return TableAccessError(f"delta-rs cannot write {table_uri}: {message}")
            if "append-only" in message:
                return InvalidWriteError(f"{table_uri} is append-only: {message}")
            return DeltaConflictError(parse_conflict_kind(message), str(exc), table_uri, self.name)
        if isinstance(exc, TableNotFoundError):
            return TableAccessError(f"table {table_uri} disappeared during the write: {message}")
        if isinstance(exc, SchemaMismatchError) or _BAD_INPUT.search(message):
            return InvalidWriteError(f"delta-rs rejected the write to {table_uri}: {message}")
        return exc


def is_panic(exc: BaseException) -> bool:
    """A Rust panic raised through pyo3 (``pyo3_runtime.PanicException``, not importable until one happens)."""
    kind = type(exc)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"


def _replaced_ids_unread(fence: Any, table: DeltaTable | None) -> tuple[str, ...]:
    """The fence ids of the leases this write's lease replaced that its snapshot ``table`` does not hold."""
    fence_ids = getattr(fence, "fence_app_ids", None)
    if fence_ids is None or table is None:
        return ()
    _, *replaced = fence_ids()
    return tuple(app for app in replaced if table.transaction_version(app) is None)


def _refused_by_engine_fence(error: Exception, fence: Any, table_uri: str) -> CommitFencedError | None:
    """A ``ConcurrentTransaction`` refusal of a writer whose lease is lost: the engine fence refused a
    late commit (ADR 0038), so nothing was committed. ``None`` otherwise (a live lease: a concurrent
    writer that replaced the same lost lease, or a duplicate of this task; the conflict stands)."""
    if not isinstance(error, DeltaConflictError) or error.kind is not ConflictKind.CONCURRENT_TRANSACTION:
        return None
    still_held = getattr(fence, "still_held", None)
    if still_held is None:
        return None
    try:
        reason = still_held()
    except Exception as exc:
        reason = f"its state is unknown ({exc})"
    if reason is None:
        return None
    return CommitFencedError(
        f"write to {table_uri} refused by Delta's conflict checker: its lease was lost ({reason}) and a "
        "writer that replaced it committed first; nothing was committed"
    )


def _app_matches(info: dict[str, Any], app_id: str, app_version: int, *, exact: bool) -> bool:
    if info.get(APP_ID_KEY) != app_id:
        return False
    try:
        recorded = int(info.get(APP_VERSION_KEY, ""))  # absent, as None, raises below: no match
    except (TypeError, ValueError):
        return False
    return recorded == app_version if exact else recorded >= app_version


def _result(
    table_uri: str,
    runner: DeltaRsRunner,
    version: int,
    info: dict[str, Any] | None,
    metrics: dict[str, Any] | None,
    started: float,
    *,
    duplicate: bool = False,
) -> WriteResult:
    """A result for a commit: metrics from the call when it returned any, else from the commit's log entry."""
    commit = info or {}
    return WriteResult(
        table_uri=table_uri,
        version=version,
        operation=str(commit.get("operation", runner.operation)),
        metrics=metrics if metrics else dict(commit.get("operationMetrics") or {}),
        elapsed_s=time.perf_counter() - started,
        duplicate=duplicate,
    )
