"""``python -m benchmarks.demo`` (``make demo``): the conflict model, then the example pipeline under Airflow.

``--engine spark`` (the default, the users' main path) runs ``pyspark_daily_sales``: PySpark-built sources,
every write committed by delta-spark through a local Spark Connect server with Delta's jars, which the demo
starts beside Airflow and stops at the end. ``--engine delta-rs`` runs ``deltaguard_daily_sales``, whose
writes delta-rs commits in the task processes (no JVM).

1. Prints the conflict matrix of the example fact table for the chosen engine's profile and explains one
   admission decision, straight from :mod:`deltaguard.core`.
2. Prepares ``<repo>/airflow_home`` (SQLite, LocalExecutor), starts the scheduler, dag-processor, triggerer
   and api-server, runs the engine's DAG (and with ``--compare`` the one-slot-pool baseline), prints each
   write's story while the run goes on (granted at once / waiting behind whom and why / committed version
   N, from the decision log: :mod:`benchmarks.harness.story`), then per task whether it waited, which writes overlapped,
   the final table versions and row counts, and where to look in the UI; then stops the stack, or keeps it
   up with ``--keep-running`` until Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from benchmarks.harness.airflow_api import TaskInstanceRecord
from benchmarks.harness.airflow_runner import AirflowHome, AirflowStack, default_dags_folder, prepare_home
from benchmarks.harness.connect_server import free_port
from benchmarks.harness.run_analysis import (
    PairCheck,
    WriteRecord,
    collect_writes,
    format_pairs,
    format_writes,
    judged_writes,
    pair_checks,
    run_makespan,
    upstream_closure,
)
from benchmarks.harness.spark_connect import BackgroundConnectServer, connection_env
from benchmarks.harness.story import StoryPrinter, StoryReader

DELTAGUARD_DAG = "deltaguard_daily_sales"
SPARK_DAG = "pyspark_daily_sales"
CONVENTIONAL_DAG = "conventional_daily_sales"
#: each example DAG's table folder under the data directory
VARIANTS = {DELTAGUARD_DAG: "deltaguard", SPARK_DAG: "pyspark", CONVENTIONAL_DAG: "conventional"}
#: the DAG each ``--engine`` runs
ENGINE_DAGS = {"spark": SPARK_DAG, "delta-rs": DELTAGUARD_DAG}
#: default seconds each data write spends on its (simulated) upstream job: Spark writes take seconds of
#: their own, so the Spark pipeline needs less to show its writes side by side
DEFAULT_WRITE_SECONDS = {"spark": 5.0, "delta-rs": 10.0}
TABLE_NAMES = ("sales_fact", "events", "customers")
DEFAULT_DAY = "2026-11-21"


# -- part 1: the model ---------------------------------------------------------------------------------


def engine_profile(engine: str) -> object:
    """The profile the lease manager uses for the demo's engine: delta-spark or delta-rs, installed version."""
    from importlib.metadata import version

    from deltaguard.core import EngineName, EngineProfile

    if engine == "spark":
        return EngineProfile(EngineName.DELTA_SPARK, version("delta-spark"))
    return EngineProfile(EngineName.DELTA_RS, version("deltalake"))


def model_overview(engine: str = "spark") -> str:
    """The example fact table's conflict matrix for the engine's profile, and one decision explained."""
    from deltaguard.core import EngineProfile, Operation, OperationKind, TableConfig, decide
    from deltaguard.core.matrix import conflict_matrix

    profile = engine_profile(engine)
    assert isinstance(profile, EngineProfile)
    table = TableConfig(partition_columns=("date", "country"), uri="sales_fact")
    day = f"t.date = '{DEFAULT_DAY}'"
    on = "t.date = s.date AND t.country = s.country AND t.sku = s.sku"
    ops = [
        Operation(
            OperationKind.MERGE, merge_condition=f"{on} AND {day} AND t.country = 'DE'", label="merge DE"
        ),
        Operation(
            OperationKind.MERGE, merge_condition=f"{on} AND {day} AND t.country = 'FR'", label="merge FR"
        ),
        Operation(OperationKind.MERGE, merge_condition=on, label="merge (no partition)"),
        Operation(OperationKind.INSERT, label="append"),
        Operation(OperationKind.DELETE, predicate="date = '2026-11-20'", label="delete yesterday"),
        Operation(OperationKind.OPTIMIZE, label="optimize"),
        Operation(OperationKind.ADD_COLUMNS, label="add columns"),
    ]
    lines = [
        f"=== 1. The conflict model ({profile.name.value} {profile.version}): table sales_fact, "
        "partitioned by (date, country) ===",
        conflict_matrix(table, profile, ops).to_text(),
        "",
        "A MERGE into France arrives while the German MERGE and a whole-table MERGE run:",
    ]
    running = [ops[0], ops[2]]
    decision = decide(ops[1], running, table, profile)
    blockers = [running[i].label for i in decision.conflicts_with]
    lines.append(f"  verdict: {decision.verdict.value}; conflicts with: {blockers}")
    lines += [f"  reason: {reason}" for reason in decision.reasons]
    lines += [f"  advice: {advice}" for advice in decision.advice]
    alone = decide(ops[1], [ops[0]], table, profile)
    lines.append(f"Beside the German MERGE alone it is: {alone.verdict.value}")
    return "\n".join(lines)


# -- part 2: the pipeline under the real scheduler -----------------------------------------------------


@dataclass(frozen=True)
class PipelineRun:
    """One finished run of an example DAG and its evidence."""

    dag_id: str
    run_id: str
    state: str
    task_instances: list[TaskInstanceRecord]
    writes: list[WriteRecord]
    pairs: list[PairCheck]
    tables: dict[str, str]

    @property
    def makespan_s(self) -> float:
        return run_makespan(self.task_instances)

    @property
    def writes_makespan_s(self) -> float:
        """First write task start to last write task end: the table work, without the shared setup."""
        return run_makespan([w.ti for w in self.writes])

    @property
    def origin(self) -> datetime:
        starts = [t.start_date for t in self.task_instances if t.start_date]
        return min(starts) if starts else datetime.now().astimezone()


def example_tables(home: AirflowHome, variant: str) -> dict[str, str]:
    """The example pipeline's table URIs (the same rule as ``dags_examples/example_pipeline.py``)."""
    return {name: str(home.data_dir / variant / name) for name in TABLE_NAMES}


def demo_home(
    home_dir: Path | None,
    write_seconds: float,
    parallelism: int,
    fresh_data: bool,
    extra_env: dict[str, str] | None = None,
) -> AirflowHome:
    """Prepare the demo's ``AIRFLOW_HOME``; the example data starts empty unless ``fresh_data`` is off.

    The home is a user's: Airflow generates its ``airflow.cfg`` (every default) and the demo's settings
    reach Airflow as ``AIRFLOW__*`` environment variables only (``prepare_home(generated=True)``).

    :param extra_env: more environment for the Airflow components (the Spark Connect connection).
    """
    home = prepare_home(
        home_dir,
        default_dags_folder(),
        generated=True,
        parallelism=parallelism,
        extra_env={
            "DELTAGUARD_EXAMPLE_WRITE_SECONDS": str(write_seconds),
            "DELTAGUARD_EXAMPLE_SCHEDULE": "none",
            **(extra_env or {}),
        },
    )
    if fresh_data:
        for variant in sorted(set(VARIANTS.values())):
            shutil.rmtree(home.data_dir / variant, ignore_errors=True)
    return home


def create_pools(stack: AirflowStack, variants: Sequence[str] = ("deltaguard",)) -> None:
    """The conventional DAG's one-slot pools, and deltaguard's per-table pools for the example tables.

    :param variants: the deltaguard DAGs' table folders (``deltaguard``, ``pyspark``) to make pools for.

    The cluster policy routes each deltaguard task to its table's pool (:mod:`deltaguard.pools` names
    them); a task in a pool that does not exist would never be scheduled, so the pools are created first,
    through the REST API, with the slots ``deltaguard pools sync`` would give them.
    """
    from deltaguard.pools import PoolsConfig, desired_pools
    from deltaguard.writes.table_uri import table_key

    for name in TABLE_NAMES:
        stack.api.set_pool(f"conventional_{name}", 1, "one-slot pool of the conventional example pipeline")
    keys = [table_key(uri) for variant in variants for uri in example_tables(stack.home, variant).values()]
    for spec in desired_pools(PoolsConfig(), keys):
        # deferred tasks (waiting for a lease in the triggerer) must not hold pool slots
        stack.api.set_pool(spec.name, spec.slots, spec.description, include_deferred=False)


def run_pipeline(stack: AirflowStack, dag_id: str, day: str, timeout: float = 600.0) -> PipelineRun:
    """Trigger one run of an example DAG for ``day``, wait for it and gather the evidence."""
    variant = VARIANTS[dag_id]
    tables = example_tables(stack.home, variant)
    stack.wait_for_dag(dag_id)
    started = time.time()
    run_id = stack.trigger(dag_id, {"date": day})
    if variant == "conventional":  # pools, no leases: nothing in the decision log to tell
        state = stack.wait_for_run(dag_id, run_id, timeout)
    else:
        print("each write's story as it happens (seconds since the run was triggered):", flush=True)
        with StoryPrinter(StoryReader(stack.home.lease_store_url, dag_id, tables, origin=started)):
            state = stack.wait_for_run(dag_id, run_id, timeout)
    tis, writes = collect_writes(stack.api, dag_id, run_id, tables.values())
    pairs: list[PairCheck] = []
    if variant != "conventional":
        upstream = upstream_closure(stack.api.downstream(dag_id))
        pairs = pair_checks(writes, judged_writes(stack.home.lease_store_url, writes), upstream)
    return PipelineRun(dag_id, run_id, state, tis, writes, pairs, tables)


def table_summary(tables: dict[str, str]) -> str:
    from deltalake import DeltaTable

    lines = []
    for name, uri in tables.items():
        if not DeltaTable.is_deltatable(uri):
            lines.append(f"  {name:<11} (not created)  {uri}")
            continue
        table = DeltaTable(uri)
        lines.append(
            f"  {name:<11} version {table.version():>3}, {table.to_pyarrow_table().num_rows:>4} rows  {uri}"
        )
    return "\n".join(lines)


def describe_run(run: PipelineRun) -> str:
    lines = [
        f"--- {run.dag_id}: run {run.run_id} -> {run.state}, makespan {run.makespan_s:.0f} s "
        f"(writes {run.writes_makespan_s:.0f} s) ---",
        "times in seconds since the first task started; 'write' = table opened, 'commit' = Delta commit",
        format_writes(run.writes, run.origin),
    ]
    if run.pairs:
        lines += ["", "pairs of writes on one table (model verdict: what happened):", format_pairs(run.pairs)]
    lines += ["", "final tables:", table_summary(run.tables)]
    return "\n".join(lines)


def where_to_look(home: AirflowHome, dag_id: str = DELTAGUARD_DAG, connect_url: str | None = None) -> str:
    lines = [
        "=== Where to look ===",
        f"  Airflow UI:      {home.base_url}  (user admin, password in {home.password_file})",
        f"  DAG runs:        {home.base_url}/dags/{dag_id}",
        f"  Delta leases:    {home.base_url}/plugin/delta-leases  (why each write waited; Browse > Delta leases)",
        f"  AIRFLOW_HOME:    {home.home}   (component logs in {home.log_dir})",
        f"  lease store:     {home.lease_store_url}",
        f"  Delta tables:    {home.data_dir}",
    ]
    if connect_url:
        lines.append(f"  Spark Connect:   {connect_url}  (log in {home.log_dir / 'connect-server.log'})")
    return "\n".join(lines)


def _wait_for_ctrl_c(stack: AirflowStack) -> None:
    print("Airflow keeps running; press Ctrl-C to stop it.", flush=True)
    try:
        while all(p.poll() is None for p in stack.processes.values()):
            time.sleep(1)
    except KeyboardInterrupt:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path, default=None, help="AIRFLOW_HOME (default <repo>/airflow_home)")
    parser.add_argument(
        "--engine",
        choices=sorted(ENGINE_DAGS),
        default="spark",
        help="spark: pyspark_daily_sales through delta-spark on a local Spark Connect server (default); "
        "delta-rs: deltaguard_daily_sales, committed by delta-rs in the task processes",
    )
    parser.add_argument("--model-only", action="store_true", help="print the conflict model part only")
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also run the one-slot-pool baseline DAG (conventional_daily_sales, which commits with delta-rs "
        "whatever --engine says: compare it with --engine delta-rs)",
    )
    parser.add_argument("--keep-running", action="store_true", help="leave Airflow up until Ctrl-C")
    parser.add_argument(
        "--write-seconds",
        type=float,
        default=None,
        help="seconds each data write spends on its upstream job (default: 5 with spark, 10 with delta-rs)",
    )
    parser.add_argument("--parallelism", type=int, default=12, help="LocalExecutor slots (>= 4)")
    parser.add_argument("--date", default=DEFAULT_DAY, help="business date the pipeline processes")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for each DAG run")
    args = parser.parse_args(argv)
    write_seconds = DEFAULT_WRITE_SECONDS[args.engine] if args.write_seconds is None else args.write_seconds
    dag_id = ENGINE_DAGS[args.engine]

    print(model_overview(args.engine), flush=True)
    if args.model_only:
        return 0
    print(f"\n=== 2. The example pipeline ({dag_id}) under the real Airflow scheduler ===", flush=True)
    spark = args.engine == "spark"
    port = free_port() if spark else None
    home = demo_home(
        args.home,
        write_seconds,
        args.parallelism,
        fresh_data=True,
        extra_env=connection_env(port) if port is not None else None,
    )
    connect = BackgroundConnectServer(home.log_dir / "connect-server.log", port=port) if spark else None
    if connect is not None:
        print(f"starting a Spark Connect server with Delta's jars on port {port} ...", flush=True)
    print(f"AIRFLOW_HOME {home.home}: migrating the metadata DB and starting Airflow ...", flush=True)
    stack = AirflowStack(home)
    # SIGTERM (e.g. from `timeout`) must still stop the stack cleanly.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    runs: list[PipelineRun] = []
    try:
        # the server's JVM starts while Airflow starts; it stops after Airflow (whose tasks use it)
        with connect if connect is not None else contextlib.nullcontext(), stack:
            print(f"Airflow is up at {home.base_url}", flush=True)
            create_pools(stack, [VARIANTS[dag_id]])
            if connect is not None:
                url = connect.wait_ready()
                print(f"Spark Connect is up at {url} ({connect.server.startup_seconds:.0f} s)", flush=True)
            dags = [dag_id, *([CONVENTIONAL_DAG] if args.compare else [])]
            for run_dag_id in dags:
                print(f"running {run_dag_id} for {args.date} ...", flush=True)
                run = run_pipeline(stack, run_dag_id, args.date, args.timeout)
                runs.append(run)
                print(describe_run(run) + "\n", flush=True)
            if len(runs) == 2:
                a, b = runs
                print(
                    f"time from the first write's start to the last write's end: deltaguard "
                    f"{a.writes_makespan_s:.0f} s vs one-slot pools {b.writes_makespan_s:.0f} s "
                    f"({a.writes_makespan_s / max(b.writes_makespan_s, 1e-9):.2f}x)",
                    flush=True,
                )
            print(where_to_look(home, dag_id, connect.server.url if connect else None), flush=True)
            if args.keep_running:
                _wait_for_ctrl_c(stack)
            print("stopping Airflow" + (" and Spark Connect" if connect else "") + " ...", flush=True)
    except KeyboardInterrupt:
        print("interrupted; Airflow stopped", file=sys.stderr)
        return 130
    if connect is not None and connect.cpu_seconds is not None:
        print(f"the Spark Connect server used {connect.cpu_seconds:.0f} CPU seconds", flush=True)
    return 0 if runs and all(r.state == "success" for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
