"""A real writer process stopped with SIGSTOP from its last lease check through its log-entry write (ADR 0038).

``bench_engine_fence`` plays the freeze inside one process. Here the late writer is a separate OS process
running a real leased write -- a deltaguard operator's ``execute`` (``DeltaInsertOperator`` append and
overwrite, ``DeltaMergeOperator``, ``DeltaUpdateOperator``, ``DeltaDeleteOperator``) on a local delta-rs
table, with a SQLite lease store and a short TTL -- and it stops itself with SIGSTOP at one exact point:

* ``checked``: right after its last lease check returned (the keeper's ``check``, counted: the probe
  first runs each operation once to learn how many checks it makes);
* ``log_tmp``, ``log_link``, ``log_linked``: inside delta-rs' commit, at the creation of the temporary
  log entry, before it is linked to ``_delta_log/<version>.json``, and right after that link
  (``benchmarks/frozen_stops.c``, compiled at start and loaded with ``LD_PRELOAD``; armed from Python).

While it is stopped its heartbeats stop, its lease expires, and a conflicting writer (another worker
process running an operator: an overwrite after an append, an append after the others) is granted the
table from the queue. Then:

* ``successor_first``: the successor commits, then the late writer gets ``SIGCONT``;
* ``late_first``: the successor stops itself after its own last check (its snapshot read), the late
  writer gets ``SIGCONT`` and finishes, then the successor does.

Each run is classified from the Delta log (the commits carrying each task's ``airflow.task_id`` and
``airflow.run_id``): ``refused by the engine`` (the late writer's commit is not in the log; the reason
delta-rs gave), ``in time`` (its entry was in the log already when it stopped: it landed while its lease
held, and the successor read it), ``detected`` (it landed late and the task failed, with
``LateCommitFailure`` or the lease-lost reason), or ``landed silently`` (it landed late and the task
succeeded). The successor's outcome is recorded beside it.

    for op in append overwrite merge update delete; do  # about 80 s each on the shared 2-core machine
        nice .venv/bin/python -m benchmarks.bench_frozen_writer --runs 24 --ops $op \
            --out benchmarks/results/frozen_writer.json
    done

Runs of other operations already in ``--out`` (same deltalake, runs and fence setting) are kept.
``--no-engine-fence`` makes the workers' commits carry no lease fence ids, for the comparison.

Needs a C compiler (``cc``) and Linux (``/proc``, ``LD_PRELOAD``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

POINTS = ("checked", "log_tmp", "log_link", "log_linked")
ORDERS = ("successor_first", "late_first")
OPERATIONS = ("append", "overwrite", "merge", "update", "delete")
#: the successor's operation: one the lease store does not grant beside the late writer's
SUCCESSOR = {
    "append": "overwrite",
    "overwrite": "append",
    "merge": "append",
    "update": "append",
    "delete": "append",
}
#: lease timing of both workers (seconds): short, so a run takes a few seconds
TTL_S, HEARTBEAT_S, STORE_TIMEOUT_S, COMMIT_MARGIN_S = 3.0, 0.5, 0.5, 0.5
RESULT = "@@result "
#: set to "1" in the workers' environment by ``--no-engine-fence``
NO_ENGINE_FENCE = "FROZEN_WRITER_NO_ENGINE_FENCE"
SHIM_SOURCE = Path(__file__).with_name("frozen_stops.c")


# ------------------------------------------------------------------------------------------------ worker
def _operator(op: str, uri: str, task_id: str) -> Any:
    import pyarrow as pa

    from deltaguard.operators.dml import (
        DeltaDeleteOperator,
        DeltaInsertOperator,
        DeltaMergeOperator,
        DeltaUpdateOperator,
    )

    common: dict[str, Any] = {"task_id": task_id, "table": uri, "engine": "delta-rs", "deferrable": False}
    rows = pa.table({"id": pa.array([100, 101], pa.int64()), "v": [task_id, task_id]})
    if op in ("append", "overwrite"):
        return DeltaInsertOperator(source=lambda: rows, mode=op, **common)
    if op == "merge":
        source = pa.table({"id": pa.array([3, 4], pa.int64()), "v": ["m", "m"]})
        return DeltaMergeOperator(source=lambda: source, condition="t.id = s.id", **common)
    if op == "update":
        return DeltaUpdateOperator(updates={"v": "'u'"}, predicate="id = 2", **common)
    if op == "delete":
        return DeltaDeleteOperator(predicate="id = 1", **common)
    raise ValueError(op)


def _context(task_id: str, run_id: str) -> dict[str, Any]:
    from types import SimpleNamespace

    now = time.time()
    import datetime as dt

    started = dt.datetime.fromtimestamp(now, dt.UTC)
    ti = SimpleNamespace(
        dag_id="frozen", task_id=task_id, run_id=run_id, try_number=1, map_index=-1, max_tries=0
    )
    dag_run = SimpleNamespace(
        run_id=run_id, start_date=started, run_after=started, logical_date=started, clear_number=0
    )
    return {"ti": ti, "dag_run": dag_run, "run_id": run_id}


def _causes(exc: BaseException) -> list[str]:
    chain, seen = [], set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(f"{type(current).__name__}: {str(current)[:300]}")
        current = current.__cause__ or current.__context__
    return chain


def worker(shim_path: str) -> int:
    """Run the jobs read from stdin (one JSON object a line), one at a time; answer each on stdout."""
    import ctypes

    from deltaguard.leases.keeper import LeaseKeeper

    shim = ctypes.CDLL(shim_path)  # the library LD_PRELOAD loaded: the same state
    state: dict[str, Any] = {"checks": 0, "stop_after": None, "stopped": False}
    real_check = LeaseKeeper.check

    def check(self: LeaseKeeper) -> None:
        real_check(self)
        state["checks"] += 1
        if state["stop_after"] == state["checks"]:
            state["stopped"] = True
            # thread-directed: a MERGE checks in a delta-rs thread, which must stop right here
            signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)

    LeaseKeeper.check = check  # type: ignore[method-assign]
    if os.environ.get(NO_ENGINE_FENCE) == "1":
        # the writer-side fences of ADR 0018 alone: commits carry no lease fence ids (engines use getattr)
        LeaseKeeper.fence_app_ids = None  # type: ignore[assignment,method-assign]
    for line in sys.stdin:
        job = json.loads(line)
        state.update(checks=0, stop_after=job.get("stop_after_check"), stopped=False)
        if job["stop"] not in ("none", "checked"):
            shim.dg_arm(job["stop"].encode(), f"{job['uri']}/_delta_log/".encode())
        answer: dict[str, Any]
        try:
            result = _operator(job["op"], job["uri"], job["task_id"]).execute(
                _context(job["task_id"], job["run_id"])
            )
            answer = {
                "outcome": "committed",
                "version": result.get("version"),
                "waited_s": result.get("waited_s"),
            }
        except BaseException as exc:
            answer = {"outcome": "failed", "error": type(exc).__name__, "causes": _causes(exc)}
        finally:
            shim.dg_disarm()
        answer.update(checks=state["checks"], stopped=bool(state["stopped"] or shim.dg_fired()))
        print(RESULT + json.dumps(answer, default=str), flush=True)
    return 0


# ------------------------------------------------------------------------------------------------ parent
class Worker:
    """A worker process: jobs in, answers out, stops seen in ``/proc``."""

    def __init__(self, name: str, env: dict[str, str], shim: Path, log_dir: Path) -> None:
        self.name = name
        self.log = open(log_dir / f"{name}.log", "w")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_frozen_writer", "--worker", str(shim)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            env={**env, "LD_PRELOAD": str(shim)},
            cwd=Path(__file__).resolve().parent.parent,
        )
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(RESULT):
                self.answers.put(json.loads(line[len(RESULT) :]))
            else:
                self.log.write(line)

    def send(self, job: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()

    def answer(self, timeout_s: float = 120) -> dict[str, Any]:
        return self.answers.get(timeout=timeout_s)

    def stopped(self) -> bool:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0] == "T"

    def wait_stopped_or_answer(self, timeout_s: float = 120) -> dict[str, Any] | None:
        """``None`` once the process is stopped; its answer if the job ended without stopping."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.stopped():
                return None
            with contextlib.suppress(queue.Empty):
                return self.answers.get(timeout=0.01)
        raise TimeoutError(f"{self.name} neither stopped nor answered in {timeout_s} s")

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _table(uri: str) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(uri, pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]}))


def _commits_of(uri: str, task_id: str, run_id: str) -> list[int]:
    from deltalake import DeltaTable

    return sorted(
        int(info["version"])
        for info in DeltaTable(uri).history()
        if info.get("airflow.task_id") == task_id and info.get("airflow.run_id") == run_id
    )


def _refusal(answer: dict[str, Any]) -> str:
    text = " | ".join(answer.get("causes", []))
    if "refused by Delta's conflict checker" in text or "ConcurrentTransaction" in text:
        return "fence (ConcurrentTransaction)"
    for kind in ("ConcurrentDeleteRead", "ConcurrentAppend", "ConcurrentDeleteDelete", "MetadataChanged"):
        if kind in text:
            return kind
    return f"other: {answer.get('error')}"


def _second_commit(run: dict[str, Any]) -> str:
    """``late_first``: what became of the successor, which read the table before the late commit."""
    answer = run.get("successor") or {}
    if run.get("successor_versions"):
        return "committed"
    return "refused by the engine: " + _refusal(answer) if answer.get("outcome") == "failed" else "nothing"


def classify(late: dict[str, Any], landed: list[int], at_stop: bool) -> str:
    """The late writer's run, from the Delta log and what its task reported."""
    if len(landed) > 1:
        return f"duplicated ({len(landed)} commits)"
    if not landed:
        return (
            "refused by the engine: " + _refusal(late) if late["outcome"] == "failed" else "nothing committed"
        )
    if at_stop:
        # landed while the lease held: a failure here is a false alarm of the after-commit check
        return "in time" if late["outcome"] == "committed" else f"in time, the task failed: {late['error']}"
    if late["outcome"] == "failed":
        text = " | ".join(late.get("causes", []))
        if "LateCommit" in text or "lease" in text.lower():
            return "detected"
        return "landed, task failed otherwise: " + late["error"]
    return "landed silently"


def one_run(
    late: Worker,
    successor: Worker,
    root: Path,
    op: str,
    point: str,
    order: str,
    n: int,
    checks: dict[str, int],
) -> dict[str, Any]:
    uri = str(root / f"{op}-{point}-{order}-{n}")
    _table(uri)
    run_id = f"{op}-{point}-{order}-{n}"
    successor_op = SUCCESSOR[op]
    late.send(
        {
            "op": op,
            "uri": uri,
            "task_id": "late",
            "run_id": run_id,
            "stop": point,
            "stop_after_check": checks[op] if point == "checked" else None,
        }
    )
    early = late.wait_stopped_or_answer()
    if early is not None:
        return {"classified": "stop not reached", "late": early}
    at_stop = bool(_commits_of(uri, "late", run_id))
    stopped_at = time.monotonic()
    successor.send(
        {
            "op": successor_op,
            "uri": uri,
            "task_id": "successor",
            "run_id": run_id,
            "stop": "checked" if order == "late_first" else "none",
            "stop_after_check": checks[successor_op] if order == "late_first" else None,
        }
    )
    if order == "successor_first":
        successor_answer = successor.answer()
        late.resume()
        late_answer = late.answer()
    else:
        early = successor.wait_stopped_or_answer()
        late.resume()
        late_answer = late.answer()
        if early is None:
            successor.resume()
            successor_answer = successor.answer()
        else:
            successor_answer = {**early, "note": "ended before its stop"}
    landed = _commits_of(uri, "late", run_id)
    return {
        "classified": classify(late_answer, landed, at_stop),
        "stopped_s": round(time.monotonic() - stopped_at, 2),
        "late": late_answer,
        "successor": successor_answer,
        "late_versions": landed,
        "successor_versions": _commits_of(uri, "successor", run_id),
    }


def _build_shim(directory: Path) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SystemExit("a C compiler (cc) is needed to build benchmarks/frozen_stops.c")
    shim = directory / "frozen_stops.so"
    subprocess.run(
        [compiler, "-O2", "-Wall", "-shared", "-fPIC", "-o", str(shim), str(SHIM_SOURCE), "-ldl"], check=True
    )
    return shim


def _environment(root: Path) -> dict[str, str]:
    home = root / "airflow_home"
    home.mkdir()
    return {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DELTAGUARD__LEASE_STORE_URL": f"sqlite:///{root / 'leases.db'}",
        "AIRFLOW__DELTAGUARD__LEASE_TTL": str(TTL_S),
        "AIRFLOW__DELTAGUARD__HEARTBEAT_INTERVAL": str(HEARTBEAT_S),
        "AIRFLOW__DELTAGUARD__STORE_TIMEOUT": str(STORE_TIMEOUT_S),
        "AIRFLOW__DELTAGUARD__COMMIT_MARGIN": str(COMMIT_MARGIN_S),
        "AIRFLOW__DELTAGUARD__POLL_INTERVAL": "0.2",
        "PYTHONUNBUFFERED": "1",
    }


def _calibrate(workers: list[Worker], root: Path) -> dict[str, int]:
    """How many lease checks each operation's write makes (the ``checked`` stop is after the last); every
    worker runs each operation once, so none is still importing when the runs start."""
    checks: dict[str, int] = {}
    for worker in workers:
        for op in OPERATIONS:
            uri = str(root / f"calibrate-{worker.name}-{op}")
            _table(uri)
            worker.send({"op": op, "uri": uri, "task_id": "calibrate", "run_id": op, "stop": "none"})
            answer = worker.answer()
            if answer["outcome"] != "committed":
                raise SystemExit(f"calibration of {op} failed: {answer}")
            if checks.setdefault(op, int(answer["checks"])) != int(answer["checks"]):
                raise SystemExit(f"{op} made {answer['checks']} lease checks, earlier {checks[op]}")
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--runs", type=int, default=24, help="runs per operation, spread over points and orders"
    )
    parser.add_argument("--ops", nargs="*", default=list(OPERATIONS), choices=OPERATIONS)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--no-engine-fence", action="store_true", help="commits carry no lease fence ids")
    parser.add_argument("--logs", type=Path, default=None, help="keep the workers' logs in this folder")
    parser.add_argument("--worker", metavar="SHIM", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    figures: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="frozen-writer-") as tmp:
        root = Path(tmp)
        shim = _build_shim(root)
        env = {**_environment(root), NO_ENGINE_FENCE: "1" if args.no_engine_fence else "0"}
        late, successor = Worker("late", env, shim, root), Worker("successor", env, shim, root)
        try:
            checks = _calibrate([late, successor], root)
            print(f"lease checks per write: {checks}", flush=True)
            combos = [(p, o) for p in POINTS for o in ORDERS]
            for op in args.ops:
                op_started, op_load = time.monotonic(), os.getloadavg()
                counts: Counter[str] = Counter()
                by_combo: dict[str, Counter[str]] = {}
                runs = []
                for n in range(args.runs):
                    point, order = combos[n % len(combos)]
                    run = one_run(late, successor, root, op, point, order, n, checks)
                    run.update(point=point, order=order)
                    runs.append(run)
                    counts[run["classified"]] += 1
                    by_combo.setdefault(f"{point}/{order}", Counter())[run["classified"]] += 1
                    print(f"{op:9s} {point:10s} {order:15s} {run['classified']}", flush=True)
                second: Counter[str] = Counter(
                    _second_commit(run) for run in runs if run["order"] == "late_first"
                )
                figures[op] = {
                    "successor": SUCCESSOR[op],
                    "late_first_successor": dict(second),
                    "elapsed_s": round(time.monotonic() - op_started, 1),
                    "load_average_before": [round(x, 2) for x in op_load],
                    "load_average_after": [round(x, 2) for x in os.getloadavg()],
                    "counts": dict(counts),
                    "by_point_and_order": {k: dict(v) for k, v in by_combo.items()},
                    "runs": runs,
                }
                print(f"== {op}: {dict(counts)}", flush=True)
        finally:
            late.close()
            successor.close()
            if args.logs is not None:
                args.logs.mkdir(parents=True, exist_ok=True)
                for name in ("late", "successor"):
                    shutil.copy(root / f"{name}.log", args.logs / f"{name}.log")
    import deltalake

    if args.out is not None and args.out.exists():
        # runs of other operations, measured by earlier invocations (one operation takes about 2 minutes)
        earlier = json.loads(args.out.read_text())
        if (
            earlier.get("deltalake") == deltalake.__version__
            and earlier.get("runs_per_operation") == args.runs
            and earlier.get("engine_fence", True) == (not args.no_engine_fence)
        ):
            figures = {**earlier.get("figures", {}), **figures}
    result = {
        "deltalake": deltalake.__version__,
        "command": "nice .venv/bin/python -m benchmarks.bench_frozen_writer --runs N --ops OP --out FILE, per OP",
        "runs_per_operation": args.runs,
        "engine_fence": not args.no_engine_fence,
        "points": list(POINTS),
        "orders": list(ORDERS),
        "lease_timing_s": {
            "ttl": TTL_S,
            "heartbeat": HEARTBEAT_S,
            "store_timeout": STORE_TIMEOUT_S,
            "commit_margin": COMMIT_MARGIN_S,
        },
        "elapsed_s": round(sum(f["elapsed_s"] for f in figures.values()), 1),
        "totals": dict(sum((Counter(f["counts"]) for f in figures.values()), Counter())),
        "figures": figures,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "figures"}, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
