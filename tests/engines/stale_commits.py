"""Run two delta-rs writes from one snapshot: the first commits, the second commits from its stale handle.

What the engine itself says about a pair, against which the conflict model's verdict is checked (the NULL
partition and partition type tests, ADR 0003 facts 11 and 13).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError

#: a write on an open table handle
Write = Callable[[DeltaTable], object]


def stale_commit_fails(base: Path, work: Path, first: Write, second: Write) -> bool:
    """Whether ``second``, opened on the same snapshot of a fresh copy of ``base`` as ``first``, fails to
    commit after ``first`` did."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(base, work)
    winner, stale = DeltaTable(str(work)), DeltaTable(str(work))
    first(winner)
    try:
        second(stale)
    except CommitFailedError:
        return True
    return False


def either_order_fails(base: Path, work: Path, a: Write, b: Write) -> bool:
    """Whether the stale write fails in either commit order."""
    return stale_commit_fails(base, work, a, b) or stale_commit_fails(base, work, b, a)
