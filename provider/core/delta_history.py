"""A Delta table's newest commits with the version numbers they really have.

Measured with deltalake 1.6.6: ``DeltaTable.history(n)`` lists the newest ``n`` commits *in storage* but
numbers them down from the version the object was loaded at. A table object loaded at version 1, after
which a DELETE landed as version 2, reports that DELETE as version 1 (and invents versions below 0). So a
caller that loads a table, then reads its history while another writer commits, gets every label shifted.
The history is kept only when no commit landed between loading the table and reading it: the table's
version is the same after ``update_incremental()`` as before the read.

Pure: it calls the object's methods and imports no engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class HistoryTable(Protocol):
    """The part of ``deltalake.DeltaTable`` this module uses."""

    def version(self) -> int: ...

    def history(self, limit: int | None = None) -> Sequence[Mapping[str, Any]]: ...

    def update_incremental(self) -> Any: ...


class HistoryMovedError(RuntimeError):
    """Commits kept landing while the history was read, so its version numbers cannot be trusted."""


def consistent_history(
    table: HistoryTable, since: int | None = None, attempts: int = 5
) -> tuple[int, list[Mapping[str, Any]]]:
    """The commits after version ``since`` and the version they end at, read while no commit landed.

    :param table: the table object (it is brought to the latest version).
    :param since: read the commits after this version (``None``: all).
    :param attempts: reads before giving up.
    :raises HistoryMovedError: when a commit landed during every attempt.
    """
    for _ in range(attempts):
        version = table.version()
        limit = None if since is None else max(version - since, 1)
        rows = list(table.history(limit))
        table.update_incremental()
        if table.version() == version:
            # the labels count down from ``version``; drop the invented ones below 0
            return version, [row for row in rows if int(row.get("version", -1)) >= 0]
    raise HistoryMovedError(f"commits kept landing while the history was read ({attempts} attempts)")
