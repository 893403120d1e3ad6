"""``python -m benchmarks.cluster run``: the example pipelines on the stack, faults, the audit, the results.

Steps: start the stack; seed the example tables on the object store; trigger several runs of
``deltaguard_daily_sales`` (delta-rs) at once, each for another business date, and one of
``pyspark_daily_sales`` (delta-spark over Spark Connect on the standalone cluster); inject the seeded faults
while they run; wait for every run to end; audit (:mod:`benchmarks.cluster.audit`); stop the stack and check
that no process is left; write ``benchmarks/results/cluster*.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from benchmarks.cluster.audit import audit, example_pipeline
from benchmarks.cluster.faults import CHEAP_KINDS, KINDS, FaultInjector
from benchmarks.cluster.holder import ExternalHolder
from benchmarks.cluster.stack import TABLE_ROOT, ClusterStack
from benchmarks.harness.airflow_runner import repo_root

DELTA_RS_DAG = "deltaguard_daily_sales"
SPARK_DAG = "pyspark_daily_sales"
#: the freeze fault's conflicting writer: DAG ``<prefix><i>`` runs on Celery worker ``i`` only
#: (``benchmarks/cluster/dags/pyspark_optimize_sales.py``)
CONFLICTING_WRITER_PREFIX = "pyspark_optimize_sales_on_worker"
FIRST_DAY = "2026-11-21"
TERMINAL = frozenset({"success", "failed"})
#: ``[scheduler] task_instance_heartbeat_timeout`` of a run that freezes no worker
HEARTBEAT_TIMEOUT_S = 30.0
#: ``[triggerer] triggerer_health_check_threshold`` of a run that freezes no worker (three of the
#: triggerer's 5 s heartbeats)
TRIGGERER_TAKEOVER_S = 15.0


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    def installed(dist: str) -> str | None:
        try:
            return version(dist)
        except PackageNotFoundError:  # pyspark and delta-spark need not be there for a run without Spark
            return None

    names = {
        "apache-airflow": "airflow",
        "apache-airflow-providers-celery": "airflow_providers_celery",
        "celery": "celery",
        "deltalake": "deltalake",
        "pyspark": "pyspark",
        "delta-spark": "delta_spark",
        "moto": "moto",
        "psycopg": "psycopg",
    }
    found = {key: installed(dist) for dist, key in names.items()}
    import subprocess

    from benchmarks.cluster.stack import pg_bin

    found["postgresql"] = subprocess.run(
        [str(pg_bin() / "postgres"), "--version"], capture_output=True, text=True, check=False
    ).stdout.split()[-1]
    found["redis"] = (
        subprocess.run(["redis-server", "--version"], capture_output=True, text=True, check=False)
        .stdout.split()[2]
        .removeprefix("v=")
    )
    return found


class Conflicts:
    """``(commit_a, commit_b, uri) -> bool`` from the operations the lease store was asked to judge."""

    def __init__(self, store_urls: list[str]) -> None:
        from deltaguard.leases.admin import open_store

        self.stores = [open_store(u) for u in store_urls]
        self.cache: dict[tuple[str, str], Any] = {}

    def _claim(self, lease_id: str | None, uri: str) -> Any:
        from deltaguard.leases import codec
        from deltaguard.writes.table_uri import table_key

        if lease_id is None:
            return None
        key = (lease_id, uri)
        if key not in self.cache:
            self.cache[key] = None
            for store in self.stores:
                row = store.read_request(lease_id)
                if row is None:
                    continue
                for claim in json.loads(row.payload)["claims"]:
                    if table_key(claim["uri"]) == table_key(uri):
                        config = codec.config_from_json(claim["config"]) if claim.get("config") else None
                        self.cache[key] = (
                            codec.operation_from_json(claim["operation"]),
                            config,
                            codec.profile_from_json(claim["profile"]),
                        )
        return self.cache[key]

    def __call__(self, a: Any, b: Any, uri: str) -> bool:
        from deltaguard.core import pair_verdict
        from deltaguard.engines.deltars.engine import DeltaRsEngine

        ja, jb = self._claim(a.lease_id, uri), self._claim(b.lease_id, uri)
        if ja is None or jb is None:
            return True  # unknown: judge it as a conflict (soundness first)
        config = jb[1] or DeltaRsEngine().table_config(uri)
        return bool(pair_verdict(ja[0], jb[0], config, jb[2]).conflict)

    def close(self) -> None:
        for store in self.stores:
            store.close()


def sweep_expired_leases(store_url: str, every_s: float = 30.0) -> list[dict[str, str]]:
    """What a deployment's scheduled ``deltaguard leases sweep`` does once the runs ended: end the expired
    leases no request asked a table of, each fenced first when it carries Spark Connect work (ADR 0033).
    Repeated every ``every_s`` while some stays held, up to the grace of a session its server closed plus
    two retries, so a lease of a killed holder ends within its bound; one that still stays held (its
    server cannot be reached) is left for the audit to report. Returns each pass's outcome."""
    from deltaguard.engines.fencing import default_remote_fence
    from deltaguard.leases.admin import open_manager
    from deltaguard.leases.manager import DEFAULT_INTERRUPTED_GRACE_S

    passes: list[dict[str, str]] = []
    deadline = time.monotonic() + DEFAULT_INTERRUPTED_GRACE_S + 2 * every_s
    while True:
        manager = open_manager(store_url, remote_fence=default_remote_fence())
        try:
            outcome = manager.end_expired()
        except Exception as exc:
            outcome = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            manager.store.close()
        passes.append(outcome)
        print(f"leases sweep: {outcome or 'nothing expired'}", flush=True)
        held = [k for k, v in outcome.items() if v != "reclaimed"]
        if not held or time.monotonic() >= deadline:
            return passes
        time.sleep(every_s)


def _airflow_leftovers(stack: ClusterStack) -> list[str]:
    """Trigger rows still in Airflow's database (a deferred task nobody will resume)."""
    import psycopg

    with psycopg.connect(f"host=127.0.0.1 port={stack.ports.pg_meta} user=postgres dbname=airflow") as conn:
        rows = conn.execute("SELECT id, classpath FROM trigger").fetchall()
    return [f"trigger {r[0]} ({r[1]}) left in the metadata DB" for r in rows]


def run_cluster(args: argparse.Namespace) -> int:
    short = bool(args.short)
    spark = not (args.no_spark or short)
    runs = 1 if short else max(1, int(args.runs))
    kinds: tuple[str, ...] = () if args.no_faults else (CHEAP_KINDS if short else KINDS)
    if getattr(args, "faults", None) and not args.no_faults:
        kinds = tuple(args.faults)
    if not spark:
        kinds = tuple(k for k in kinds if k != "kill_spark_connect")
    out = args.out or repo_root() / "benchmarks" / "results" / (
        "cluster-broken.json" if args.no_leases else "cluster-short.json" if short else "cluster.json"
    )
    result = run(
        home=args.home.resolve(),
        spark=spark,
        runs=runs,
        kinds=kinds,
        seed=int(args.seed),
        split_store=bool(args.no_leases),
        lease_ttl=float(args.lease_ttl),
        fault_repeats=1 if short else 2,
    )
    result["command"] = (
        "python -m benchmarks.cluster run"
        + (" --short" if short else "")
        + (" --no-leases" if args.no_leases else "")
        + (f" --faults {','.join(kinds)}" if getattr(args, "faults", None) else "")
    )
    # a figure names the commit it came from (a dirty tree says so)
    described = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=repo_root(), capture_output=True, text=True
    )
    result["commit"] = described.stdout.strip() or None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, sort_keys=False) + "\n")
    print(
        json.dumps({k: result[k] for k in ("runs", "tasks", "writes", "faults", "audit", "wall_s")}, indent=2)
    )
    print(f"results in {out}")
    if not result.get("writes"):
        # a clean audit of a run that wrote nothing proves nothing (2026-11-28: every write of a short run at
        # lease_ttl 30 failed closed with StoreCallTimeout, and the audit found nothing wrong)
        print("nothing was written: the audit is vacuous", file=sys.stderr)
        return 1
    if not result.get("faults_all_fired", True):
        print(
            f"{result['faults_fired']} of {len(result['faults_planned'])} planned faults fired: invalid figure",
            file=sys.stderr,
        )
        return 1
    return 0 if result["audit_passed"] and not result["leftover_processes"] else 1


def _set_env(values: dict[str, str]) -> Callable[[], None]:
    """Set ``values`` in this process's environment; return what puts every one of them back as it was."""
    before = {key: os.environ.get(key) for key in values}
    os.environ.update(values)

    def restore() -> None:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    return restore


def run(
    *,
    home: Path,
    spark: bool,
    runs: int,
    kinds: tuple[str, ...],
    seed: int,
    split_store: bool = False,
    write_seconds: float = 8.0,
    run_timeout: float = 2700.0,
    lease_ttl: float = 90.0,
    external_hold: bool | None = None,
    fault_repeats: int = 1,
) -> dict[str, Any]:
    """Start the stack, run the pipelines under the faults, audit, stop; return the results document.

    :param lease_ttl: ``[deltaguard] lease_ttl``. 90 s by default: with 30 s (store calls bounded at 2.5 s)
        every write of the short run failed closed with ``StoreCallTimeout`` at load 10-20 on two cores
        (2026-11-28), and the full runs needed 90 s too.
    :param external_hold: hold an exclusive lease on the delta-rs ``customers`` table from outside Airflow
        until the triggerer fault was injected (:mod:`benchmarks.cluster.holder`), so that fault finds the
        table's writers deferred. ``None``: when the run is one pipeline run with ``restart_triggerer`` among
        its faults (the short run: without it the fault found a deferred task in 1 of 9 runs).
    """
    began = time.monotonic()
    load_at_start = list(os.getloadavg())
    # a SIGKILLed worker's task stays running until the scheduler's heartbeat timeout: the run waits that
    # long, so it is short unless a worker is frozen on purpose, which it must outlast. 30 s is six of the
    # task supervisor's heartbeats ([workers] min_heartbeat_interval, 5 s); measured (2026-11-28), the short
    # run's end waited for exactly this after the kill (the run ended 64 s after it with 60 s)
    freeze = "stop_worker_past_lease" in kinds
    stack = ClusterStack(
        home,
        spark=spark,
        write_seconds=write_seconds,
        split_store=split_store,
        lease_ttl=lease_ttl,
        heartbeat_timeout=None if freeze else HEARTBEAT_TIMEOUT_S,
        # a deferred task whose triggerer was SIGKILLed waited 40 s for its trigger to move (Airflow's 30 s
        # threshold, measured 2026-11-28 in the short run); a frozen worker's run keeps Airflow's default
        triggerer_takeover=None if freeze else TRIGGERER_TAKEOVER_S,
    )
    # this process reads the tables on S3 for the audit; what it sets is taken back at the end, or a test
    # process would hand moto's stopped endpoint and the S3 table root to the stacks it starts next
    # (measured: make test's e2e pipelines after this run listed s3://lake on a closed port)
    restore = _set_env({**stack.client_env(), "DELTAGUARD_EXAMPLE_TABLE_ROOT": TABLE_ROOT})
    pipeline = example_pipeline()
    result: dict[str, Any] = {}
    injector: FaultInjector | None = None
    holder: ExternalHolder | None = None
    if external_hold is None:
        external_hold = runs == 1 and "restart_triggerer" in kinds
    leftovers: list[int] = []
    try:
        stack.up()
        up_s = time.monotonic() - began
        assert stack.airflow is not None
        api = stack.airflow.api()
        variants = {DELTA_RS_DAG: "deltaguard"} | ({SPARK_DAG: "pyspark"} if spark else {})
        if spark and "stop_worker_past_lease" in kinds:
            variants |= {
                f"{CONFLICTING_WRITER_PREFIX}{i}": "pyspark" for i in range(1, stack.celery_workers + 1)
            }
        for variant in dict.fromkeys(variants.values()):
            pipeline.create_tables(variant, FIRST_DAY)
        planned: list[tuple[str, str]] = [
            (DELTA_RS_DAG, (date.fromisoformat(FIRST_DAY) + timedelta(days=i)).isoformat())
            for i in range(runs)
        ]
        if spark:
            planned.append((SPARK_DAG, FIRST_DAY))
        for dag_id in variants:
            api.wait(f"DAG {dag_id} parsed", lambda d=dag_id: api.dag(d), 300, 2.0)
            api.set_paused(dag_id, False)
        triggered: list[tuple[str, str, str]] = []
        if external_hold:
            holder = ExternalHolder(
                stack.lease_store_url,
                pipeline.table_uris("deltaguard")["customers"],
                until=lambda: injector is not None and injector.finished("restart_triggerer"),
                ttl_s=lease_ttl,
            )
            holder.start()
        for dag_id, day in planned:
            triggered.append((dag_id, api.trigger(dag_id, {"date": day}), day))

        def activity() -> dict[str, str]:
            states = {}
            for dag_id, run_id, _ in triggered:
                for ti in api.task_instances(dag_id, run_id):
                    states[f"{ti.task_id}@{variants[dag_id]}@{run_id}"] = str(ti.state)
            return states

        stack.timings["tables and DAGs ready"] = round(time.monotonic() - began - up_s, 1)
        pipeline_began = time.monotonic()
        # the faults' own runs (the freeze's conflicting writer) join ``triggered``: waited for and audited
        injector = FaultInjector(stack, kinds, seed, activity, triggered=triggered, repeats=fault_repeats)
        injector.start()
        deadline = time.monotonic() + run_timeout
        states: dict[str, str] = {}
        next_day = {dag_id: sum(1 for d, _ in planned if d == dag_id) for dag_id, _ in planned}
        extra_runs = 0
        while time.monotonic() < deadline:
            try:
                states = {run_id: str(api.dag_run(d, run_id).get("state")) for d, run_id, _ in triggered}
            except Exception:
                time.sleep(5)
                continue
            if injector.done() and all(s in TERMINAL for s in states.values()):
                break
            if not injector.done():
                # the faults' points are events of the run (grants, writes running, writers queued): while
                # some planned fault has not fired, every pipeline gets a new run (the next business date)
                # once its runs ended, so the points keep coming whatever the machine's speed
                for dag_id in next_day:
                    if all(states.get(r) in TERMINAL for d, r, _ in triggered if d == dag_id):
                        day = (date.fromisoformat(FIRST_DAY) + timedelta(days=next_day[dag_id])).isoformat()
                        next_day[dag_id] += 1
                        triggered.append((dag_id, api.trigger(dag_id, {"date": day}), day))
                        extra_runs += 1
            time.sleep(3)
        # past the cap, a fault still waiting counts as planned and not fired: the figure is then invalid
        injector.stop()
        if holder is not None:
            holder.stop()
        stack.timings["runs and faults"] = round(time.monotonic() - pipeline_began, 1)
        # the triggerer and store settle: releases after the last task are logged by then
        time.sleep(5)
        sweep_began = time.monotonic()
        sweep_expired_leases(stack.lease_store_url)
        stack.timings["leases sweep"] = round(time.monotonic() - sweep_began, 1)
        audit_began = time.monotonic()
        tis = {(d, r): api.task_instances(d, r) for d, r, _ in triggered}
        xcoms = {(r, ti.task_id): api.xcom(d, r, ti.task_id) for (d, r), v in tis.items() for ti in v}
        leftovers_af = _airflow_leftovers(stack)
        store_urls = stack.lease_store_urls()
        conflicts = Conflicts(store_urls)
        scheduler_log = (stack.log_dir / "scheduler.log").read_text(errors="replace")
        reports = {}
        held = holder.held() if holder is not None else None
        froze_with_spark = spark and bool(injector.summary().get("stop_worker_past_lease"))
        try:
            # one audit per variant (one set of tables), over every DAG's runs that wrote them
            for dag_id, variant in ((DELTA_RS_DAG, "deltaguard"), (SPARK_DAG, "pyspark")):
                if dag_id not in variants:
                    continue
                ours = [(d, r, day) for d, r, day in triggered if variants[d] == variant]
                reports[dag_id] = audit(
                    tables=pipeline.table_uris(variant),
                    day_of_run={r: day for _, r, day in ours},
                    first_day=FIRST_DAY,
                    task_instances={r: tis[(d, r)] for d, r, _ in ours},
                    store_urls=store_urls,
                    conflicting=conflicts,
                    log_dir=stack.airflow.log_dir,
                    scheduler_log=scheduler_log,
                    dag_id=dag_id,
                    airflow_leftovers=leftovers_af if dag_id == DELTA_RS_DAG else (),
                    xcoms={k: v for k, v in xcoms.items() if isinstance(v, dict)},
                    dag_of_run={r: d for d, r, _ in ours},
                    external_holds={"customers": held} if held and variant == "deltaguard" else None,
                    fence_expected=froze_with_spark and variant == "pyspark",
                    frozen_holders=injector.frozen_holders,
                )
        finally:
            conflicts.close()
        stack.timings["audit"] = round(time.monotonic() - audit_began, 1)
        figures: dict[str, int] = {}
        for report in reports.values():
            for key, value in report.figures().items():
                figures[key] = figures.get(key, 0) + value
        ti_states: dict[str, int] = {}
        for v in tis.values():
            for ti in v:
                ti_states[str(ti.state)] = ti_states.get(str(ti.state), 0) + 1
        result = {
            "stack": {
                "executor": "CeleryExecutor",
                "celery_workers": stack.celery_workers,
                "worker_concurrency": stack.worker_concurrency,
                "triggerers": stack.triggerers,
                "scheduler": 1,
                "dag_processor": 1,
                "metadata_db": "postgresql",
                "broker": "redis",
                "lease_store": "postgresql (split per Celery worker: deliberately broken)"
                if split_store
                else "postgresql (one, shared)",
                "spark": {"master": stack.spark_master, "workers": stack.spark_workers, "executor_cores": 1}
                if spark
                else None,
                "object_store": "s3",
                "object_store_server": "moto (stand-in for Amazon S3)",
                "log_stores": {
                    "delta-rs": "put-if-absent (S3 conditional write, If-None-Match)",
                    "delta-spark": "S3SingleDriverLogStore (default), one Connect server" if spark else None,
                },
                "lease_ttl_s": stack.lease_ttl,
                "versions": _versions(),
            },
            "runs": len(triggered),
            "run_states": states,
            "tasks": sum(len(v) for v in tis.values()),
            "task_states": ti_states,
            "writes": sum(r.counts.get("writes", 0) for r in reports.values()),
            "decisions": {
                k: sum(r.counts.get(k, 0) for r in reports.values()) // max(1, len(reports))
                for k in (
                    "decisions",
                    "grants",
                    "waits",
                    "releases",
                    "expiries",
                    "remote_fenced",
                    "remote_unfenced",
                )
            },
            "faults": injector.summary(),
            "faults_planned": [
                {"kind": f.kind, "occurrence": f.occurrence, "after_grants": f.after_grants}
                for f in injector.planned
            ],
            "faults_fired": len(injector.records),
            # a figure is valid only if every planned fault fired
            "faults_all_fired": injector.all_fired(),
            "extra_runs_for_faults": extra_runs,
            "fault_log": [f.__dict__ for f in injector.records],
            "faults_skipped": injector.skipped,
            "external_hold": None
            if holder is None
            else {
                "table": holder.uri,
                "lease": holder.lease_id,
                "held_s": round(held[1] - held[0], 1) if held else None,
                "errors": holder.errors,
            },
            "frozen_holder": injector.frozen_holder,
            "fault_errors": injector.errors,
            "seed": seed,
            "audit": figures,
            "audit_passed": all(r.passed for r in reports.values()),
            "audit_details": {d: r.details() for d, r in reports.items()},
            "failures_with_cause": {d: r.failures for d, r in reports.items()},
            "stack_up_s": round(up_s, 1),
        }
    finally:
        if injector is not None:
            injector.stop()
        if holder is not None:
            holder.stop()
        down_began = time.monotonic()
        stack.down()
        leftovers = stack.leftovers()
        result["stack_down_s"] = round(time.monotonic() - down_began, 1)
        result["timings_s"] = dict(stack.timings)
        result["airflow_start_cpu_s"] = dict(stack.start_cpu)
        result["load_average"] = {"start": load_at_start, "end": list(os.getloadavg())}
        restore()
    result["leftover_processes"] = leftovers
    result["audit"]["orphans"] = result.get("audit", {}).get("orphans", 0) + len(leftovers)
    result["wall_s"] = round(time.monotonic() - began, 1)
    return result
