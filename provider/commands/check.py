"""``deltaguard check FILE|-``: decide whether a write may run beside the writes already running.

One JSON document in, one JSON object out; a JSON array of documents in, an array of results out (in the
same order, one process for thousands of checks). Invalid input prints one line to stderr and exits 2,
and nothing is printed to stdout: every document is decided before any output is written.

When every write of a document is judged by the delta-rs rules and the table's partition types are given,
delta-rs itself confirms each partition disjointness the model grants, as the operators have it confirmed
(ADR 0037): the engine is installed with the provider, so it is at hand. ``--hand-only`` skips it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from deltaguard.commands import UsageError

if TYPE_CHECKING:
    from deltaguard.core.check_request import CheckRequest
    from deltaguard.core.table_config import TableConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="JSON document (or array of documents); '-' reads standard input")
    parser.add_argument("--indent", type=int, default=None, help="pretty-print the JSON output")
    parser.add_argument(
        "--hand-only",
        action="store_true",
        help="judge by the model's own reading alone, without asking delta-rs what partition predicates "
        "select (faster, and less strict than the operators)",
    )


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def check_documents(value: Any, *, hand_only: bool = False) -> Any:
    """Decide one document (a dict) or a list of them.

    :param value: the decoded JSON.
    :param hand_only: do not attach delta-rs' evaluator of partition predicates (see the module).
    :raises ValueError: with a one-line message on invalid input.
    """
    from deltaguard.core.check_request import RequestError, parse_request
    from deltaguard.core.model import decide

    def one(document: Any, where: str) -> dict[str, Any]:
        request = parse_request(document, where)
        table = request.table if hand_only else _judged_table(request)
        try:
            decision = decide(request.candidate, request.running, table, request.profile)
        except ValueError as error:  # unparsable predicate or MERGE condition
            raise RequestError(f"{where}: {' '.join(str(error).split())}") from None
        return decision.to_json()

    if isinstance(value, list):
        return [one(document, f"document[{i}]") for i, document in enumerate(value)]
    return one(value, "document")


def _judged_table(request: CheckRequest) -> TableConfig:
    """The document's table, with delta-rs' evaluator when the delta-rs rules judge every write."""
    from deltaguard.engines.sources import attach_delta_rs_oracle

    writes = (request.candidate, *request.running)
    engines = {request.profile.name, *(op.engine.name for op in writes if op.engine is not None)}
    return attach_delta_rs_oracle(request.table, engines)


def run(args: argparse.Namespace) -> int:
    try:
        text = _read(args.file)
    except OSError as error:
        raise UsageError(f"cannot read {args.file}: {error.strerror or error}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"invalid JSON at line {error.lineno} column {error.colno}: {error.msg}") from None
    except (RecursionError, ValueError) as error:
        # No document nests deeply or holds numbers (every field is text, a boolean, a list or an object).
        why = "it nests too deeply" if isinstance(error, RecursionError) else str(error)[:200]
        raise UsageError(f"not a check document: {why}") from None
    try:
        result = check_documents(value, hand_only=args.hand_only)
    except ValueError as error:
        raise UsageError(str(error)) from None
    json.dump(result, sys.stdout, indent=args.indent)
    sys.stdout.write("\n")
    return 0
