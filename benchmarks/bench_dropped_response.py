"""A leased delta-rs write on S3 whose log-entry answer is lost after the PUT landed (ADR 0038).

moto's S3 server (the project's stand-in for Amazon S3) runs behind :class:`benchmarks.s3_drop_proxy.DropProxy`,
which forwards every request but closes the connection without an answer for the one PUT of the table's
next log entry, ``_delta_log/00000000000000000001.json`` (``create``: the table's first,
``..00000.json``, of an append into a table that does not exist yet), once moto has stored it. The write is a
deltaguard operator's ``execute`` (``DeltaInsertOperator`` append and overwrite, ``DeltaMergeOperator``,
``DeltaUpdateOperator``, ``DeltaDeleteOperator``) through a ``delta`` connection whose storage options
point at the proxy, under a SQLite lease store; when a try fails with an error Airflow retries, the probe
runs the task's next try, as Airflow would. Each run is then read from the Delta log: how many commits
carry the run's ``airflow.run_id`` (exactly one is right) and how many rows the write's source put there
twice.

``--mode`` compares:

* ``leased`` (default): the operators as they ship;
* ``unfenced``: the same, with commits carrying no lease fence ids and no idempotency transaction
  (``idempotent=False``): what deltaguard's own search for its commit does alone;
* ``raw``: deltalake called directly (``write_deltalake``, ``DeltaTable.merge/update/delete``) with no
  deltaguard at all: what delta-rs itself does with the lost answer.

    nice .venv/bin/python -m benchmarks.bench_dropped_response --runs 10 --out benchmarks/results/dropped_response.json
    nice .venv/bin/python -m benchmarks.bench_dropped_response --runs 4 --mode raw
    nice .venv/bin/python -m benchmarks.bench_dropped_response --runs 5 --staged --ops append overwrite

``--staged`` loses the answer to the first log entry of the staging table a staged append or overwrite
writes its data files through (``deltaguard.engines.deltars.staged``) instead.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from benchmarks.s3_drop_proxy import ProxyControl

BUCKET = "lake"
BASE = "warehouse"
#: ``create`` is an append into a table that does not exist yet: the answer lost is the one to its creation
OPERATIONS = ("append", "overwrite", "merge", "update", "delete", "create")
MODES = ("leased", "unfenced", "raw")
KEYS = {
    "AWS_ACCESS_KEY_ID": "deltaguard",
    "AWS_SECRET_ACCESS_KEY": "deltaguard-secret",
    "AWS_REGION": "us-east-1",
}
#: the log entry whose answer is lost: the first commit after the table's creation
ENTRY = "_delta_log/00000000000000000001.json"
#: ``create``: the log entry that creates the table
CREATE_ENTRY = "_delta_log/00000000000000000000.json"
#: ``--staged``: the first log entry of the staging table a staged append or overwrite writes its files with
STAGING_ENTRY = "_delta_log/00000000000000000000.json"


@contextlib.contextmanager
def _s3_behind_proxy(root: Path) -> Iterator[tuple[str, ProxyControl]]:
    """moto's S3 server and the proxy in front of it, each a process of its own: deltalake holds the GIL in
    some calls, which would stall a server in the writer's process."""
    from benchmarks.cluster.procs import port_open
    from benchmarks.harness.airflow_runner import free_port

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with open(root / "moto.log", "w") as log:
        moto = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log
        )
    proxy = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.s3_drop_proxy", "--upstream", endpoint],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        deadline = time.monotonic() + 120
        while not port_open(port):
            if time.monotonic() > deadline or moto.poll() is not None:
                raise RuntimeError(f"moto's S3 server did not start (see {root / 'moto.log'})")
            time.sleep(0.2)
        assert proxy.stdout is not None
        line = proxy.stdout.readline()
        if not line.startswith("listening "):
            raise RuntimeError(f"the proxy did not start: {line!r}")
        yield endpoint, ProxyControl(line.split()[1])
    finally:
        for process in (proxy, moto):
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _rows() -> Any:
    import pyarrow as pa

    return pa.table({"id": pa.array([100, 101], pa.int64()), "v": ["n", "n"]})


def _merge_source() -> Any:
    import pyarrow as pa

    return pa.table({"id": pa.array([3, 4], pa.int64()), "v": ["m", "m"]})


def _operator(op: str, table: str, *, idempotent: bool) -> Any:
    from deltaguard.operators.dml import (
        DeltaDeleteOperator,
        DeltaInsertOperator,
        DeltaMergeOperator,
        DeltaUpdateOperator,
    )

    common: dict[str, Any] = {
        "task_id": op,
        "table": table,
        "delta_conn_id": "lake",
        "engine": "delta-rs",
        "deferrable": False,
        "idempotent": idempotent,
    }
    if op in ("append", "overwrite", "create"):
        return DeltaInsertOperator(source=_rows, mode="append" if op == "create" else op, **common)
    if op == "merge":
        return DeltaMergeOperator(source=_merge_source, condition="t.id = s.id", **common)
    if op == "update":
        return DeltaUpdateOperator(updates={"v": "'u'"}, predicate="id = 2", **common)
    return DeltaDeleteOperator(predicate="id = 1", **common)


def _raw(op: str, uri: str, options: dict[str, str], run_id: str) -> None:
    from deltalake import DeltaTable, write_deltalake
    from deltalake.transaction import CommitProperties

    props = CommitProperties(custom_metadata={"airflow.run_id": run_id})
    if op in ("append", "overwrite", "create"):
        mode = "append" if op == "create" else op
        write_deltalake(uri, _rows(), mode=mode, storage_options=options, commit_properties=props)
        return
    table = DeltaTable(uri, storage_options=options)
    if op == "merge":
        merger = table.merge(
            _merge_source(),
            predicate="t.id = s.id",
            source_alias="s",
            target_alias="t",
            commit_properties=props,
        )
        merger.when_matched_update_all().when_not_matched_insert_all().execute()
    elif op == "update":
        table.update(updates={"v": "'u'"}, predicate="id = 2", commit_properties=props)
    else:
        table.delete(predicate="id = 1", commit_properties=props)


def _context(op: str, run_id: str, try_number: int) -> dict[str, Any]:
    started = dt.datetime.now(dt.UTC)
    ti = SimpleNamespace(
        dag_id="dropped", task_id=op, run_id=run_id, try_number=try_number, map_index=-1, max_tries=1
    )
    dag_run = SimpleNamespace(
        run_id=run_id, start_date=started, run_after=started, logical_date=started, clear_number=0
    )
    return {"ti": ti, "dag_run": dag_run, "run_id": run_id}


def _expected_rows(op: str) -> dict[int, int]:
    """id -> how many rows of it the table holds after one commit of ``op`` (ids 1, 2, 3 before)."""
    return {
        "append": {1: 1, 2: 1, 3: 1, 100: 1, 101: 1},
        "overwrite": {100: 1, 101: 1},
        "merge": {1: 1, 2: 1, 3: 1, 4: 1},
        "update": {1: 1, 2: 1, 3: 1},
        "delete": {2: 1, 3: 1},
        "create": {100: 1, 101: 1},
    }[op]


def one_run(
    op: str,
    n: int,
    mode: str,
    proxy: ProxyControl,
    moto_options: dict[str, str],
    proxy_options: dict[str, str],
    staged: bool = False,
) -> dict[str, Any]:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from deltaguard.engines.deltars import staged as staging

    name = f"{mode}-{'staged-' if staged else ''}{op}-{n}"
    uri = f"s3://{BUCKET}/{BASE}/{name}"
    run_id = f"run-{name}"
    if op != "create":
        write_deltalake(
            uri,
            pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]}),
            storage_options=moto_options,
        )
    entry = f"/{BUCKET}/{BASE}/{name}/{CREATE_ENTRY if op == 'create' else ENTRY}"
    before = len(proxy.state()["requests"])
    if staged:
        # the staging table's only log entry; its directory's name ends in a fresh uuid4
        entry = f"/{BUCKET}/{BASE}/{name}/{staging.STAGING_PREFIX}[0-9a-f]{{32}}/{STAGING_ENTRY}"
        proxy.arm(entry, pattern=True)
    else:
        proxy.arm(entry)
    tries: list[str] = []
    started = time.monotonic()
    for try_number in (1, 2):
        try:
            if mode == "raw":
                _raw(op, uri, proxy_options, run_id)
            else:
                _operator(op, name, idempotent=mode == "leased").execute(_context(op, run_id, try_number))
            tries.append("succeeded")
            break
        except Exception as exc:
            from airflow.sdk.exceptions import AirflowFailException

            tries.append(f"{type(exc).__name__}: {str(exc)[:200]}")
            if isinstance(exc, AirflowFailException):
                break  # Airflow does not retry it; any other failure gets the task's next try
    elapsed = time.monotonic() - started
    table = DeltaTable(uri, storage_options=moto_options)
    commits = sorted(int(i["version"]) for i in table.history() if i.get("airflow.run_id") == run_id)
    ids = Counter(int(r["id"]) for r in table.to_pyarrow_table(columns=["id"]).to_pylist())
    expected = _expected_rows(op)
    duplicated = sum(max(0, count - expected.get(key, 0)) for key, count in ids.items())
    missing = sum(max(0, count - ids.get(key, 0)) for key, count in expected.items())
    state = proxy.state()
    # Two commits of one write may add the same data files (a retried commit re-sends its actions): the
    # protocol keeps one file per path, so the rows are not doubled, but the log holds the write twice.
    added = [_added_paths(moto_options, name, version) for version in commits]
    re_added = len(set.intersection(*added)) if len(added) > 1 else 0
    entry_puts = [
        {
            "entry": seen["path"].split(f"/{name}/", 1)[1],
            **{k: seen[k] for k in ("status", "dropped", "conditions")},
        }
        for seen in state["requests"][before:]
        if seen["method"] == "PUT"
        and "/_delta_log/" in seen["path"]
        and seen["path"].startswith(f"/{BUCKET}/{BASE}/{name}/")
    ]
    return {
        "dropped": bool(state["dropped"]) and re.fullmatch(entry, state["dropped"][-1]) is not None,
        "tries": tries,
        "commits": commits,
        "duplicated_rows": duplicated,
        "missing_rows": missing,
        "files_added_by_more_than_one_commit": re_added,
        "log_entry_puts": entry_puts,
        "elapsed_s": round(elapsed, 2),
    }


def _added_paths(options: dict[str, str], name: str, version: int) -> set[str]:
    """The data files the log entry ``version`` of the run's table adds."""
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=options["AWS_ENDPOINT_URL"],
        aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"],
        region_name=KEYS["AWS_REGION"],
    )
    key = f"{BASE}/{name}/_delta_log/{version:020d}.json"
    text = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()
    actions = [json.loads(line) for line in text.splitlines() if line.strip()]
    return {a["add"]["path"] for a in actions if "add" in a}


def classify(run: dict[str, Any]) -> str:
    if not run["dropped"]:
        return "answer not dropped"
    commits = len(run["commits"])
    rows = (
        ""
        if run["duplicated_rows"] == 0 and run["missing_rows"] == 0
        else (f", {run['duplicated_rows']} rows duplicated, {run['missing_rows']} missing")
    )
    outcome = "first try succeeded" if run["tries"][0] == "succeeded" else f"{len(run['tries'])} tries"
    again = (
        f", {run['files_added_by_more_than_one_commit']} files added again"
        if run.get("files_added_by_more_than_one_commit")
        else ""
    )
    return f"{commits} commit{'s' if commits != 1 else ''}, {outcome}{rows}{again}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs per operation")
    parser.add_argument("--ops", nargs="*", default=list(OPERATIONS), choices=OPERATIONS)
    parser.add_argument("--mode", default="leased", choices=MODES)
    parser.add_argument(
        "--staged",
        action="store_true",
        help="lose the answer to the staging table's log entry instead (append and overwrite only)",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    started = time.monotonic()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="dropped-response-") as tmp:
        root = Path(tmp)
        (root / "airflow_home").mkdir()
        os.environ.update(
            AIRFLOW_HOME=str(root / "airflow_home"),
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__DELTAGUARD__LEASE_STORE_URL=f"sqlite:///{root / 'leases.db'}",
            AIRFLOW__DELTAGUARD__POLL_INTERVAL="0.2",
        )
        import boto3

        services = contextlib.ExitStack()
        endpoint, proxy = services.enter_context(_s3_behind_proxy(root))
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"],
            region_name=KEYS["AWS_REGION"],
        ).create_bucket(Bucket=BUCKET)
        moto_options = {**KEYS, "AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true"}
        proxy_options = {**moto_options, "AWS_ENDPOINT_URL": proxy.url}
        os.environ["AIRFLOW_CONN_LAKE"] = json.dumps(
            {
                "conn_type": "delta",
                "host": f"s3://{BUCKET}/{BASE}",
                "extra": {"storage_options": proxy_options},
            }
        )
        if args.mode == "unfenced":
            from deltaguard.leases.keeper import LeaseKeeper

            LeaseKeeper.fence_app_ids = None  # type: ignore[assignment,method-assign]  # engines use getattr
        figures: dict[str, Any] = {}
        try:
            for op in args.ops:
                counts: Counter[str] = Counter()
                runs = []
                for n in range(args.runs):
                    run = one_run(op, n, args.mode, proxy, moto_options, proxy_options, args.staged)
                    run["classified"] = classify(run)
                    counts[run["classified"]] += 1
                    runs.append(run)
                    print(
                        f"{args.mode:8s} {op:9s} {run['classified']}  puts={run['log_entry_puts']}",
                        flush=True,
                    )
                figures[op] = {
                    "counts": dict(counts),
                    "duplicated_rows": sum(r["duplicated_rows"] for r in runs),
                    "runs_with_more_than_one_commit": sum(len(r["commits"]) > 1 for r in runs),
                    "runs": runs,
                }
        finally:
            services.close()
    import deltalake

    result = {
        "deltalake": deltalake.__version__,
        "mode": args.mode,
        "lost_answer": "the staging table's log entry"
        if args.staged
        else f"the table's {ENTRY} ({CREATE_ENTRY} for create)",
        "runs_per_operation": args.runs,
        "elapsed_s": round(time.monotonic() - started, 1),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "duplicated_rows": sum(f["duplicated_rows"] for f in figures.values()),
        "runs_with_more_than_one_commit": sum(f["runs_with_more_than_one_commit"] for f in figures.values()),
        "figures": figures,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "figures"}, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
