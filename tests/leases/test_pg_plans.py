"""The PostgreSQL store's query plans: decisions look rows up by index, however the tables grew.

A plan cached while a table was nearly empty used to keep scanning the whole table after it had grown (the
request-id lookup in ``dg_requests`` reached half a millisecond per decision in the benchmark), so the
store's sessions force generic plans without sequential scans (ADR 0004). The scan counters of the store's
own tables show whether any decision read a whole table.
"""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa

from deltaguard.leases.manager import LeaseManager

from .conftest import op, request

pytestmark = pytest.mark.postgres

STORE_TABLES = ("dg_tables", "dg_leases", "dg_queue", "dg_requests", "dg_decisions")


def _sequential_scans(engine: sa.Engine) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT relname, seq_scan FROM pg_stat_user_tables WHERE relname = ANY(:names)"),
            {"names": list(STORE_TABLES)},
        )
        return {name: int(count) for name, count in rows}


def _settled_sequential_scans(engine: sa.Engine) -> dict[str, int]:
    """Sequential scans per store table, once every store session has ended.

    A backend hands its table statistics over when it exits, so the store's sessions must be gone first."""
    deadline = time.monotonic() + 30
    with engine.connect() as conn:
        while time.monotonic() < deadline:
            left = conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'deltaguard-leases' "
                    "AND datname = current_database()"
                )
            ).scalar()
            if left == 0:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the store's sessions did not end")
    return _sequential_scans(engine)


def test_decisions_never_scan_a_whole_table_after_it_grew(pg_url: str) -> None:
    """Plans are cached while the tables are nearly empty; then ``dg_requests`` and the log grow by thousands
    of rows; later decisions (fast paths and the general path: grant beside a holder, queue, withdraw) must
    still reach their rows through indexes."""
    observer = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    # Creating the schema scans tables (index builds, a table rewrite): count from after it.
    LeaseManager(pg_url).store.close()
    before = _settled_sequential_scans(observer)
    manager = LeaseManager(pg_url)
    try:
        standing = request("standing", ("s3://t/busy", op("INSERT")))
        manager.acquire(standing)

        def cycles(tag: str, count: int) -> None:
            for n in range(count):
                idle = request(f"{tag}-idle-{n}", (f"s3://t/idle-{n % 3}", op("MERGE")))
                beside = request(f"{tag}-beside-{n}", ("s3://t/busy", op("INSERT")))
                queued = request(f"{tag}-queued-{n}", ("s3://t/busy", op("MERGE")))
                for each in (idle, beside, queued):
                    manager.acquire(each)
                for each in (idle, beside, queued):
                    manager.release(each.request_id, each.owner)

        cycles("warm", 12)  # past psycopg's prepare threshold: the plans are cached now
        with observer.connect() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO dg_requests (request_id, owner_key, status, rank, enqueued_at, expires_at, "
                    "payload, updated_at) SELECT 'old-' || n, 'k', 'released', 0, 0, 0, '{}', 0 "
                    "FROM generate_series(1, 20000) AS n"
                )
            )
            conn.execute(
                sa.text(
                    "INSERT INTO dg_decisions (at, kind, request_id, uri, owner_key, detail) "
                    "SELECT 0, 'grant', 'old-' || n, 's3://t/old', 'k', '{}' FROM generate_series(1, 20000) AS n"
                )
            )
        cycles("grown", 12)
    finally:
        manager.store.close()
    after = _settled_sequential_scans(observer)
    observer.dispose()
    assert set(after) == set(STORE_TABLES)
    assert {name: after[name] - before.get(name, 0) for name in STORE_TABLES} == dict.fromkeys(
        STORE_TABLES, 0
    )
