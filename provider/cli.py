"""The ``deltaguard`` command line.

Each subcommand lives in its own module with ``add_arguments(parser)`` and ``run(args) -> int`` and is
imported only when chosen, so ``deltaguard check`` never pays for Airflow or an engine. Invalid input (a
subcommand raises :class:`~deltaguard.commands.UsageError`) is one line on stderr and exit code 2, as for a
malformed command line.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

#: subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("deltaguard.commands.check", "decide whether a write may run beside running writes"),
    "matrix": ("deltaguard.commands.matrix", "print the operation x operation conflict matrix"),
    "pools": ("deltaguard.commands.pools", "sync one Airflow pool per Delta table"),
    "db": ("deltaguard.commands.db", "create or upgrade the lease store's schema (db migrate [--check])"),
    "plan": ("deltaguard.commands.plan", "plan a DAG's writes: what serializes, why, and the run's makespan"),
    "leases": (
        "deltaguard.commands.leases",
        "list a table's leases, or release one by hand (release --force)",
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="deltaguard", description="Conflict-aware orchestration of Delta writes"
    )
    from deltaguard import __version__

    parser.add_argument("--version", action="version", version=f"deltaguard {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text)
        command_parser.set_defaults(_module=module_name)
        if args_list[:1] == [name]:
            importlib.import_module(module_name).add_arguments(command_parser)
    args = parser.parse_args(args_list)
    module = importlib.import_module(args._module)
    from deltaguard.commands import USAGE_EXIT, UsageError

    try:
        return int(module.run(args))
    except UsageError as exc:
        print(f"deltaguard {args.command}: error: {_one_line(str(exc))}", file=sys.stderr)
        return USAGE_EXIT


def _one_line(text: str) -> str:
    """``text`` on one line (a message may quote input holding line breaks)."""
    return " ".join(text.split()) or "invalid input"


if __name__ == "__main__":
    sys.exit(main())
