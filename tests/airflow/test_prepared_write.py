"""A write is prepared once: the :class:`~deltaguard.writes.prepared.PreparedWrite` a try builds before its
lease goes through the deferral (Airflow's own serialisation of the resume arguments), and the resumed try
neither reads the table, builds the scope nor validates again; it writes what the lease was asked for."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

import pyarrow as pa
import pytest

from deltaguard.writes.prepared import PreparedWrite
from tests.airflow.helpers import hold_lease_until_waiter, sales_table, task_context, wait_until_unleased


def _through_airflow(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` as a resumed task gets them: serialised as the task runner sends a deferral, stored as
    JSON, deserialised as the task runner resumes (``airflow.sdk.execution_time.task_runner``)."""
    from airflow.sdk.serde import deserialize, serialize

    restored = deserialize(json.loads(json.dumps(serialize(kwargs))))
    assert isinstance(restored, dict)
    return restored


def _merge(table: str, source: Any, task_id: str = "m") -> Any:
    from deltaguard.operators.dml import DeltaMergeOperator

    return DeltaMergeOperator(
        task_id=task_id,
        table=table,
        source=source,
        condition="t.id = s.id AND t.country = s.country",
        deferrable=True,
    )


def _deferred(op: Any, table: str, lease_store_url: str) -> dict[str, Any]:
    """Run ``op`` until it defers behind a held lease; the resume kwargs, once the holder released."""
    from airflow.sdk.exceptions import TaskDeferred

    hold_lease_until_waiter(table, op.task_id, timeout_s=60)
    with pytest.raises(TaskDeferred) as deferred:
        op.execute(task_context(op.task_id))
    wait_until_unleased(lease_store_url, table)
    return _through_airflow(deferred.value.kwargs)


def test_the_value_round_trips_through_the_deferral(tmp_path, lease_store_url, monkeypatch) -> None:
    monkeypatch.setenv("AIRFLOW__DELTAGUARD__FILE_STATS", "True")  # a pinned read version travels too
    table = sales_table(str(tmp_path / "sales"))
    data = pa.table({"id": [2], "country": ["DE"], "amount": [21]})
    prepared = _merge(table, lambda: data).prepare_try(task_context("m")).value
    assert prepared.read_version == 0 and prepared.source_scope is not None
    assert prepared.operation.label  # the app id travels with the operation

    kwargs = _deferred(_merge(table, lambda: data), table, lease_store_url)
    carried = PreparedWrite.from_kwargs(kwargs["prepared_write"])
    # statistics do not travel (the resumed request is judged without them, as the triggerer judges it)
    assert carried == dataclasses.replace(
        prepared, table_config=dataclasses.replace(prepared.table_config, file_stats=None)
    )
    assert carried.operation.label == prepared.operation.label
    assert carried.table_config.version == 0  # the version the write was validated at


def test_a_value_of_another_layout_is_refused() -> None:
    with pytest.raises(ValueError, match="format"):
        PreparedWrite.from_kwargs({"uri": "/t"})
    with pytest.raises(ValueError, match="malformed"):
        PreparedWrite.from_kwargs({"format": 1, "uri": "/t"})


def test_a_resumed_try_prepares_nothing_again(tmp_path, lease_store_url, monkeypatch) -> None:
    """Resumed, the MERGE reads its source once (to write it), takes its scope from the value and is
    validated by nobody before the engine, which trusts the version the value was validated at."""
    from deltaguard.engines.deltars import engine as deltars_engine
    from deltaguard.engines.deltars.engine import DeltaRsEngine
    from deltaguard.hooks.delta import DeltaTableHook
    from deltaguard.operators import base, dml

    table = sales_table(str(tmp_path / "sales"))
    reads = itertools.count()

    def source() -> pa.Table:
        next(reads)
        return pa.table({"id": [2], "country": ["DE"], "amount": [21]})

    op = _merge(table, source)
    kwargs = _deferred(op, table, lease_store_url)
    assert next(reads) == 1  # read once before the lease, for the scope (ADR 0019)

    calls: list[str] = []

    def counted(name: str, real: Any) -> Any:
        def wrapper(*args: Any, **kw: Any) -> Any:
            calls.append(name)
            return real(*args, **kw)

        return wrapper

    monkeypatch.setattr(DeltaRsEngine, "validate", counted("validate", DeltaRsEngine.validate))
    monkeypatch.setattr(
        DeltaTableHook, "write_table_config", counted("config", DeltaTableHook.write_table_config)
    )
    monkeypatch.setattr(dml, "scoped_merge", counted("scope", dml.scoped_merge))
    monkeypatch.setattr(base, "with_target_reads", counted("target reads", base.with_target_reads))
    monkeypatch.setattr(
        deltars_engine, "validate_spec", counted("engine check", deltars_engine.validate_spec)
    )

    result = _merge(table, source).resume_execution("execute_complete", kwargs, task_context("m"))
    assert result["version"] == 1
    assert calls == []
    assert next(reads) == 3  # one more read: the write's own
    assert "kept the scope the lease was asked for before waiting" in result["merge_scope"]


def test_a_resumed_write_on_a_moved_table_is_checked_by_the_engine(
    tmp_path, lease_store_url, monkeypatch
) -> None:
    """The value is trusted at the version it was validated at only: when the table moved on while the task
    waited, the engine checks the write again at the version it commits from."""
    from deltalake import write_deltalake

    from deltaguard.engines.deltars import engine as deltars_engine
    from deltaguard.operators.dml import DeltaUpdateOperator

    def update() -> DeltaUpdateOperator:
        return DeltaUpdateOperator(
            task_id="u", table=table, updates={"amount": "amount + 1"}, predicate="id = 2", deferrable=True
        )

    table = sales_table(str(tmp_path / "sales"))
    kwargs = _deferred(update(), table, lease_store_url)
    write_deltalake(table, pa.table({"id": [9], "country": ["FR"], "amount": [1]}), mode="append")

    checked: list[int] = []
    real = deltars_engine.validate_spec

    def counted(*args: Any, **kw: Any) -> None:
        checked.append(1)
        real(*args, **kw)

    monkeypatch.setattr(deltars_engine, "validate_spec", counted)
    result = update().resume_execution("execute_complete", kwargs, task_context("u"))
    assert result["version"] == 2
    assert checked == [1]  # once, by the engine's write, against version 1
