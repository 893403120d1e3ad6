"""A throwaway PostgreSQL whose first port was taken meanwhile starts on another (``tests.pg``).

``make test`` runs two test workers side by side, each starting its own cluster on a port that was free
when picked but is not held until the server binds it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

import tests.pg as pg

pytestmark = pytest.mark.postgres


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port some other process listens on for the whole test."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def test_a_cluster_whose_port_was_taken_starts_on_a_free_one(
    taken_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    if pg.find_pg_bin() is None:
        pytest.skip("no PostgreSQL server binaries (install the 'postgresql' package)")
    picks = iter([taken_port])
    real_free_port = pg._free_port
    monkeypatch.setattr(pg, "_free_port", lambda: next(picks, None) or real_free_port())
    with pg.throwaway_postgres() as url:
        assert f":{taken_port}/" not in url
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar_one() == 1
        engine.dispose()
