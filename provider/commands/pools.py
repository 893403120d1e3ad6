"""``deltaguard pools sync``: create or update one Airflow pool per Delta table (through the Airflow CLI)."""

from __future__ import annotations

import argparse
import json
import shlex


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
    pools_config = load_pools_config(path)
    scanned = scan_dag_tables(args.dags_folder) if args.dags_folder else set()
    specs = desired_pools(pools_config, scanned)
    if args.dry_run:
        print(json.dumps(pools_import_document(specs), indent=2, sort_keys=True))
        return 0
    if not specs:
        print("no tables found: nothing to sync (give --config and/or --dags-folder)")
        return 1
    sync_pools(specs, shlex.split(args.airflow) if args.airflow else None)
    for spec in specs:
        print(f"pool {spec.name}: {spec.slots} slots ({spec.description})")
    return 0
