"""The plan of the orchestration benchmark's DAGs against their measured runs under the real scheduler.

For each seed of a recorded sweep (``benchmarks/results/orchestration_sweep.json``, written by
``python -m benchmarks.bench_orchestration --seeds 0-4``), the same workload is generated, its tables
created, and ``deltaguard plan`` is run on the deltaguard strategy's DAG with the sweep's worker
parallelism (``--workers``), the plan's default hand-off (``--handoff-s``) and no lease store, so durations are the DAG's declared ``expected_duration``
(each the true duration times a seeded factor in [0.7, 1.3], as the operators are told). The planned
makespans under one-slot pools and deltaguard are set beside the measured ones, with the relative error.

Under deltaguard the plan also gives a range: the fastest and slowest runs over which write asks first for
each table whose first question is a race (:mod:`deltaguard.planning.first_holders`). The measured run is
compared with that range too: ``range_error`` is 0 inside it, else the relative distance to its nearer end.

The lease manager's slot gate is played at ``--worker-slots`` (the sweep's ``[core] parallelism`` when its
deployment had the gate, 0 for sweeps run before it was built) and a deferred write's trigger first checks
``--first-check-s`` seconds after its deferral (default 5 s, one ``[deltaguard] poll_interval``, what the
recorded sweeps ran with; a sweep of a deployment whose triggers wait for the deferring try's exit report,
ADR 0039, needs ``--first-check-s 8`` with Airflow's defaults).

Run: ``python -m benchmarks.plan_vs_measured`` (about a minute; no Airflow stack is started); the sweep with
the gate: ``--sweep benchmarks/results/orchestration_sweep_slotgate.json --worker-slots 8 --out
benchmarks/results/plan_vs_measured_sweep_slotgate.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.bench_dags import STRATEGIES, dag_id_for
from benchmarks.bench_orchestration import DAG_FILE
from benchmarks.workload_tables import BENCH_DIR_ENV, create_tables, write_plan
from deltaguard.planning.leased_run import DEFAULT_HANDOFF_S, DEFAULT_SLOT_TIMES
from lab.simulation.workload import generate

#: seconds from a deferral to the trigger's first check in the recorded sweeps' deployments: one
#: ``[deltaguard] poll_interval`` (5 s), from before the trigger waited for the exit report (ADR 0039)
RECORDED_FIRST_CHECK_S = 5.0

RESULTS = Path(__file__).resolve().parent / "results"


def planned(
    seed: int,
    shape: dict[str, Any],
    parallelism: int,
    work: Path,
    handoff_s: float,
    slot_times: tuple[float, float],
    worker_slots: int = 0,
    first_check_s: float = RECORDED_FIRST_CHECK_S,
    phase_wait_s: float = 0.0,
    cold_start_s: float | None = None,
) -> dict[str, Any]:
    """The plan's JSON for the deltaguard DAG of ``seed``'s workload."""
    import os

    from deltaguard.cli import main

    workload = generate(seed, **shape)
    uris = create_tables(workload, work / "data")
    for strategy in STRATEGIES:
        write_plan(work / f"{dag_id_for(strategy)}.json", workload, uris, work / "attempts.jsonl")
    dags = work / "dags"
    dags.mkdir()
    (dags / "deltaguard.py").write_text(DAG_FILE.format(strategy="deltaguard"))
    os.environ[BENCH_DIR_ENV] = str(work)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(
            [
                "plan",
                str(dags),
                "--format",
                "json",
                "--no-store",
                "--workers",
                str(parallelism),
                "--handoff-s",
                str(handoff_s),
                "--start-s",
                str(slot_times[0]),
                "--end-s",
                str(slot_times[1]),
                "--worker-slots",
                str(worker_slots),
                "--first-check-s",
                str(first_check_s),
                "--phase-wait-s",
                str(phase_wait_s),
                *([] if cold_start_s is None else ["--cold-start-s", str(cold_start_s)]),
            ]
        )
    if code != 0:
        raise RuntimeError(f"deltaguard plan failed for seed {seed} ({code})")
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


def range_error(best_s: float, worst_s: float, measured_s: float) -> float:
    """0 when ``measured_s`` lies in ``[best_s, worst_s]``, else the signed relative distance from the
    measured run to the range's nearer end (negative: the range is short)."""
    if best_s <= measured_s <= worst_s:
        return 0.0
    nearer = worst_s if measured_s > worst_s else best_s
    return round((nearer - measured_s) / measured_s, 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sweep", type=Path, default=RESULTS / "orchestration_sweep.json")
    parser.add_argument("--out", type=Path, default=RESULTS / "plan_vs_measured.json")
    parser.add_argument("--parallelism", type=int, default=8, help="the sweep's worker parallelism")
    parser.add_argument(
        "--handoff-s",
        type=float,
        default=DEFAULT_HANDOFF_S,
        help="the plan's hand-off from a grant out of the lease queue to the write (default: the plan's)",
    )
    parser.add_argument(
        "--start-s",
        type=float,
        default=DEFAULT_SLOT_TIMES.start_s,
        help="a write's seconds in its worker slot before its lease question (default: the plan's)",
    )
    parser.add_argument(
        "--end-s",
        type=float,
        default=DEFAULT_SLOT_TIMES.end_s,
        help="a write's seconds in its worker slot after its commit (default: the plan's)",
    )
    parser.add_argument(
        "--worker-slots",
        type=int,
        default=0,
        help="the lease manager's slot gate in the sweep's deployment (its [core] parallelism when the gate "
        "was on, ADR 0028; default 0: no gate, as in the sweeps before it was built)",
    )
    parser.add_argument(
        "--first-check-s",
        type=float,
        default=RECORDED_FIRST_CHECK_S,
        help="seconds from a deferral to the trigger's first check in the sweep's deployment (default: 5, "
        "what the recorded sweeps ran with; 8 for a deployment whose triggers wait for the exit report)",
    )
    parser.add_argument(
        "--phase-wait-s",
        type=float,
        default=0.0,
        help="[deltaguard] phase_wait in the sweep's deployment (default: 0, what the sweeps before the "
        "wait ran with; 5, the option's default, for a sweep with it)",
    )
    parser.add_argument(
        "--cold-start-s",
        type=float,
        default=None,
        help="the start-up of a task on a worker the executor starts for it (default: --start-s); a sweep "
        "that starts a fresh Airflow for deltaguard alone starts its first tasks on new workers",
    )
    parser.add_argument(
        "--true-durations",
        action="store_true",
        help="declare each write's true duration instead of the noisy estimate the benchmark's DAG declares",
    )
    args = parser.parse_args(argv)
    if args.true_durations:
        from benchmarks import bench_dags

        # the DAG module looks the function up when it builds each task
        bench_dags.estimated_duration = lambda seed, write, error=0.0: write.duration_s  # type: ignore[assignment]
    sweep = json.loads(args.sweep.read_text())
    # the sweep's workload shape: bench_orchestration's defaults
    shape = {"tables": 4, "writes": 20, "partitions": 6, "overlap": 0.1, "duration": (30.0, 40.0)}
    rows = []
    for run in sweep["runs"]:
        if not run.get("valid"):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            document = planned(
                run["seed"],
                shape,
                args.parallelism,
                Path(tmp),
                args.handoff_s,
                (args.start_s, args.end_s),
                args.worker_slots,
                args.first_check_s,
                args.phase_wait_s,
                args.cold_start_s,
            )
        row: dict[str, Any] = {"seed": run["seed"]}
        for policy, measured_key in (("one_slot_pools", "one_slot_pools_s"), ("deltaguard", "deltaguard_s")):
            plan_s = document["makespan"][policy]["makespan_s"]
            measured = float(run[measured_key])
            row[policy] = {
                "planned_s": plan_s,
                "measured_s": measured,
                "error": round((plan_s - measured) / measured, 3),
            }
        race = document["deltaguard_range"]
        measured = float(run["deltaguard_s"])
        row["deltaguard_range"] = {
            "best_s": race["best_s"],
            "worst_s": race["worst_s"],
            "mean_s": race["mean_s"],
            "mean_error": round((race["mean_s"] - measured) / measured, 3),
            "measured_s": measured,
            "range_error": range_error(race["best_s"], race["worst_s"], measured),
            # the benchmark's tables by name (the plan's keys are the temporary copies' paths)
            "first_to_ask": {Path(t).name: w for t, w in race["first_to_ask"].items()},
            "plays": race["plays"],
            "exhaustive": race["exhaustive"],
        }
        rows.append(row)
        print(json.dumps(row))
    summary = {
        policy: {
            "mean_abs_error": round(sum(abs(r[policy]["error"]) for r in rows) / len(rows), 3),
            "worst_abs_error": max(abs(r[policy]["error"]) for r in rows),
        }
        for policy in ("one_slot_pools", "deltaguard")
    }
    summary["deltaguard_range"] = {
        "mean_abs_error": round(sum(abs(r["deltaguard_range"]["range_error"]) for r in rows) / len(rows), 3),
        "worst_abs_error": max(abs(r["deltaguard_range"]["range_error"]) for r in rows),
        "measured_within_range": sum(1 for r in rows if r["deltaguard_range"]["range_error"] == 0),
        "mean_width": round(
            sum(
                (r["deltaguard_range"]["worst_s"] - r["deltaguard_range"]["best_s"])
                / r["deltaguard_range"]["measured_s"]
                for r in rows
            )
            / len(rows),
            3,
        ),
    }
    result = {
        "command": " ".join(
            ["python -m benchmarks.plan_vs_measured", *(sys.argv[1:] if argv is None else argv)]
        ),
        "sweep": str(args.sweep.relative_to(RESULTS.parent.parent))
        if args.sweep.is_relative_to(RESULTS.parent.parent)
        else str(args.sweep),
        "sweep_command": sweep.get("command"),
        "parallelism": args.parallelism,
        "handoff_s": args.handoff_s,
        "slot_times": {"start_s": args.start_s, "end_s": args.end_s},
        "worker_slots": args.worker_slots,
        "first_check_s": args.first_check_s,
        "phase_wait_s": args.phase_wait_s,
        "cold_start_s": args.cold_start_s,
        "durations": (
            "true durations"
            if args.true_durations
            else "declared expected_duration (true duration x seeded factor in [0.7, 1.3])"
        ),
        "runs": rows,
        "summary": summary,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
