"""Profile one re-admission pass (ADR 0031) over a queue of ``n`` appends behind an exclusive holder.

Run: ``nice -n 15 .venv/bin/python -m benchmarks.profile_readmit --n 300 --store sqlite`` (or
``--store postgres``: a throwaway server, as the tests start). Prints the pass's CPU time, the number of model
calls and pair judgements, and the top of its ``cProfile`` by cumulative time. The queue is built with one
``acquire`` per waiter (not profiled); the release is not profiled either: only ``readmit``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import dataclasses
import io
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from deltaguard.core import model  # noqa: E402
from deltaguard.core.admission import Granted, Waiting  # noqa: E402
from deltaguard.leases.manager import LeaseManager  # noqa: E402
from tests.leases.conftest import FakeClock, op, request  # noqa: E402


@contextlib.contextmanager
def _store(kind: str) -> Iterator[str]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            yield f"sqlite:///{tmp}/leases.db"
        return
    from tests.leases.conftest import fresh_pg_database
    from tests.pg import throwaway_postgres

    with throwaway_postgres() as server:
        yield fresh_pg_database(server)


def profile(url: str, n: int, top: int, labels: bool = False, sort: str = "cumulative") -> dict[str, float]:
    """Queue ``n`` appends behind an exclusive holder, release it, and profile one ``readmit`` (``top``: how
    many lines of the profile to print; 0: time the pass without the profiler; ``labels``: every append
    has its own label, as the triggerer benchmark's have; ``sort``: the profile's order, e.g. ``tottime``)."""
    clock = FakeClock()
    manager = LeaseManager(url, clock=clock)
    holder = manager.acquire(request("alter", ("t1", op("SET_TBLPROPERTIES")), ttl_s=7200))
    assert isinstance(holder, Granted)
    for i in range(n):
        clock.advance(0.001)
        append = dataclasses.replace(op("INSERT"), label=f"append{i}") if labels else op("INSERT")
        assert isinstance(manager.acquire(request(f"w{i}", ("t1", append), wait_ttl_s=7200)), Waiting)
    clock.advance(1)
    manager.release(holder.lease_id, request("alter", ("t1", op("INSERT"))).owner)
    calls = {"decide": 0, "pairs": 0}
    real_decide, real_judge = model.decide, model._judge_all

    def counted_decide(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls["decide"] += 1
        return real_decide(*args, **kwargs)

    def counted_judge(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls["pairs"] += 1
        return real_judge(*args, **kwargs)

    manager._decide = counted_decide
    model._judge_all = counted_judge  # type: ignore[assignment]
    profiler = cProfile.Profile()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if top:
        profiler.enable()
    result = manager.readmit("t1")
    profiler.disable()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    model._judge_all = real_judge  # type: ignore[assignment]
    granted = sum(isinstance(a, Granted) for a in result.answers.values())
    if top:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(sort).print_stats(top)
        print(out.getvalue())
    manager.store.close()
    return {
        "n": n,
        "granted": granted,
        "profiled": bool(top),
        "labels": labels,
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        **calls,
        "load_avg_1m": os.getloadavg()[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--sort", default="cumulative", help="the profile's order (cumulative, tottime, ...)")
    parser.add_argument("--labels", action="store_true", help="a label per append (distinct operations)")
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--top", type=int, default=30, help="profile lines shown; 0: no profiler")
    args = parser.parse_args()
    with _store(args.store) as url:
        print(profile(url, args.n, args.top, args.labels, args.sort))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
