"""``deltaguard plan PATH``: which of a DAG's writes will wait for each other, why, and how long a run takes.

Parses the DAG file or folder as Airflow does, finds every deltaguard write, reads each table's
configuration (:mod:`deltaguard.planning.discover`) and judges the writes with the conflict model
(:mod:`deltaguard.planning.analysis`). Prints text or JSON; ``--out`` writes a Gantt chart; ``--check
BASELINE.json`` exits 1 when a serializing pair is new or the deltaguard makespan grew past the tolerance.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from deltaguard.commands import UsageError

#: exit code when ``--check`` finds the plan worse than its baseline
CHECK_FAILED = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="a DAG file or a DAGs folder")
    parser.add_argument("--dag-id", help="plan only this DAG")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    parser.add_argument(
        "--out", help="write a Gantt chart of the planned run (.svg, or .png with matplotlib)"
    )
    parser.add_argument("--tables", help="declared table configurations (JSON: table URI -> table document)")
    parser.add_argument("--no-read", action="store_true", help="do not read the tables' Delta logs")
    parser.add_argument(
        "--store",
        help="lease store URL for recorded durations and configurations (default: [deltaguard] lease_store_url)",
    )
    parser.add_argument("--no-store", action="store_true", help="read no lease store")
    parser.add_argument(
        "--workers",
        type=int,
        help="tasks that run at once at most (default: the smaller of [core] parallelism and the DAG's "
        "max_active_tasks, 32 and 16 by Airflow's defaults; give a smaller pool's size here)",
    )
    parser.add_argument(
        "--worker-slots",
        type=int,
        default=None,
        help="the lease manager's slot gate: leases held at once at most, 0 for no gate (default: "
        "[deltaguard] worker_slots, else [core] parallelism, as the lease manager reads them)",
    )
    parser.add_argument(
        "--first-check-s",
        type=float,
        default=None,
        help="seconds from a write's deferral to its trigger's first lease check (default: this "
        "deployment's: [deltaguard] poll_interval, but no sooner than [workers] min_heartbeat_interval + 3 s)",
    )
    parser.add_argument(
        "--phase-wait-s",
        type=float,
        default=None,
        help="the longest a write lets the conflicting writes of earlier phases on its table ask first "
        "(default: this deployment's [deltaguard] phase_wait)",
    )
    parser.add_argument(
        "--handoff-s",
        type=float,
        default=None,
        help="seconds from a lease granted out of the queue to the write's first byte (default 3.36, the "
        "median measured under the real scheduler)",
    )
    parser.add_argument(
        "--start-s",
        type=float,
        default=None,
        help="seconds a write's task holds its worker slot before its lease question: from its start as "
        "Airflow logs it through the operator's checks (default: measured under the real scheduler, docs/plan.md)",
    )
    parser.add_argument(
        "--cold-start-s",
        type=float,
        default=None,
        help="--start-s of a task on a worker the executor starts for it: the run's first tasks in a "
        "freshly started deployment (default: --start-s, warm workers)",
    )
    parser.add_argument(
        "--end-s",
        type=float,
        default=None,
        help="seconds a write's task holds its worker slot after its commit: release, task end (default: "
        "measured under the real scheduler)",
    )
    parser.add_argument(
        "--mapped-instances",
        type=int,
        default=None,
        help="instances assumed for a task mapped over values known only at run time (default 2)",
    )
    parser.add_argument(
        "--other-seconds", type=float, default=None, help="seconds of a task that writes no table (default 0)"
    )
    parser.add_argument(
        "--check", metavar="BASELINE", help="exit 1 when the plan is worse than this JSON plan"
    )
    parser.add_argument(
        "--tolerance", type=float, default=None, help="relative makespan growth --check allows (default 0.05)"
    )


def _store_url(args: argparse.Namespace) -> str | None:
    if args.no_store:
        return None
    if args.store:
        return str(args.store)
    try:
        from deltaguard import config

        return config.lease_store_url() or None
    except Exception:  # no Airflow configuration: no recorded durations, stated in the plan
        return None


def _plans(args: argparse.Namespace) -> list[Any]:
    from deltaguard.planning.discover import (
        DEFAULT_MAPPED_INSTANCES,
        DEFAULT_OTHER_S,
        PlanInputError,
        deployment_first_check_s,
        deployment_phase_wait_s,
        load_dags,
        load_table_documents,
        plan_dag,
    )
    from deltaguard.planning.leased_run import DEFAULT_HANDOFF_S, DEFAULT_SLOT_TIMES, SlotTimes

    mapped = DEFAULT_MAPPED_INSTANCES if args.mapped_instances is None else args.mapped_instances
    other = DEFAULT_OTHER_S if args.other_seconds is None else args.other_seconds
    if mapped < 1:
        raise UsageError(f"--mapped-instances must be at least 1, got {mapped}")
    if other < 0:
        raise UsageError(f"--other-seconds must be >= 0, got {other}")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    if args.worker_slots is not None and args.worker_slots < 0:
        raise UsageError(f"--worker-slots must be at least 0, got {args.worker_slots}")
    try:  # the deployment's own settings, where no flag gives them: a bad one is named, not replaced
        first_check = deployment_first_check_s() if args.first_check_s is None else args.first_check_s
        phase_wait = deployment_phase_wait_s() if args.phase_wait_s is None else args.phase_wait_s
    except ValueError as exc:
        raise UsageError(f"cannot plan: {exc}") from None
    if not 0 <= first_check < float("inf"):
        raise UsageError(f"--first-check-s must be a finite number >= 0, got {args.first_check_s}")
    if not 0 <= phase_wait < float("inf"):
        raise UsageError(f"--phase-wait-s must be a finite number >= 0, got {args.phase_wait_s}")
    handoff = DEFAULT_HANDOFF_S if args.handoff_s is None else args.handoff_s
    if not 0 <= handoff < float("inf"):
        raise UsageError(f"--handoff-s must be a finite number >= 0, got {args.handoff_s}")
    start_s = DEFAULT_SLOT_TIMES.start_s if args.start_s is None else args.start_s
    end_s = DEFAULT_SLOT_TIMES.end_s if args.end_s is None else args.end_s
    for flag, value in (("--start-s", start_s), ("--end-s", end_s), ("--cold-start-s", args.cold_start_s)):
        if value is not None and not 0 <= value < float("inf"):
            raise UsageError(f"{flag} must be a finite number >= 0, got {value}")
    slot_times = SlotTimes(start_s, end_s, args.cold_start_s)
    try:
        documents = load_table_documents(args.tables)
        dags = load_dags(args.path, args.dag_id)
        store = _store_url(args)
        plans = [
            plan_dag(
                dag,
                documents,
                read_tables=not args.no_read,
                store_url=store,
                mapped_instances=mapped,
                other_s=other,
                workers=args.workers,
                worker_slots=args.worker_slots,
                first_check_s=first_check,
                phase_wait_s=phase_wait,
                handoff_s=handoff,
                slot_times=slot_times,
            )
            for dag in dags
        ]
    except PlanInputError as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:  # an unparsable predicate or MERGE condition in a DAG
        raise UsageError(f"cannot plan: {' '.join(str(exc).split())}") from None
    return plans


def run(args: argparse.Namespace) -> int:
    from deltaguard.planning.report import plan_json, render_text

    if args.out and not str(args.out).lower().endswith((".svg", ".png")):
        raise UsageError(f"--out writes a .svg or .png chart, not {args.out!r}")
    # Parsing DAG files logs (Airflow's logging, the DAGs' own prints) to standard output: keep it on
    # standard error so the JSON on standard output stays one document.
    with contextlib.redirect_stdout(sys.stderr):
        plans = _plans(args)
    if (args.out or args.check) and len(plans) != 1:
        raise UsageError(f"{len(plans)} DAGs found: name one with --dag-id for --out or --check")
    documents = [plan_json(plan) for plan in plans]
    if args.format == "json":
        json.dump(documents[0] if len(documents) == 1 else documents, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write("\n".join(render_text(plan) for plan in plans))
    if args.out:
        from deltaguard.planning.gantt import ChartUnavailableError, write_chart

        try:
            written = write_chart(plans[0], args.out)
        except (ChartUnavailableError, ValueError) as exc:
            raise UsageError(str(exc)) from None
        print(f"chart written to {written}", file=sys.stderr)
    if args.check:
        return _check(documents[0], args.check, args.tolerance)
    return 0


def _check(current: dict[str, Any], path: str, tolerance: float | None) -> int:
    from deltaguard.planning.baseline import DEFAULT_TOLERANCE, compare

    try:
        with open(path, encoding="utf-8") as handle:
            baseline = json.load(handle)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the baseline {path}: {' '.join(str(exc).split())}") from None
    if isinstance(baseline, list):
        baseline = next(
            (b for b in baseline if isinstance(b, dict) and b.get("dag_id") == current["dag_id"]), None
        )
    try:
        problems = compare(current, baseline, DEFAULT_TOLERANCE if tolerance is None else tolerance)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for problem in problems:
        print(f"deltaguard plan --check: {problem}", file=sys.stderr)
    return CHECK_FAILED if problems else 0
