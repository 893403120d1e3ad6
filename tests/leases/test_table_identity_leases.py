"""A symlinked local table and its target, and ``s3a://``/``s3://`` spellings, take one lease key.

The symlink case runs on real delta-rs: a write through the link and one through the target are one
table to the engine (the stale one fails at commit), so the lease manager must see one table too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from deltaguard.core.admission import Granted, Waiting
from deltaguard.leases.manager import LeaseManager
from deltaguard.writes.table_uri import local_realpath, table_key

from .conftest import FakeClock, op, request


@pytest.fixture
def manager(store, clock: FakeClock) -> LeaseManager:
    return LeaseManager(store, clock=clock, ageing_s=10.0, retention_s=3600.0)


@pytest.fixture
def linked_table(tmp_path: Path) -> tuple[str, str]:
    target = tmp_path / "data" / "events"
    data = pa.table({"d": ["2024-01-01", "2024-01-02"], "x": [1, 2]})
    write_deltalake(str(target), data, partition_by=["d"])
    link = tmp_path / "alias"
    os.symlink(target, link)
    return str(link), str(target)


def test_the_engine_sees_one_table_behind_the_link(linked_table: tuple[str, str]) -> None:
    link, target = linked_table
    stale = DeltaTable(link)  # read through the link ...
    DeltaTable(target).delete("d = '2024-01-01'")  # ... while a write commits through the target
    with pytest.raises(CommitFailedError):
        stale.delete("d = '2024-01-01'")


def test_link_and_target_take_one_key(linked_table: tuple[str, str]) -> None:
    link, target = linked_table
    assert table_key(link) == table_key(target) == table_key(f"file://{link}/")
    assert local_realpath(link) == os.path.realpath(target)


def test_a_table_not_created_yet_keeps_its_path(tmp_path: Path) -> None:
    os.symlink(tmp_path, tmp_path.parent / f"{tmp_path.name}-link")
    later = f"{tmp_path.parent}/{tmp_path.name}-link/new/table"
    assert table_key(later) == f"{os.path.realpath(tmp_path)}/new/table"


@pytest.mark.parametrize(("first", "second"), [("link", "target"), ("s3a://b/t", "s3://b/t")])
def test_two_spellings_wait_for_each_other(
    manager: LeaseManager, linked_table: tuple[str, str], first: str, second: str
) -> None:
    names = {"link": linked_table[0], "target": linked_table[1]}
    a = request("via_one", (table_key(names.get(first, first)), op("DELETE", "d = '2024-01-01'")))
    b = request("via_other", (table_key(names.get(second, second)), op("DELETE", "d = '2024-01-01'")))
    assert isinstance(manager.acquire(a), Granted)
    assert isinstance(manager.acquire(b), Waiting)
