"""Per-date UPDATEs through the lease manager, with and without file statistics (ADR 0020).

Run: ``.venv/bin/python benchmarks/bench_file_stats_leases.py [--days 200] [--requests 50]``.

Builds an unpartitioned delta-rs table with one file per day (``--days`` files of ten rows), then asks a
fresh SQLite lease store for ``--requests`` leases, each an ``UPDATE ... WHERE day = <its day>`` held
until the end (none is released). With statistics each request carries the configuration and statistics of
the table's version and pins it (``read_version``); without, the predicate-only rules decide. Prints how
many were granted side by side, the median and largest ``acquire`` time, and how long reading the
configuration with statistics took.
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time

import pyarrow as pa
from deltalake import write_deltalake

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.discovery import read_table_config
from deltaguard.engines.specs import UpdateSpec
from deltaguard.leases.manager import LeaseManager


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=200)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="deltaguard-stats-leases-")
    uri = f"{root}/table"
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(args.days)]
    for i, day in enumerate(days):
        frame = pa.table(
            {
                "id": pa.array(range(i * 10, i * 10 + 10), pa.int64()),
                "day": pa.array([day] * 10, pa.date32()),
                "v": pa.array([0] * 10, pa.int64()),
            }
        )
        write_deltalake(uri, frame, mode="append")
    profile = DeltaRsEngine().profile()
    started = time.perf_counter()
    with_stats = read_table_config(uri, file_stats=True)
    read_ms = (time.perf_counter() - started) * 1000
    for use in (True, False):
        config = with_stats if use else read_table_config(uri)
        manager = LeaseManager(f"sqlite:///{root}/leases-{use}.db")
        latencies: list[float] = []
        granted = 0
        for i, day in enumerate(days[: args.requests]):
            operation = UpdateSpec({"v": "v + 1"}, f"day = '{day.isoformat()}'").operation()
            claim = TableClaim(uri, operation, profile, config, read_version=config.version if use else None)
            request = LeaseRequest(claims=(claim,), owner=Owner(name=f"w{i}"), request_id=f"r{i}", ttl_s=600)
            started = time.perf_counter()
            answer = manager.acquire(request)
            latencies.append((time.perf_counter() - started) * 1000)
            granted += isinstance(answer, Granted)
        print(
            f"statistics={use}: {granted}/{args.requests} granted side by side; acquire median "
            f"{statistics.median(latencies):.1f} ms, max {max(latencies):.1f} ms"
        )
    print(f"configuration with statistics of {args.days} files read in {read_ms:.0f} ms")


if __name__ == "__main__":
    main()
