"""The ``pg_server`` fixture, shared by the test directories that need a real PostgreSQL.

The root conftest (``tests/conftest.py``) imports it, once, so one cluster serves a whole test process.
:mod:`tests.pg` stays free of pytest, because the lease benchmark imports it too.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pg import find_pg_bin, throwaway_postgres


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """A throwaway PostgreSQL cluster for the session; skips with the reason when none is installed."""
    if find_pg_bin() is None:
        pytest.skip("no PostgreSQL server binaries (install the 'postgresql' package)")
    with throwaway_postgres() as url:
        yield url
