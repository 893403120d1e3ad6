"""The cluster run's fault injector (benchmarks/cluster/faults.py) on a real SQLite lease table."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from benchmarks.cluster.faults import FaultInjector


def _store(path: Path) -> str:
    url = f"sqlite:///{path}"
    engine = sa.create_engine(url)
    with engine.begin() as c:
        c.execute(sa.text("CREATE TABLE dg_leases (owner_key TEXT, expires_at REAL)"))
        for task, expires in (("merge_sales_fr", time.time() + 60), ("merge_sales_it", time.time() - 1)):
            owner = json.dumps({"task_id": task, "run_id": "r1"})
            c.execute(sa.text("INSERT INTO dg_leases VALUES (:o, :e)"), {"o": owner, "e": expires})
    engine.dispose()
    return url


def test_the_freeze_polls_the_lease_store_through_one_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = SimpleNamespace(lease_store_url=_store(tmp_path / "leases.db"))
    created: list[str] = []
    real = sa.create_engine

    def counting(url: str, **kwargs: object) -> sa.Engine:
        created.append(url)
        return real(url, **kwargs)

    monkeypatch.setattr(sa, "create_engine", counting)
    injector = FaultInjector(stack, (), 0, dict)  # type: ignore[arg-type]
    # live lease, expired lease, no lease: each answered from the table
    assert [injector._holds_lease(t, "r1") for t in ("merge_sales_fr", "merge_sales_it", "upsert")] == [
        True,
        False,
        False,
    ]
    assert len(created) == 1, "one engine per fault, not one per poll"
    injector.stop()
    assert injector._engine is None  # disposed with the injector
