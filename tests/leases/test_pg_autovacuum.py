"""Less work for autovacuum on the PostgreSQL store's tables (ADR 0011).

Every VACUUM or ANALYZE of a table makes each session re-plan the statements that read it on its next call,
all sessions at once. The store's plans do not depend on column statistics, so automatic ANALYZE is switched
off for its tables while automatic VACUUM keeps them small; and closing a request updates its row in place,
which leaves VACUUM no index entries to clean up.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
import sqlalchemy as sa

from deltaguard.core.admission import Granted
from deltaguard.leases.manager import LeaseManager
from deltaguard.leases.open import open_store

from .conftest import op, request

pytestmark = pytest.mark.postgres

T = TypeVar("T")

STORE_TABLES = ("dg_tables", "dg_leases", "dg_queue", "dg_requests", "dg_decisions")


def _options(conn: sa.Connection) -> dict[str, dict[str, str]]:
    rows = conn.execute(
        sa.text("SELECT relname, reloptions FROM pg_class WHERE relname = ANY(:names) AND relkind = 'r'"),
        {"names": list(STORE_TABLES)},
    )
    return {name: dict(option.split("=", 1) for option in options or ()) for name, options in rows}


def test_store_tables_carry_their_autovacuum_settings(pg_url: str) -> None:
    with open_store(pg_url) as store, store.engine.connect() as conn:
        options = _options(conn)
    assert set(options) == set(STORE_TABLES)
    for table in STORE_TABLES:
        assert options[table]["autovacuum_analyze_threshold"] == "2147483647", table
    for table in ("dg_leases", "dg_queue"):
        assert options[table]["vacuum_truncate"] == "false", table
    for table in ("dg_requests", "dg_decisions"):
        assert options[table]["autovacuum_vacuum_insert_scale_factor"] == "1.0", table
    assert options["dg_requests"]["fillfactor"] == "70"
    # The table every decision locks keeps its default vacuum; only analyze is off.
    assert set(options["dg_tables"]) == {"autovacuum_analyze_threshold"}


@pytest.fixture
def quick_autovacuum(pg_server: str) -> Iterator[None]:
    """The server's autovacuum wakes every second for this test (default: every minute), then as before."""
    admin = sa.create_engine(pg_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text("ALTER SYSTEM SET autovacuum_naptime = 1"))
        conn.execute(sa.text("SELECT pg_reload_conf()"))
    try:
        yield
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text("ALTER SYSTEM RESET autovacuum_naptime"))
            conn.execute(sa.text("SELECT pg_reload_conf()"))
        admin.dispose()


def _churn(url: str, cycles: int) -> None:
    """Real decisions on 20 tables: each cycle grants and releases one INSERT lease."""
    with open_store(url) as store:
        manager = LeaseManager(store)
        for n in range(cycles):
            asked = request(f"r{n}", (f"t{n % 20}", op("INSERT")))
            assert isinstance(manager.acquire(asked), Granted)
            assert manager.release(asked.request_id, asked.owner)


def _poll(
    observer: sa.Engine, read: Callable[[sa.Connection], T], done: Callable[[T], bool], timeout_s: float
) -> T:
    """``read`` from a new session until ``done`` says so; a session hands its table statistics over when
    it ends, so each read opens its own.

    :raises AssertionError: when ``done`` never holds within ``timeout_s``, with the last reading.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        with observer.connect() as conn:
            reading = read(conn)
        if done(reading):
            return reading
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached in {timeout_s} s; last reading: {reading}")
        time.sleep(0.3)


def _counts(conn: sa.Connection) -> dict[str, tuple[int, int]]:
    rows = conn.execute(
        sa.text(
            "SELECT relname, autovacuum_count, autoanalyze_count FROM pg_stat_user_tables "
            "WHERE relname = ANY(:names)"
        ),
        {"names": [*STORE_TABLES, "control"]},
    )
    return {name: (int(vacuums), int(analyzes)) for name, vacuums, analyzes in rows}


@pytest.mark.usefixtures("quick_autovacuum")
def test_autovacuum_vacuums_but_never_analyzes_the_store_tables(pg_url: str) -> None:
    """Real decisions churn the store's tables past the default thresholds, and a control table with default
    settings gets the same churn: once autovacuum has analyzed the control and vacuumed the lease table, no
    store table has been analyzed."""
    _churn(pg_url, 300)
    observer = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        with observer.connect() as conn:
            conn.execute(sa.text("CREATE TABLE control (id INTEGER PRIMARY KEY)"))
            for _ in range(3):
                conn.execute(sa.text("INSERT INTO control SELECT generate_series(1, 300)"))
                conn.execute(sa.text("DELETE FROM control"))
        counts = _poll(
            observer,
            _counts,
            lambda c: c.get("control", (0, 0))[1] >= 1 and c.get("dg_leases", (0, 0))[0] >= 1,
            timeout_s=90,
        )
    finally:
        observer.dispose()
    assert {table: counts[table][1] for table in STORE_TABLES} == dict.fromkeys(STORE_TABLES, 0)


def test_closing_a_request_rewrites_its_row_in_place(pg_url: str) -> None:
    """No index covers what closing a request changes (status, update time), and its table keeps room on each
    page, so PostgreSQL updates the row in place (HOT): no new index entries, no dead ones for VACUUM."""
    cycles = 200
    _churn(pg_url, cycles)
    observer = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    query = sa.text("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'dg_requests'")
    try:
        updates, in_place = _poll(
            observer, lambda conn: tuple(conn.execute(query).one()), lambda c: c[0] >= cycles, timeout_s=30
        )
    finally:
        observer.dispose()
    assert in_place >= 0.9 * updates, (updates, in_place)
