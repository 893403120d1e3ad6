"""Run the three virtual-time batch sweeps (`python -m lab.simulation batch`) and record them in one file.

Run (about 5-15 minutes on 2 cores, mostly the CP-SAT solver)::

    .venv/bin/python -m benchmarks.batch_sweeps

The shapes and seeds were fixed before any result was looked at: few hot tables, many tables, and mixed
DML and maintenance, seeds 1-32 each. Writes ``benchmarks/results/simulation_batches.json``: per shape the
command, its rows and its summary, with the commit it ran at.

``--replay-priority`` replays only the ``deltaguard_priority`` column (worker slots by the priority policy's
weights) on the recorded seeds at the current commit, against the optima and lower bounds already in the
file (seconds, no solver), and records the commit it ran at beside that column::

    .venv/bin/python -m benchmarks.batch_sweeps --replay-priority
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SHAPES = {
    "hot": "--seeds 1-32 --tables 2 --writes 20 --slots 8 --overlap 0.3 --format json",
    "many": "--seeds 1-32 --tables 12 --writes 24 --slots 8 --format json",
    "mixed": "--seeds 1-32 --tables 4 --writes 20 --slots 8 --mix default --format json",
}


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    from deltaguard.cli import main as cli

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / "simulation_batches.json")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument(
        "--replay-priority",
        action="store_true",
        help="replay the deltaguard_priority column only, against the recorded optima",
    )
    args = parser.parse_args(argv)
    if args.replay_priority:
        return replay_priority(args.out, [s.strip() for s in args.shapes.split(",")])
    shapes: dict[str, object] = {}
    for name in (s.strip() for s in args.shapes.split(",")):
        command = f"python -m lab.simulation batch {SHAPES[name]}"
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = cli(shlex.split(command)[1:])
        if code != 0:
            print(f"{command} failed ({code}): {printed.getvalue()}", file=sys.stderr)
            return code
        shapes[name] = {"command": command, **json.loads(printed.getvalue())}
        print(f"{name}: done", flush=True)
    data = {
        "commit": _commit(),
        "date": datetime.datetime.now(datetime.UTC).date().isoformat(),
        "machine": f"{os.cpu_count()}-core machine, load average {os.getloadavg()[0]:.1f} at the end",
        "shapes": shapes,
    }
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    return 0


def replay_priority(path: Path, shapes: list[str]) -> int:
    """Re-simulate ``deltaguard_priority`` on each recorded shape's seeds and rewrite its summary.

    :param path: a file written by :func:`main`.
    :param shapes: the shapes to replay.
    """
    from lab.simulation import simulator as sim
    from lab.simulation.__main__ import _profile, add_arguments, batch_summary
    from lab.simulation.workload import generate

    data = json.loads(path.read_text())
    commit = _commit()
    for name in shapes:
        recorded = data["shapes"][name]
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        shape = parser.parse_args(["batch", *shlex.split(SHAPES[name])])
        profile = _profile(shape.engine, shape.version)
        rows = recorded["rows"]
        for row in rows:
            workload = generate(
                row["seed"],
                tables=shape.tables or 4,
                writes=shape.writes or 20,
                mix=shape.mix,
                partitions=shape.partitions,
                overlap=shape.overlap,
            )
            stream = sim.stream_of(workload)
            result = sim.simulate(
                "deltaguard",
                stream,
                slots=shape.slots or 8,
                profile=profile,
                seed=workload.seed,
                slot_order="priority",
                lease_priority="phase",
            )
            row["deltaguard_priority_s"] = result.summary(stream.arrivals)["makespan_s"]
        summary = batch_summary(rows)["deltaguard_priority"]
        summary.update(
            commit=commit,
            note=(
                "worker slots by the dag_policy priority weights and lease ranks by its phase bonus (simulate "
                'slot_order="priority", lease_priority="phase"), the '
                "same seeds replayed at this commit; the optimum and lower bound are the rows'"
            ),
        )
        recorded["summary"]["deltaguard_priority"] = summary
        print(f"{name}: {summary}", flush=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
