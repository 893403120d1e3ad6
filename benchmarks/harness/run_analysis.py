"""What happened in one DAG run of Delta writes: who waited, who overlapped, and whether that was right.

Evidence comes from outside the tasks: task instances (start/end/state/try) from the Airflow REST API,
each task's XCom (engine write time, wait), and the Delta log of each table (commit version, timestamp,
read version, and the ``airflow.*`` / ``deltaguard.lease_id`` commit metadata, which delta-rs writes into the
commitInfo and delta-spark into its ``userMetadata`` JSON). The operations the lease
manager judged are read back from the lease store, so the verdicts checked here are the model's verdicts
on exactly what the tasks asked for. Used by the demo, the end-to-end test and the orchestration benchmark.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from benchmarks.harness.airflow_api import AirflowApi, TaskInstanceRecord


@dataclass(frozen=True)
class Commit:
    """One entry of a Delta table's history.

    :param version: the committed version.
    :param operation: Delta's operation name (``MERGE``, ``WRITE``, ...).
    :param at: commit time.
    :param read_version: the snapshot the write read, when the engine records it (not for blind appends).
    :param info: the whole commitInfo.
    """

    version: int
    operation: str
    at: datetime
    read_version: int | None
    info: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def task_id(self) -> str | None:
        value = self.info.get("airflow.task_id")
        return str(value) if value else None

    @property
    def run_id(self) -> str | None:
        value = self.info.get("airflow.run_id")
        return str(value) if value else None

    @property
    def lease_id(self) -> str | None:
        # delta-rs records it as deltaguard.lease_id, delta-spark's userMetadata as lease_id
        value = self.info.get("deltaguard.lease_id") or self.info.get("lease_id")
        return str(value) if value else None


def table_history(uri: str) -> list[Commit]:
    """The table's whole history, oldest first (empty when the table does not exist)."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(uri):
        return []
    commits = []
    for entry in DeltaTable(uri).history():
        entry = {**_user_metadata(entry), **entry}
        read_version = entry.get("readVersion")
        commits.append(
            Commit(
                version=int(entry["version"]),
                operation=str(entry.get("operation", "")),
                at=datetime.fromtimestamp(int(entry["timestamp"]) / 1000, tz=UTC),
                read_version=None if read_version is None else int(read_version),
                info=dict(entry),
            )
        )
    return sorted(commits, key=lambda c: c.version)


def _user_metadata(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The commit metadata delta-spark carries as one JSON object in ``userMetadata`` (delta-rs writes the
    same keys into the commitInfo itself); empty when there is none or it is not a JSON object."""
    raw = entry.get("userMetadata")
    if not isinstance(raw, str):
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


@dataclass(frozen=True)
class WriteRecord:
    """One write task of a run, with its Airflow and Delta evidence.

    :param task_id: the task.
    :param table: the table URI it wrote (from the Delta commit or its XCom).
    :param ti: the task instance.
    :param commit: the Delta commit it made (``None`` when it committed nothing).
    :param elapsed_s: seconds the engine spent on the write (opening the table to commit), from the XCom.
    :param waited_s: seconds the task waited for its lease (deltaguard operators only).
    :param waited_behind: who it waited for.
    :param decision: the admission line the task logged.
    :param xcom: the task's whole XCom return value.
    """

    task_id: str
    table: str
    ti: TaskInstanceRecord
    commit: Commit | None
    elapsed_s: float | None
    waited_s: float | None = None
    waited_behind: tuple[str, ...] = ()
    decision: str | None = None
    xcom: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def write_end(self) -> datetime | None:
        return self.commit.at if self.commit else None

    @property
    def write_start(self) -> datetime | None:
        """When the write opened the table: its commit time minus the engine's write time."""
        if self.commit is None or self.elapsed_s is None:
            return None
        return self.commit.at - timedelta(seconds=self.elapsed_s)

    @property
    def lease_id(self) -> str | None:
        if self.commit and self.commit.lease_id:
            return self.commit.lease_id
        value = self.xcom.get("lease_id")
        return str(value) if value else None


def collect_writes(
    api: AirflowApi, dag_id: str, run_id: str, tables: Iterable[str]
) -> tuple[list[TaskInstanceRecord], list[WriteRecord]]:
    """Every task instance of the run, and a :class:`WriteRecord` for each task that wrote a table.

    A task is a write when one of ``tables`` has a commit carrying its ``airflow.task_id`` for this run, or
    when its XCom names a ``table_uri`` and ``version`` (writers that record no commit metadata).
    """
    tables = list(tables)
    tis = api.task_instances(dag_id, run_id)
    commits: dict[tuple[str, int], Commit] = {}
    by_task: dict[str, tuple[str, Commit]] = {}
    for uri in tables:
        for commit in table_history(uri):
            commits[(uri, commit.version)] = commit
            if commit.run_id == run_id and commit.task_id:
                by_task[commit.task_id] = (uri, commit)
    records = []
    for ti in tis:
        xcom = api.xcom(dag_id, run_id, ti.task_id)
        xcom = xcom if isinstance(xcom, dict) else {}
        if ti.task_id in by_task:
            uri, commit = by_task[ti.task_id]
        elif xcom.get("table_uri") in tables and xcom.get("version") is not None:
            uri = str(xcom["table_uri"])
            commit = commits.get((uri, int(xcom["version"])))
            if commit is not None and commit.task_id not in (None, ti.task_id):
                # the write committed nothing (e.g. OPTIMIZE with nothing to compact): the version it
                # reports is someone else's commit
                commit = None
        else:
            continue
        elapsed = xcom.get("elapsed_s")
        records.append(
            WriteRecord(
                task_id=ti.task_id,
                table=uri,
                ti=ti,
                commit=commit,
                elapsed_s=None if elapsed is None else float(elapsed),
                waited_s=None if xcom.get("waited_s") is None else float(xcom["waited_s"]),
                waited_behind=tuple(xcom.get("waited_behind") or ()),
                decision=xcom.get("decision"),
                xcom=xcom,
            )
        )
    return tis, sorted(records, key=lambda r: (r.table, r.commit.version if r.commit else -1))


# -- the model's view ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgedWrite:
    """What the lease manager was asked for one write: the operation, table configuration and engine."""

    operation: Any
    config: Any
    profile: Any


def judged_writes(lease_store_url: str, records: Sequence[WriteRecord]) -> dict[str, JudgedWrite]:
    """Read back, per task, the operation its lease request carried for the table it wrote."""
    from deltaguard.engines.deltars.engine import DeltaRsEngine
    from deltaguard.leases import codec
    from deltaguard.leases.open import open_store
    from deltaguard.writes.table_uri import table_key

    judged: dict[str, JudgedWrite] = {}
    store = open_store(lease_store_url)
    try:
        for record in records:
            if not record.lease_id:
                continue
            row = store.read_request(record.lease_id)
            if row is None:
                continue
            for claim in json.loads(row.payload)["claims"]:
                if table_key(claim["uri"]) != table_key(record.table):
                    continue
                config = (
                    codec.config_from_json(claim["config"])
                    if claim.get("config")
                    else DeltaRsEngine().table_config(record.table)
                )
                judged[record.task_id] = JudgedWrite(
                    operation=codec.operation_from_json(claim["operation"]),
                    config=config,
                    profile=codec.profile_from_json(claim["profile"]),
                )
    finally:
        store.close()
    return judged


@dataclass(frozen=True)
class PairCheck:
    """Two writes on one table, what the model says about them, and what really happened.

    :param first: the task that committed first.
    :param second: the other task.
    :param table: the table.
    :param compatible: the conflict model's pairwise verdict.
    :param ordered: the DAG orders them (one is upstream of the other), so they cannot overlap anyway.
    :param overlapped: their write intervals intersected in time.
    :param snapshot_overlap: neither read the other's commit (``None`` when the log cannot tell).
    :param reason: the model's reason when they conflict.
    """

    first: str
    second: str
    table: str
    compatible: bool
    ordered: bool
    overlapped: bool
    snapshot_overlap: bool | None
    reason: str = ""


def upstream_closure(downstream: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    """For each task, every task that must finish before it (transitively)."""
    parents: dict[str, set[str]] = {task: set() for task in downstream}
    for task, children in downstream.items():
        for child in children:
            parents.setdefault(child, set()).add(task)
    closure: dict[str, set[str]] = {}

    def visit(task: str) -> set[str]:
        if task not in closure:
            closure[task] = set()
            for parent in parents.get(task, ()):
                closure[task] |= {parent, *visit(parent)}
        return closure[task]

    for task in parents:
        visit(task)
    return closure


def pair_checks(
    records: Sequence[WriteRecord], judged: Mapping[str, JudgedWrite], upstream: Mapping[str, set[str]]
) -> list[PairCheck]:
    """Every pair of writes on the same table that both committed, with the model's verdict."""
    from deltaguard.core import pair_verdict

    checks = []
    committed = [r for r in records if r.commit is not None and r.task_id in judged]
    for i, a in enumerate(committed):
        for b in committed[i + 1 :]:
            if a.table != b.table:
                continue
            first, second = (a, b) if a.commit.version < b.commit.version else (b, a)  # type: ignore[union-attr]
            ja, jb = judged[first.task_id], judged[second.task_id]
            verdict = pair_verdict(ja.operation, jb.operation, jb.config, jb.profile)
            overlapped = bool(
                first.write_start
                and second.write_start
                and first.write_start < second.write_end  # type: ignore[operator]
                and second.write_start < first.write_end  # type: ignore[operator]
            )
            read = second.commit.read_version  # type: ignore[union-attr]
            checks.append(
                PairCheck(
                    first=first.task_id,
                    second=second.task_id,
                    table=first.table,
                    compatible=not verdict.conflict,
                    ordered=first.task_id in upstream.get(second.task_id, set())
                    or second.task_id in upstream.get(first.task_id, set()),
                    overlapped=overlapped,
                    # the later commit read a snapshot older than the earlier commit: true concurrency
                    snapshot_overlap=None if read is None else read < first.commit.version,  # type: ignore[union-attr]
                    reason=verdict.reason,
                )
            )
    return checks


# -- presentation ----------------------------------------------------------------------------------------


def _clock(moment: datetime | None, origin: datetime) -> str:
    return "-" if moment is None else f"{(moment - origin).total_seconds():6.1f}"


def format_writes(records: Sequence[WriteRecord], origin: datetime) -> str:
    """A per-task table: admission, wait, write interval (seconds since ``origin``), committed version."""
    lines = [
        f"{'task':<26} {'table':<11} {'state':<8} {'try':>3} {'start':>6} {'write':>6} {'commit':>6} "
        f"{'end':>6} {'ver':>4}  admission"
    ]
    for r in sorted(records, key=lambda r: (r.table, r.ti.start_date or origin)):
        if r.waited_s is None:
            admission = "(no lease: plain task)"
        elif r.waited_behind:
            admission = f"waited {r.waited_s:.0f} s behind {', '.join(r.waited_behind)}"
        else:
            admission = "granted at once"
        lines.append(
            f"{r.task_id:<26} {r.table.rstrip('/').rsplit('/', 1)[-1]:<11} {r.ti.state or '-':<8} "
            f"{r.ti.try_number:>3} {_clock(r.ti.start_date, origin)} {_clock(r.write_start, origin)} "
            f"{_clock(r.write_end, origin)} {_clock(r.ti.end_date, origin)} "
            f"{r.commit.version if r.commit else '-':>4}  {admission}"
        )
    return "\n".join(lines)


def format_pairs(checks: Sequence[PairCheck]) -> str:
    lines = []
    for c in checks:
        verdict = "compatible" if c.compatible else "CONFLICT  "
        happened = (
            "overlapped" if c.overlapped else ("ordered by the DAG" if c.ordered else "one after the other")
        )
        lines.append(f"  {verdict} {c.first} / {c.second}: {happened}")
    return "\n".join(lines)


def run_makespan(tis: Sequence[TaskInstanceRecord]) -> float:
    """Seconds from the first task start to the last task end."""
    starts = [t.start_date for t in tis if t.start_date]
    ends = [t.end_date for t in tis if t.end_date]
    if not starts or not ends:
        return 0.0
    return (max(ends) - min(starts)).total_seconds()


# -- the commit order the Delta logs show ----------------------------------------------------------------


@dataclass(frozen=True)
class LogOrder:
    """The order in which a run's writes took effect, read from the tables' Delta logs.

    :param order: write ids, each table's in commit-version order (tables one after another: writes on
        different tables do not affect each other); a write that committed nothing comes right after the
        version it read.
    :param committed: write id -> (table name, version) of its commit.
    :param duplicates: writes that committed more than once.
    :param misplaced: writes committed to a table that is not theirs.
    """

    order: tuple[str, ...]
    committed: Mapping[str, tuple[str, int]]
    duplicates: tuple[str, ...] = ()
    misplaced: tuple[str, ...] = ()


def delta_log_order(
    tables: Mapping[str, str],
    write_tables: Mapping[str, str],
    no_ops: Mapping[str, int],
    key: str,
) -> LogOrder:
    """Read every table's history and order the writes by the commits carrying their id under ``key``.

    :param tables: table name -> URI.
    :param write_tables: write id -> the table name it writes (the plan).
    :param no_ops: write id -> the version it read, for writes that ran and committed nothing (delta-rs
        commits nothing for a DELETE, UPDATE, MERGE or OPTIMIZE that changes nothing).
    :param key: the commitInfo key naming a commit's write.
    """
    order: list[str] = []
    committed: dict[str, tuple[str, int]] = {}
    duplicates: set[str] = set()
    misplaced: set[str] = set()
    for name, uri in tables.items():
        history = [(c.version, str(c.info[key])) for c in table_history(uri) if c.info.get(key)]
        waiting = sorted(
            (version, write) for write, version in no_ops.items() if write_tables.get(write) == name
        )
        for version, write in history:
            while waiting and waiting[0][0] < version:
                order.append(waiting.pop(0)[1])
            if write in committed:
                duplicates.add(write)
                continue
            if write_tables.get(write) != name:
                misplaced.add(write)
            committed[write] = (name, version)
            order.append(write)
        order.extend(write for _, write in waiting)
    return LogOrder(tuple(order), committed, tuple(sorted(duplicates)), tuple(sorted(misplaced)))


# -- commits the engine should have refused ----------------------------------------------------------------


@dataclass(frozen=True)
class DoubleRemove:
    """A data file removed by two commits: both rewrote the same rows, so whatever each added is there twice.

    Delta's conflict checks exist to refuse the second of these (``ConcurrentDeleteDelete`` in the Databricks
    page "Isolation levels and write conflicts"); finding one in a log is direct evidence that the engine let
    a conflicting pair commit, independent of any replay.

    :param path: the file's path in the table.
    :param versions: the commits that removed it, oldest first.
    """

    path: str
    versions: tuple[int, ...]


def files_removed_twice(uri: str) -> list[DoubleRemove]:
    """Every file of a local table's Delta log that more than one commit removed.

    Reads the JSON commits themselves (the benchmark's tables are local and short-lived, so no checkpoint has
    replaced them); an empty list when the table has no log.
    """
    from pathlib import Path

    removed: dict[str, list[int]] = {}
    log = Path(uri.removeprefix("file://")) / "_delta_log"
    for commit in sorted(log.glob("*.json")) if log.is_dir() else ():
        version = int(commit.stem)
        for line in commit.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "remove" in action:
                removed.setdefault(action["remove"]["path"], []).append(version)
    return [DoubleRemove(path, tuple(v)) for path, v in sorted(removed.items()) if len(v) > 1]
