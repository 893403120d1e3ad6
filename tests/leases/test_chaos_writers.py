"""Chaos: writer processes killed (SIGKILL) and frozen (SIGSTOP/SIGCONT), the SQLite store's write lock held
by a frozen holder, all at random points from a fixed seed, on a real delta-rs table.

Checked afterwards, independently of what the writers reported:

* every commit after the setup carries its lease id, and landed (the log file's ctime: the rename that
  made the commit visible) inside its lease's window in the decision log, from the grant to its release
  or, for a lease reclaimed as expired, its expiry; in the store's own order of the log no lease was
  granted while another was live (every job conflicts with every other);
* the table holds exactly the expected rows (seeded rows minus the deleted ranges, plus the merged rows),
  none lost, none twice.

Freezes are shorter than the commit margin: a writer frozen longer than that between its last fence check
and its commit can still commit late (ADR 0018 names that window); the test keeps to what the fence closes.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
import sqlalchemy as sa
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties

from deltaguard.leases.manager import LeaseManager
from tests.leases.conftest import fresh_pg_database

SEED = 20261123
WRITERS = 3
JOBS_PER_WRITER = 7
SEEDED = range(100_000, 100_060)  # rows the delete jobs remove, ten per job
#: The fault schedule: at most this many rounds of faults, then the writers finish undisturbed. The run is
#: bounded by this count, not by the wall clock (a busy machine makes the writers slower, not wrong);
#: pytest-timeout only stops a hang.
FAULT_ROUNDS = 60
#: the figure each kind of fault is counted in
FIGURE_OF = {"kill": "kills", "freeze": "freezes", "outage": "store_outages"}
WRITER_SCRIPT = Path(__file__).with_name("chaos_writer.py")


def _jobs(rng: random.Random) -> dict[str, list[dict]]:
    """Per writer, its jobs: merges of fresh ids, deletes of seeded ranges, optimizes."""
    deletes = [SEEDED.start + 10 * i for i in range(len(SEEDED) // 10)]
    plan: dict[str, list[dict]] = {}
    next_id = 1
    for w in range(WRITERS):
        jobs = []
        for j in range(JOBS_PER_WRITER):
            kind = rng.choice(["merge", "merge", "optimize", "delete"])
            if kind == "delete" and not deletes:
                kind = "merge"
            job = {"id": f"w{w}-j{j}", "kind": kind}
            if kind == "merge":
                job |= {"first": next_id, "count": 25}
                next_id += 25
            elif kind == "delete":
                job |= {"first": deletes.pop(), "count": 10}
            jobs.append(job)
        plan[f"w{w}"] = jobs
    return plan


def _commits(table: str) -> list[dict]:
    log = Path(table) / "_delta_log"
    out = []
    for path in sorted(log.glob("*.json")):
        actions = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        out.append({"version": int(path.stem), "landed": path.stat().st_ctime, "info": info})
    return out


def _table_log(url: str, table: str) -> list[tuple[str, str, float, dict]]:
    """The table's grant/release/expiry entries in the order they were written (rowid / seq).

    Each decision is stamped with the time its call started, before it waited for the table's lock, so
    the stamps of two decisions on one table can be out of order; the insertion order is the lock order.
    """
    order = "rowid" if url.startswith("sqlite") else "seq"
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                f"SELECT kind, request_id, at, detail FROM dg_decisions WHERE uri = :u "
                f"AND kind IN ('grant', 'release', 'expiry') ORDER BY {order}"
            ),
            {"u": table},
        ).all()
    engine.dispose()
    return [(kind, rid, at, json.loads(detail)) for kind, rid, at, detail in rows]


def _lease_windows(entries: list[tuple[str, str, float, dict]]) -> dict[str, tuple[float, float]]:
    """Per lease: (granted at, the first instant a successor could be granted): its release, or for a lease
    reclaimed as expired its expiry time itself."""
    starts = {rid: at for kind, rid, at, _ in entries if kind == "grant"}
    ends: dict[str, float] = {}
    for kind, rid, at, detail in entries:
        if rid in starts and rid not in ends and kind in ("release", "expiry"):
            ends[rid] = at if kind == "release" else float(detail["expired_at"])
    return {rid: (start, ends.get(rid, float("inf"))) for rid, start in starts.items()}


def _overlaps(entries: list[tuple[str, str, float, dict]]) -> list[str]:
    """Grants made while another lease on the table was live, in the store's own order."""
    live: set[str] = set()
    found = []
    for kind, rid, _, _ in entries:
        if kind == "grant":
            if live:
                found.append(f"{rid} granted while {sorted(live)} held the table")
            live.add(rid)
        else:
            live.discard(rid)
    return found


def _sqlite_outage(url: str, seconds: float) -> None:
    """A holder of SQLite's write lock that stopped: every decision waits behind it."""
    holder = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None, timeout=60)
    holder.execute("BEGIN IMMEDIATE")
    time.sleep(seconds)
    holder.execute("ROLLBACK")
    holder.close()


def _postgres_outage(url: str, seconds: float) -> None:
    """SIGSTOP of every server backend of the store's database (their TCP connections stay up)."""
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    with admin.connect() as conn:
        pids = [
            r[0]
            for r in conn.execute(
                sa.text(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
                )
            )
        ]
    admin.dispose()
    stopped = []
    try:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)
        time.sleep(seconds)
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


@pytest.mark.slow
@pytest.mark.timeout(1200)  # a hang-stopper, about ten times a run on a loaded machine
@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_no_conflicting_commits_and_no_lost_or_duplicated_rows_under_chaos(
    tmp_path: Path, request: pytest.FixtureRequest, store: str
) -> None:
    rng = random.Random(SEED)
    table = str(tmp_path / "table")
    if store == "sqlite":
        url, outage = f"sqlite:///{tmp_path / 'leases.db'}", _sqlite_outage
    else:
        url, outage = fresh_pg_database(request.getfixturevalue("pg_server")), _postgres_outage
    seeded = pa.table({"id": pa.array(list(SEEDED), pa.int64()), "v": pa.array([f"s{i}" for i in SEEDED])})
    write_deltalake(table, seeded)
    LeaseManager(url).store.close()  # create the schema before the writers race for it
    plan = _jobs(rng)
    for name, jobs in plan.items():
        (tmp_path / f"{name}.jobs").write_text(json.dumps(jobs))

    def start(name: str) -> subprocess.Popen:
        argv = [sys.executable, str(WRITER_SCRIPT), url, table, name, str(tmp_path / f"{name}.jobs")]
        return subprocess.Popen([*argv, str(tmp_path / f"{name}.done")], stderr=subprocess.PIPE)

    procs = {name: start(name) for name in plan}
    figures = {"kills": 0, "freezes": 0, "store_outages": 0}
    started = time.monotonic()
    try:
        for _ in range(FAULT_ROUNDS):
            if all(p.poll() is not None for p in procs.values()):
                break
            time.sleep(rng.uniform(0.3, 1.2))
            # Each kind of fault happens at least once, however fast the writers finish on this machine.
            forced = [kind for kind in ("kill", "freeze", "outage") if not figures[FIGURE_OF[kind]]]
            action = forced[0] if forced else rng.choice(["kill", "freeze", "freeze", "outage", "none"])
            running = [n for n, p in procs.items() if p.poll() is None]
            if not running:
                break
            victim = rng.choice(running)
            if action == "kill" and figures["kills"] < 8:
                procs[victim].send_signal(signal.SIGKILL)
                procs[victim].wait()
                figures["kills"] += 1
                procs[victim] = start(victim)  # resumes at its first job not recorded as done
            elif action == "freeze":
                os.kill(procs[victim].pid, signal.SIGSTOP)
                time.sleep(rng.uniform(0.1, 0.6))  # well within the 1 s commit margin
                os.kill(procs[victim].pid, signal.SIGCONT)
                figures["freezes"] += 1
            elif action == "outage":
                outage(url, rng.uniform(0.2, 1.2))  # within the tolerated stall (1.5 s)
                figures["store_outages"] += 1
        for proc in procs.values():
            proc.wait()  # the schedule is over: the writers finish their jobs undisturbed
        for name, proc in procs.items():
            assert proc.returncode == 0, f"{name}: {proc.stderr.read().decode()[-2000:]}"
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
                proc.kill()

    manager = LeaseManager(url)
    try:
        entries = _table_log(url, table)
        windows = _lease_windows(entries)
        decisions = len(manager.decisions(limit=1_000_000))
    finally:
        manager.store.close()
    commits = _commits(table)[1:]  # after the setup write
    for commit in commits:
        lease = commit["info"].get("lease_id")
        assert lease in windows, f"commit {commit['version']} has no granted lease: {commit['info']}"
        start_at, end_at = windows[lease]
        assert start_at <= commit["landed"] < end_at, (
            f"commit {commit['version']} landed at {commit['landed']:.3f}, outside its lease's window "
            f"[{start_at:.3f}, {end_at:.3f})"
        )
    assert _overlaps(entries) == [], "two conflicting leases were live at once"

    expected = set(SEEDED)
    for jobs in plan.values():
        for job in jobs:
            span = set(range(job.get("first", 0), job.get("first", 0) + job.get("count", 0)))
            if job["kind"] == "merge":
                expected |= span
            elif job["kind"] == "delete":
                expected -= span
    ids = DeltaTable(table).to_pyarrow_table(columns=["id"]).column("id").to_pylist()
    assert len(ids) == len(set(ids)), "a row was written twice"
    assert set(ids) == expected, "rows were lost or appeared"

    events = [e for n in plan for e in (tmp_path / f"{n}.done.events").read_text().split()]
    figures |= {
        "decisions": decisions,
        "leases": len(windows),
        "commits": len(commits),
        "rows_checked": len(ids),
        "fenced": events.count("fenced"),
        "conflicts": events.count("conflict"),
        "store_errors": events.count("store_error"),
        "duplicates_skipped": events.count("duplicate"),
        "unexpected": [e for e in events if e.startswith("unexpected:")],
        "seconds": round(time.monotonic() - started, 1),
    }
    print(f"chaos figures ({store}):", json.dumps(figures))
    assert figures["kills"] > 0 and figures["freezes"] > 0 and figures["store_outages"] > 0


def _grants(manager: LeaseManager, table: str) -> list[object]:
    """The grants logged for ``table``; none yet while the writer holds SQLite's write lock past this
    reader's busy timeout (a loaded machine), which is the test's observation, not what it checks."""
    from deltaguard.exceptions import StoreError

    try:
        return [d for d in manager.decisions(uri=table) if d.kind == "grant"]
    except StoreError:
        return []


@pytest.mark.timeout(600)
def test_a_writer_stopped_past_its_lease_does_not_commit(tmp_path: Path) -> None:
    """SIGSTOP of a writer while it reads its source, for longer than the TTL; a conflicting writer is
    granted and commits meanwhile; woken up, the first writer must refuse its commit and redo the job."""
    from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim
    from deltaguard.core.profiles import EngineName, EngineProfile
    from deltaguard.core.table_config import TableConfig
    from deltaguard.engines.specs import DeleteSpec

    table = str(tmp_path / "table")
    url = f"sqlite:///{tmp_path / 'leases.db'}"
    seeded = pa.table({"id": pa.array(list(SEEDED), pa.int64()), "v": pa.array([f"s{i}" for i in SEEDED])})
    write_deltalake(table, seeded)
    LeaseManager(url).store.close()
    (tmp_path / "w0.jobs").write_text(json.dumps([{"id": "w0-j0", "kind": "merge", "first": 1, "count": 25}]))
    argv = [
        sys.executable,
        str(WRITER_SCRIPT),
        url,
        table,
        "w0",
        str(tmp_path / "w0.jobs"),
        str(tmp_path / "w0.done"),
    ]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, env={**os.environ, "CHAOS_WORK_S": "3"})
    manager = LeaseManager(url)
    try:
        while not _grants(manager, table):
            # however long the writer takes to start on a busy machine; it may only not die first
            assert proc.poll() is None, "the writer ended before it was granted its lease"
            time.sleep(0.05)
        first_lease = next(d.request_id for d in manager.decisions(uri=table) if d.kind == "grant")
        os.kill(proc.pid, signal.SIGSTOP)  # inside its 3 s extract, holding the lease
        time.sleep(4.5)  # past the 4 s TTL
        spec = DeleteSpec(f"id >= {SEEDED.start} AND id < {SEEDED.start + 10}")
        claim = TableClaim(
            table, spec.operation(), EngineProfile(EngineName.DELTA_RS, "1.6.6"), TableConfig(exists=True)
        )
        other = manager.acquire(
            LeaseRequest(claims=(claim,), owner=Owner(dag_id="chaos", task_id="other"), ttl_s=30)
        )
        assert isinstance(other, Granted)  # the stopped writer's lease was reclaimed as expired
        marks = CommitProperties(custom_metadata={"lease_id": other.lease_id})
        DeltaTable(table).delete(spec.predicate, commit_properties=marks)
        manager.release(other.lease_id, Owner(dag_id="chaos", task_id="other"))
        os.kill(proc.pid, signal.SIGCONT)
        assert proc.wait() == 0, proc.stderr.read().decode()[-2000:]  # pytest-timeout stops a hang
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        manager.store.close()
    events = (tmp_path / "w0.done.events").read_text().split()
    assert events == ["fenced", "written"]
    leases = [c["info"].get("lease_id") for c in _commits(table)[1:]]
    assert first_lease not in leases and len(leases) == 2  # the DELETE, then the redone MERGE
    ids = DeltaTable(table).to_pyarrow_table(columns=["id"]).column("id").to_pylist()
    assert sorted(ids) == sorted(set(range(1, 26)) | set(SEEDED[10:]))
