"""Cached starting points for the stack's PostgreSQL servers, so a second start skips initdb and migrations.

Measured on two shared cores (``timings_s`` in ``benchmarks/results/cluster*.json``): ``initdb`` took 6-8 s
per server and ``airflow db migrate`` on an empty PostgreSQL database 100-150 s at load 10 (an Airflow import
plus the ORM's ``CREATE TABLE``\\ s and the stamp), the largest part of the stack's start. Both results depend
only on the installed binaries, so they are kept once per version:

- an initialised data directory per PostgreSQL major version, copied (``cp -a``, owners kept: the server runs
  as ``postgres`` when we are root) for every server instead of running ``initdb``;
- a ``pg_dump`` of Airflow's freshly migrated metadata database per set of installed ``apache-airflow*``
  distributions and PostgreSQL version, restored with ``pg_restore`` instead of ``airflow db migrate``.

The cache lives in ``$DELTAGUARD_CLUSTER_CACHE`` or, by default, ``<venv>/cluster-cache`` (a fresh venv
starts with none; ``make clean`` removes it with the venv). A restore that fails falls back to migrating.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from importlib.metadata import distributions
from pathlib import Path

CACHE_ENV = "DELTAGUARD_CLUSTER_CACHE"


def cache_dir() -> Path:
    """Where the templates are kept (created on demand)."""
    path = Path(os.environ.get(CACHE_ENV) or Path(sys.prefix) / "cluster-cache")
    path.mkdir(parents=True, exist_ok=True)
    return path


def initdb_template(pg_bin: Path) -> Path:
    """The cached initialised data directory for the PostgreSQL at ``pg_bin`` (may not exist yet)."""
    return cache_dir() / f"pg{pg_bin.parent.name}-initdb"


def copy_data_dir(source: Path, dest: Path) -> None:
    """Copy a stopped server's data directory, keeping owners and modes (PostgreSQL checks both)."""
    subprocess.run(["cp", "-a", f"{source}/.", str(dest)], check=True, capture_output=True, timeout=120)


def keep_initdb(data: Path, pg_bin: Path) -> None:
    """Keep a freshly initialised (never started) data directory as the template for the next servers."""
    target = initdb_template(pg_bin)
    if target.exists():
        return
    partial = target.with_name(target.name + f".partial-{os.getpid()}")
    partial.mkdir()
    copy_data_dir(data, partial)
    partial.rename(target)


def metadata_dump(pg_bin: Path) -> Path:
    """The cached dump of a migrated Airflow metadata database for the installed versions (may not exist)."""
    versions = sorted(
        f"{d.metadata['Name']}=={d.version}"
        for d in distributions()
        if (d.metadata["Name"] or "").lower().replace("_", "-").startswith("apache-airflow")
    )
    key = hashlib.sha256("\n".join([pg_bin.parent.name, *versions]).encode()).hexdigest()[:16]
    return cache_dir() / f"airflow-metadata-{key}.dump"


def _conninfo(port: int, database: str) -> list[str]:
    return ["-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", database]


def dump_metadata(pg_bin: Path, port: int, database: str) -> None:
    """Dump the just-migrated metadata database into the cache (atomically: a half-written dump is never used)."""
    target = metadata_dump(pg_bin)
    partial = target.with_name(target.name + f".partial-{os.getpid()}")
    subprocess.run(
        [str(pg_bin / "pg_dump"), "-Fc", "-f", str(partial), *_conninfo(port, database)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    partial.rename(target)


def restore_metadata(pg_bin: Path, port: int, database: str) -> bool:
    """Restore the cached dump into the (empty) ``database``; ``False`` when there is none or it fails."""
    dump = metadata_dump(pg_bin)
    if not dump.exists():
        return False
    restored = subprocess.run(
        [str(pg_bin / "pg_restore"), "--exit-on-error", "--no-owner", *_conninfo(port, database), str(dump)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if restored.returncode != 0:
        dump.unlink(missing_ok=True)  # stale or damaged: migrate this time, dump again after
        return False
    return True
