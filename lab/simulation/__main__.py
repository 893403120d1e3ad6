"""``python -m lab.simulation``: the three orchestration strategies at scale, in virtual time.

Example (the full-scale day: 10,000 tables, 1,000,000 writes)::

    python -m lab.simulation --writes 1000000 --out benchmarks/results

``--writes`` scales the day down; the number of tables follows (``writes / 100``) unless ``--tables`` is
given, so every table sees the same load at any scale. Writes ``simulation.json`` and PNG charts to
``--out`` and prints a summary.

``python -m lab.simulation batch`` plays small batches (every write arrives at once) for a range of seeds and
compares each strategy's makespan with the workload's lower bound and its proven optimum (OR-Tools CP-SAT,
extra ``bench``)::

    python -m lab.simulation batch --seeds 1-32 --tables 4 --writes 20 --slots 8 --format json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXIT_INVALID = 2


def _ints(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got {text!r}")
    return values


def _seeds(text: str) -> range:
    low, _, high = text.partition("-")
    try:
        first, last = int(low), int(high or low)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected A-B, got {text!r}") from None
    if first < 0 or last < first:
        raise argparse.ArgumentTypeError(f"expected 0 <= A <= B, got {text!r}")
    return range(first, last + 1)


def _mix(text: str) -> dict[str, float] | None:
    """``roles`` (each table plays a role), ``default`` (one mix of DML and maintenance) or ``kind=w,...``."""
    from lab.simulation.workload import DEFAULT_MIX

    if text == "roles":
        return None
    if text == "default":
        return dict(DEFAULT_MIX)
    try:
        return {k.strip(): float(v) for k, v in (part.split("=") for part in text.split(",") if part.strip())}
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected roles, default or kind=weight,..., got {text!r}"
        ) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "mode", nargs="?", choices=("day", "batch"), default="day", help="day (default) or batch"
    )
    parser.add_argument("--seeds", type=_seeds, default=range(1, 33), help="batch: seeds A-B (default 1-32)")
    parser.add_argument("--partitions", type=int, default=4, help="batch: partitions per table (default 4)")
    parser.add_argument("--overlap", type=float, default=0.2, help="batch: partition reuse chance (0.2)")
    parser.add_argument(
        "--mix", type=_mix, default=None, help="batch: roles (default), default or kind=w,..."
    )
    parser.add_argument("--time-limit-s", type=float, default=10.0, help="batch: CP-SAT limit per seed")
    parser.add_argument("--writes", type=int, help="writes per day (default 200,000; batch: 20)")
    parser.add_argument("--tables", type=int, help="tables (default: writes / 100, at least 10)")
    parser.add_argument("--slots", type=int, help="worker slots (default: writes / 100, at least 8)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--engine", default="databricks", help="databricks (default), delta-spark or delta-rs"
    )
    parser.add_argument("--version", default=None, help="engine version (default 15.4 / 3.2.0 / 1.6.6)")
    parser.add_argument(
        "--conflict-probability",
        type=float,
        default=0.5,
        help="chance that an optimistic commit fails when the model says it can (default 0.5)",
    )
    parser.add_argument("--hot-tables", type=float, default=0.01, help="share of hot tables (default 0.01)")
    parser.add_argument("--hot-share", type=float, default=0.05, help="share of writes to hot tables")
    parser.add_argument("--median-s", type=float, default=60.0, help="median write duration (log-normal)")
    parser.add_argument("--sigma", type=float, default=1.2, help="log-normal sigma of durations")
    parser.add_argument("--retry-delay-s", type=float, default=30.0, help="optimistic: first retry delay")
    parser.add_argument("--max-retries", type=int, default=10, help="optimistic: retries per write")
    parser.add_argument("--cost-tables", type=_ints, default=[10, 100, 1_000, 10_000])
    parser.add_argument("--cost-running", type=_ints, default=[0, 1, 4, 16])
    parser.add_argument("--cost-decisions", type=int, default=200, help="timed decisions per cell")
    parser.add_argument("--out", type=Path, default=None, help="write simulation.json and PNGs here")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    from lab.progress import add_progress_argument

    add_progress_argument(parser)


def _profile(engine: str, version: str | None) -> Any:
    from deltaguard.core.profiles import EngineName, EngineProfile

    defaults = {"databricks": "15.4", "delta-spark": "3.2.0", "delta-rs": "1.6.6"}
    name = engine.strip().lower()
    if name not in defaults:
        raise ValueError(f"unknown engine {engine!r}; choose one of {sorted(defaults)}")
    return EngineProfile(EngineName(name), version or defaults[name])


def run(args: argparse.Namespace) -> int:
    if args.mode == "batch":
        return run_batch(args)
    return run_day(args)


def run_batch(args: argparse.Namespace) -> int:
    """Small batches over a range of seeds: one row of makespans per seed, then medians and worst ratios."""
    from lab.simulation import simulator as sim
    from lab.simulation.workload import generate

    if importlib.util.find_spec("ortools") is None:
        print(
            "python -m lab.simulation batch: the optimum needs OR-Tools: pip install 'airflow-provider-deltaguard[bench]'"
        )
        return EXIT_INVALID
    try:
        profile = _profile(args.engine, args.version)
        tables = args.tables or 4
        slots = args.slots or 8
        workloads = [
            generate(
                seed,
                tables=tables,
                writes=args.writes or 20,
                mix=args.mix,
                partitions=args.partitions,
                overlap=args.overlap,
            )
            for seed in args.seeds
        ]
    except ValueError as exc:
        print(f"python -m lab.simulation: {exc}")
        return EXIT_INVALID
    decide = sim.MemoDecide()
    rows = [
        sim.batch_row(
            sim.stream_of(w), slots=slots, profile=profile, time_limit_s=args.time_limit_s, decide=decide
        )
        for w in workloads
    ]
    data = {"rows": rows, "summary": batch_summary(rows)}
    if args.format == "json":
        print(json.dumps(data, indent=2))
    else:
        for name, figures in data["summary"].items():
            print(f"{name:<16} " + "  ".join(f"{k} {v}" for k, v in figures.items()))
    return 0


def batch_summary(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per strategy: median and worst ratio to the optimum (over the seeds with a proven optimum) and the
    median ratio to one-slot pools."""
    import statistics

    out: dict[str, dict[str, Any]] = {}
    proven = [r for r in rows if r["optimum_s"]]
    for name in (
        "one_slot_pools",
        "optimistic",
        "deltaguard",
        "deltaguard_fifo",
        "deltaguard_chain",
        "deltaguard_priority",
    ):
        to_opt = [r[f"{name}_s"] / r["optimum_s"] for r in proven]
        to_pools = [r[f"{name}_s"] / r["one_slot_pools_s"] for r in rows if r["one_slot_pools_s"]]
        to_bound = [r[f"{name}_s"] / r["lower_bound_s"] for r in rows if r["lower_bound_s"]]
        out[name] = {
            "median_to_optimum": round(statistics.median(to_opt), 3) if to_opt else None,
            "worst_to_optimum": round(max(to_opt), 3) if to_opt else None,
            "median_to_lower_bound": round(statistics.median(to_bound), 3) if to_bound else None,
            "worst_to_lower_bound": round(max(to_bound), 3) if to_bound else None,
            "median_to_one_slot_pools": round(statistics.median(to_pools), 3) if to_pools else None,
            "proven_optima": len(proven),
            "seeds": len(rows),
        }
    return out


def run_day(args: argparse.Namespace) -> int:
    from lab.simulation import simulator as sim

    if args.writes is None:
        args.writes = 200_000
    from lab.simulation.workload import model_conflicts

    if args.out and importlib.util.find_spec("matplotlib") is None:
        # say so before an hour-long simulation, not after it
        from lab.simulation.charts import CHARTS_HINT

        print(f"python -m lab.simulation --out: {CHARTS_HINT}", file=sys.stderr)
        return EXIT_INVALID
    try:
        if args.writes < 1:
            raise ValueError(f"--writes must be >= 1, got {args.writes}")
        if not 0 <= args.conflict_probability <= 1:
            raise ValueError("--conflict-probability must be within [0, 1]")
        profile = _profile(args.engine, args.version)
        tables = args.tables or max(10, args.writes // 100)
        slots = args.slots or max(8, args.writes // 100)
        began = time.perf_counter()
        stream = sim.generate_stream(
            args.seed,
            tables=tables,
            writes=args.writes,
            hot_tables=args.hot_tables,
            hot_share=args.hot_share,
            median_s=args.median_s,
            sigma=args.sigma,
        )
    except ValueError as exc:
        print(f"python -m lab.simulation: {exc}")
        return EXIT_INVALID
    generated_s = time.perf_counter() - began
    from lab.progress import progress_bar, wanted

    # a minute or more at the default 200,000 writes: the bar says which step runs (stderr, a terminal only)
    with progress_bar("judging write pairs", 3 + len(sim.STRATEGIES), wanted(args.progress)) as bar:
        conflicts = model_conflicts(stream.workload, profile)
        bar.step("computing the lower bound")
        bound = sim.stream_lower_bound(stream, slots, conflicts)
        decide = sim.MemoDecide()
        results: dict[str, dict[str, Any]] = {}
        runs: dict[str, sim.SimResult] = {}
        for strategy in sim.STRATEGIES:
            bar.step(f"simulating {strategy}")
            result = sim.simulate(
                strategy,
                stream,
                slots=slots,
                profile=profile,
                conflicts=conflicts,
                conflict_probability=args.conflict_probability,
                retry_delay_s=args.retry_delay_s,
                max_retries=args.max_retries,
                seed=args.seed,
                decide=decide,
            )
            runs[strategy] = result
            summary = result.summary(stream.arrivals)
            summary["ratio_to_lower_bound"] = round(summary["makespan_s"] / bound["value_s"], 3)
            results[strategy] = summary
        bar.step("measuring the admission cost")
        cost = sim.admission_cost(
            profile, args.cost_tables, args.cost_running, args.cost_decisions, args.seed
        )
    report = sim.SimulationReport(
        params={
            **stream.workload.params,
            "slots": slots,
            "seed": args.seed,
            "engine": profile.describe(),
            "conflict_probability": args.conflict_probability,
            "retry_delay_s": args.retry_delay_s,
            "max_retries": args.max_retries,
            "generate_s": round(generated_s, 1),
            "total_wall_s": round(time.perf_counter() - began, 1),
            "command": "python -m lab.simulation " + " ".join(sys.argv[2:]),
        },
        lower_bound=bound,
        strategies=results,
        admission_cost=cost,
        machine={"cpus": os.cpu_count(), "python": platform.python_version(), "loadavg": os.getloadavg()},
    )
    data = report.to_json()
    if args.out:
        from lab.simulation.charts import bar_chart, cost_chart, gantt_chart

        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "simulation.json").write_text(json.dumps(data, indent=2) + "\n")
        bar_chart(
            args.out / "simulation_bars.png",
            results,
            bound["value_s"],
            f"Simulation: {args.writes:,} writes on {tables:,} tables in a day",
            unit="h",
        )
        cost_chart(args.out / "simulation_admission_cost.png", cost)
        lanes, window = sim.busiest_tables(stream, 4), 3 * 3600.0
        gantt_chart(
            args.out / "simulation_gantt.png",
            {s: sim.timeline(stream, runs[s], lanes, window) for s in sim.STRATEGIES},
            lanes,
            "Simulation: the busiest tables, first 3 hours",
        )
    if args.format == "json":
        print(json.dumps(data, indent=2))
    else:
        print(_text(data))
    return 0


def _text(data: dict[str, Any]) -> str:
    p = data["params"]
    lines = [
        f"{p['writes']:,} writes on {p['tables']:,} tables over {p['period_s'] / 3600:.0f} h, {p['slots']} "
        f"worker slots, {p['engine']}; lower bound {data['lower_bound_s'] / 3600:.2f} h "
        f"(simulated in {p['total_wall_s']:.0f} s)",
        f"{'strategy':<16}{'makespan h':>11}{'writes/h':>10}{'wait p50':>9}{'p95':>8}{'p99':>9}"
        f"{'failed':>8}{'wasted h':>10}",
    ]
    for name in ("one_slot_pools", "optimistic", "deltaguard"):
        s = data[name]
        lines.append(
            f"{name:<16}{s['makespan_s'] / 3600:>11.2f}{s['throughput_per_h']:>10.0f}{s['wait_p50_s']:>9.1f}"
            f"{s['wait_p95_s']:>8.1f}{s['wait_p99_s']:>9.1f}{s['failed_attempts']:>8}"
            f"{s['wasted_task_s'] / 3600:>10.1f}"
        )
    lines.append("admission decision cost (median us): tables x running writes per table")
    for row in data["admission_cost"]:
        lines.append(
            f"  {row['tables']:>6} tables, {row['running_per_table']:>3} running: {row['us_per_decision']:>8.1f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lab.simulation ARGS``."""
    from lab.cli import main as run_tool

    return run_tool(
        "python -m lab.simulation",
        "simulate pools, optimistic retries and deltaguard at scale",
        add_arguments,
        run,
        argv,
    )


if __name__ == "__main__":
    sys.exit(main())
