"""``python -m lab.fuzz``: differential fuzzing of the conflict model against a real engine.

Generates realistic Spark SQL write pairs and triples on varied table layouts, asks the conflict model,
and runs every case the model allows on the engine (both commit orders from stale snapshots, compared
with every serial order). Prints a summary (a few lines, or JSON with ``--format json``); saves each shrunk unsound case as a JSON file that the
regression tests replay. Exits 1 when any unsound case or crash was found, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ENGINES = ("delta-rs",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the subcommand's options.

    :param parser: the subcommand's parser.
    """
    parser.add_argument("--minutes", type=float, default=5.0, help="time budget (default: 5)")
    parser.add_argument("--engine", choices=ENGINES, default="delta-rs", help="the engine to measure")
    parser.add_argument("--seed", type=int, default=0, help="first hypothesis seed (round n uses seed + n)")
    parser.add_argument(
        "--out", type=Path, default=None, metavar="FILE", help="also write the JSON summary to FILE"
    )
    parser.add_argument(
        "--save-dir",
        type=Path,
        default=Path("fuzz_findings"),
        metavar="DIR",
        help="where shrunk failing cases are saved, one JSON file each (default: ./fuzz_findings)",
    )
    parser.add_argument(
        "--no-precision",
        action="store_true",
        help="run only cases the model allows (skip the precision statistics on conflict verdicts)",
    )
    parser.add_argument(
        "--file-stats",
        action="store_true",
        help="delta-rs: give the model the snapshot's per-file statistics and generate cases on unpartitioned "
        "tables clustered by date (ADR 0020)",
    )
    parser.add_argument("--examples-per-round", type=int, default=25, help="hypothesis examples per round")
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="the summary on stdout (--out is JSON)"
    )
    from lab.progress import add_progress_argument

    add_progress_argument(parser)


def run(args: argparse.Namespace) -> int:
    """Fuzz for ``--minutes``, print the summary, return 1 when anything unsound or crashing was found.

    :param args: parsed options.
    """
    if args.minutes <= 0 or args.examples_per_round < 1:
        print("python -m lab.fuzz: --minutes must be > 0 and --examples-per-round >= 1", file=sys.stderr)
        return 2
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        print(
            "python -m lab.fuzz: needs hypothesis (pip install hypothesis)",
            file=sys.stderr,
        )
        return 2
    import deltalake
    from hypothesis import strategies as st

    from lab.fuzz.engine import DeltaRsDifferentialEngine
    from lab.fuzz.run import fuzz
    from lab.fuzz.strategies import cases, edge_cases, edge_stats_cases, stats_cases

    engine = DeltaRsDifferentialEngine(file_stats=args.file_stats)
    known = tuple(_known_classes(args.save_dir))
    started = time.perf_counter()
    from lab.progress import progress_bar, wanted

    budget_s = args.minutes * 60
    with (
        tempfile.TemporaryDirectory(prefix="deltaguard-fuzz-") as scratch,
        progress_bar(f"fuzzing {engine.name}", budget_s, wanted(args.progress)) as bar,
    ):

        def report(line: str) -> None:
            # the bar runs on the time budget; without one each round is a line on stderr, as before
            if bar.shown:
                bar.at(min(time.perf_counter() - started, budget_s), line)
            else:
                print(line, file=sys.stderr, flush=True)

        stats = fuzz(
            engine,
            Path(scratch),
            minutes=args.minutes,
            seed=args.seed,
            out_dir=args.save_dir,
            examples_per_round=args.examples_per_round,
            run_conflicts=not args.no_precision,
            progress=report,
            known_classes=known,
            # half of the cases also hold the edge rows (NULL / empty / long multi-byte strings, negatives)
            strategy=st.one_of(stats_cases(), edge_stats_cases())
            if args.file_stats
            else st.one_of(cases(), edge_cases()),
        )
    summary = {
        "engine": engine.name,
        "deltalake_version": deltalake.__version__,
        "seed": args.seed,
        "minutes": args.minutes,
        "file_stats": args.file_stats,
        "elapsed_s": round(time.perf_counter() - started, 1),
        "known_classes_skipped": len(known),
        **stats.to_json(),
    }
    text = json.dumps(summary, indent=2, sort_keys=False)
    print(text if args.format == "json" else summary_text(summary))
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 1 if stats.unsound or stats.crashes else 0


def summary_text(summary: dict) -> str:
    """The summary in a few lines: what ran, what was found, and where the findings were saved."""
    precision = summary["precision"]
    unsound, crashes = summary["unsound_cases"], summary["crashes"]
    verdict = (
        "no unsound case, no crash"
        if not unsound and not crashes
        else f"{unsound} unsound, {crashes} crashes"
    )
    lines = [
        f"deltaguard fuzz: {verdict}",
        f"  {summary['engine']} (deltalake {summary['deltalake_version']}), seed {summary['seed']}, "
        f"{summary['elapsed_s']} s{', file statistics' if summary['file_stats'] else ''}",
        f"  {summary['cases_generated']} cases generated, {summary['executed_differentially']} run on the engine "
        f"in every order, {summary['model_no_conflict']} admitted by the model",
        f"  precision {precision['precision']:.0%}: the model admitted {precision['model_and_engine_allowed']} of "
        f"the {precision['engine_allowed']} cases the engine ran safely",
    ]
    for signature, entry in summary["unsound_classes"].items():
        lines.append(f"  UNSOUND x{entry['count']}: {signature}")
    if summary["saved"]:
        lines.append(f"  saved: {', '.join(summary['saved'])}")
    lines.append("  (--format json or --out FILE for every figure)")
    return "\n".join(lines)


def _known_classes(directory: Path) -> list[str]:
    """Finding classes already saved in ``directory`` (a later run saves only new ones)."""
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.json")):
        try:
            found.append(json.loads(path.read_text(encoding="utf-8"))["class"])
        except (OSError, ValueError, KeyError):
            continue  # not a saved finding
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lab.fuzz ARGS``."""
    from lab.cli import main as run_tool

    return run_tool(
        "python -m lab.fuzz",
        "fuzz the conflict model against a real engine, differentially",
        add_arguments,
        run,
        argv,
    )


if __name__ == "__main__":
    sys.exit(main())
