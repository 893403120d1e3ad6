"""Lease manager benchmark: decision latency (p50/p99) and throughput on SQLite and PostgreSQL.

Run: ``.venv/bin/python benchmarks/bench_leases.py`` (writes ``benchmarks/results/leases.json``).

Setup per store: 10,000 tables (each with a stored configuration), 100,000 historical decision-log entries,
and a standing blind-INSERT lease on every tenth table, so some decisions call the conflict model and either
grant (INSERT beside INSERT) or queue (MERGE behind INSERT on a Serializable table). A requester picks a
random table, ``acquire``s (timed: this is the decision), then ``release``s (or withdraws the queued request).

Two modes (the ``mode`` field of each row):

* ``closed_loop``: each requester issues its next request as soon as the previous release returns. This
  measures maximum throughput; its latency hides queueing (a slow answer delays the next request).
* ``open_loop``: requesters issue requests at a fixed aggregate rate (``offered_per_s``: ``--rate``, at most
  ``--rate-per-requester`` per requester) with exponential gaps (Poisson arrivals), the way independent
  Airflow tasks arrive. Latency runs from each request's *scheduled* send time, so a request stuck behind a
  slow one counts its wait (no coordinated omission); ``decisions_per_s`` is what was achieved. One more
  open-loop row with the most requesters runs at ``--moderate-rate`` (below saturation).

Windows: closed-loop and flatness rows run ``--duration`` (8 s); other open-loop rows run ``--open-duration``
(60 s), because PostgreSQL's autovacuum visits the store's churning tables once a minute (its naptime), and
each visit brings a burst of slow decisions (the visit's own CPU, and every backend re-plans its cached
statements on a table whose planner statistics the vacuum or analyze updated). An 8-s window holds about 4,000
decisions, so its p99 is the 40th slowest: one burst inside it decides the p99, and a window without one hides
it. A 60-s window weighs the bursts at their real rate. Each row also gives ``p999_ms``, the tail the bursts
live in. A longer window does not remove the machine's own drift: compare commits in alternating runs (ADR
0008).

Requesters are separate processes, not threads: Airflow workers are processes, and threads would measure
the GIL instead of the store's concurrency. On a 2-core machine 32 processes over-subscribe the CPU.

``--series 32:500,32:200 --repeat 5 --out ...`` runs only those open-loop rows, repeatedly, on the big database
(the spread of p99 between runs, each repeat with its own arrival schedule and tables;
``benchmarks/results/leases_series.json``).

Flatness ("cost does not grow with tables or log size"): the same workload, 1 requester closed loop and 8
requesters open loop, against 100 tables with an empty log (``small``), 10,000 tables with an empty log and
100 tables with the full log. Every row records the 1-minute load average of the (shared) machine.
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
from deltaguard.leases.open import open_store  # noqa: E402

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


def _warm(manager: LeaseManager, owner: Owner, tables: int, tag: str) -> None:
    """Open the pool's connection, let psycopg prepare the repeated statements (after 5 uses) and let the
    conflict model parse the workload's predicates once, outside the measurement: every path is taken
    (an idle table, INSERT beside the standing INSERT, MERGE queued behind it).

    A process's first model call costs far more (imports, parsing; see ``benchmarks/bench_model.py`` for
    cold figures); this benchmark measures the steady state of a long-lived requester."""
    for n in range(12):
        table = table_uri((n * 7919) % tables) if n % 3 else table_uri((n * 7919) % tables // 10 * 10)
        for operation in OPS:
            warm = LeaseRequest(
                (TableClaim(table, operation, PROFILE, CONFIG),),
                owner,
                request_id=f"{tag}-{n}-{operation.kind.value}",
            )
            manager.acquire(warm)
            manager.release(warm.request_id, owner)


def _request(rng: random.Random, tables: int, owner: Owner, request_id: str) -> LeaseRequest:
    return LeaseRequest(
        (TableClaim(table_uri(rng.randrange(tables)), rng.choice(OPS), PROFILE, CONFIG),),
        owner,
        request_id=request_id,
    )


def requester(
    url: str,
    worker: int,
    tables: int,
    duration_s: float,
    rate: float,
    start: Any,
    start_at: Any,
    out: Any,
    seed: int = 0,
) -> None:
    """One requester process. ``rate`` 0: closed loop (acquire, release, repeat, timing each acquire).
    ``rate`` > 0: open loop, this process's share of the offered rate, with exponential gaps (Poisson
    arrivals); latency runs from the *scheduled* send time, so a request delayed behind a slow one counts
    its wait (no coordinated omission). ``seed`` picks the arrival schedule and tables (with ``worker``)."""
    manager = LeaseManager(url)
    manager.decide  # noqa: B018 - import the model before the clock starts
    owner = Owner(dag_id="bench", task_id=f"req{worker}")
    rng = random.Random(seed * 10_007 + worker)
    _warm(manager, owner, tables, f"warm-{os.getpid()}-{worker}")
    start.put(None)  # ready
    start_at.wait(300)  # ... until the parent publishes the common start time
    # Translate the shared wall-clock start into this process's perf_counter timeline.
    base = time.perf_counter() + (start_at.when.value - time.time())
    latencies: list[float] = []
    end = base + duration_s
    n = 0
    due = base
    while True:
        if rate > 0:
            due += rng.expovariate(rate)
            if due >= end:
                break
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        else:
            due = time.perf_counter()
            if due >= end:
                break
        request = _request(rng, tables, owner, f"r{os.getpid()}-{worker}-{n}")
        manager.acquire(request)
        latencies.append(time.perf_counter() - due)
        manager.release(request.request_id, owner)
        n += 1
    elapsed = time.perf_counter() - base
    # Stay idle until every requester's window has closed: a process that exits (interpreter teardown,
    # its server backend ending) would otherwise steal CPU from requesters still being measured.
    time.sleep(max(0.0, end + 1.0 - time.perf_counter()))
    out.put((latencies, elapsed))
    manager.store.close()


class _StartSignal:
    """A start time shared by all requesters: published once by the parent, read after ``wait``."""

    def __init__(self, ctx: Any) -> None:
        self.when = ctx.Value("d", 0.0)
        self.event = ctx.Event()

    def publish(self, at: float) -> None:
        self.when.value = at
        self.event.set()

    def wait(self, timeout: float) -> None:
        if not self.event.wait(timeout):
            raise TimeoutError("the benchmark never started")


def measure(
    url: str,
    store: str,
    requesters: int,
    tables: int,
    history: int,
    duration_s: float,
    offered: float = 0.0,
    seed: int = 0,
) -> dict[str, Any]:
    """One row: closed loop when ``offered`` is 0, else open loop at ``offered`` acquires/s in aggregate.
    ``seed`` 0 is the fixed workload of the main rows; repeats of ``--series`` use others, so that their
    spread covers different arrival schedules, not one schedule replayed."""
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Queue()
    start_at = _StartSignal(ctx)
    out = ctx.Queue()
    share = offered / requesters
    procs = [
        ctx.Process(target=requester, args=(url, w, tables, duration_s, share, start, start_at, out, seed))
        for w in range(requesters)
    ]
    for p in procs:
        p.start()
    for _ in procs:  # every requester is warmed up
        start.get(timeout=300)
    start_at.publish(time.time() + 0.2)
    results = [out.get(timeout=duration_s + 300) for _ in procs]
    for p in procs:
        p.join(60)
    latencies = sorted(x for r, _ in results for x in r)
    wall = max(elapsed for _, elapsed in results)
    q = statistics.quantiles(latencies, n=1000, method="inclusive")
    row = {
        "store": store,
        "mode": "open_loop" if offered else "closed_loop",
        "offered_per_s": offered or None,
        "requesters": requesters,
        "tables": tables,
        "history_decisions": history,
        "decisions": len(latencies),
        "p50_ms": round(q[499] * 1000, 2),
        "p99_ms": round(q[989] * 1000, 2),
        "p999_ms": round(q[998] * 1000, 2),
        "duration_s": duration_s,
        "decisions_per_s": round(len(latencies) / wall, 1),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }
    if seed:
        row["seed"] = seed
    print(json.dumps(row), flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--requesters", default="1,8,32")
    parser.add_argument(
        "--duration", type=float, default=8.0, help="seconds per closed-loop and flatness measurement"
    )
    parser.add_argument(
        "--open-duration",
        type=float,
        default=60.0,
        help="seconds per open-loop measurement on the big database (at least autovacuum's one-minute naptime, "
        "so that its visits weigh in the percentiles at their real rate)",
    )
    parser.add_argument("--rate", type=float, default=500.0, help="open-loop offered acquires/s (aggregate)")
    parser.add_argument(
        "--moderate-rate",
        type=float,
        default=200.0,
        help="an extra open-loop row at this rate with the most requesters (0: none)",
    )
    parser.add_argument(
        "--rate-per-requester",
        type=float,
        default=100.0,
        help="open-loop cap per requester (one requester offers at most this many acquires/s)",
    )
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--history", type=int, default=100_000)
    parser.add_argument("--pg-url", help="an empty PostgreSQL database (default: a throwaway cluster)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "leases.json"))
    parser.add_argument(
        "--series",
        help="instead of the full set: only these open-loop rows, as requesters:rate pairs (e.g. 32:500,32:200), "
        "each --repeat times on the big database, to show the spread of p99 between runs",
    )
    parser.add_argument("--repeat", type=int, default=3, help="how many times --series runs each row")
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
    if args.series:
        for attempt in range(args.repeat):
            for pair in args.series.split(","):
                n, rate = pair.split(":")
                row = measure(
                    big,
                    store,
                    int(n),
                    args.tables,
                    args.history,
                    args.open_duration,
                    float(rate),
                    seed=attempt + 1,
                )
                rows.append({**row, "repeat": attempt + 1})
        return rows
    for n in counts:
        rows.append(measure(big, store, n, args.tables, args.history, args.duration))
    for n in counts:
        rate = min(args.rate, args.rate_per_requester * n)
        rows.append(measure(big, store, n, args.tables, args.history, args.open_duration, rate))
    # Below saturation: the latency a moderate, steady arrival rate sees with many requesters.
    if args.moderate_rate:
        rows.append(
            measure(
                big, store, max(counts), args.tables, args.history, args.open_duration, args.moderate_rate
            )
        )
    # Flatness: the same per-decision work against fewer tables and/or an empty log.
    for name, tables, history in (
        ("small", 100, 0),
        ("tables_only", args.tables, 0),
        ("log_only", 100, args.history),
    ):
        url = make_url(f"bench_{name}")
        populate(url, tables, history)
        rows.append(measure(url, store, 1, tables, history, args.duration))
        rows.append(measure(url, store, 8, tables, history, args.duration, args.rate))
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
