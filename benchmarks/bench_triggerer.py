"""Triggerer benchmark: N waiting lease triggers in one event loop against a real PostgreSQL.

Run: ``.venv/bin/python benchmarks/bench_triggerer.py`` (writes ``benchmarks/results/triggerer.json``).

The triggerer runs every trigger's ``run()`` coroutine as a task of one asyncio event loop; this benchmark
does the same, without the triggerer's database bookkeeping around it: it creates ``--waiters`` tasks, each
iterating a :class:`~deltaguard.triggers.lease.LeaseAvailableTrigger` until its first event. Setup: one
table per waiter, one blocking lease (``SET TBLPROPERTIES``) on each and one queued MERGE behind it, made by a
separate lease manager that is closed before the measurement (its connections are not counted).

Each mode gets a fresh database on one throwaway PostgreSQL server (:func:`tests.pg.throwaway_postgres`):

* ``notify``: this branch, shared store handle and LISTEN/NOTIFY (``lease_store_listen = True``);
* ``poll``: shared store handle, no listener (``lease_store_listen = False``): a check every ``poll_interval``;
* ``per_trigger_main``: the trigger of ``--main-ref`` (its source, run against this tree's store), where each
  trigger opens its own store. Run with ``--main-waiters`` triggers, because it holds one connection each and
  the server's ``max_connections`` would refuse 1,000.

Measured per mode, while every trigger waits (``--idle`` seconds after a warm-up of two polls and 5 s):
store connections (``pg_stat_activity``, application names ``deltaguard-leases`` and ``deltaguard-listen``;
the largest of 5 samples), transactions per second (``pg_stat_database`` commits and rollbacks of the
database: every store statement of a trigger runs in autocommit or one transaction), CPU seconds per second
of this process (the triggerer) and of the server's backends (``/proc/<pid>/stat``). Then hand-off latency:
``--releases`` holders, drawn with a fixed seed, are released one at a time ``--gap`` seconds apart; each
latency runs from the start of the ``release`` call to the moment the waiter's trigger yields its event.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import types
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# a private Airflow home: the triggers read [deltaguard] options through Airflow's configuration
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="deltaguard-bench-airflow-"))

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting  # noqa: E402
from deltaguard.core.operations import Operation, OperationKind  # noqa: E402
from deltaguard.core.profiles import EngineName, EngineProfile  # noqa: E402
from deltaguard.core.table_config import TableConfig  # noqa: E402
from deltaguard.leases.manager import LeaseManager  # noqa: E402
from tests.airflow.helpers import store_handles_closed  # noqa: E402
from tests.pg import throwaway_postgres  # noqa: E402

PROFILE = EngineProfile(EngineName.DELTA_RS, "1.6.6")
CONFIG = TableConfig(partition_columns=("country",))
TICKS = os.sysconf("SC_CLK_TCK")


def _request(owner: str, kind: OperationKind, table: str, ttl_s: float = 600) -> LeaseRequest:
    claim = TableClaim(table, Operation(kind, label=owner), PROFILE, CONFIG)
    return LeaseRequest(claims=(claim,), owner=Owner(name=owner), ttl_s=ttl_s, wait_ttl_s=ttl_s)


def _fresh_database(server: str) -> str:
    name = f"dg_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(server, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return server.rsplit("/", 1)[0] + f"/{name}"


def _setup(url: str, n: int) -> tuple[list[str], list[str]]:
    """One holder and one waiter per table; returns (holder lease ids, waiter request ids)."""
    manager = LeaseManager(url)
    holders, waiters = [], []
    for i in range(n):
        held = manager.acquire(_request(f"alter{i}", OperationKind.SET_TBLPROPERTIES, f"/t/{i}"))
        queued = manager.acquire(_request(f"merge{i}", OperationKind.MERGE, f"/t/{i}"))
        assert isinstance(held, Granted) and isinstance(queued, Waiting)
        holders.append(held.lease_id)
        waiters.append(queued.request_id)
    manager.store.close()
    return holders, waiters


class Probe:
    """Reads the server's view of the store: connections, transactions, backend CPU."""

    def __init__(self, url: str) -> None:
        self.engine = sa.create_engine(url, poolclass=sa.pool.NullPool)

    def sample(self) -> dict[str, Any]:
        with self.engine.connect() as conn:
            pids = [
                int(r[0])
                for r in conn.execute(
                    sa.text(
                        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                        "AND application_name IN ('deltaguard-leases', 'deltaguard-listen')"
                    )
                )
            ]
            xacts = conn.execute(
                sa.text(
                    "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
                )
            ).scalar()
        cpu = 0.0
        for pid in pids:
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                cpu += (int(fields[11]) + int(fields[12])) / TICKS
        return {"connections": len(pids), "xacts": int(xacts or 0), "pids": set(pids), "cpu": cpu}

    def close(self) -> None:
        self.engine.dispose()


def _main_trigger_class(ref: str) -> type:
    """``LeaseAvailableTrigger`` as ``ref`` has it (its source, run against this tree's modules)."""
    source = subprocess.check_output(
        ["git", "show", f"{ref}:provider/triggers/lease.py"], cwd=ROOT, text=True
    )
    module = types.ModuleType("deltaguard_bench_main_lease")
    module.__dict__["__name__"] = "deltaguard_bench_main_lease"
    exec(compile(source, f"{ref}:provider/triggers/lease.py", "exec"), module.__dict__)
    return module.__dict__["LeaseAvailableTrigger"]


async def _first(trigger: Any, fired: dict[str, float]) -> None:
    async for event in trigger.run():
        fired[event.payload["request_id"]] = time.monotonic()
        return


def _quantiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"n": 0, "median_ms": None, "p95_ms": None, "worst_ms": None}
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "n": len(ordered),
        "median_ms": round(statistics.median(ordered) * 1000, 1),
        "p95_ms": round(p95 * 1000, 1),
        "worst_ms": round(ordered[-1] * 1000, 1),
    }


async def _measure(
    url: str, trigger_cls: type, n: int, poll: float, idle: float, releases: int, gap: float, seed: int
) -> dict[str, Any]:

    holders, waiters = await asyncio.to_thread(_setup, url, n)
    probe = Probe(url)
    fired: dict[str, float] = {}
    tasks = [asyncio.create_task(_first(trigger_cls(url, rid, poll_interval=poll), fired)) for rid in waiters]
    await asyncio.sleep(2 * poll + 5.0)  # every trigger has checked at least once
    before = await asyncio.to_thread(probe.sample)
    cpu0, wall0 = time.process_time(), time.monotonic()
    peak, pids = before["connections"], set(before["pids"])
    for _ in range(5):
        await asyncio.sleep(idle / 5)
        now = await asyncio.to_thread(probe.sample)
        peak, pids = max(peak, now["connections"]), pids | now["pids"]
    cpu1, wall1 = time.process_time(), time.monotonic()
    after = now
    span = wall1 - wall0
    idle_row = {
        "store_connections_peak": peak,
        "transactions_per_s": round((after["xacts"] - before["xacts"]) / span, 1),
        "triggerer_cpu_s_per_s": round((cpu1 - cpu0) / span, 3),
        # backends alive through the whole window (a backend that exited took its counters with it)
        "server_backend_cpu_s_per_s": round((after["cpu"] - before["cpu"]) / span, 3)
        if before["pids"] == after["pids"]
        else None,
        "window_s": round(span, 1),
    }
    # hand-offs: release holders one at a time, in an order fixed by the seed
    chosen = random.Random(seed).sample(range(n), min(releases, n))
    releaser = LeaseManager(url)
    started: dict[str, float] = {}
    for i in chosen:
        started[waiters[i]] = time.monotonic()
        await asyncio.to_thread(releaser.release, holders[i], Owner(name=f"alter{i}"))
        await asyncio.sleep(gap)
    deadline = time.monotonic() + 6 * poll + 30
    while not all(w in fired for w in started) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    latencies = [fired[w] - t for w, t in started.items() if w in fired]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await store_handles_closed()
    releaser.store.close()
    probe.close()
    handoff = {**_quantiles(latencies), "missing": len(started) - len(latencies)}
    return {
        "waiters": n,
        "poll_interval_s": poll,
        "idle": idle_row,
        "handoff": handoff,
        **headline(n, idle_row, handoff),
    }


def headline(waiters: int, idle: dict[str, Any], handoff: dict[str, Any]) -> dict[str, Any]:
    """The three figures the deployment targets name: waiting tasks, store connections (the peak while they
    wait), and the 95th percentile from a release to the waiter's event, in seconds."""
    p95_ms = handoff.get("p95_ms")
    return {
        "waiting_tasks": waiters,
        "max_store_connections": idle["store_connections_peak"],
        "grant_after_release_p95_s": None if p95_ms is None else round(p95_ms / 1000, 3),
    }


def _setup_crowd(url: str, n: int) -> tuple[str, list[str]]:
    """One table, one exclusive holder, and ``n`` appends queued behind it (compatible with each other, so
    the release can admit them all); returns (holder lease id, waiter request ids)."""
    manager = LeaseManager(url)
    # queueing 1,000 one by one takes minutes on a loaded machine: nothing may expire meanwhile
    held = manager.acquire(_request("alter", OperationKind.SET_TBLPROPERTIES, "/t/crowd", ttl_s=7200))
    assert isinstance(held, Granted)
    waiters = []
    for i in range(n):
        queued = manager.acquire(_request(f"append{i}", OperationKind.INSERT, "/t/crowd", ttl_s=7200))
        assert isinstance(queued, Waiting)
        waiters.append(queued.request_id)
    manager.store.close()
    return held.lease_id, waiters


async def _measure_crowd(url: str, trigger_cls: type, n: int, poll: float, timeout: float) -> dict[str, Any]:
    """``n`` waiting triggers behind one holder on one table: the time from the start of its release until
    each waiter's event, with the store's connections (peak, sampled every 0.5 s) and transactions meanwhile."""

    holder, waiters = await asyncio.to_thread(_setup_crowd, url, n)
    probe = Probe(url)
    fired: dict[str, float] = {}
    tasks = [asyncio.create_task(_first(trigger_cls(url, rid, poll_interval=poll), fired)) for rid in waiters]
    await asyncio.sleep(2 * poll + 5.0)  # every trigger has checked at least once and waits
    releaser = LeaseManager(url)
    before = await asyncio.to_thread(probe.sample)
    peak = before["connections"]
    cpu0 = time.process_time()
    started = time.monotonic()
    await asyncio.to_thread(releaser.release, holder, Owner(name="alter"))
    while len(fired) < n and time.monotonic() - started < timeout:
        await asyncio.sleep(0.5)
        peak = max(peak, (await asyncio.to_thread(probe.sample))["connections"])
    after = await asyncio.to_thread(probe.sample)
    cpu = time.process_time() - cpu0
    latencies = [t - started for t in fired.values()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await store_handles_closed()
    releaser.store.close()
    probe.close()
    drained = max(latencies) if len(latencies) == n else None
    return {
        "waiters": n,
        "poll_interval_s": poll,
        "answered": len(latencies),
        "all_answered_s": None if drained is None else round(drained, 3),
        "answer": _quantiles(latencies),
        "store_connections_peak": peak,
        "transactions_during_drain": after["xacts"] - before["xacts"],
        "triggerer_cpu_s": round(cpu, 2),
    }


def _release_times(url: str, n: int) -> list[float]:
    """Seconds per ``release`` of a lease nobody waits for (acquire untimed), over ``n`` cycles on 50 tables."""
    manager = LeaseManager(url)
    times = []
    for i in range(100 + n):
        held = manager.acquire(_request(f"a{i}", OperationKind.MERGE, f"/t/{i % 50}"))
        assert isinstance(held, Granted)
        start = time.perf_counter()
        manager.release(held.lease_id, Owner(name=f"a{i}"))
        if i >= 100:  # the first 100 warm the caches and plans
            times.append(time.perf_counter() - start)
    manager.store.close()
    return times


def release_cost(server: str, rounds: int, n: int) -> dict[str, Any]:
    """What schema 8's row triggers add to a release nobody waits for: alternating rounds with the triggers
    enabled and disabled (``ALTER TABLE ... DISABLE TRIGGER``), each on a fresh database."""
    rows: dict[str, list[dict[str, float]]] = {"with_trigger": [], "without_trigger": []}
    for _ in range(rounds):
        for mode in rows:
            url = _fresh_database(server)
            LeaseManager(url).store.close()  # create the schema
            if mode == "without_trigger":
                engine = sa.create_engine(url)
                with engine.begin() as conn:
                    conn.execute(sa.text("ALTER TABLE dg_leases DISABLE TRIGGER dg_leases_freed"))
                    conn.execute(sa.text("ALTER TABLE dg_queue DISABLE TRIGGER dg_queue_freed"))
                engine.dispose()
            times = sorted(_release_times(url, n))
            rows[mode].append(
                {
                    "median_ms": round(statistics.median(times) * 1000, 3),
                    "p99_ms": round(times[int(0.99 * (len(times) - 1))] * 1000, 3),
                    "load_avg_1m": round(os.getloadavg()[0], 2),
                }
            )
    return {"releases_per_round": n, "rounds": rounds, **rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--waiters", type=int, default=1000)
    parser.add_argument("--main-waiters", type=int, default=100)
    parser.add_argument("--main-ref", default="d5fcd17")
    parser.add_argument("--poll", type=float, default=5.0, help="the triggers' poll_interval (the default)")
    parser.add_argument("--idle", type=float, default=60.0)
    parser.add_argument("--releases", type=int, default=40)
    parser.add_argument("--gap", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--modes", default="notify,poll,per_trigger_main")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "triggerer.json"))
    parser.add_argument(
        "--release-cost",
        action="store_true",
        help="instead: the cost schema 8's NOTIFY triggers add to a release (triggerer_release_cost.json)",
    )
    parser.add_argument(
        "--crowd",
        type=int,
        default=0,
        help="instead: this many waiters behind one release on one table (triggerer_crowd.json); "
        "--modes notify (this tree) and/or per_waiter (the trigger of --crowd-ref, each waiter checking alone)",
    )
    parser.add_argument("--crowd-ref", default="8a17b9a")
    parser.add_argument("--crowd-timeout", type=float, default=400.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cycles", type=int, default=1500)
    args = parser.parse_args()
    if args.release_cost:
        with throwaway_postgres() as server:
            result = release_cost(server, args.rounds, args.cycles)
        result["command"] = "python benchmarks/bench_triggerer.py " + " ".join(sys.argv[1:])
        out = ROOT / "benchmarks" / "results" / "triggerer_release_cost.json"
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result))
        return 0

    from deltaguard.triggers.lease import LeaseAvailableTrigger

    if args.crowd:
        rows = []
        with throwaway_postgres() as server:
            for mode in args.modes.split(","):
                url = _fresh_database(server)
                os.environ["AIRFLOW__DELTAGUARD__LEASE_STORE_URL"] = url
                os.environ["AIRFLOW__DELTAGUARD__LEASE_STORE_LISTEN"] = "True"
                cls = _main_trigger_class(args.crowd_ref) if mode == "per_waiter" else LeaseAvailableTrigger
                load = os.getloadavg()[0]
                row = asyncio.run(_measure_crowd(url, cls, args.crowd, args.poll, args.crowd_timeout))
                row.update(
                    mode=mode,
                    load_avg_1m_before=round(load, 2),
                    load_avg_1m_after=round(os.getloadavg()[0], 2),
                )
                print(json.dumps(row), flush=True)
                rows.append(row)
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        out = ROOT / "benchmarks" / "results" / f"triggerer_crowd_{args.crowd}.json"
        result = {
            "command": "python benchmarks/bench_triggerer.py " + " ".join(sys.argv[1:]),
            "commit": commit.stdout.strip(),
            "crowd_ref": args.crowd_ref,
            "machine": {"cpus": os.cpu_count()},
            "rows": rows,
        }
        out.write_text(json.dumps(result, indent=2) + "\n")
        return 0

    rows = []
    with throwaway_postgres(max_connections=max(100, args.main_waiters * 2 + 20)) as server:
        for mode in args.modes.split(","):
            url = _fresh_database(server)
            # the trigger resolves its password-free store reference against the configured store
            os.environ["AIRFLOW__DELTAGUARD__LEASE_STORE_URL"] = url
            os.environ["AIRFLOW__DELTAGUARD__LEASE_STORE_LISTEN"] = "False" if mode == "poll" else "True"
            cls = _main_trigger_class(args.main_ref) if mode == "per_trigger_main" else LeaseAvailableTrigger
            n = args.main_waiters if mode == "per_trigger_main" else args.waiters
            load = os.getloadavg()[0]
            row = asyncio.run(_measure(url, cls, n, args.poll, args.idle, args.releases, args.gap, args.seed))
            row.update(
                mode=mode, load_avg_1m_before=round(load, 2), load_avg_1m_after=round(os.getloadavg()[0], 2)
            )
            print(json.dumps(row), flush=True)
            rows.append(row)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    result = {
        "command": "python benchmarks/bench_triggerer.py " + " ".join(sys.argv[1:]),
        "commit": commit.stdout.strip(),
        "seed": args.seed,
        "machine": {"cpus": os.cpu_count()},
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
