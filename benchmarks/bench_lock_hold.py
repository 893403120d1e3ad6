"""How long one admission decision holds the lease store's locks, with the engine's evaluator asked outside the
store transaction (the product, ADR 0037 decision 5) and, for comparison, inside it.

Run: ``nice -n 5 .venv/bin/python -m benchmarks.bench_lock_hold`` (writes ``benchmarks/results/lock_hold.json``;
``--stores sqlite`` when PostgreSQL is not installed). ``--cold`` makes each measured decision in a new Python
process, the first decision of that process, as a task's is (``lock_hold_cold.json``). ``--processes K``
runs K processes deciding at once, each on a table of its own beside 4 holders, and releasing each lease
after its decision (``lock_hold_Kp.json``): what a decision and a release cost while others decide. A
transaction's time then includes its wait for the locks others hold.

The workload, fixed before any figure was read: a delta-rs table partitioned by an INT ``k`` (the lease tests'
``INTS``), *n* holders each holding a DELETE of one partition (``k = 1`` .. ``k = n``), and a measured DELETE of
``k = n + 1``, asked ``--decisions`` times (20) beside them, each time by a lease manager of its own with a new
evaluator (nothing kept from an earlier answer: a task process's first question) and released after. Every pair is separated only by the
evaluator's answer, so each measured decision asks it *n* questions. Holders 1, 2, 4 and 8.

Per decision it records the store transactions the decision ran (``SqlLeaseStore.run`` and PostgreSQL's
``run_on_snapshot``, each one transaction), the time each was open (for SQLite, the store's one write lock is
held for all of it; for PostgreSQL, the table rows' locks), the time the evaluator spent answering
(``DataFusionOracle._evaluate``) and how many of its calls ran while a transaction was open.

``outside`` is the product. ``inside`` wraps the same evaluator without its answer cache, so each question is
asked where the decision meets it, inside the transaction: the behaviour before the evaluator was moved out.
Figures are medians and worst cases over the decisions of a cell; every row records the 1-minute load average.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deltaguard.core.admission import Granted, LeaseRequest, Owner  # noqa: E402
from deltaguard.core.oracle import Truth  # noqa: E402
from deltaguard.engines.deltars.meaning import DataFusionOracle  # noqa: E402
from deltaguard.leases.manager import LeaseManager  # noqa: E402
from deltaguard.leases.sql.base import SqlLeaseStore  # noqa: E402
from deltaguard.leases.sql.postgres import PostgresLeaseStore  # noqa: E402
from tests.leases.conftest import INTS_URI, int_delete_request  # noqa: E402

HOLDERS = (1, 2, 4, 8)
MODES = ("outside", "inside")


class _Watch:
    """Times the store transactions and the evaluator's calls of this process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open = 0
        self.transactions: list[float] = []
        self.engine_s: list[float] = []
        self.asked_inside = 0

    def transaction(self, method: Callable[..., Any]) -> Callable[..., Any]:
        return self._timed(method, self.transactions, opens=1)

    def evaluator(self, method: Callable[..., Any]) -> Callable[..., Any]:
        return self._timed(method, self.engine_s, opens=0)

    def _timed(self, method: Callable[..., Any], into: list[float], opens: int) -> Callable[..., Any]:
        """``method``, its calls' seconds added to ``into``; ``opens``: 1 for a store transaction (counted
        open while it runs), 0 for an evaluator call (counted as asked inside when one is open)."""

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                if not opens and self.open:
                    self.asked_inside += 1
                self.open += opens
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                with self.lock:
                    self.open -= opens
                    into.append(time.perf_counter() - start)

        return wrapped


@contextlib.contextmanager
def watching() -> Iterator[_Watch]:
    watch = _Watch()
    patched = [
        (SqlLeaseStore, "run", watch.transaction(SqlLeaseStore.run)),
        (PostgresLeaseStore, "run_on_snapshot", watch.transaction(PostgresLeaseStore.run_on_snapshot)),
        (DataFusionOracle, "_evaluate", watch.evaluator(DataFusionOracle._evaluate)),
    ]
    saved = [(cls, name, cls.__dict__[name]) for cls, name, _ in patched]
    for cls, name, value in patched:
        setattr(cls, name, value)
    try:
        yield watch
    finally:
        for cls, name, value in saved:
            setattr(cls, name, value)


class _AskedInside:
    """The same evaluator without its answer cache: each question is asked where the decision meets it."""

    def __init__(self, oracle: DataFusionOracle) -> None:
        self._oracle = oracle

    def evaluate(
        self, predicates: Sequence[str], candidates: Mapping[str, Sequence[str | None]]
    ) -> Sequence[tuple[Truth, ...]]:
        return self._oracle._evaluate(tuple(predicates), candidates)


def _request(who: str, predicate: str, mode: str, uri: str = INTS_URI) -> LeaseRequest:
    inside = _AskedInside if mode == "inside" else None
    return int_delete_request(who, predicate, uri=uri, dag_id="bench", evaluator=inside)


def _summary(values: Sequence[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 2), "worst": round(max(values), 2)}


def _decide_one(
    url: str, holders: int, d: int, mode: str, uri: str = INTS_URI
) -> tuple[dict[str, float], str]:
    """One measured decision by a lease manager of its own (as a task's process has: nothing it was
    answered before is kept); its figures and its lease id."""
    asked = _request(f"measured{d}", f"k = {holders + 1}", mode, uri)
    with watching() as watch:
        writer = LeaseManager(url)
        start = time.perf_counter()
        try:
            answer = writer.acquire(asked)
        finally:
            wall = time.perf_counter() - start
            writer.store.close()
    if not isinstance(answer, Granted):
        raise RuntimeError(f"the measured DELETE was not granted beside {holders}: {answer}")
    row = {
        "transactions": len(watch.transactions),
        "hold_ms": 1000 * sum(watch.transactions),
        "longest_transaction_ms": 1000 * max(watch.transactions),
        "engine_ms": 1000 * sum(watch.engine_s),
        "engine_calls": len(watch.engine_s),
        "asked_inside": watch.asked_inside,
        "decision_ms": 1000 * wall,
    }
    return row, answer.lease_id


def _decide_in_new_process(url: str, holders: int, d: int, mode: str) -> tuple[dict[str, float], str]:
    """:func:`_decide_one` in a new interpreter: the first decision of a process, as a task's."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_lock_hold", "--one", json.dumps([url, holders, d, mode])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    row, lease_id = json.loads(done.stdout.strip().splitlines()[-1])
    return row, lease_id


def measure_cell(url: str, mode: str, holders: int, decisions: int, *, cold: bool = False) -> dict[str, Any]:
    """Decide ``decisions`` DELETEs beside ``holders`` holders on a new store at ``url``, each in a new
    process when ``cold``."""
    manager = LeaseManager(url)
    held: list[tuple[str, Owner]] = []
    try:
        for i in range(1, holders + 1):
            asked = _request(f"holder{i}", f"k = {i}", mode)
            answer = manager.acquire(asked)
            if not isinstance(answer, Granted):
                raise RuntimeError(f"holder {i} was not granted: {answer}")
            held.append((answer.lease_id, asked.owner))
        rows: list[dict[str, float]] = []
        for d in range(decisions):
            row, lease_id = (_decide_in_new_process if cold else _decide_one)(url, holders, d, mode)
            rows.append(row)
            manager.release(lease_id, Owner(dag_id="bench", task_id=f"measured{d}"))
        return {
            "holders": holders,
            "mode": mode,
            "process": "new" if cold else "warm",
            "decisions": decisions,
            "load_average_1m": round(os.getloadavg()[0], 2),
            **{key: _summary([r[key] for r in rows]) for key in rows[0]},
        }
    finally:
        for lease_id, owner in held:
            manager.release(lease_id, owner)
        manager.store.close()


def _decide_many(url: str, holders: int, decisions: int, mode: str, uri: str, start_at: float) -> None:
    """``decisions`` decisions on ``uri`` one after the other, from ``start_at`` (epoch seconds), each released
    after it; prints their figures as JSON (one process of :func:`measure_concurrent`)."""
    time.sleep(max(0.0, start_at - time.time()))
    rows = []
    for d in range(decisions):
        row, lease_id = _decide_one(url, holders, d, mode, uri)
        releaser = LeaseManager(url)
        start = time.perf_counter()
        try:
            releaser.release(lease_id, Owner(dag_id="bench", task_id=f"measured{d}"))
        finally:
            row["release_ms"] = 1000 * (time.perf_counter() - start)
            releaser.store.close()
        rows.append(row)
    print(json.dumps(rows))


def measure_concurrent(url: str, mode: str, holders: int, decisions: int, processes: int) -> dict[str, Any]:
    """``processes`` processes deciding at once, each ``decisions`` DELETEs beside ``holders`` holders of a
    table of its own, on one store at ``url``: what a decision costs when others decide beside it."""
    manager = LeaseManager(url)
    uris = [f"{INTS_URI}{j}" for j in range(processes)]
    held: list[tuple[str, Owner]] = []
    try:
        for uri in uris:
            for i in range(1, holders + 1):
                asked = _request(f"holder{i}", f"k = {i}", mode, uri)
                answer = manager.acquire(asked)
                if not isinstance(answer, Granted):
                    raise RuntimeError(f"holder {i} of {uri} was not granted: {answer}")
                held.append((answer.lease_id, asked.owner))
        start_at = time.time() + 8.0  # after every process has started and imported
        workers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.bench_lock_hold",
                    "--many",
                    json.dumps([url, holders, decisions, mode, uri, start_at]),
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for uri in uris
        ]
        rows: list[dict[str, float]] = []
        for worker in workers:
            out, _ = worker.communicate()
            if worker.returncode != 0:
                raise RuntimeError(f"a deciding process failed ({worker.returncode})")
            rows.extend(json.loads(out.strip().splitlines()[-1]))
        return {
            "holders": holders,
            "mode": mode,
            "process": "warm",
            "processes": processes,
            "decisions": decisions * processes,
            "load_average_1m": round(os.getloadavg()[0], 2),
            **{key: _summary([r[key] for r in rows]) for key in rows[0]},
        }
    finally:
        for lease_id, owner in held:
            manager.release(lease_id, owner)
        manager.store.close()


def _store_urls(
    stores: Sequence[str], stack: contextlib.ExitStack
) -> Iterator[tuple[str, Callable[[], str]]]:
    for store in stores:
        if store == "sqlite":
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="deltaguard-lock-hold-"))
            counter = iter(range(10_000))
            yield (
                store,
                lambda folder=folder, counter=counter: f"sqlite:///{folder}/leases-{next(counter)}.db",
            )
        elif store == "postgres":
            from tests.leases.conftest import fresh_pg_database
            from tests.pg import throwaway_postgres

            server = stack.enter_context(throwaway_postgres())
            yield store, lambda server=server: fresh_pg_database(server)
        else:
            raise SystemExit(f"unknown store {store!r} (sqlite, postgres)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--decisions", type=int, default=20)
    parser.add_argument("--cold", action="store_true", help="each measured decision in a new process")
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--processes", type=int, default=1, help="that many processes deciding at once, each on its own table"
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # [url, holders, d, mode]: one decision, as JSON
    parser.add_argument("--many", help=argparse.SUPPRESS)  # the arguments of _decide_many, as JSON
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(_decide_one(*json.loads(args.one))))
        return 0
    if args.many:
        _decide_many(*json.loads(args.many))
        return 0
    name = (
        "lock_hold" + ("_cold" if args.cold else "") + (f"_{args.processes}p" if args.processes > 1 else "")
    )
    out = args.out or str(ROOT / "benchmarks" / "results" / f"{name}.json")
    holder_counts = HOLDERS if args.processes == 1 else (4,)
    results: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        for store, new_url in _store_urls(args.stores.split(","), stack):
            for holders in holder_counts:
                for mode in MODES:
                    if args.processes > 1:
                        cell = measure_concurrent(new_url(), mode, holders, args.decisions, args.processes)
                    else:
                        cell = measure_cell(new_url(), mode, holders, args.decisions, cold=args.cold)
                    row = {"store": store, **cell}
                    results.append(row)
                    print(
                        f"{store:8} {mode:7} holders={holders}: hold {row['hold_ms']['median']}"
                        f"/{row['hold_ms']['worst']} ms, longest transaction "
                        f"{row['longest_transaction_ms']['median']}/{row['longest_transaction_ms']['worst']} ms,"
                        f" engine {row['engine_ms']['median']}/{row['engine_ms']['worst']} ms, transactions "
                        f"{row['transactions']['median']}/{row['transactions']['worst']}, asked inside "
                        f"{row['asked_inside']['worst']} (median/worst; load {row['load_average_1m']})",
                        flush=True,
                    )
    Path(out).write_text(json.dumps({"rows": results}, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
