"""``python -m lab.conformance``: measure an engine (delta-rs, or delta-spark with ``--engine delta-spark``)
against the conflict model, cell by cell.

Exits 1 when any cell is unsound (the model said ``no_conflict`` but the engine conflicted, failed or
silently corrupted data), 0 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lab.conformance.cells import CellResult, Summary


class Counter:
    """``[n/N]`` in front of each line of a command that prints one line per finished item (a cell)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0

    def next(self) -> str:
        """Count one more item and return its prefix."""
        self.done += 1
        return f"[{self.done}/{self.total}]"

    def skip(self) -> None:
        """Count an item that prints no line (``--quiet``)."""
        self.done += 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the subcommand's options.

    :param parser: the subcommand's parser.
    """
    parser.add_argument(
        "--engine",
        choices=("delta-rs", "delta-spark"),
        default="delta-rs",
        help="delta-rs (stale table handles) or delta-spark (one local Spark, interleavings forced by a gate)",
    )
    parser.add_argument(
        "--slice",
        choices=("ci", "representative", "full", "isolation"),
        default="representative",
        help="representative: a fast subset covering every measured fact; full: every pair x layout x spelling; "
        "ci: a few delta-spark cells; isolation: delta-spark on tables whose delta.isolationLevel delta-rs "
        "stored (every spelling: a read, each write alone, and the pairs where the levels differ)",
    )
    parser.add_argument(
        "--suite",
        choices=("probes", "file-stats"),
        default="probes",
        help="probes: the probe writes x layouts x isolation spellings; file-stats: unpartitioned layouts where "
        "delta-rs decides conflicts with per-file statistics (delta-rs only, slices representative/full)",
    )
    parser.add_argument(
        "--json", type=Path, default=None, metavar="FILE", help="also write the results as JSON"
    )
    parser.add_argument(
        "--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes (default: up to 2)"
    )
    parser.add_argument("--quiet", action="store_true", help="print only unsound cells and the summary")


def run(args: argparse.Namespace) -> int:
    """Run the slice, print observed vs predicted per cell and the summary.

    :param args: parsed options.
    :returns: 1 if any cell is unsound, 2 on bad options, else 0.
    """
    if args.jobs < 1:
        print("python -m lab.conformance: --jobs must be >= 1", file=sys.stderr)
        return 2
    if args.suite == "file-stats":
        if args.engine != "delta-rs" or args.slice in ("ci", "isolation"):
            print(
                "python -m lab.conformance: --suite file-stats is delta-rs only, slice representative or full",
                file=sys.stderr,
            )
            return 2
        return run_file_stats(args)
    if args.engine == "delta-spark":
        return run_delta_spark(args)
    if args.slice in ("ci", "isolation"):
        print(f"python -m lab.conformance: --slice {args.slice} is for --engine delta-spark", file=sys.stderr)
        return 2
    # Imported here so `deltaguard --help` does not pay for deltalake.
    import deltalake

    from lab.conformance.cells import generate, summarize
    from lab.conformance.facts import facts_from_cells, probe_retries
    from lab.conformance.report import cell_line, summary_text, write_json
    from lab.conformance.runner import run_cells

    cells = generate(args.slice)
    print(
        f"python -m lab.conformance: delta-rs {deltalake.__version__}, {len(cells)} cells ({args.slice}), "
        f"{args.jobs} job(s)",
        flush=True,
    )
    started = time.perf_counter()

    count = Counter(len(cells))

    def show(done: list[CellResult]) -> None:
        for result in done:
            if not args.quiet or result.unsound:
                print(f"{count.next()} {cell_line(result)}", flush=True)
            else:
                count.skip()

    results = run_cells(cells, jobs=args.jobs, progress=show)
    elapsed = time.perf_counter() - started
    facts = facts_from_cells(results) + probe_retries()
    print(summary_text(results) + f" elapsed={elapsed:.1f}s")
    for fact in facts:
        verdict = {True: "holds", False: "DOES NOT HOLD", None: "not measured"}[fact.holds]
        print(f"fact {fact.name}: {verdict} - {fact.claim}")
    if args.json is not None:
        meta = {
            "engine": "delta-rs",
            "deltalake_version": deltalake.__version__,
            "slice": args.slice,
            "jobs": args.jobs,
            "elapsed_s": round(elapsed, 1),
            "facts": [fact.to_json() for fact in facts],
        }
        write_json(args.json, results, meta)
        print(f"results written to {args.json}")
    return exit_code(summarize(results))


def run_file_stats(args: argparse.Namespace) -> int:
    """The statistics cells (ADR 0020) against delta-rs: unsound count and admitted share.

    :param args: parsed options.
    """
    import json

    import deltalake

    from lab.conformance.stats_runner import StatsResult, run_stats_cells, summarize
    from lab.conformance.stats_scenarios import generate

    cells = generate(args.slice)
    print(
        f"python -m lab.conformance: file statistics, delta-rs {deltalake.__version__}, {len(cells)} cells "
        f"({args.slice}), {args.jobs} job(s)",
        flush=True,
    )
    started = time.perf_counter()

    count = Counter(len(cells))

    def show(done: list[StatsResult]) -> None:
        for r in done:
            if args.quiet and not r.unsound:
                count.skip()
            else:
                verdict = {None: "MODEL ERROR", True: "conflict", False: "no_conflict"}[r.prediction.conflict]
                flag = "  UNSOUND" if r.unsound else ""
                print(
                    f"{count.next()} {r.cell.key}: predicted {verdict} ({r.prediction.rule}), "
                    f"observed {r.observed_summary()}{flag}",
                    flush=True,
                )

    results = run_stats_cells(cells, jobs=args.jobs, progress=show)
    elapsed = time.perf_counter() - started
    summary = summarize(results)
    print(
        f"cells={summary.cells} unsound={summary.unsound} engine_allows={summary.engine_allows} "
        f"model_allows_of_those={summary.model_allows_of_those} admitted={summary.admitted_share:.1%} "
        f"inconclusive={summary.inconclusive} elapsed={elapsed:.1f}s"
    )
    plain_allowed, plain_admitted = summary.without_source
    if plain_allowed:
        print(
            f"  without MERGE / REPLACE WHERE sources: engine allows {plain_allowed}, model admits "
            f"{plain_admitted} ({plain_admitted / plain_allowed:.1%})"
        )
    for layout, (allowed, admitted) in summary.by_layout.items():
        share = f"{admitted / allowed:.1%}" if allowed else "n/a"
        print(f"  {layout}: engine allows {allowed}, model admits {admitted} ({share})")
    if args.json is not None:
        document = {
            "meta": {
                "engine": "delta-rs",
                "deltalake_version": deltalake.__version__,
                "suite": "file-stats",
                "slice": args.slice,
                "jobs": args.jobs,
                "elapsed_s": round(elapsed, 1),
                "command": f"python -m lab.conformance --suite file-stats --slice {args.slice} --jobs {args.jobs} "
                f"--json {args.json}",
            },
            "summary": summary.to_json(),
            "cells": [r.to_json() for r in results],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
        print(f"results written to {args.json}")
    return 1 if summary.unsound else 0


def run_delta_spark(args: argparse.Namespace) -> int:
    """The cells of ``args.slice`` against delta-spark: one local Spark session, cells one after the other.

    :param args: parsed options (``--jobs`` is ignored: one JVM on a small machine).
    """
    import tempfile

    from deltaguard.engines.spark.setup import delta_jars_from_env, installed_version
    from lab.conformance.cells import summarize
    from lab.conformance.report import cell_line, summary_text, write_json
    from lab.conformance.spark_runner import (
        SOLO_PROBES,
        SoloResult,
        SparkGroupRunner,
        delta_spark_session,
        delta_version_from_jars,
        run_solo,
        run_spark_cells,
        spark_cells,
    )

    cells = spark_cells(args.slice)
    jars = delta_jars_from_env()
    delta_version = delta_version_from_jars(jars) or installed_version("delta-spark")
    print(
        f"python -m lab.conformance: delta-spark {delta_version} on pyspark {installed_version('pyspark')}, "
        f"{len(cells)} cells ({args.slice})",
        flush=True,
    )
    started = time.perf_counter()
    so_far: list[CellResult] = []
    # The isolation slice measures what delta-spark does with spellings only delta-rs stores.
    isolation_slice = args.slice == "isolation"
    creator = "delta-rs" if isolation_slice else "delta-spark"
    solo: list[SoloResult] = []

    def meta(elapsed: float, complete: bool) -> dict[str, object]:
        extra: dict[str, object] = {}
        if isolation_slice:
            extra = {
                "tables_written_by": creator,
                "command": f"python -m lab.conformance --engine delta-spark --slice isolation --json {args.json}",
                "solo": [r.to_json() for r in solo],
            }
        return {
            "engine": "delta-spark",
            "delta_spark_version": delta_version,
            "pyspark_version": installed_version("pyspark"),
            "slice": args.slice,
            "complete": complete,
            "jobs": 1,
            "elapsed_s": round(elapsed, 1),
            "mechanism": "stale write paused by a Python UDF gate inside its Spark job, after its snapshot "
            "was fixed; interleaving proven by the commit's readVersion",
            **extra,
        }

    count = Counter(len(cells))

    def show(done: list[CellResult]) -> None:
        for result in done:
            if not args.quiet or result.unsound:
                print(f"{count.next()} {cell_line(result)}", flush=True)
            else:
                count.skip()
        so_far.extend(done)
        if args.json is not None:  # a long run keeps what it measured so far
            write_json(args.json, so_far, meta(time.perf_counter() - started, False))

    with tempfile.TemporaryDirectory(prefix="deltaguard-conformance-spark-") as scratch:
        spark = delta_spark_session(Path(scratch))
        try:
            if isolation_slice:
                from lab.conformance.spark_runner import ISOLATION_SLICE_SPELLINGS

                runner = SparkGroupRunner(spark, Path(scratch) / "solo", delta_version, creator)
                for spelling in ISOLATION_SLICE_SPELLINGS:
                    for r in run_solo(runner, spelling, SOLO_PROBES):
                        solo.append(r)
                        print(
                            f"solo {spelling or '(absent)'}: {r.action} {r.observed}"
                            + (f" [{r.commit_isolation}]" if r.commit_isolation else "")
                            + (f" {r.kind}: {r.detail[:160]}" if r.kind else ""),
                            flush=True,
                        )
                    if args.json is not None:  # kept as measured, before the (slower) cells
                        write_json(args.json, so_far, meta(time.perf_counter() - started, False))
            results = run_spark_cells(
                cells, spark, Path(scratch), delta_version, progress=show, creator=creator
            )
        finally:
            spark.stop()
    elapsed = time.perf_counter() - started
    print(summary_text(results) + f" elapsed={elapsed:.1f}s")
    if args.json is not None:
        write_json(args.json, results, meta(elapsed, True))
        print(f"results written to {args.json}")
    return exit_code(summarize(results))


def exit_code(summary: Summary) -> int:
    """1 when any cell is unsound, else 0.

    :param summary: the run's summary.
    """
    return 1 if summary.unsound else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.conformance", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
