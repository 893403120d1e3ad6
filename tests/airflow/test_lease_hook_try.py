"""The lease hook owns a try's plumbing: the operator's cached hook lives for one try, and the triggerer's
pooled mode shares one store per URL."""

from __future__ import annotations

import asyncio
import threading

import pytest

from deltaguard import config
from deltaguard.core.admission import Granted
from deltaguard.hooks.lease import DeltaLeaseHook
from tests.airflow.helpers import sales_table, task_context


def test_write_context_names_the_try_the_lease_and_its_fencing(lease_store_url) -> None:
    hook = DeltaLeaseHook(config.lease_settings(lease_store_url))
    grant = Granted(request_id="r1", lease_id="l1", fencing={"file:///t": 7}, expires_at=0.0)
    ctx = hook.write_context(
        grant, app_id="d.t@r", app_version=3, dag_id="d", run_id="r", task_id="t", try_number=2, map_index=-1
    )
    assert (ctx.app_id, ctx.app_version) == ("d.t@r", 3)
    assert ctx.commit_metadata["lease_id"] == "l1"
    assert ctx.commit_metadata["lease_fencing"] == '{"file:///t": 7}'
    assert ctx.commit_metadata["airflow.try_number"] == "2" and "airflow.map_index" not in ctx.commit_metadata


def test_the_operator_hook_is_cached_for_one_try_only(tmp_path, lease_store_url) -> None:
    from deltaguard.operators.dml import DeltaDeleteOperator

    table = sales_table(str(tmp_path / "sales"))
    op = DeltaDeleteOperator(task_id="del", table=table, predicate="country = 'FR'")
    seen: list[DeltaLeaseHook] = []
    write = op.work_under_lease

    def spy(context, leases, *args):  # type: ignore[no-untyped-def]
        seen.append(leases)
        assert op.lease_hook is leases  # one hook for the whole try
        return write(context, leases, *args)

    op.work_under_lease = spy  # type: ignore[method-assign]
    op.execute(task_context("del"))
    assert "lease_hook" not in op.__dict__  # dropped when the try ended: the next try reads its options
    op.execute(task_context("del"))
    assert len(seen) == 2 and seen[0] is not seen[1]
    assert seen[0]._manager is None  # its store was closed


def test_a_write_task_leaves_no_thread_of_its_own(tmp_path, lease_store_url) -> None:
    # Airflow's task supervisor reaps the task process only after its sockets close: a process with threads
    # left takes longer to end in the kernel, and the supervisor that looks too early waits a heartbeat
    from deltaguard.operators.dml import DeltaDeleteOperator

    before = set(threading.enumerate())
    op = DeltaDeleteOperator(
        task_id="del", table=sales_table(str(tmp_path / "sales")), predicate="country = 'FR'"
    )
    op.execute(task_context("del"))
    left = [t.name for t in set(threading.enumerate()) - before if t.name.startswith("deltaguard")]
    assert left == []


def test_pooled_mode_shares_one_store_per_url(lease_store_url) -> None:
    settings = config.lease_settings(lease_store_url)

    async def both() -> bool:
        async with (
            DeltaLeaseHook.pooled(lease_store_url, settings) as a,
            DeltaLeaseHook.pooled(lease_store_url, settings) as b,
        ):
            return a is b

    assert asyncio.run(both())


@pytest.mark.parametrize("option", ["nonsense"])
def test_a_bad_option_fails_before_a_hook_is_cached(tmp_path, lease_store_url, monkeypatch, option) -> None:
    from deltaguard.operators.dml import DeltaDeleteOperator
    from deltaguard.operators.failures import InvalidTaskInputError

    monkeypatch.setenv("AIRFLOW__DELTAGUARD__POLL_INTERVAL", option)
    op = DeltaDeleteOperator(
        task_id="del", table=sales_table(str(tmp_path / "s")), predicate="country = 'FR'"
    )
    with pytest.raises(InvalidTaskInputError, match="deltaguard configuration"):
        op.execute(task_context("del"))
    assert "lease_hook" not in op.__dict__
