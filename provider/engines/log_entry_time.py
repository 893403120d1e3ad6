"""When a commit's log entry landed, as the table's storage reports it (ADR 0018).

A commit's ``commitInfo.timestamp`` is chosen by the writer: delta-rs and delta-spark stamp it when they
*build* the commit, so a writer stopped between the stamp and the write of ``_delta_log/<version>.json``
carries a time from before its stop. Ordering a commit against lease grants by that stamp lets a late
commit pass as an early one. The log entry's own write time comes from the storage instead:

* local files: the later of the file's ``st_mtime`` and ``st_ctime``. delta-rs writes a temporary file and
  then links it to the version's name without replacing (measured on deltalake 1.6.6: ``st_ctime`` a
  fraction of a millisecond after ``st_mtime``); the link sets ``st_ctime``, which no writer can choose,
  so a writer stopped between the two still reads as landed when the link was made;
* object stores: the object's ``last_modified`` through deltalake's own storage handler (the same object
  store client delta-rs committed with).

Comparing it with the lease store's grant times assumes the storage's clock agrees with the clocks of the
processes that stamp decisions, as lease expiry already assumes of the processes themselves; the caller
allows a skew (:attr:`deltaguard.leases.keeper.LeaseKeeper.clock_skew_s`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from urllib.parse import unquote, urlparse

from deltaguard.engines.commit_coordination import scheme_of

log = logging.getLogger(__name__)


def log_entry_path(version: int) -> str:
    """The log entry of ``version``, relative to the table root."""
    return f"_delta_log/{version:020d}.json"


def local_table_path(table_uri: str) -> str | None:
    """The directory of a table on the local file system, or ``None`` for other storage."""
    if scheme_of(table_uri) != "file":
        return None
    if table_uri.startswith("file:"):
        return unquote(urlparse(table_uri).path)
    return table_uri


def log_entry_written_at(
    table_uri: str, version: int, storage_options: Mapping[str, str] | None = None
) -> float | None:
    """Seconds since the epoch at which the storage wrote ``version``'s log entry; ``None`` if unknown.

    :param table_uri: the table.
    :param version: the committed version.
    :param storage_options: deltalake storage options for the table.
    """
    local = local_table_path(table_uri)
    try:
        if local is not None:
            stat = os.stat(os.path.join(local, log_entry_path(version)))
            return max(stat.st_mtime, stat.st_ctime)
        from deltalake.fs import DeltaStorageHandler

        handler = DeltaStorageHandler(table_uri, options=dict(storage_options or {}))
        info = handler.get_file_info([log_entry_path(version)])[0]
        mtime_ns = info.mtime_ns
        return None if mtime_ns is None else mtime_ns / 1e9
    except FileNotFoundError:  # e.g. a catalog table's name read as a path
        return None
    except Exception as exc:  # unknown: the caller falls back to a time known to be after the commit
        log.warning("deltaguard: cannot read when version %d of %s was written: %s", version, table_uri, exc)
        return None
