"""The ``pg_server`` fixture, shared by the test directories that need a real PostgreSQL.

A conftest imports it (``from tests.pg_fixtures import pg_server``) to offer it to its directory.
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
