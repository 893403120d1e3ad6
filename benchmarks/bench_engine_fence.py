"""Late commits of a frozen delta-rs writer: refused by the engine, detected, or landed silently (ADR 0038).

For each operation, ``--runs`` times and in both orders, a writer passes its last lease check and then
"freezes" past its TTL (played in process: the lease clock jumps and the conflicting successor works
inside that check, as in ``tests/engines/test_deltars_engine_fence.py``; no SIGSTOP). Then:

* ``successor_first``: the successor is granted, commits, and the frozen writer's commit reaches delta-rs
  from its old snapshot;
* ``late_first``: the successor is granted and reads the table, the frozen writer's commit lands, then
  the successor commits from the snapshot it read.

Each run is counted by what happened to the commit that came second: ``refused by fence`` (delta-rs
refused it with ``ConcurrentTransaction``: the lease fence ids), ``refused by conflict <kind>`` (another
of delta-rs' conflict checks refused it first), ``detected`` (it landed, and the late writer failed with
``LateCommitError``) or ``silent`` (it landed and nobody failed). Real local tables and a real SQLite
lease store in a temporary directory.

    nice .venv/bin/python -m benchmarks.bench_engine_fence --runs 20 --out benchmarks/results/engine_fence.json
    nice .venv/bin/python -m benchmarks.bench_engine_fence --runs 20 --no-engine-fence \
        --out benchmarks/results/engine_fence_off.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from deltaguard.core.admission import Granted, LeaseRequest, Owner, TableClaim
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.specs import (
    AppendSpec,
    DeleteSpec,
    MergeSpec,
    OverwriteSpec,
    UpdateSpec,
    WriteContext,
    WriteSpec,
)
from deltaguard.exceptions import CommitFencedError, DeltaConflictError, LateCommitError
from deltaguard.leases.keeper import LeaseKeeper
from deltaguard.leases.manager import LeaseManager

ROWS = pa.table({"id": pa.array([100, 101], pa.int64()), "v": ["n", "n"]})


def _late_ops() -> dict[str, tuple[OperationKind, WriteSpec, int]]:
    """operation -> (kind, spec, how many fence checks it makes; the frozen writer stops after the last)."""
    return {
        "append": (OperationKind.INSERT, AppendSpec(source=ROWS), 2),
        "overwrite": (OperationKind.OVERWRITE, OverwriteSpec(source=ROWS), 2),
        "delete": (OperationKind.DELETE, DeleteSpec(predicate="id = 1"), 1),
        "update": (OperationKind.UPDATE, UpdateSpec(predicate="id = 2", updates={"v": "'u'"}), 1),
        "merge": (
            OperationKind.MERGE,
            MergeSpec(
                source=pa.table({"id": pa.array([3], pa.int64()), "v": ["m"]}),
                condition="t.id = s.id",
                matched_update_all=True,
            ),
            2,
        ),
    }


class _Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


#: ``--no-engine-fence``: commits carry no lease fence ids (the writer-side fences of ADR 0018 only)
ENGINE_FENCE = [True]


def _keeper(manager: LeaseManager, uri: str, kind: OperationKind, name: str) -> LeaseKeeper:
    owner = Owner(task_id=name)
    claim = TableClaim(
        uri, Operation(kind), EngineProfile(EngineName.DELTA_RS, deltalake.__version__), TableConfig()
    )
    grant = manager.acquire(LeaseRequest(claims=[claim], owner=owner, ttl_s=120))
    assert isinstance(grant, Granted), grant
    keeper = LeaseKeeper(
        manager,
        grant.lease_id,
        owner,
        expires_at=grant.expires_at,
        fencing=grant.fencing,
        clock=manager.clock,
    )
    if not ENGINE_FENCE[0]:
        keeper.fence_app_ids = None  # type: ignore[assignment,method-assign]  # engines look it up with getattr
    return keeper


class _Counts:
    """A fence that holds and counts its checks."""

    def __init__(self) -> None:
        self.checks = 0

    def check(self) -> None:
        self.checks += 1

    def on_lost(self, cancel: Any) -> Any:
        return lambda: None


def _checks_of(op: str) -> int:
    """How many fence checks ``op`` makes (the frozen writer stops after the last one)."""
    with tempfile.TemporaryDirectory() as tmp:
        uri = str(Path(tmp) / "t")
        write_deltalake(uri, pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]}))
        fence = _Counts()
        DeltaRsEngine().write(uri, _late_ops()[op][1], WriteContext(fence=fence))
        return fence.checks


def one_run(root: Path, op: str, order: str) -> str:
    kind, spec, _ = _late_ops()[op]
    last = _checks_of(op)
    uri = str(root / "t")
    write_deltalake(uri, pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]}))
    # decisions stamped an hour before the storage's clock, so the grant precedes the late commit's entry
    clock = _Clock(time.time() - 3600)
    manager = LeaseManager(f"sqlite:///{root / 'leases.db'}", clock=clock)
    engine = DeltaRsEngine()
    late = _keeper(manager, uri, kind, "late")
    successor_kind, successor_spec = (
        (OperationKind.OVERWRITE, OverwriteSpec(source=ROWS))
        if op == "append"
        else (OperationKind.INSERT, AppendSpec(source=ROWS))
    )
    state: dict[str, Any] = {}
    real_check = late.check
    checks = [0]

    def check_then_freeze() -> None:
        real_check()
        checks[0] += 1
        if checks[0] != last:
            return
        clock.now += 300

        def successor_works() -> None:
            keeper = _keeper(manager, uri, successor_kind, "successor")
            if order == "successor_first":
                state["successor"] = _outcome(
                    lambda: engine.write(uri, successor_spec, WriteContext(fence=keeper))
                )
            else:
                state["keeper"], state["snapshot"] = keeper, engine.open_table(uri)

        # in a thread of its own: a MERGE checks its fence inside delta-rs' runtime, where no other
        # delta-rs call may start
        worker = threading.Thread(target=successor_works)
        worker.start()
        worker.join()

    late.check = check_then_freeze  # type: ignore[method-assign]
    try:
        late_outcome = _outcome(lambda: engine.write(uri, spec, WriteContext(fence=late)))
        if order == "late_first":
            state["successor"] = _outcome(
                lambda: engine.write(
                    uri, successor_spec, WriteContext(fence=state["keeper"]), snapshot=state["snapshot"]
                )
            )
    finally:
        manager.store.close()
    successor = state.get("successor", "not run")
    second = late_outcome if order == "successor_first" else successor
    # the truth is the Delta log: how many of the two writes committed, whatever either writer reported
    landed = DeltaTable(uri).version()  # version 0 is the table's creation
    if second.startswith("refused") and landed == 1:
        return second  # nothing of the second commit landed
    if second in ("committed", "late") and landed == 2:
        return "detected" if late_outcome == "late" else "silent"
    return f"unexpected: late {late_outcome}, successor {successor}, {landed} commits in the log"


def _outcome(write: Any) -> str:
    """``refused by fence`` (ConcurrentTransaction), ``refused by conflict <kind>`` (another conflict
    check of delta-rs fired first), ``late`` (committed, then LateCommitError), ``committed``, or
    ``fenced before commit``."""
    try:
        write()
    except CommitFencedError as exc:
        return "refused by fence" if "conflict checker" in str(exc) else "fenced before commit"
    except DeltaConflictError as exc:
        kind = exc.kind.value
        return "refused by fence" if kind == "ConcurrentTransaction" else f"refused by conflict {kind}"
    except LateCommitError:
        return "late"
    return "committed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--no-engine-fence", action="store_true", help="commits carry no lease fence ids")
    args = parser.parse_args(argv)
    ENGINE_FENCE[0] = not args.no_engine_fence
    figures: dict[str, dict[str, dict[str, int]]] = {}
    for op in _late_ops():
        for order in ("successor_first", "late_first"):
            counts: Counter[str] = Counter()
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory() as tmp:
                    counts[one_run(Path(tmp), op, order)] += 1
            figures.setdefault(op, {})[order] = dict(counts)
            print(f"{op:10s} {order:16s} {dict(counts)}", flush=True)
    result = {
        "deltalake": deltalake.__version__,
        "runs": args.runs,
        "engine_fence": ENGINE_FENCE[0],
        "figures": figures,
    }
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
