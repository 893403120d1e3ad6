"""The real lease manager with duration estimates on and off: makespan and waits of fixed batches.

Run: ``.venv/bin/python benchmarks/bench_backfill.py --out benchmarks/results/backfill.json`` (SQLite, and
PostgreSQL on a throwaway server from ``tests/pg.py``).

The workloads are those of ``python -m lab.simulation batch`` (``lab.simulation.workload.generate``:
4 tables and 20 writes, its default, and a hotter 2 tables and 30 writes; seeds 1-16, fixed before
looking): every write asks for its table's lease at time 0.
Time is virtual (an injected clock), so a run measures the policy, not the machine. Each write holds its
lease for its true duration; with estimates on, its request carries the true duration times a seeded
uniform factor in [0.7, 1.3] (as the simulator's estimates); off, none (FIFO among conflicting writes).
Whenever a lease ends, and every ``--poll-s`` seconds in between, each waiting write polls
(``LeaseManager.check``, as the lease trigger does), earliest queued first. Unlike the simulator there is no
global limit on worker slots: every write waits deferred and runs as soon as its lease is granted.

After every step the run checks that no two granted leases on a table conflict (the real conflict model on
the full set of holders); ``overlaps`` counts violations and must be 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deltaguard.core import model
from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim, Waiting
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.leases.manager import LeaseManager
from lab.simulation.workload import Workload, generate, operation

PROFILE = EngineProfile(EngineName("databricks"), "15.4")  # the simulator's default engine
ESTIMATE_ERROR = 0.3


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def replay(workload: Workload, url: str, *, estimates: bool, poll_s: float) -> dict[str, Any]:
    """Play one batch through a real lease manager; return its makespan, waits and overlap count."""
    clock = Clock()
    manager = LeaseManager(url, clock=clock, retention_s=10**9)
    start = clock.now
    noise = random.Random(workload.seed)
    tables = {t.name: t for t in workload.tables}
    uri = f"{{}}-{workload.seed}-{'on' if estimates else 'off'}"
    requests: list[LeaseRequest] = []
    for w in workload.writes:
        guess = w.duration_s * noise.uniform(1 - ESTIMATE_ERROR, 1 + ESTIMATE_ERROR)
        table = tables[w.table]
        requests.append(
            LeaseRequest(
                claims=(
                    TableClaim(
                        uri.format(w.table), operation(w, table), PROFILE, table.config(uri.format(w.table))
                    ),
                ),
                owner=Owner(dag_id="batch", task_id=w.id),
                ttl_s=10**6,
                wait_ttl_s=10**6,
                request_id=f"{w.id}-{workload.seed}-{estimates}",
                expected_duration_s=guess if estimates else None,
            )
        )
    granted_at: dict[int, float] = {}
    ends: dict[int, float] = {}  # running writes: index -> true end
    overlaps = 0
    decisions = 0
    wall = time.perf_counter()

    def settle(answer: Granted | Waiting | Any, i: int) -> None:
        if isinstance(answer, Granted) and i not in granted_at:
            granted_at[i] = clock.now
            ends[i] = clock.now + workload.writes[i].duration_s

    def check_sound() -> int:
        bad = 0
        for name in tables:
            held = manager.leases(uri.format(name))
            ops = [lease.operation for lease in held]
            for k, op_k in enumerate(ops):
                others = ops[:k] + ops[k + 1 :]
                if others and model.decide(op_k, others, tables[name].config(), PROFILE).conflict:
                    bad += 1
        return bad

    for i, req in enumerate(requests):
        settle(manager.acquire(req), i)
        decisions += 1
    overlaps += check_sound()
    while len(granted_at) < len(requests) or ends:
        next_end = min(ends.values(), default=float("inf"))
        clock.now = min(next_end, clock.now + poll_s)
        for i in [i for i, end in ends.items() if end <= clock.now]:
            manager.release(requests[i].request_id, requests[i].owner)
            del ends[i]
        for i in sorted(set(range(len(requests))) - set(granted_at)):  # queued first-come, in order
            settle(manager.check(requests[i].request_id), i)
            decisions += 1
        overlaps += check_sound()
    manager.store.close()
    waits = sorted(granted_at[i] - start for i in range(len(requests)))
    finish = max(granted_at[i] + workload.writes[i].duration_s for i in range(len(requests))) - start
    return {
        "makespan_s": round(finish, 2),
        "wait_p50_s": round(statistics.median(waits), 2),
        "wait_max_s": round(waits[-1], 2),
        "overlaps": overlaps,
        "decisions": decisions,
        "wall_s": round(time.perf_counter() - wall, 2),
    }


def run_config(url: str, seeds: range, tables: int, writes: int, poll_s: float) -> dict[str, Any]:
    """Every seed of one configuration, estimates on then off, with medians and worst cases."""
    rows = []
    for seed in seeds:
        workload = generate(seed, tables=tables, writes=writes)
        on = replay(workload, url, estimates=True, poll_s=poll_s)
        off = replay(workload, url, estimates=False, poll_s=poll_s)
        rows.append({"seed": seed, "estimates_on": on, "estimates_off": off})
        print(f"{tables}x{writes} seed {seed}: on {on} off {off}", flush=True)
    ratios = [r["estimates_on"]["makespan_s"] / r["estimates_off"]["makespan_s"] for r in rows]

    def summary(key: str) -> dict[str, Any]:
        return {
            "makespan_s_median": round(statistics.median(r[key]["makespan_s"] for r in rows), 2),
            "makespan_s_worst": max(r[key]["makespan_s"] for r in rows),
            "wait_p50_s_median": round(statistics.median(r[key]["wait_p50_s"] for r in rows), 2),
            "wait_max_s_median": round(statistics.median(r[key]["wait_max_s"] for r in rows), 2),
            "wait_max_s_worst": max(r[key]["wait_max_s"] for r in rows),
            "overlaps": sum(r[key]["overlaps"] for r in rows),
        }

    return {
        "tables": tables,
        "writes": writes,
        "summary": {
            "estimates_on": summary("estimates_on"),
            "estimates_off": summary("estimates_off"),
            "makespan_ratio_on_to_off": {
                "median": round(statistics.median(ratios), 3),
                "best": round(min(ratios), 3),
                "worst": round(max(ratios), 3),
                "seeds_shorter": sum(1 for x in ratios if x < 1),
                "seeds_longer": sum(1 for x in ratios if x > 1),
            },
        },
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1-16")
    parser.add_argument(
        "--configs", default="4x20,2x30", help="tables x writes per batch (4x20: simulate batch's default)"
    )
    parser.add_argument("--poll-s", type=float, default=10.0)
    parser.add_argument(
        "--stores", default="sqlite,postgresql", help="postgresql starts a throwaway server (tests/pg.py)"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    low, high = (int(x) for x in args.seeds.split("-"))
    configs = [tuple(int(x) for x in c.split("x")) for c in args.configs.split(",")]
    runs = []
    with contextlib.ExitStack() as stack:
        for store in args.stores.split(","):
            for tables, writes in configs:
                if store == "sqlite":
                    tmp = stack.enter_context(tempfile.TemporaryDirectory())
                    url = f"sqlite:///{tmp}/leases.db"
                else:
                    from tests.pg import throwaway_postgres

                    server = stack.enter_context(throwaway_postgres())
                    url = fresh_database(server)
                run = run_config(url, range(low, high + 1), tables, writes, args.poll_s)
                runs.append({"store": store, **run})
    data = {
        "params": {
            "seeds": args.seeds,
            "configs": args.configs,
            "poll_s": args.poll_s,
            "estimate_error": ESTIMATE_ERROR,
            "engine": "Databricks Runtime 15.4",
            "worker_slots": "unlimited",
            "command": f".venv/bin/python benchmarks/bench_backfill.py --seeds {args.seeds} "
            f"--configs {args.configs} --stores {args.stores} --out benchmarks/results/backfill.json",
        },
        "runs": runs,
    }
    if args.out:
        args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps([{k: r[k] for k in ("store", "tables", "writes", "summary")} for r in runs], indent=2))


def fresh_database(server_url: str) -> str:
    """A new empty database on the throwaway server."""
    import uuid

    import sqlalchemy as sa

    name = f"dg_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(server_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return server_url.rsplit("/", 1)[0] + f"/{name}"


if __name__ == "__main__":
    main()
