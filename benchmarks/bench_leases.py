"""Lease manager benchmark: decision latency (p50/p99) and throughput on SQLite and PostgreSQL.

Run: ``.venv/bin/python benchmarks/bench_leases.py`` (writes ``benchmarks/results/leases.json``).

Setup per store: 10,000 tables (each with a stored configuration), 100,000 historical decision-log entries,
and a standing blind-INSERT lease on every tenth table, so some decisions call the conflict model and either
grant (INSERT beside INSERT) or queue (MERGE behind INSERT on a Serializable table). Each requester loops:
pick a random table, ``acquire`` (timed: this is the decision), then ``release`` (or withdraw the queued
request). Throughput counts acquire decisions per second of wall time over all requesters.

Requesters are separate processes, not threads: Airflow workers are processes, and threads would measure
the GIL (the decision's Python work) instead of the store's concurrency. On a 2-core machine 32 processes
over-subscribe the CPU; that is the point of the 32-requester row.

For the "cost does not grow" comparison, the same workload also runs against a store with 100 tables and an
empty decision log (rows with ``tables`` = 100).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deltaguard.core.admission import LeaseRequest, Owner, TableClaim  # noqa: E402
from deltaguard.core.operations import Operation, OperationKind  # noqa: E402
from deltaguard.core.profiles import EngineName, EngineProfile  # noqa: E402
from deltaguard.core.table_config import TableConfig  # noqa: E402
from deltaguard.leases import codec  # noqa: E402
from deltaguard.leases.manager import LeaseManager  # noqa: E402
from deltaguard.leases.store import open_store  # noqa: E402

PROFILE = EngineProfile(EngineName.DELTA_SPARK, "4.0")
CONFIG = TableConfig(partition_columns=("date",), version=1)
OPS = (
    Operation(OperationKind.INSERT),
    Operation(OperationKind.MERGE, merge_condition="t.id = s.id AND t.date = '2024-01-01'"),
)


def table_uri(i: int) -> str:
    return f"s3://bench/warehouse/table_{i:05d}"


def populate(url: str, tables: int, history: int) -> None:
    """Create the schema, ``tables`` table rows with configuration, ``history`` log entries and standing
    INSERT leases on every tenth table (bulk SQL: setup is not what is measured)."""
    now = time.time()
    config_json = codec.dumps(codec.config_to_json(CONFIG))
    owner = Owner(dag_id="bench", task_id="standing")
    op_json = codec.dumps(codec.operation_to_json(OPS[0]))
    with open_store(url) as store:
        engine: sa.Engine = store.engine  # type: ignore[attr-defined]
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO dg_tables (uri, fencing, config_version, config_json) VALUES (:u, 1, 1, :c)"
                ),
                [{"u": table_uri(i), "c": config_json} for i in range(tables)],
            )
            conn.execute(
                sa.text(
                    "INSERT INTO dg_leases (lease_id, uri, owner_key, owner_json, op_json, granted_at, expires_at, "
                    "fencing, ttl_s) VALUES (:id, :u, :k, :o, :op, :now, :exp, 1, 86400)"
                ),
                [
                    {
                        "id": f"standing-{i}",
                        "u": table_uri(i),
                        "k": owner.key,
                        "o": codec.dumps(owner.to_json()),
                        "op": op_json,
                        "now": now,
                        "exp": now + 86400,
                    }
                    for i in range(0, tables, 10)
                ],
            )
            rng = random.Random(7)
            batch = []
            for n in range(history):
                batch.append(
                    {
                        "at": now - rng.uniform(0, 6 * 86400),
                        "k": rng.choice(("grant", "wait", "release")),
                        "r": f"old-{n}",
                        "u": table_uri(rng.randrange(tables)),
                        "o": owner.key,
                        "d": "{}",
                    }
                )
                if len(batch) == 10_000:
                    conn.execute(
                        sa.text(
                            "INSERT INTO dg_decisions (at, kind, request_id, uri, owner_key, detail) "
                            "VALUES (:at, :k, :r, :u, :o, :d)"
                        ),
                        batch,
                    )
                    batch = []
            if batch:
                conn.execute(
                    sa.text(
                        "INSERT INTO dg_decisions (at, kind, request_id, uri, owner_key, detail) "
                        "VALUES (:at, :k, :r, :u, :o, :d)"
                    ),
                    batch,
                )
        if engine.dialect.name == "postgresql":
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                conn.execute(sa.text("ANALYZE"))


def requester(url: str, worker: int, tables: int, duration_s: float, start: Any, out: Any) -> None:
    manager = LeaseManager(url)
    manager.decide  # noqa: B018 - import the model before the clock starts
    owner = Owner(dag_id="bench", task_id=f"req{worker}")
    rng = random.Random(worker)
    # Warm the connection pool and statement caches outside the measurement.
    warm = LeaseRequest(
        (TableClaim(table_uri(1), OPS[0], PROFILE, CONFIG),), owner, request_id=f"warm-{os.getpid()}-{worker}"
    )
    manager.acquire(warm)
    manager.release(warm.request_id, owner)
    start.wait(300)
    latencies: list[float] = []
    end = time.monotonic() + duration_s
    n = 0
    while time.monotonic() < end:
        request = LeaseRequest(
            (TableClaim(table_uri(rng.randrange(tables)), rng.choice(OPS), PROFILE, CONFIG),),
            owner,
            request_id=f"r{os.getpid()}-{worker}-{n}",
        )
        t0 = time.perf_counter()
        manager.acquire(request)
        latencies.append(time.perf_counter() - t0)
        manager.release(request.request_id, owner)
        n += 1
    out.put(latencies)
    manager.store.close()


def measure(
    url: str, store: str, requesters: int, tables: int, history: int, duration_s: float
) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(requesters + 1)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=requester, args=(url, w, tables, duration_s, start, out))
        for w in range(requesters)
    ]
    for p in procs:
        p.start()
    start.wait(300)
    t0 = time.monotonic()
    results = [out.get(timeout=duration_s + 300) for _ in procs]
    wall = time.monotonic() - t0
    for p in procs:
        p.join(60)
    latencies = sorted(x for r in results for x in r)
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    row = {
        "store": store,
        "requesters": requesters,
        "tables": tables,
        "history_decisions": history,
        "decisions": len(latencies),
        "p50_ms": round(q[49] * 1000, 2),
        "p99_ms": round(q[98] * 1000, 2),
        "decisions_per_s": round(len(latencies) / wall, 1),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(row), flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--requesters", default="1,8,32")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measurement")
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--history", type=int, default=100_000)
    parser.add_argument("--pg-url", help="an empty PostgreSQL database (default: a throwaway cluster)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "leases.json"))
    args = parser.parse_args()
    counts = [int(x) for x in args.requesters.split(",")]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-leases-") as tmp:
        for store in args.stores.split(","):
            if store == "sqlite":
                rows += run_store(store, lambda name: f"sqlite:///{tmp}/{name}.db", counts, args)
            elif store == "postgres":
                if args.pg_url:
                    rows += run_store(store, _pg_databases(args.pg_url), counts, args)
                else:
                    from tests.pg import throwaway_postgres

                    with throwaway_postgres(max_connections=120) as server:
                        rows += run_store(store, _pg_databases(server), counts, args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


def _pg_databases(server: str) -> Any:
    def make(name: str) -> str:
        engine = sa.create_engine(server, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        engine.dispose()
        return server.rsplit("/", 1)[0] + f"/{name}"

    return make


def run_store(store: str, make_url: Any, counts: list[int], args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    big = make_url("bench_big")
    populate(big, args.tables, args.history)
    for n in counts:
        rows.append(measure(big, store, n, args.tables, args.history, args.duration))
    small = make_url("bench_small")
    populate(small, 100, 0)
    for n in (1, 8):
        rows.append(measure(small, store, n, 100, 0, args.duration))
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
