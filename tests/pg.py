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
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_as(user: str | None, argv: list[str]) -> None:
    # Only wrap in runuser when we are root; an unprivileged test run can start the server itself.
    full = ["runuser", "-u", user, "--", *argv] if user else argv
    result = subprocess.run(full, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv[:2])} failed ({result.returncode}): {result.stderr.strip()[-800:]}"
        )


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
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={root} "
            f"-c max_connections={max_connections} -c fsync=off -c synchronous_commit=off "
            "-c full_page_writes=off -c shared_buffers=64MB"
        )
        _run_as(
            user,
            [
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
            ],
        )
        started = True
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        if started:
            with contextlib.suppress(Exception):
                _run_as(user, [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)
