"""``python -m benchmarks.cluster up|down|run``: start, stop, or run pipelines and faults on the stack."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.cluster.faults import KINDS
from benchmarks.cluster.stack import ClusterStack, default_home, down_from_state


def _kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(f"unknown fault kind(s) {unknown}; choose from {', '.join(KINDS)}")
    return kinds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cluster", description=__doc__)
    parser.add_argument("command", choices=("up", "down", "run"))
    parser.add_argument("--home", type=Path, default=default_home(), help="the stack's directory")
    parser.add_argument("--no-spark", action="store_true", help="no Spark cluster (delta-rs pipeline only)")
    parser.add_argument("--short", action="store_true", help="one delta-rs pipeline run, the cheap faults")
    parser.add_argument("--runs", type=int, default=3, help="concurrent runs of the delta-rs pipeline")
    parser.add_argument("--seed", type=int, default=7, help="random seed of the fault schedule")
    parser.add_argument("--no-faults", action="store_true", help="run the pipelines without faults")
    parser.add_argument(
        "--faults",
        type=_kinds,
        default=None,
        help=f"comma-separated fault kinds instead of the default set ({','.join(KINDS)})",
    )
    parser.add_argument("--no-leases", action="store_true", help="break the stack on purpose: leases off")
    parser.add_argument("--lease-ttl", type=float, default=90.0, help="[deltaguard] lease_ttl (seconds)")
    parser.add_argument("--out", type=Path, default=None, help="results JSON (run)")
    args = parser.parse_args(argv)
    home = args.home.resolve()
    if args.command == "down":
        killed = down_from_state(home)
        print(f"stopped; {len(killed)} process(es) needed SIGKILL")
        return 0
    if args.command == "up":
        stack = ClusterStack(home, spark=not args.no_spark)
        began = time.monotonic()
        try:
            stack.up()
        except BaseException:
            stack.down()
            raise
        print(f"stack up in {time.monotonic() - began:.0f} s; state in {home / 'state.json'}")
        print(
            f"Airflow UI {stack.airflow.base_url if stack.airflow else '-'} (admin password in "
            f"{home / 'airflow' / 'simple_auth_manager_passwords.json.generated'}); "
            "stop with `python -m benchmarks.cluster down`"
        )
        return 0
    from benchmarks.cluster.run import run_cluster

    return run_cluster(args)


if __name__ == "__main__":
    sys.exit(main())
