"""After a run: read the Delta logs, the decision log and Airflow's records, and count what went wrong.

Nothing here trusts the tasks' own word. The checks:

- **overlaps**: every commit made under a lease lies inside that lease's held interval (grant to release,
  expiry or abandon: a *late* commit, after the lease ended, counts), and no two writes the conflict model
  calls conflicting held their leases, or wrote, at the same time;
- **lost / duplicated rows**: each table's rows against an independent plain-Python computation from the
  example's inputs and the writes the Delta log shows committed (in commit order);
- **silent successes**: a write task Airflow calls successful that committed nothing;
  **unexplained failures**: a failed task whose log and the scheduler's log name no cause;
- **missing fences**: when the freeze fault froze a PySpark MERGE's holder with Spark in the run and brought
  a conflicting writer, the decision log must show the store's fence decision on the frozen lease
  (``remote_fenced``, followed by a grant of the table to another request, or ``remote_unfenced`` with its
  reason): the store-side Connect fence ran under the real scheduler (ADR 0033);
- **orphans**: a lease still held or a request still queued, a task still deferred or running, a trigger
  row left in Airflow's database. Once every task ended, a lease or queue row left in the store is an orphan
  whether or not it expired: a holder that ended releases what it holds, and an expired lease nobody reclaimed
  still shows as held (and, carrying Spark Connect work, blocks the table until a fence). The one exception
  is a row whose task Airflow failed on a heartbeat timeout: its process died (a SIGKILLed worker) and could
  release nothing; once expired, the next request on its table reclaims it. Such rows are listed
  (``dead_holders``), not counted, unless they still carry server-side work awaiting a fence.
"""

from __future__ import annotations

import importlib.util
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks.harness.airflow_runner import default_dags_folder
from benchmarks.harness.run_analysis import Commit, table_history


def example_pipeline() -> ModuleType:
    """``dags_examples/example_pipeline.py``, loaded under a private name (the inputs only)."""
    spec = importlib.util.spec_from_file_location(
        "cluster_example_pipeline", default_dags_folder() / "example_pipeline.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Lease:
    request_id: str
    uri: str
    owner_key: str
    granted_at: float
    ended_at: float | None  # None: never released, expired or abandoned
    end_kind: str | None
    #: the grant's and the end's places in the store's log (``DecisionRow.seq``): what orders decisions on
    #: one table, where the stamps (taken when a store call starts) can cross
    granted_seq: int | None = None
    ended_seq: int | None = None


@dataclass
class AuditReport:
    overlaps: list[str] = field(default_factory=list)
    late_commits: list[str] = field(default_factory=list)
    lost_rows: list[str] = field(default_factory=list)
    duplicated_rows: list[str] = field(default_factory=list)
    silent_successes: list[str] = field(default_factory=list)
    unexplained_failures: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    unlogged: list[str] = field(default_factory=list)
    missing_fences: list[str] = field(default_factory=list)
    #: the fence decisions on the frozen holder's lease (the freeze fault's, with Spark)
    fence: list[str] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    #: every expired lease: its task, whether it carried a recorded server-side work handle, how it was fenced
    expired: list[dict[str, Any]] = field(default_factory=list)
    #: expired rows of tasks whose process died (failed on a heartbeat timeout), left for the next request
    dead_holders: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, int]:
        return {
            "overlaps": len(self.overlaps) + len(self.late_commits),
            "lost_rows": len(self.lost_rows),
            "duplicated_rows": len(self.duplicated_rows),
            "silent_successes": len(self.silent_successes),
            "unexplained_failures": len(self.unexplained_failures),
            "orphans": len(self.orphans),
            "unlogged_decisions": len(self.unlogged),
            "missing_fences": len(self.missing_fences),
        }

    @property
    def passed(self) -> bool:
        return not any(self.figures().values())

    def details(self) -> dict[str, list[Any]]:
        return {
            "overlaps": self.overlaps,
            "late_commits": self.late_commits,
            "lost_rows": self.lost_rows[:50],
            "duplicated_rows": self.duplicated_rows[:50],
            "silent_successes": self.silent_successes,
            "unexplained_failures": self.unexplained_failures,
            "orphans": self.orphans,
            "unlogged_decisions": self.unlogged,
            "missing_fences": self.missing_fences,
            "frozen_holder_fence": self.fence,
            "expired_leases": self.expired,
            "dead_holders": self.dead_holders,
        }


# -- the decision log --------------------------------------------------------------------------------


def read_decisions(store_urls: Iterable[str]) -> list[Any]:
    """Every decision-log row of every store, each store's in the order of its log (its sequence), not of
    the stamps: a release and the grant it allowed can be stamped in the other order (a call's stamp is
    taken when it starts)."""
    from deltaguard.leases.open import open_store

    rows: list[Any] = []
    for url in store_urls:
        store = open_store(url)
        try:
            rows += sorted(store.decisions(limit=100_000), key=_log_place)
        finally:
            store.close()
    return rows


def _log_place(row: Any) -> tuple[float, float]:
    seq = getattr(row, "seq", None)
    return (seq, 0.0) if seq is not None else (float("inf"), row.at)


def leases_from(decisions: Sequence[Any]) -> dict[tuple[str, str], Lease]:
    """``(request id, table) -> Lease`` from grants and the release / expiry / abandon that ended them."""
    granted: dict[tuple[str, str], Any] = {}
    ended: dict[tuple[str, str], Any] = {}
    for row in decisions:
        key = (row.request_id, row.uri)
        if row.kind == "grant" and key not in granted:
            granted[key] = row
        elif row.kind in ("release", "expiry", "abandon") and key not in ended:
            ended[key] = row
    return {
        key: Lease(
            key[0],
            key[1],
            row.owner_key,
            row.at,
            ended[key].at if key in ended else None,
            ended[key].kind if key in ended else None,
            getattr(row, "seq", None),
            getattr(ended[key], "seq", None) if key in ended else None,
        )
        for key, row in granted.items()
    }


def held_at_once(a: Lease, b: Lease) -> bool:
    """Whether two leases on one table were held at the same time.

    By the store's log order when both carry it (one store: decisions on a table are logged under its lock,
    in the order they were made); by the stamps only for rows without it.
    """
    if a.granted_seq is not None and b.granted_seq is not None:
        a_end = a.ended_seq if a.ended_seq is not None else float("inf")
        b_end = b.ended_seq if b.ended_seq is not None else float("inf")
        return a.granted_seq < b_end and b.granted_seq < a_end
    a_end_at = a.ended_at if a.ended_at is not None else float("inf")
    b_end_at = b.ended_at if b.ended_at is not None else float("inf")
    return a.granted_at < b_end_at and b.granted_at < a_end_at


# -- expected rows -------------------------------------------------------------------------------------


def _task_kind(task_id: str) -> str:
    return task_id.split("_", 1)[0]


def expected_tables(
    pipeline: ModuleType,
    first_day: str,
    commits: Mapping[str, Sequence[Commit]],
    day_of_run: Mapping[str, str],
) -> dict[str, list[dict[str, Any]]]:
    """Each table's rows computed in plain Python from the seeds and the writes that committed, in order."""
    p = pipeline
    sales: dict[tuple[Any, ...], dict[str, Any]] = {
        (r["date"], r["country"], r["sku"]): r for r in p.seed_sales_rows(first_day)
    }
    events: list[dict[str, Any]] = []
    customers: dict[int, dict[str, Any]] = {r["id"]: dict(r) for r in p.seed_customer_rows()}
    has_loyalty = False
    for table, history in commits.items():
        for commit in history:
            task, run = commit.task_id, commit.run_id
            if not task or run not in day_of_run:
                continue
            day = day_of_run[run]
            if table == "sales_fact" and task.startswith("merge_sales_"):
                for row in p.sales_rows(day, task.rsplit("_", 1)[1].upper()):
                    sales[(row["date"], row["country"], row["sku"])] = row
            elif table == "events" and task.startswith("log_events_"):
                events += p.event_rows(day, task[len("log_events_") :])
            elif table == "customers":
                if task == "upsert_customers":
                    for row in p.customer_change_rows(day):
                        if row["id"] in customers:
                            customers[row["id"]]["name"] = row["name"]
                        else:
                            customers[row["id"]] = dict(
                                row, **({"loyalty_points": None} if has_loyalty else {})
                            )
                elif task == "update_customer_tiers":
                    for row in customers.values():
                        if row["lifetime_value"] > 1000:
                            row["tier"] = "gold"
                elif task == "delete_closed_customers":
                    customers = {i: r for i, r in customers.items() if r["status"] != "closed"}
                elif task == "add_loyalty_column":
                    has_loyalty = True
                    for row in customers.values():
                        row.setdefault("loyalty_points", None)
    return {"sales_fact": list(sales.values()), "events": events, "customers": list(customers.values())}


def compare_rows(
    name: str, actual: Sequence[Mapping[str, Any]], expected: Sequence[Mapping[str, Any]]
) -> tuple[list[str], list[str]]:
    """(lost, duplicated): rows expected but missing or different, and rows present more often than expected."""

    def canon(row: Mapping[str, Any]) -> str:
        return json.dumps({k: row.get(k) for k in sorted(row)}, sort_keys=True, default=str)

    want, have = Counter(canon(r) for r in expected), Counter(canon(r) for r in actual)
    lost = [f"{name}: {row}" for row, n in (want - have).items() for _ in range(n)]
    extra = [f"{name}: {row}" for row, n in (have - want).items() for _ in range(n)]
    return lost, extra


# -- the audit ----------------------------------------------------------------------------------------

ERROR_NAME = re.compile(r"\b([A-Z][A-Za-z]+(?:Error|Exception|Timeout))\b")


def failure_cause(log_dir: Path, dag_id: str, run_id: str, task_id: str, scheduler_log: str) -> str | None:
    """The cause a failed task's own logs or the scheduler's log name, or ``None`` when nothing does."""
    task_dir = log_dir / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}"
    for log in sorted(task_dir.glob("*.log*")):
        for line in log.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and (
                record.get("level") in ("error", "critical") or "error_detail" in record
            ):
                text = json.dumps(record)
                match = ERROR_NAME.search(text)
                if match:
                    return match.group(1)
                return str(record.get("event", "error"))[:200]
    for line in scheduler_log.splitlines():
        if (
            task_id in line
            and run_id in line
            and re.search(r"heartbeat|zombie|killed|externally|failed", line, re.I)
        ):
            return line.strip()[-300:]
    return None


def audit(
    *,
    tables: Mapping[str, str],
    day_of_run: Mapping[str, str],
    first_day: str,
    task_instances: Mapping[str, Sequence[Any]],
    store_urls: Sequence[str],
    conflicting: Any,
    log_dir: Path,
    scheduler_log: str,
    dag_id: str,
    airflow_leftovers: Sequence[str] = (),
    xcoms: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    dag_of_run: Mapping[str, str] | None = None,
    external_holds: Mapping[str, tuple[float, float]] | None = None,
    fence_expected: bool = False,
    frozen_holders: Sequence[tuple[str, str]] = (),
) -> AuditReport:
    """Judge one variant's runs (one DAG, several runs, one set of tables).

    :param tables: ``name -> uri`` of the variant's three tables.
    :param day_of_run: ``run_id -> business date``.
    :param first_day: the date the tables were seeded for.
    :param task_instances: ``run_id -> task instances`` (``TaskInstanceRecord``).
    :param store_urls: every lease store the run used.
    :param conflicting: ``(commit_a, commit_b, uri) -> bool``: whether the model calls the two writes conflicting.
    :param log_dir: Airflow's log folder (task logs).
    :param scheduler_log: the scheduler's log text (heartbeat-timeout failures are named there).
    :param airflow_leftovers: deferred/running task instances or trigger rows found after the run.
    :param xcoms: ``(run_id, task_id) -> XCom`` (a write that reports ``committed: false`` on purpose).
    :param dag_of_run: ``run_id -> dag_id`` for runs of other DAGs than ``dag_id`` writing the same tables
        (the freeze fault's conflicting writer).
    :param external_holds: ``table name -> (granted, released)`` of exclusive leases held from outside
        Airflow (:mod:`benchmarks.cluster.holder`): a commit of the table in between is an overlap.
    :param fence_expected: the freeze fault ran with Spark: require the fence decision (:func:`fence_checks`).
    :param frozen_holders: ``(run_id, task_id)`` of every PySpark MERGE it froze holding its lease (none:
        it found none, which fails the check when ``fence_expected``).
    """
    report = AuditReport()
    decisions = read_decisions(store_urls)
    leases = leases_from(decisions)
    histories = {name: table_history(uri) for name, uri in tables.items()}
    ours = {name: [c for c in h if c.run_id in day_of_run] for name, h in histories.items()}
    report.counts = {
        "writes": sum(len(v) for v in ours.values()),
        "decisions": len(decisions),
        "grants": sum(1 for d in decisions if d.kind == "grant"),
        "waits": sum(1 for d in decisions if d.kind == "wait"),
        "releases": sum(1 for d in decisions if d.kind == "release"),
        "expiries": sum(1 for d in decisions if d.kind == "expiry"),
        "remote_fenced": sum(1 for d in decisions if d.kind == "remote_fenced"),
        "remote_unfenced": sum(1 for d in decisions if d.kind == "remote_unfenced"),
    }

    # overlaps and late commits
    for name, commits in ours.items():
        overlaps, late, unlogged = lease_checks(name, tables[name], commits, leases, conflicting)
        report.overlaps += overlaps
        report.late_commits += late
        report.unlogged += unlogged
        if name in (external_holds or {}):
            report.overlaps += held_overlaps(name, commits, (external_holds or {})[name])
    if fence_expected:
        report.missing_fences, report.fence = fence_checks(decisions, frozen_holders)

    expired_ids = {d.request_id for d in decisions if d.kind == "expiry"}
    payloads = request_payloads(store_urls, expired_ids) if expired_ids else {}
    report.expired = expired_leases(decisions, payloads, tables.values(), ours)
    for lease in report.expired:
        if lease["commits_after_end"]:
            # counted once already among the late commits; said here with how the hand-over was fenced
            report.failures[f"late commit of {lease['lease']}"] = (
                f"after an expiry fenced as {lease['fence']}: {', '.join(lease['commits_after_end'])}"
            )

    # rows
    expected = expected_tables(example_pipeline(), first_day, ours, day_of_run)
    from deltalake import DeltaTable

    for name, uri in tables.items():
        actual = DeltaTable(uri).to_pyarrow_table().to_pylist() if histories[name] else []
        lost, extra = compare_rows(name, actual, expected[name])
        report.lost_rows += lost
        report.duplicated_rows += extra

    # task outcomes
    committed = {(c.run_id, c.task_id) for v in ours.values() for c in v}
    for run_id, tis in task_instances.items():
        for ti in tis:
            key = f"{ti.task_id}@{run_id}"
            is_write = ti.task_id != "setup_tables"
            if ti.state == "success" and is_write and (run_id, ti.task_id) not in committed:
                xcom = (xcoms or {}).get((run_id, ti.task_id)) or {}
                # a write with nothing to do (OPTIMIZE with nothing to compact, a DELETE whose rows an earlier
                # run removed) commits nothing and reports the version it left; the row check still judges
                # the table, so only a success that reports no version at all is silent
                if xcom.get("version") is None:
                    report.silent_successes.append(key)
                else:
                    report.failures[f"{key} (no-op)"] = f"committed nothing, table at v{xcom['version']}"
            elif ti.state in ("failed", "up_for_retry"):
                cause = failure_cause(
                    log_dir, (dag_of_run or {}).get(run_id, dag_id), run_id, ti.task_id, scheduler_log
                )
                if cause is None:
                    report.unexplained_failures.append(key)
                else:
                    report.failures[key] = cause
            elif ti.state not in ("success", "upstream_failed", "skipped", "removed"):
                report.orphans.append(f"task {key} left in state {ti.state}")

    # orphans in the store
    died = {
        (run_id, ti.task_id)
        for run_id, tis in task_instances.items()
        for ti in tis
        if ti.state == "failed" and "heartbeat" in report.failures.get(f"{ti.task_id}@{run_id}", "").lower()
    }
    orphans, report.dead_holders = store_orphans(store_urls, tables.values(), died)
    report.orphans += orphans
    report.orphans += list(airflow_leftovers)
    return report


def held_overlaps(name: str, commits: Sequence[Commit], held: tuple[float, float]) -> list[str]:
    """Commits of table ``name`` made while a writer outside Airflow held an exclusive lease on it.

    The same second of slack as :func:`lease_checks` (commit timestamps are milliseconds of another clock).
    """
    granted, released = held
    return [
        f"{name}: {c.task_id}@{c.run_id} (v{c.version}) committed at {c.at.timestamp():.1f} while the "
        f"exclusive external lease was held [{granted:.1f}, {released:.1f}]"
        for c in commits
        if granted + 1.0 < c.at.timestamp() < released - 1.0
    ]


#: the decision-log kinds of a fence's outcome (ADR 0033)
_FENCE_KINDS = ("remote_fenced", "remote_unfenced", "remote_interrupted")


def fence_checks(decisions: Sequence[Any], holders: Sequence[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """:func:`fence_check` of every frozen holder (none: the Connect fence was not exercised)."""
    if not holders:
        return [
            "the freeze found no PySpark MERGE holding its lease: the Connect fence was not exercised"
        ], []
    problems: list[str] = []
    log: list[str] = []
    for holder in holders:
        p, entries = fence_check(decisions, holder)
        problems += p
        log += [f"{holder[1]}@{holder[0]}: {e}" for e in entries]
    return problems, log


def fence_check(decisions: Sequence[Any], holder: tuple[str, str] | None) -> tuple[list[str], list[str]]:
    """Whether the store fenced the frozen holder's lease for the conflicting writer: (problems, fence log).

    Passes when the decision log holds, for a lease of ``holder`` (``(run_id, task_id)``, matched on the
    owner key), a ``remote_fenced`` followed by a ``grant`` of the same table to another request, or a
    ``remote_unfenced`` that names its reason (the lease then stays held: no hand-over, and that is sound).
    An ``expiry`` of that lease logged before any fence decision is a reclaim without a fence.

    :param decisions: the decision log, oldest first.
    :param holder: the frozen holder; ``None`` when the freeze found no PySpark MERGE holding its lease.
    """
    if holder is None:
        return [
            "the freeze found no PySpark MERGE holding its lease: the Connect fence was not exercised"
        ], []
    run_id, task_id = holder

    def mine(row: Any) -> bool:
        try:
            owner = json.loads(row.owner_key)
        except ValueError:
            return False
        return isinstance(owner, dict) and owner.get("run_id") == run_id and owner.get("task_id") == task_id

    leases = {(d.request_id, d.uri) for d in decisions if d.kind == "grant" and mine(d)}
    if not leases:
        return [f"no grant of {task_id}@{run_id} in the decision log"], []
    problems: list[str] = []
    log: list[str] = []
    for lease_id, uri in sorted(leases):
        own = [d for d in decisions if d.request_id == lease_id and _same(d.uri, uri)]
        log += [f"{d.kind} at {d.at:.1f}: {d.detail[:300]}" for d in own if d.kind != "grant"]
        fences = [d for d in own if d.kind in _FENCE_KINDS]
        first_fence = fences[0].at if fences else float("inf")
        if any(d.kind == "expiry" and d.at < first_fence for d in own):
            problems.append(
                f"lease {lease_id} of {task_id}@{run_id} expired and was reclaimed without a fence"
            )
        elif not fences:
            problems.append(
                f"no fence decision on lease {lease_id} of {task_id}@{run_id}: no conflicting writer asked "
                "for the table while it was frozen past its lease"
            )
        elif any(f.kind in ("remote_fenced", "remote_interrupted") for f in fences):
            ended = next(f for f in fences if f.kind in ("remote_fenced", "remote_interrupted"))
            handed = [
                d
                for d in decisions
                if d.kind == "grant" and _same(d.uri, uri) and d.request_id != lease_id and d.at >= ended.at
            ]
            if not handed:
                problems.append(
                    f"lease {lease_id} was fenced but the table was never granted to another writer"
                )
            else:
                log.append(f"granted to {handed[0].request_id} at {handed[0].at:.1f} ({handed[0].owner_key})")
        elif not fences[0].detail.strip():
            problems.append(f"remote_unfenced on lease {lease_id} without a reason")
    return problems, log


def store_orphans(
    store_urls: Sequence[str], uris: Iterable[str], died: set[tuple[str, str]], now: float | None = None
) -> tuple[list[str], list[str]]:
    """Lease and queue rows left on ``uris`` after every task ended: (orphans, rows of dead holders).

    Every row left is an orphan, expired or not (the module's docstring says why), except an expired row of
    a task in ``died`` that carries no server-side work awaiting a fence.

    :param died: ``(run_id, task_id)`` of tasks Airflow failed on a heartbeat timeout.
    :param now: the time rows are judged at (default: now).
    """
    import time

    from deltaguard.leases.open import open_store
    from deltaguard.leases.remote_work import handles_in

    now = time.time() if now is None else now
    orphans: list[str] = []
    dead: list[str] = []
    for url in store_urls:
        store = open_store(url)
        try:
            for uri in uris:
                rows = [("lease", r.lease_id, r.owner_key, r.expires_at) for r in store.list_leases(uri)]
                rows += [
                    ("request", r.request_id, r.owner_key, r.expires_at) for r in store.list_waiters(uri)
                ]
                for kind, row_id, owner_key, expires_at in rows:
                    owner = json.loads(owner_key)
                    task = (str(owner.get("run_id", "")), str(owner.get("task_id", "")))
                    if expires_at > now:
                        state = "still held" if kind == "lease" else "still queued"
                        orphans.append(f"{kind} {row_id} of {task[1]}@{task[0]} on {uri} {state}")
                        continue
                    request = store.read_request(row_id)
                    try:
                        handles = handles_in(request.payload) if request is not None else []
                    except ValueError:
                        handles = [{"kind": "unreadable"}]
                    left = (
                        f"{kind} {row_id} of {task[1]}@{task[0]} on {uri} expired {now - expires_at:.0f} s "
                        "before the audit and was never reclaimed"
                    )
                    if handles:
                        orphans.append(f"{left}, awaiting a fence of its server-side work")
                    elif task in died:
                        dead.append(f"{left} (its task failed on a heartbeat timeout)")
                    else:
                        orphans.append(f"{left}, though its task ended")
        finally:
            store.close()
    return orphans, dead


def request_payloads(store_urls: Sequence[str], lease_ids: Iterable[str]) -> dict[str, str]:
    """``lease id -> stored request payload`` (where fence handles are recorded) from every store."""
    from deltaguard.leases.open import open_store

    payloads: dict[str, str] = {}
    for url in store_urls:
        store = open_store(url)
        try:
            for lease_id in set(lease_ids) - set(payloads):
                row = store.read_request(lease_id)
                if row is not None:
                    payloads[lease_id] = row.payload
        finally:
            store.close()
    return payloads


def expired_leases(
    decisions: Sequence[Any],
    payloads: Mapping[str, str],
    uris: Iterable[str],
    commits: Mapping[str, Sequence[Commit]],
) -> list[dict[str, Any]]:
    """Every lease on ``uris`` the store expired, with what its holder recorded and how it was handed over.

    ``remote_handles`` are the server-side work handles (ADR 0033) its request still carries (a holder drops
    one when it saw that work end); ``fence`` the decision log's fence entries for it, in order:
    ``remote_fenced`` (the Connect server confirmed the work ended or was interrupted, then the hand-over) or
    ``remote_unfenced`` (not confirmed: the lease stays held); ``none`` when none was needed (no handle).
    ``commits_after_end``: commits made under it after the expiry (late commits, already failures).
    """
    from deltaguard.leases.remote_work import handles_in

    wanted = list(uris)
    expiries = [d for d in decisions if d.kind == "expiry" and any(_same(d.uri, u) for u in wanted)]
    if not expiries:
        return []
    fences: dict[str, list[Any]] = {}
    awaiting: set[str] = set()
    for d in decisions:
        if d.kind in _FENCE_KINDS:
            fences.setdefault(d.request_id, []).append(d)
        elif d.kind == "release_awaiting_fence":
            awaiting.add(d.request_id)
    found = []
    for d in expiries:
        try:
            handles = handles_in(payloads.get(d.request_id) or "{}")
        except ValueError:
            handles = [{"kind": "unknown"}]
        mine = [c for cs in commits.values() for c in cs if c.lease_id == d.request_id]
        fenced = fences.get(d.request_id, [])
        found.append(
            {
                "lease": d.request_id,
                "table": d.uri,
                "owner": d.owner_key,
                "tasks": sorted({f"{c.task_id}@{c.run_id}" for c in mine}),
                "expired_at": d.at,
                "remote_handles": [{k: h.get(k) for k in ("kind", "tag")} for h in handles],
                "release_awaiting_fence": d.request_id in awaiting,
                "fence": ", ".join(f"{f.kind} at {f.at:.1f}: {f.detail[:300]}" for f in fenced) or "none",
                "handed_over_after": _handed_over_after(d, fenced, handles),
                "commits_after_end": [
                    f"v{c.version} {c.task_id}@{c.run_id}" for c in mine if c.at.timestamp() > d.at + 1.0
                ],
            }
        )
    return found


def _handed_over_after(expiry: Any, fenced: Sequence[Any], handles: Sequence[Any]) -> str:
    """What let an expired lease go (ADR 0033, "When a lease whose fence failed is handed over")."""
    from deltaguard.leases.remote_work import SERVER_WORK_INTERRUPTED

    try:
        said = json.loads(expiry.detail).get("server_work")
    except (TypeError, ValueError, AttributeError):
        said = None
    if said == "fenced" or any(f.kind == "remote_fenced" and f.at <= expiry.at + 1.0 for f in fenced):
        return "remote_fenced"
    if said == SERVER_WORK_INTERRUPTED or any(f.kind == "remote_interrupted" for f in fenced):
        # the server closed the holder's session (interrupting its operations) and the grace passed: a
        # hand-over of its own, named so, never counted as a confirmed fence
        return "remote_interrupted"
    if fenced and not handles:
        return "remote_unfenced, then its holder saw the work end and dropped the handle"
    if fenced:
        return "remote_unfenced"  # a hand-over no rule allows: the audit's expired list shows it
    return "no fence"


def lease_checks(
    name: str, uri: str, commits: Sequence[Commit], leases: Mapping[tuple[str, str], Lease], conflicting: Any
) -> tuple[list[str], list[str], list[str]]:
    """One table's commits against the leases they were made under.

    :return: (conflicting writes that held leases at once or read a snapshot before the other's commit,
        commits outside their lease's held interval, commits or leases the decision log does not account for).
    """
    overlaps: list[str] = []
    late: list[str] = []
    unlogged: list[str] = []
    held: list[tuple[Commit, Lease]] = []
    for commit in commits:
        lease = next(
            (found for (rid, u), found in leases.items() if rid == commit.lease_id and _same(u, uri)),
            None,
        )
        label = f"{name} v{commit.version} {commit.task_id}@{commit.run_id}"
        if lease is None:
            unlogged.append(f"{label}: no grant for lease {commit.lease_id} in the decision log")
            continue
        ts = commit.at.timestamp()
        # the commit time is the log entry's timestamp (ms); a second of slack for clock granularity. The
        # lease's end is when the store recorded it (release, or the reclaim of an expired lease): the
        # earliest moment another writer could be granted the table.
        if ts < lease.granted_at - 1.0 or (lease.ended_at is not None and ts > lease.ended_at + 1.0):
            late.append(
                f"{label} at {ts:.1f} outside lease {lease.request_id} [{lease.granted_at:.1f}, "
                f"{lease.ended_at} {lease.end_kind}]"
            )
        if lease.end_kind is None:
            unlogged.append(f"{label}: lease {lease.request_id} has no release/expiry in the log")
        held.append((commit, lease))
    for i, (a, la) in enumerate(held):
        for b, lb in held[i + 1 :]:
            if not conflicting(a, b, uri):
                continue
            first, second = (a, b) if a.version < b.version else (b, a)
            if held_at_once(la, lb):
                overlaps.append(
                    f"{name}: {a.task_id}@{a.run_id} (v{a.version}) and {b.task_id}@{b.run_id} (v{b.version}) "
                    "conflict but held leases at once"
                )
            elif second.read_version is not None and second.read_version < first.version:
                overlaps.append(
                    f"{name}: {second.task_id}@{second.run_id} read v{second.read_version} before the "
                    f"conflicting v{first.version}"
                )
    return overlaps, late, unlogged


def _same(a: str, b: str) -> bool:
    from deltaguard.writes.table_uri import table_key

    return table_key(a) == table_key(b)
