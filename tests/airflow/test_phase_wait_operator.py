"""A write operator's fresh try lets the tasks ``asks_after`` names ask first, on the table it asks for.

The lease hook's wait is tested on its own in ``test_policy_priority.py``; here the operator hands it its
owner, its table as the lease store records it and the policy's task ids, so a table named differently
from the store's key would hold the try the whole ``phase_wait``.
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

from tests.airflow.helpers import sales_table

RUN = "scheduled__2026-12-07T00:00:00+00:00"


def context(task_id: str) -> dict[str, Any]:
    start = dt.datetime(2026, 12, 7, tzinfo=dt.UTC)
    ti = SimpleNamespace(dag_id="nightly.sales_eu", task_id=task_id, run_id=RUN, try_number=1, map_index=-1)
    return {
        "ti": ti,
        "dag_run": SimpleNamespace(run_id=RUN, start_date=start, run_after=start, logical_date=start),
    }


class _Said:
    """The phase wait's own log lines (what the task log shows)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str, *args: Any) -> None:
        self.lines.append(message % args)


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> _Said:
    from deltaguard.hooks.lease import DeltaLeaseHook

    said = _Said()
    wait = DeltaLeaseHook.let_earlier_ask

    def recorded(self: DeltaLeaseHook, *args: Any, **kwargs: Any) -> None:
        wait(self, *args, **{**kwargs, "log": said})

    monkeypatch.setattr(DeltaLeaseHook, "let_earlier_ask", recorded)
    return said


@pytest.fixture
def table(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """A partitioned table with a space in its name, and a lease store named by Airflow's configuration."""
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__LEASE_STORE_URL", f"sqlite:///{tmp_path / 'leases.db'}")
    return sales_table(str(tmp_path / "lake" / "sales eu"))


def test_an_optimize_lets_the_merges_of_its_run_ask_first(
    table: str, monkeypatch: pytest.MonkeyPatch, said: _Said
) -> None:
    from deltaguard.operators.dml import DeltaMergeOperator
    from deltaguard.operators.maintenance import DeltaOptimizeOperator

    # long enough that a lookup on another key than the store's could not pass unnoticed
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__PHASE_WAIT", "120")

    merge = DeltaMergeOperator(
        task_id="merge.eu_de",
        table=table,
        source=lambda: pa.table({"id": [2, None], "country": ["DE", "DE"], "amount": [21, None]}),
        source_reads_target=False,
        condition="t.id = s.id",
        target_partition_values={"country": "DE"},
    )
    merge.execute(context("merge.eu_de"))
    optimize = DeltaOptimizeOperator(task_id="compact.optimize", table=table)
    optimize.asks_after = ("merge.eu_de",)  # as the priority policy sets it
    optimize.execute(context("compact.optimize"))
    (line,) = said.lines
    assert line.startswith("deltaguard: waited") and "did not within" not in line, line
    assert "sales eu" in line


def test_a_task_that_never_asks_holds_the_try_no_longer_than_the_wait(
    table: str, monkeypatch: pytest.MonkeyPatch, said: _Said
) -> None:
    from deltaguard.operators.maintenance import DeltaOptimizeOperator

    monkeypatch.setenv("AIRFLOW__DELTAGUARD__PHASE_WAIT", "0.5")
    optimize = DeltaOptimizeOperator(task_id="compact.optimize", table=table)
    optimize.asks_after = ("merge.eu_fr",)  # skipped upstream, say: it never asks
    result = optimize.execute(context("compact.optimize"))
    (line,) = said.lines
    assert "merge.eu_fr did not within 0.5 s" in line
    assert "granted at once" in result["decision"]  # then it asked, and ran
