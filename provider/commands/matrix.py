"""``deltaguard matrix``: print the operation x operation conflict matrix of an engine and a table.

Example: ``deltaguard matrix --engine databricks --runtime 14.3 --partitioned date
--property delta.enableDeletionVectors=true --format text``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from deltaguard.commands import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine", default="databricks", help="databricks (default), delta-spark or delta-rs"
    )
    parser.add_argument("--runtime", help="Databricks Runtime version, e.g. 14.3 (default 14.3)")
    parser.add_argument("--version", help="delta-spark / delta-rs version (default 3.2.0 / 1.6.6)")
    parser.add_argument("--photon", action="store_true", help="Databricks: the cluster runs Photon")
    parser.add_argument(
        "--row-level-preview",
        action="store_true",
        help="Databricks 14.0/14.1: spark.databricks.delta.rowLevelConcurrencyPreview = true",
    )
    parser.add_argument("--table", metavar="FILE", help="table JSON as in `check` (flags below add to it)")
    parser.add_argument("--partitioned", metavar="COLS", help="comma-separated partition columns")
    parser.add_argument("--clustered", metavar="COLS", help="comma-separated liquid clustering columns")
    parser.add_argument("--identity", metavar="COLS", help="comma-separated identity columns")
    parser.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="table property as stored in the Delta log (repeatable)",
    )
    parser.add_argument(
        "--operations",
        metavar="FILE",
        help="JSON list of operations (as in `check`) instead of the representative set",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")


def _columns(text: str | None) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()] if text else []


def _load(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except OSError as error:
        raise ValueError(f"cannot read {what} {path}: {error.strerror or error}") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{what} {path}: invalid JSON at line {error.lineno}: {error.msg}") from None


def build(args: argparse.Namespace) -> Any:
    """Parse the flags into (table, profile, operations) and return the matrix.

    :raises ValueError: one-line message on invalid flags.
    """
    from deltaguard.core.check_request import parse_engine, parse_operation, parse_table
    from deltaguard.core.matrix import conflict_matrix

    engine: dict[str, Any] = {"name": args.engine}
    if args.engine.strip().lower() == "databricks":
        engine["runtime"] = args.runtime or "14.3"
        engine["photon"] = args.photon
        engine["row_level_preview"] = args.row_level_preview
        if args.version:
            raise ValueError("--version is for delta-spark / delta-rs; use --runtime for databricks")
    else:
        if args.runtime or args.photon or args.row_level_preview:
            raise ValueError("--runtime, --photon and --row-level-preview only apply to --engine databricks")
        engine["version"] = args.version or (
            "3.2.0" if args.engine.strip().lower() == "delta-spark" else "1.6.6"
        )
    profile = parse_engine(engine, "--engine")

    table_doc: dict[str, Any] = _load(args.table, "table file") if args.table else {}
    if not isinstance(table_doc, dict):
        raise ValueError("--table: expected a JSON object")
    table_doc = dict(table_doc)
    for flag, key in (
        ("partitioned", "partition_columns"),
        ("clustered", "clustering_columns"),
        ("identity", "identity_columns"),
    ):
        if getattr(args, flag):
            table_doc[key] = _columns(getattr(args, flag))
    properties = dict(table_doc.get("properties") or {})
    for item in args.property:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--property {item!r}: expected KEY=VALUE")
        properties[key.strip()] = value.strip()
    if properties:
        table_doc["properties"] = properties
    table = parse_table(table_doc, "--table")

    operations = None
    if args.operations:
        raw = _load(args.operations, "operations file")
        if not isinstance(raw, list) or not raw:
            raise ValueError("--operations: expected a non-empty JSON list of operations")
        operations = [parse_operation(item, f"operations[{i}]") for i, item in enumerate(raw)]
    return conflict_matrix(table, profile, operations)


def run(args: argparse.Namespace) -> int:
    try:
        matrix = build(args)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if args.format == "json":
        json.dump(matrix.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(matrix.to_text())
    return 0
