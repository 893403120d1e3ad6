"""A throwaway PostgreSQL cluster for tests, usable from any test directory.

PostgreSQL refuses to run as root, and the test machine runs as root, so pytest-postgresql's
``postgresql_proc`` cannot start the server directly. :func:`throwaway_postgres` creates a cluster in a
temporary directory owned by an unprivileged user (``postgres`` when it exists), listening on 127.0.0.1 on
a free port with its unix socket inside that directory, and removes everything on exit.

Usage::

    from tests.pg import throwaway_postgres
    with throwaway_postgres() as url:   # postgresql+psycopg://postgres@127.0.0.1:PORT/postgres
        ...
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from benchmarks.harness.ports import free_port as _free_port

#: Where Debian/Ubuntu install the server binaries; the newest version wins.
_PG_ROOT = Path("/usr/lib/postgresql")


def find_pg_bin() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or ``None`` when PostgreSQL is not installed.

    ``DELTAGUARD_PG_BIN`` overrides the search.
    """
    override = os.environ.get("DELTAGUARD_PG_BIN")
    if override:
        return Path(override) if (Path(override) / "initdb").exists() else None
    if _PG_ROOT.is_dir():
        versions = sorted(
            (p for p in _PG_ROOT.iterdir() if (p / "bin" / "initdb").exists()),
            key=lambda p: int(p.name) if p.name.isdigit() else 0,
        )
        if versions:
            return versions[-1] / "bin"
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _run_as(user: str | None, argv: list[str]) -> None:
    # Only wrap in runuser when we are root; an unprivileged test run can start the server itself.
    full = ["runuser", "-u", user, "--", *argv] if user else argv
    result = subprocess.run(full, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv[:2])} failed ({result.returncode}): {result.stderr.strip()[-800:]}"
        )


#: how many ports a cluster's start tries before it gives up
_START_ATTEMPTS = 3


def _pg_ctl_start(bin_dir: Path, data: Path, root: Path, port: int, max_connections: int) -> list[str]:
    """The ``pg_ctl start`` command of a cluster listening on 127.0.0.1:``port`` (socket inside ``root``)."""
    options = (
        f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={root} "
        f"-c max_connections={max_connections} -c fsync=off -c synchronous_commit=off "
        "-c full_page_writes=off -c shared_buffers=64MB"
    )
    return [
        str(bin_dir / "pg_ctl"),
        "-D",
        str(data),
        "-o",
        options,
        "-l",
        str(root / "log"),
        "-w",
        "-t",
        "60",
        "start",
    ]


def _stop(user: str | None, bin_dir: Path, data: Path) -> None:
    """Stop the cluster in ``data`` at once, if one runs there."""
    with contextlib.suppress(Exception):
        _run_as(user, [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])


@contextlib.contextmanager
def throwaway_postgres(max_connections: int = 100) -> Iterator[str]:
    """Start a private PostgreSQL cluster; yield its SQLAlchemy URL; stop and delete it afterwards.

    :param max_connections: the server's ``max_connections`` (multi-process tests open many).
    :raises RuntimeError: when no PostgreSQL binaries exist or the server does not start.
    """
    bin_dir = find_pg_bin()
    if bin_dir is None:
        raise RuntimeError("no PostgreSQL server binaries found (install the 'postgresql' package)")
    user: str | None = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
            user = "postgres"
        except KeyError:
            user = "nobody"
    root = Path(tempfile.mkdtemp(prefix="deltaguard-pg-"))
    data = root / "data"
    if user:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    port = _free_port()
    started = False
    try:
        _run_as(
            user, [str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8"]
        )
        # The port is free when picked but not held: another process (a second test worker starting its own
        # cluster at the same moment) may take it first, so a start that fails is tried on a fresh port.
        for attempt in range(_START_ATTEMPTS):
            try:
                _run_as(user, _pg_ctl_start(bin_dir, data, root, port, max_connections))
                break
            except RuntimeError:
                if attempt == _START_ATTEMPTS - 1:
                    raise
                _stop(user, bin_dir, data)  # a server that came up after pg_ctl gave up on it
                port = _free_port()
        started = True
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        if started or (data / "postmaster.pid").exists():
            _stop(user, bin_dir, data)
        shutil.rmtree(root, ignore_errors=True)
