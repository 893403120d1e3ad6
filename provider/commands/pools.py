"""``deltaguard pools sync``: create or update one Airflow pool per Delta table (through the Airflow CLI)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="pools_command", required=True)
    sync = sub.add_parser(
        "sync", help="create/update one pool per table from the pools file and/or a DAG scan"
    )
    sync.add_argument("--config", help="pools file (default: [deltaguard] pools_file)")
    sync.add_argument("--dags-folder", help="also scan the DAGs in this folder for deltaguard tasks")
    sync.add_argument("--dry-run", action="store_true", help="print the pools as JSON, change nothing")
    sync.add_argument(
        "--airflow", default=None, help="the Airflow CLI command (default: airflow next to python)"
    )


def run(args: argparse.Namespace) -> int:
    from deltaguard.commands import UsageError
    from deltaguard.pools import (
        desired_pools,
        load_pools_config,
        pools_import_document,
        scan_dag_tables,
        sync_pools,
    )

    path = args.config
    if path is None:
        from deltaguard import config

        path = config.pools_file()
    try:
        airflow_cmd = shlex.split(args.airflow) if args.airflow is not None else None
        pools_config = load_pools_config(path)
    except ValueError as exc:  # an unreadable or malformed pools file, or an unbalanced --airflow
        raise UsageError(str(exc)) from None
    if args.airflow is not None and not airflow_cmd:
        raise UsageError("--airflow is empty")
    scanned: set[str] = set()
    if args.dags_folder is not None:
        folder = Path(args.dags_folder)
        if not folder.is_dir():
            raise UsageError(f"--dags-folder {args.dags_folder!r} is not a directory")
        try:
            scanned = scan_dag_tables(folder)
        except RuntimeError as exc:  # DAG files that do not import: their tables would be missed
            raise UsageError(str(exc)) from None
    specs = desired_pools(pools_config, scanned)
    if args.dry_run:
        print(json.dumps(pools_import_document(specs), indent=2, sort_keys=True))
        return 0
    if not specs:
        print("no tables found: nothing to sync (give --config and/or --dags-folder)")
        return 1
    try:
        sync_pools(specs, airflow_cmd)
    except (RuntimeError, OSError) as exc:  # the Airflow CLI failed or could not be started
        print(" ".join(f"deltaguard pools: {exc}".split()), file=sys.stderr)
        return 1
    for spec in specs:
        print(f"pool {spec.name}: {spec.slots} slots ({spec.description})")
    return 0
