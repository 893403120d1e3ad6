"""Delta-rs write operators use file statistics in their lease requests (``[deltaguard] file_stats``, the
``file_stats`` argument), and write from the version their lease records (ADR 0020)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.discovery import read_table_config
from deltaguard.leases import codec
from deltaguard.leases.manager import LeaseManager
from deltaguard.operators.base import LeaseWaitTimeout
from deltaguard.operators.dml import DeltaInsertOperator, DeltaUpdateOperator
from deltaguard.writes.table_uri import table_key
from tests.airflow.helpers import task_context


def clustered(path: Path) -> str:
    """Unpartitioned, one file per day (days 1 and 3)."""
    uri = str(path / "events")
    for day, ids in (("2024-01-01", range(0, 50)), ("2024-01-03", range(200, 300))):
        frame = pa.table(
            {
                "id": pa.array(list(ids), pa.int64()),
                "day": pa.array([dt.date.fromisoformat(day)] * len(ids), pa.date32()),
                "v": pa.array([0] * len(ids), pa.int64()),
            }
        )
        write_deltalake(uri, frame, mode="append")
    return uri


def hold_day1(uri: str, store_url: str) -> LeaseManager:
    """A running UPDATE of day 1 that read the table's current version (and pins it)."""
    config = read_table_config(uri, file_stats=True)
    manager = LeaseManager(store_url)
    claim = TableClaim(
        table_key(uri),
        Operation(OperationKind.UPDATE, predicate="day = '2024-01-01'", assignments=(("v", "v + 1"),)),
        DeltaRsEngine().profile(),
        config,
        read_version=config.version,
    )
    assert isinstance(
        manager.acquire(LeaseRequest(claims=(claim,), owner=Owner(name="day1"), ttl_s=300)), Granted
    )
    return manager


def day3(**kwargs: object) -> DeltaUpdateOperator:
    return DeltaUpdateOperator(
        task_id="day3",
        table=kwargs.pop("table"),  # type: ignore[arg-type]
        updates={"v": "v + 1"},
        predicate="day = '2024-01-03'",
        deferrable=False,
        lease_wait_timeout=2,
        **kwargs,  # type: ignore[arg-type]
    )


def test_a_per_date_update_runs_beside_another_per_date_update(tmp_path: Path, lease_store_url: str) -> None:
    uri = clustered(tmp_path)
    hold_day1(uri, lease_store_url)
    result = day3(table=uri).execute(task_context("day3"))
    assert result["waited_behind"] == [] and result["committed"] and result["version"] == 2
    assert sum(r["v"] for r in DeltaTable(uri).to_pyarrow_table().to_pylist()) == 100
    assert read_versions(lease_store_url, result["lease_id"]) == {table_key(uri): 1}


def test_a_write_the_statistics_never_judge_neither_sends_them_nor_pins(
    tmp_path: Path, lease_store_url: str
) -> None:
    uri = clustered(tmp_path)
    append = DeltaInsertOperator(
        task_id="append",
        table=uri,
        source=lambda: pa.table({"id": pa.array([7], pa.int64()), "day": [dt.date(2024, 1, 1)], "v": [0]}),
        deferrable=False,
    )
    result = append.execute(task_context("append"))
    assert result["committed"]
    assert read_versions(lease_store_url, result["lease_id"]) == {}


def read_versions(store_url: str, lease_id: str) -> dict[str, int]:
    row = LeaseManager(store_url).store.read_request(lease_id)
    assert row is not None
    return codec.payload_read_versions(row.payload)


def test_the_operator_argument_opts_out(tmp_path: Path, lease_store_url: str) -> None:
    uri = clustered(tmp_path)
    hold_day1(uri, lease_store_url)
    with pytest.raises(LeaseWaitTimeout):
        day3(table=uri, file_stats=False).execute(task_context("day3"))


def test_the_option_turns_it_off(
    tmp_path: Path, lease_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = clustered(tmp_path)
    hold_day1(uri, lease_store_url)
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__FILE_STATS", "False")
    with pytest.raises(LeaseWaitTimeout):
        day3(table=uri).execute(task_context("day3"))
