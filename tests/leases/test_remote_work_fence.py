"""An expired lease that recorded server-side work (Spark Connect) is reclaimed only once a fence
confirmed that work stopped (ADR 0033); on both stores, with a fake fence."""

from __future__ import annotations

import pytest

from deltaguard.core.admission import Granted, Owner, Waiting
from deltaguard.leases.manager import LeaseLostError, LeaseManager
from deltaguard.leases.remote_work import (
    FENCED_KIND,
    FORCED_KIND,
    INTERRUPTED_KIND,
    SERVER_WORK_INTERRUPTED,
    UNFENCED_KIND,
)

from .conftest import FakeClock, op, request

HANDLE = {
    "kind": "spark_connect",
    "endpoint": "sc://connect.example:15002",
    "session_id": "5d3c4f0e-0000-4000-8000-000000000001",
    "tag": "deltaguard-abc",
    "app_id": "local-1",
}


class FakeFence:
    """Answers like a Spark Connect fence: confirms, or raises ``error``."""

    def __init__(self, error: str | None = None) -> None:
        self.error = error
        self.calls: list[dict[str, str]] = []

    def fence(self, handle: dict[str, str]) -> str:
        self.calls.append(dict(handle))
        if self.error is not None:
            raise ConnectionError(self.error)
        return f"interrupted tag {handle['tag']}; every operation ended"


def manager_with(store, clock: FakeClock, fence: FakeFence | None) -> LeaseManager:
    return LeaseManager(store, clock=clock, retention_s=3600.0, remote_fence=fence, fence_retry_s=5.0)


def holder_with_work(manager: LeaseManager, clock: FakeClock) -> Granted:
    """A MERGE lease (ttl 10 s) that recorded Spark Connect work, then stopped renewing: now expired."""
    holder = request("frozen", ("t1", op("MERGE")), ttl_s=10)
    lease = manager.acquire(holder)
    assert isinstance(lease, Granted)
    manager.record_remote_work(lease.lease_id, holder.owner, HANDLE)
    clock.advance(11)
    return lease


def test_an_expired_lease_with_work_is_reclaimed_only_once_the_fence_confirmed(
    store, clock: FakeClock
) -> None:
    fence = FakeFence(error="server unreachable")
    manager = manager_with(store, clock, fence)
    lease = holder_with_work(manager, clock)
    writer = request("writer", ("t1", op("MERGE")))
    answer = manager.acquire(writer)
    assert isinstance(answer, Waiting), answer
    assert [b.id for b in answer.blockers] == [lease.lease_id]
    assert fence.calls == [HANDLE]
    # the wait text names the work, where it runs and why it is not known to be stopped
    reason = answer.reasons[0]
    assert (
        "Spark Connect work of dag.frozen could not be confirmed stopped on sc://connect.example:15002"
        in reason
    )
    assert "server unreachable" in reason
    assert manager.leases("t1")[0].lease_id == lease.lease_id  # still listed as held (sensors see it)
    logged = [d for d in manager.decisions(uri="t1") if d.kind == UNFENCED_KIND]
    assert logged and "server unreachable" in logged[0].detail["reason"]
    assert not [d for d in manager.decisions(uri="t1") if d.kind == "expiry"]

    # within the retry interval the server is not asked again; the table stays held
    clock.advance(1)
    assert isinstance(manager.check(writer.request_id), Waiting)
    assert len(fence.calls) == 1

    # the server answers again: the next pass fences, reclaims and grants in the same call
    fence.error = None
    clock.advance(5)
    granted = manager.check(writer.request_id)
    assert isinstance(granted, Granted), granted
    assert len(fence.calls) == 2
    kinds = [d.kind for d in reversed(manager.decisions(uri="t1"))]
    assert kinds.index(FENCED_KIND) < kinds.index("expiry") < len(kinds) - 1 - kinds[::-1].index("grant")


def test_without_a_fence_the_lease_stays_held_with_the_reason(store, clock: FakeClock) -> None:
    manager = manager_with(store, clock, None)
    lease = holder_with_work(manager, clock)
    answer = manager.acquire(request("writer", ("t1", op("MERGE"))))
    assert isinstance(answer, Waiting)
    assert "no fence for server-side work" in answer.reasons[0]
    # an operator releases it by hand, with a logged reason
    assert manager.force_release(lease.lease_id, "session killed on the cluster", by="ops") == ["t1"]
    forced = [d for d in manager.decisions(uri="t1") if d.kind == FORCED_KIND]
    assert forced[0].detail["reason"] == "session killed on the cluster" and forced[0].detail["by"] == "ops"
    assert isinstance(manager.acquire(request("next", ("t1", op("MERGE")))), Granted)


def test_without_a_handle_an_expired_lease_is_reclaimed_as_before(store, clock: FakeClock) -> None:
    fence = FakeFence(error="never called")
    manager = manager_with(store, clock, fence)
    holder = request("gone", ("t1", op("MERGE")), ttl_s=10)
    assert isinstance(manager.acquire(holder), Granted)
    clock.advance(11)
    assert isinstance(manager.acquire(request("writer", ("t1", op("MERGE")))), Granted)
    assert fence.calls == []


def test_a_handle_dropped_when_the_work_ended_needs_no_fence(store, clock: FakeClock) -> None:
    fence = FakeFence(error="never called")
    manager = manager_with(store, clock, fence)
    holder = request("done", ("t1", op("MERGE")), ttl_s=10)
    lease = manager.acquire(holder)
    assert isinstance(lease, Granted)
    manager.record_remote_work(lease.lease_id, holder.owner, HANDLE)
    manager.record_remote_work(lease.lease_id, holder.owner, HANDLE, ended=True)
    clock.advance(11)
    assert isinstance(manager.acquire(request("writer", ("t1", op("MERGE")))), Granted)
    assert fence.calls == []


def test_the_holders_late_heartbeat_does_not_free_the_table(store, clock: FakeClock) -> None:
    fence = FakeFence(error="server unreachable")
    manager = manager_with(store, clock, fence)
    lease = holder_with_work(manager, clock)
    with pytest.raises(LeaseLostError):
        manager.heartbeat(lease.lease_id, Owner(dag_id="dag", task_id="frozen"))
    assert isinstance(manager.acquire(request("writer", ("t1", op("MERGE")))), Waiting)


def test_work_cannot_be_recorded_on_an_expired_lease(store, clock: FakeClock) -> None:
    manager = manager_with(store, clock, FakeFence())
    holder = request("late", ("t1", op("MERGE")), ttl_s=10)
    lease = manager.acquire(holder)
    assert isinstance(lease, Granted)
    clock.advance(11)
    with pytest.raises(LeaseLostError):
        manager.record_remote_work(lease.lease_id, holder.owner, HANDLE)


def test_the_readmission_of_a_queue_waits_for_the_fence_too(store, clock: FakeClock) -> None:
    fence = FakeFence(error="deadline exceeded")
    manager = manager_with(store, clock, fence)
    holder_with_work(manager, clock)
    writer = request("writer", ("t1", op("MERGE")))
    assert isinstance(manager.acquire(writer), Waiting)
    clock.advance(6)
    answers = manager.readmit("t1").answers
    assert isinstance(answers[writer.request_id], Waiting)
    assert "deadline exceeded" in " ".join(answers[writer.request_id].reasons)
    fence.error = None
    clock.advance(6)
    assert isinstance(manager.readmit("t1").answers[writer.request_id], Granted)


def test_the_cli_lists_the_held_lease_and_releases_it_by_hand(tmp_path, capsys) -> None:
    from deltaguard.cli import main

    url = f"sqlite:///{tmp_path / 'leases.db'}"
    clock = FakeClock(__import__("time").time() - 60)  # granted a minute ago, ttl 10 s: expired now
    manager = LeaseManager(url, clock=clock)
    try:
        lease = holder_with_work(manager, clock)
    finally:
        manager.store.close()
    assert main(["leases", "list", "t1", "--store-url", url]) == 0
    assert lease.lease_id in capsys.readouterr().out  # expired, yet still holding the table
    with pytest.raises(SystemExit) as refused:  # without --force nothing is released
        main(["leases", "release", lease.lease_id, "--store-url", url, "--reason", "x"])
    assert refused.value.code == 2
    capsys.readouterr()
    code = main(
        ["leases", "release", lease.lease_id, "--force", "--reason", "server restarted", "--store-url", url]
    )
    assert code == 0 and "released lease" in capsys.readouterr().out
    assert main(["leases", "list", "t1", "--store-url", url]) == 0
    assert capsys.readouterr().out == ""
    assert (
        main(["leases", "release", lease.lease_id, "--force", "--reason", "again", "--store-url", url]) == 1
    )


def test_managers_sharing_fence_memory_ask_the_server_once_per_interval(store, clock: FakeClock) -> None:
    from deltaguard.leases.remote_work import FenceMemory

    fence = FakeFence(error="server unreachable")
    shared = FenceMemory()
    first = LeaseManager(store, clock=clock, remote_fence=fence, fence_retry_s=5.0, fence_memory=shared)
    second = LeaseManager(store, clock=clock, remote_fence=fence, fence_retry_s=5.0, fence_memory=shared)
    holder_with_work(first, clock)
    assert isinstance(first.acquire(request("a", ("t1", op("MERGE")))), Waiting)
    answer = second.acquire(request("b", ("t1", op("MERGE"))))
    assert isinstance(answer, Waiting) and "server unreachable" in answer.reasons[0]  # the shared failure
    assert len(fence.calls) == 1


def test_a_release_before_the_work_was_seen_ended_hands_the_table_over_only_after_a_fence(
    store, clock: FakeClock
) -> None:
    # The holder is alive and releases, but its interrupted Spark Connect operation was not seen ended
    # (the engine waits 30 s for it): that operation may still commit, so the table is not free yet.
    fence = FakeFence(error="operation still RUNNING")
    manager = manager_with(store, clock, fence)
    holder = request("alive", ("t1", op("MERGE")), ttl_s=60)
    lease = manager.acquire(holder)
    assert isinstance(lease, Granted)
    manager.record_remote_work(lease.lease_id, holder.owner, HANDLE)
    assert manager.release(lease.lease_id, holder.owner) is True
    # the release fenced at once; the fence failed, so the lease stays held and says why
    assert [d.kind for d in manager.decisions(uri="t1")][:2] == [UNFENCED_KIND, "release_awaiting_fence"]
    writer = request("writer", ("t1", op("MERGE")))
    answer = manager.acquire(writer)
    assert isinstance(answer, Waiting) and "operation still RUNNING" in answer.reasons[0]
    fence.error = None
    clock.advance(6)
    assert isinstance(manager.check(writer.request_id), Granted)
    assert [c["tag"] for c in fence.calls] == ["deltaguard-abc", "deltaguard-abc"]


def test_a_release_after_the_work_was_seen_ended_frees_the_table_at_once(store, clock: FakeClock) -> None:
    fence = FakeFence(error="never called")
    manager = manager_with(store, clock, fence)
    holder = request("alive", ("t1", op("MERGE")), ttl_s=60)
    lease = manager.acquire(holder)
    assert isinstance(lease, Granted)
    manager.record_remote_work(lease.lease_id, holder.owner, HANDLE)
    manager.record_remote_work(lease.lease_id, holder.owner, HANDLE, ended=True)
    assert manager.release(lease.lease_id, holder.owner) is True
    assert isinstance(manager.acquire(request("writer", ("t1", op("MERGE")))), Granted)
    assert fence.calls == []


def test_a_lease_awaiting_a_fence_ends_without_another_request_for_its_table(store, clock: FakeClock) -> None:
    """The releasing holder fences its own outstanding work: once the server confirms it ended, the lease
    is reclaimed and logged (remote_fenced, expiry), though nobody asks for the table again. Before, it
    stayed held with no release or expiry logged, beyond the run."""
    fence = FakeFence()
    manager = manager_with(store, clock, fence)
    holder = request("alive", ("t1", op("MERGE")), ttl_s=60)
    lease = manager.acquire(holder)
    assert isinstance(lease, Granted)
    manager.record_remote_work(lease.lease_id, holder.owner, HANDLE)
    assert manager.release(lease.lease_id, holder.owner) is True
    assert [c["tag"] for c in fence.calls] == ["deltaguard-abc"]
    assert manager.leases("t1") == [] and store.read_lease(lease.lease_id) == []
    kinds = [d.kind for d in reversed(manager.decisions(uri="t1"))]
    assert kinds == ["grant", "release_awaiting_fence", FENCED_KIND, "expiry"]
    expiry = next(d for d in manager.decisions(uri="t1") if d.kind == "expiry")
    assert expiry.detail["server_work"] == "fenced"  # the hand-over says what allowed it


class ClosedSessionFence(FakeFence):
    """Answers like the Spark Connect fence for a session its server closed (``SessionClosedByServer``)."""

    def fence(self, handle: dict[str, str]) -> str:
        self.calls.append(dict(handle))
        error = ConnectionError("session 5d3c was closed by the server that ran it (application local-1)")
        error.interrupted_by_server = True  # type: ignore[attr-defined]
        raise error


def test_a_lease_whose_server_closed_its_session_ends_after_the_grace_named_as_interrupted(
    store, clock: FakeClock
) -> None:
    """Before, such a lease answered remote_unfenced forever and blocked its table until a forced release."""
    fence = ClosedSessionFence()
    manager = LeaseManager(
        store,
        clock=clock,
        retention_s=3600.0,
        remote_fence=fence,
        fence_retry_s=5.0,
        interrupted_grace_s=120.0,
    )
    lease = holder_with_work(manager, clock)
    writer = request("writer", ("t1", op("MERGE")))
    assert isinstance(manager.acquire(writer), Waiting)
    first = [d for d in manager.decisions(uri="t1") if d.kind == UNFENCED_KIND]
    assert len(first) == 1 and first[0].detail["interrupted_by_server"]["hand_over_at"] == clock() + 120.0
    # inside the grace the table stays held, however often the writer asks
    clock.advance(119)
    assert isinstance(manager.check(writer.request_id), Waiting)
    assert store.read_lease(lease.lease_id) != []
    clock.advance(6)  # past the grace and the fence's retry interval: the next fence hands it over
    assert isinstance(manager.check(writer.request_id), Granted)
    log = list(reversed(manager.decisions(uri="t1")))
    kinds = [d.kind for d in log]
    assert INTERRUPTED_KIND in kinds and FENCED_KIND not in kinds  # never logged as a confirmed fence
    assert kinds.index(INTERRUPTED_KIND) < kinds.index("expiry") < len(kinds) - 1 - kinds[::-1].index("grant")
    interrupted = next(d for d in log if d.kind == INTERRUPTED_KIND)
    assert interrupted.detail["confirmed"] is False and "closed by the server" in interrupted.detail["reason"]
    expiry = next(d for d in log if d.kind == "expiry")
    assert expiry.detail["server_work"] == SERVER_WORK_INTERRUPTED


def test_a_sweep_ends_such_a_lease_nobody_asks_for_and_the_grace_does_not_restart_per_process(
    store, clock: FakeClock
) -> None:
    fence = ClosedSessionFence()

    def another_process() -> LeaseManager:
        return LeaseManager(
            store, clock=clock, remote_fence=fence, fence_retry_s=5.0, interrupted_grace_s=120.0
        )

    lease = holder_with_work(another_process(), clock)
    swept = another_process().end_expired()
    assert list(swept) == [lease.lease_id] and "closed by the server" in swept[lease.lease_id]
    clock.advance(60)
    assert another_process().end_expired() != {lease.lease_id: "reclaimed"}  # 60 s of 120: still held
    clock.advance(61)
    assert another_process().end_expired() == {lease.lease_id: "reclaimed"}
    log = list(reversed(another_process().decisions(uri="t1")))
    kinds = [d.kind for d in log]
    assert kinds[-2:] == [INTERRUPTED_KIND, "expiry"] and kinds.count(UNFENCED_KIND) == 2
    # every process counts the grace from the first fence that saw the session gone
    firsts = {d.detail["interrupted_by_server"]["first_seen"] for d in log if d.kind == UNFENCED_KIND}
    assert firsts == {log[kinds.index(INTERRUPTED_KIND)].detail["first_seen"]}


def test_work_on_an_unreachable_server_is_never_handed_over_by_time(store, clock: FakeClock) -> None:
    fence = FakeFence(error="server unreachable")
    manager = LeaseManager(
        store, clock=clock, remote_fence=fence, fence_retry_s=5.0, interrupted_grace_s=120.0
    )
    lease = holder_with_work(manager, clock)
    for _ in range(3):
        assert manager.end_expired() == {lease.lease_id: "ConnectionError: server unreachable"}
        clock.advance(3600)
    assert store.read_lease(lease.lease_id) != []
    assert not [d for d in manager.decisions(uri="t1") if d.kind in (INTERRUPTED_KIND, "expiry")]


def test_the_cli_sweep_reclaims_expired_leases_and_lists_the_ones_its_fence_cannot_end(
    tmp_path, capsys
) -> None:
    from deltaguard.cli import main

    url = f"sqlite:///{tmp_path / 'leases.db'}"
    clock = FakeClock(__import__("time").time() - 60)  # granted a minute ago, ttl 10 s: expired now
    manager = LeaseManager(url, clock=clock)
    try:
        dead = manager.acquire(request("dead", ("t2", op("MERGE")), ttl_s=10))
        assert isinstance(dead, Granted)
        frozen = request("frozen", ("t1", op("MERGE")), ttl_s=10)
        held = manager.acquire(frozen)
        assert isinstance(held, Granted)
        # a closed local port: the sweep's fence cannot reach the server, so that lease stays held
        manager.record_remote_work(held.lease_id, frozen.owner, {**HANDLE, "endpoint": "sc://127.0.0.1:1"})
    finally:
        manager.store.close()
    assert main(["leases", "sweep", "--store-url", url]) == 0
    lines = dict(line.split("\t", 1) for line in capsys.readouterr().out.splitlines())
    assert lines[dead.lease_id] == "reclaimed"
    assert "could not be read" in lines[held.lease_id] or "127.0.0.1:1" in lines[held.lease_id], lines
    check = LeaseManager(url)
    try:
        assert check.store.read_lease(dead.lease_id) == [] and check.store.read_lease(held.lease_id) != []
    finally:
        check.store.close()


class WaitsForTheOther(FakeFence):
    """Confirms the work of tag ``slow`` only once the fence of tag ``quick`` has been called: fences run one
    after another never get there (``slow`` then runs into the manager's fence timeout)."""

    def __init__(self) -> None:
        super().__init__()
        import threading

        self.quick_called = threading.Event()

    def fence(self, handle: dict[str, str]) -> str:
        self.calls.append(dict(handle))
        if handle["tag"] == "quick":
            self.quick_called.set()
        elif not self.quick_called.wait(
            10.0
        ):  # past the manager's 2 s fence timeout: what it sees is its own
            raise ConnectionError("the other lease was not fenced meanwhile")
        return f"interrupted tag {handle['tag']}; every operation ended"


def test_the_expired_leases_of_one_decision_are_fenced_side_by_side(store, clock: FakeClock) -> None:
    """A lease whose fence takes long no longer delays the fence (and hand-over) of another lease on the same
    table: in the production-shaped run two slow ones held a frozen holder's lease past the freeze."""
    fence = WaitsForTheOther()
    manager = LeaseManager(store, clock=clock, remote_fence=fence, fence_retry_s=5.0, fence_timeout_s=2.0)
    for name, tag in (("slow", "slow"), ("quick", "quick")):
        holder = request(name, ("t1", op("INSERT")), ttl_s=10)
        lease = manager.acquire(holder)
        assert isinstance(lease, Granted)
        manager.record_remote_work(lease.lease_id, holder.owner, {**HANDLE, "tag": tag})
    clock.advance(11)
    answer = manager.acquire(request("writer", ("t1", op("MERGE"))))
    assert isinstance(answer, Granted), answer  # both fenced in the same decision, neither timed out
    kinds = [d.kind for d in manager.decisions(uri="t1")]
    assert kinds.count(FENCED_KIND) == 2 and UNFENCED_KIND not in kinds
