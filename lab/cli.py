"""``python -m lab.<tool>``: one command-line tool of the harness, as ``deltaguard <command>`` runs a command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from deltaguard.commands import USAGE_EXIT, UsageError


def main(
    prog: str,
    description: str,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int],
    argv: Sequence[str] | None = None,
) -> int:
    """Parse ``argv`` and run; invalid input prints one line on stderr and exits 2, as ``deltaguard`` does.

    :param prog: the program name in messages (``python -m lab.fuzz``).
    :param description: the one-line help.
    :param add_arguments: adds the tool's arguments.
    :param run: runs the tool, returns its exit code.
    :param argv: the arguments (default: ``sys.argv[1:]``).
    """
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_arguments(parser)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return int(run(args))
    except UsageError as exc:
        print(f"{prog}: error: {' '.join(str(exc).split()) or 'invalid input'}", file=sys.stderr)
        return USAGE_EXIT
