"""The spark-submit job: run one deltaguard write on the cluster's Spark with the Spark engine.

    spark-submit ... deltaguard/engines/spark/job.py --table-uri /data/orders \\
        --spec-json '{"kind": "append", "source": "/landing/orders.parquet"}' \\
        --context-json '{"app_id": "dag.task", "app_version": 42}' [--result-file /tmp/result.json]

(``python -m deltaguard.engines.spark.job`` works the same where ``pyspark`` can start a session.)
``--spec-json``/``--context-json`` take JSON text or ``@path`` of a JSON file. Sources are URIs.

The job prints one ``DELTAGUARD_RESULT <json>`` line (the :class:`WriteResult`) and writes the same JSON
to ``--result-file`` when given. Exit codes tell the submitting side what happened without parsing Java
traces: 0 written (or duplicate), 2 bad arguments/spec, 3 Spark setup (Delta's jars missing), 4 commit
conflict (a ``DELTAGUARD_CONFLICT <kind> <message>`` line precedes it), 1 anything else.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deltaguard.engines.errors import DeltaConflictError, InvalidWriteError, SparkSetupError
from deltaguard.engines.spec_json import context_from_json, context_to_json, spec_from_json, spec_to_json
from deltaguard.engines.specs import WriteContext, WriteSpec

RESULT_MARKER = "DELTAGUARD_RESULT"
CONFLICT_MARKER = "DELTAGUARD_CONFLICT"
EXIT_OK, EXIT_FAILED, EXIT_BAD_ARGS, EXIT_SETUP, EXIT_CONFLICT = 0, 1, 2, 3, 4


class _Parser(argparse.ArgumentParser):
    # argparse exits on errors; the job reports them as InvalidWriteError with the right exit code.
    def error(self, message: str) -> Any:
        raise InvalidWriteError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="deltaguard.engines.spark.job", description="Run one deltaguard write on Spark.")
    parser.add_argument("--table-uri", required=True, help="Delta table path or catalog name")
    parser.add_argument("--spec-json", required=True, help="the write spec as JSON, or @file")
    parser.add_argument("--context-json", default=None, help="the write context as JSON, or @file")
    parser.add_argument("--result-file", default=None, help="also write the result JSON here")
    parser.add_argument("--app-name", default="deltaguard-write", help="Spark application name")
    return parser


def _json_argument(text: str, what: str) -> str:
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidWriteError(f"cannot read the {what} file {path}: {exc}") from exc
    return text


def parse_job_args(argv: Sequence[str]) -> tuple[str, WriteSpec, WriteContext, argparse.Namespace]:
    """Parse and decode the job's arguments.

    :raises InvalidWriteError: for missing/unknown arguments or a malformed spec/context.
    """
    args = build_parser().parse_args(list(argv))
    if not args.table_uri.strip():
        raise InvalidWriteError("--table-uri is empty")
    spec = spec_from_json(_json_argument(args.spec_json, "spec"))
    context = context_from_json(_json_argument(args.context_json, "context") if args.context_json else None)
    return args.table_uri, spec, context, args


def build_args(
    table_uri: str, spec: WriteSpec, context: WriteContext | None = None, result_file: str | None = None
) -> list[str]:
    """The job's command-line arguments for one write (the inverse of :func:`parse_job_args`)."""
    args = ["--table-uri", table_uri, "--spec-json", json.dumps(spec_to_json(spec), sort_keys=True)]
    if context is not None:
        args += ["--context-json", json.dumps(context_to_json(context), sort_keys=True)]
    if result_file:
        args += ["--result-file", result_file]
    return args


def run(argv: Sequence[str], engine: Any = None) -> int:
    """Run the job; returns the exit code (see the module docstring).

    :param argv: the job's arguments.
    :param engine: an engine to write with (default: a :class:`~deltaguard.engines.spark.SparkEngine` on
        the job's session).
    """
    try:
        table_uri, spec, context, args = parse_job_args(argv)
    except InvalidWriteError as exc:
        print(f"deltaguard spark job: bad arguments: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS
    try:
        if engine is None:
            from deltaguard.engines.spark.engine import SparkEngine
            from deltaguard.engines.spark.session import worker_session

            # No master here: spark-submit has chosen it, and setting one would override it.
            engine = SparkEngine(lambda: worker_session(app_name=args.app_name, default_master=None))
        result = engine.write(table_uri, spec, context)
    except InvalidWriteError as exc:
        print(f"deltaguard spark job: invalid write: {exc}", file=sys.stderr)
        return EXIT_BAD_ARGS
    except SparkSetupError as exc:
        print(f"deltaguard spark job: Spark setup: {exc}", file=sys.stderr)
        return EXIT_SETUP
    except DeltaConflictError as exc:
        print(f"{CONFLICT_MARKER} {exc.kind.value} {exc.original_message}", flush=True)
        return EXIT_CONFLICT
    payload = json.dumps(result.to_json(), sort_keys=True)
    print(f"{RESULT_MARKER} {payload}", flush=True)
    if args.result_file:
        Path(args.result_file).write_text(payload, encoding="utf-8")
    return EXIT_OK


def main() -> None:
    sys.exit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
