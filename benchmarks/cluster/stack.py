"""The production-shaped stack on one machine: every part a real server, each in its own process group.

Parts (all bound to 127.0.0.1):

- two PostgreSQL servers from Debian's binaries: Airflow's metadata database (and Celery's result backend),
  and deltaguard's lease store, shared by every Celery worker, both triggerers and the api-server;
- Redis from Debian as the Celery broker;
- moto's server as the S3 endpoint the tables live on (delta-rs and delta-spark both write there);
- optionally a Spark standalone cluster (master, two workers with one core each) and a Spark Connect server
  in front of it with Delta's jars and the S3A filesystem, so PySpark writes run on executors;
- Airflow 3.3 with the CeleryExecutor: api-server, scheduler, dag-processor, two triggerers, two Celery
  workers.

:class:`ClusterStack` starts them in dependency order, writes ``state.json`` (ports, PIDs) into its home so
``python -m benchmarks.cluster down`` in another process can stop them, and stops them in reverse order,
then proves with the environment marker (:data:`~benchmarks.cluster.procs.MARKER_ENV`) that no process
is left.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.cluster import templates
from benchmarks.cluster.procs import (
    MARKER_ENV,
    Service,
    cpu_seconds,
    kill_leftovers,
    marked_processes,
    port_open,
)
from benchmarks.harness.airflow_runner import AirflowHome, default_dags_folder, prepare_home, repo_root
from benchmarks.harness.connect_server import free_port

BUCKET = "lake"
#: where the example DAGs keep their tables on the object store (``DELTAGUARD_EXAMPLE_TABLE_ROOT``)
TABLE_ROOT = f"s3://{BUCKET}/examples"
#: DAG files of the stack's own (not examples): the freeze fault's conflicting writer
CLUSTER_DAGS = Path(__file__).resolve().parent / "dags"


def worker_queue(i: int) -> str:
    """The Celery queue only Celery worker ``i`` (from 1) consumes, beside Airflow's ``default``."""
    return f"worker{i}"


#: moto accepts any key; these only need to be the same everywhere
AWS_KEY, AWS_SECRET, AWS_REGION = "deltaguard", "deltaguard-secret", "us-east-1"
#: the Hadoop S3A jars (hadoop-aws for the pyspark wheel's Hadoop, and the AWS SDK bundle), see ``jars.py``
S3_JARS_ENV = "DELTAGUARD_S3_JARS"


def default_home() -> Path:
    """``<repo>/cluster_home`` (git-ignored)."""
    return repo_root() / "cluster_home"


def pg_bin() -> Path:
    """Debian's PostgreSQL server binaries (the newest installed version)."""
    roots = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
    if not roots:
        raise RuntimeError(
            "no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)"
        )
    return roots[-1].parent


@dataclass(frozen=True)
class Ports:
    pg_meta: int
    pg_leases: int
    redis: int
    s3: int
    spark_master: int
    connect: int

    @classmethod
    def pick(cls) -> Ports:
        return cls(*(free_port() for _ in range(6)))


class ClusterStack:
    """Start, fault and stop the whole stack.

    :param home: directory for every part's data and logs (wiped on :meth:`up`).
    :param spark: also run the Spark standalone cluster and the Connect server.
    :param celery_workers: Celery workers (each ``worker_concurrency`` slots).
    :param triggerers: triggerer processes.
    :param spark_workers: Spark standalone workers (one core, ``executor_memory`` each).
    :param lease_ttl: ``[deltaguard] lease_ttl`` (short, so a killed or frozen holder is noticed in a run).
    :param write_seconds: ``DELTAGUARD_EXAMPLE_WRITE_SECONDS`` (how long each example source takes).
    :param extra_env: more environment for the Airflow components.
    :param split_store: break the deployment on purpose: each Celery worker gets a lease store (database)
        of its own, as if each machine had its own SQLite file, so writes on different workers never see
        each other's leases. The audit must then fail.
    :param heartbeat_timeout: ``[scheduler] task_instance_heartbeat_timeout``: how long a SIGKILLed worker's
        task stays running before the scheduler fails it (the run waits that long). Default ``lease_ttl + 90``
        and at least 60: above the SIGSTOP fault's longest freeze (``lease_ttl + 60``: it lasts until the store
        fenced the frozen holder for the conflicting writer it brings), or a frozen holder's task would be
        failed by Airflow instead of handed over by the lease store.
    :param triggerer_takeover: ``[triggerer] triggerer_health_check_threshold``: how long after a killed
        triggerer's last heartbeat its triggers go to a live triggerer (a deferred task waits that long).
        ``None``: Airflow's default (30 s).
    """

    def __init__(
        self,
        home: Path | None = None,
        *,
        spark: bool = True,
        celery_workers: int = 2,
        worker_concurrency: int = 4,
        triggerers: int = 2,
        spark_workers: int = 2,
        lease_ttl: float = 30.0,
        write_seconds: float = 8.0,
        extra_env: dict[str, str] | None = None,
        split_store: bool = False,
        heartbeat_timeout: float | None = None,
        triggerer_takeover: float | None = None,
    ) -> None:
        self.home = (home or default_home()).resolve()
        self.spark = spark
        self.celery_workers = celery_workers
        self.worker_concurrency = worker_concurrency
        self.triggerers = triggerers
        self.spark_workers = spark_workers if spark else 0
        self.lease_ttl = lease_ttl
        self.write_seconds = write_seconds
        self.extra_env = dict(extra_env or {})
        self.split_store = split_store
        self.heartbeat_timeout = heartbeat_timeout or max(60.0, lease_ttl + 90.0)
        self.triggerer_takeover = triggerer_takeover
        self.ports = Ports.pick()
        self.services: dict[str, Service] = {}
        self.airflow: AirflowHome | None = None
        self.started_at: float | None = None
        #: where the stack's time went: ``step -> seconds`` (start to ready per part, stop per part)
        self.timings: dict[str, float] = {}
        #: CPU seconds each Airflow component had used when all of them were first healthy (its start's cost)
        self.start_cpu: dict[str, float] = {}

    @contextmanager
    def _timed(self, step: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.timings[step] = round(self.timings.get(step, 0.0) + time.monotonic() - began, 1)
            print(f"[cluster] {step}: {self.timings[step]:.1f} s", file=sys.stderr, flush=True)

    # -- addresses ------------------------------------------------------------------------------------

    @property
    def meta_url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.ports.pg_meta}/airflow"

    @property
    def lease_store_url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.ports.pg_leases}/deltaguard_leases"

    def worker_store_url(self, index: int) -> str:
        """The lease store Celery worker ``index`` uses (its own database when :attr:`split_store`)."""
        if not self.split_store:
            return self.lease_store_url
        return self.lease_store_url.rsplit("/", 1)[0] + f"/deltaguard_leases_w{index}"

    def lease_store_urls(self) -> list[str]:
        """Every lease store in use."""
        urls = [self.lease_store_url] + [self.worker_store_url(i) for i in range(1, self.celery_workers + 1)]
        return list(dict.fromkeys(urls))

    @property
    def broker_url(self) -> str:
        return f"redis://127.0.0.1:{self.ports.redis}/0"

    @property
    def s3_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports.s3}"

    @property
    def spark_master(self) -> str:
        return f"spark://127.0.0.1:{self.ports.spark_master}"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    def base_env(self) -> dict[str, str]:
        """What every process gets: the marker, S3 settings delta-rs and boto read, a local-only Spark."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__")}
        env.update(
            {
                MARKER_ENV: str(self.home),
                "AWS_ENDPOINT_URL": self.s3_endpoint,
                "AWS_ACCESS_KEY_ID": AWS_KEY,
                "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
                "AWS_REGION": AWS_REGION,
                "AWS_DEFAULT_REGION": AWS_REGION,
                "AWS_ALLOW_HTTP": "true",
                "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable,
            }
        )
        return env

    def client_env(self) -> dict[str, str]:
        """The S3 variables this (driving) process needs to read the tables, without the marker."""
        return {k: v for k, v in self.base_env().items() if k.startswith("AWS_")}

    # -- parts ----------------------------------------------------------------------------------------

    def _postgres(self, name: str, port: int, database: str) -> Service:
        data = self.home / name
        user = "postgres" if os.geteuid() == 0 else None
        if not (data / "PG_VERSION").exists():
            data.mkdir(parents=True, exist_ok=True)
            if user:
                entry = pwd.getpwnam(user)
                os.chown(data, entry.pw_uid, entry.pw_gid)
                _check_reachable(data, user)
            # initdb once per PostgreSQL version; every server after that starts from a copy (templates.py)
            template = templates.initdb_template(pg_bin())
            if template.exists():
                templates.copy_data_dir(template, data)
            else:
                initdb = [
                    str(pg_bin() / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "postgres",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                ]
                subprocess.run(
                    (["runuser", "-u", user, "--"] if user else []) + initdb,
                    check=True,
                    capture_output=True,
                    timeout=180,
                )
                templates.keep_initdb(data, pg_bin())
        argv = [
            str(pg_bin() / "postgres"),
            "-D",
            str(data),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            f"port={port}",
            "-c",
            f"unix_socket_directories={data}",
            "-c",
            "max_connections=200",
            "-c",
            "shared_buffers=32MB",
            "-c",
            "fsync=off",
        ]
        service = Service(
            name,
            (["runuser", "-u", user, "--"] if user else []) + argv,
            self.base_env(),
            self.log_dir / f"{name}.log",
            ready=lambda: self._pg_ready(port, database),
            stop_signal=signal.SIGINT,  # PostgreSQL's "fast" shutdown
        )
        return service

    @staticmethod
    def _pg_ready(port: int, database: str) -> bool:
        import psycopg

        try:
            with psycopg.connect(
                f"host=127.0.0.1 port={port} user=postgres dbname=postgres", autocommit=True
            ) as c:
                if c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone() is None:
                    c.execute(f'CREATE DATABASE "{database}"')
            return True
        except psycopg.OperationalError:
            return False

    def _redis(self) -> Service:
        redis = shutil.which("redis-server")
        if redis is None:
            raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
        data = self.home / "redis"
        data.mkdir(parents=True, exist_ok=True)
        argv = [redis, "--bind", "127.0.0.1", "--port", str(self.ports.redis), "--dir", str(data)]
        argv += ["--save", "", "--appendonly", "no", "--protected-mode", "yes"]
        return Service(
            "redis",
            argv,
            self.base_env(),
            self.log_dir / "redis.log",
            ready=lambda: port_open(self.ports.redis),
            grace=3.0,  # no persistence: nothing to flush
        )

    def _s3(self) -> Service:
        argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.ports.s3)]
        return Service(
            "s3",
            argv,
            self.base_env(),
            self.log_dir / "s3.log",
            ready=lambda: port_open(self.ports.s3),
            grace=3.0,  # in memory: the audit has read the tables before the stop
        )

    def _spark_class(self) -> str:
        return str(Path(sys.executable).parent / "spark-class")

    def _spark_master(self) -> Service:
        env = {**self.base_env(), "SPARK_DAEMON_MEMORY": "256m", "SPARK_DAEMON_JAVA_OPTS": "-XX:+UseSerialGC"}
        argv = [self._spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
        argv += ["--port", str(self.ports.spark_master), "--webui-port", str(free_port())]
        return Service(
            "spark-master",
            argv,
            env,
            self.log_dir / "spark-master.log",
            ready=lambda: port_open(self.ports.spark_master),
        )

    def _spark_worker(self, index: int) -> Service:
        env = {**self.base_env(), "SPARK_DAEMON_MEMORY": "256m", "SPARK_DAEMON_JAVA_OPTS": "-XX:+UseSerialGC"}
        work = self.home / f"spark-worker-{index}"
        work.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"spark-worker-{index}.log"
        argv = [self._spark_class(), "org.apache.spark.deploy.worker.Worker", self.spark_master]
        argv += ["--host", "127.0.0.1", "--cores", "1", "--memory", "768m", "--work-dir", str(work)]
        argv += ["--webui-port", str(free_port())]
        return Service(
            f"spark-worker-{index}",
            argv,
            env,
            log,
            ready=lambda: "Successfully registered with master" in log.read_text(errors="replace"),
        )

    def spark_conf(self) -> dict[str, str]:
        """The Connect server's conf: the standalone master, one-core executors, S3A on moto."""
        from benchmarks.cluster.jars import s3_jars

        jars = ":".join(str(j) for j in s3_jars())
        conf = {
            "spark.executor.cores": "1",
            "spark.executor.memory": "512m",
            "spark.cores.max": str(self.spark_workers),
            "spark.sql.shuffle.partitions": "2",
            "spark.databricks.delta.snapshotPartitions": "2",
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            # the SDK bundle is 650 MB: on one machine it is put on the classpath, not shipped to executors
            "spark.driver.extraClassPath": jars,
            "spark.executor.extraClassPath": jars,
            "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "spark.hadoop.fs.s3a.endpoint": self.s3_endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": AWS_REGION,
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.access.key": AWS_KEY,
            "spark.hadoop.fs.s3a.secret.key": AWS_SECRET,
            "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            "spark.hadoop.fs.s3a.change.detection.mode": "none",
        }
        return conf

    def _connect(self) -> Service:
        from benchmarks.harness.connect_server import LocalConnectServer

        server = LocalConnectServer(
            self.ports.connect,
            master=self.spark_master,
            conf=self.spark_conf(),
            driver_memory="1g",
            log_file=self.log_dir / "spark-connect.log",
        )
        return Service(
            "spark-connect",
            server.command(),
            self.base_env(),
            self.log_dir / "spark-connect.log",
            ready=lambda: port_open(self.ports.connect),
        )

    def airflow_env(self) -> dict[str, str]:
        from benchmarks.harness.spark_connect import connection_env

        env = {
            MARKER_ENV: str(self.home),
            **{k: v for k, v in self.base_env().items() if k.startswith(("AWS_", "SPARK_", "PYSPARK_"))},
            "DELTAGUARD_EXAMPLE_TABLE_ROOT": TABLE_ROOT,
            "DELTAGUARD_EXAMPLE_SCHEDULE": "none",
            "DELTAGUARD_EXAMPLE_MAX_ACTIVE_RUNS": "4",
            "DELTAGUARD_EXAMPLE_WRITE_SECONDS": str(self.write_seconds),
            "DELTAGUARD_CLUSTER_CELERY_WORKERS": str(self.celery_workers),
            **connection_env(self.ports.connect),
        }
        env.update(self.extra_env)
        return env

    def airflow_options(self) -> dict[str, dict[str, str]]:
        return {
            # lazy_discover_providers: Airflow's default. The harness discovers providers eagerly for the UI
            # plugin, which now loads either way (docs/deployment.md, Upgrading), and eager discovery cost each
            # of the seven Airflow processes 2-4 s of CPU at start (measured 2026-11-28 on `import airflow`)
            "core": {"executor": "CeleryExecutor", "parallelism": "16", "lazy_discover_providers": "True"},
            # psycopg 3 for the async engine too (Airflow would otherwise pick asyncpg, not installed)
            "database": {
                "sql_alchemy_conn": self.meta_url,
                "sql_alchemy_conn_async": self.meta_url.replace("+psycopg", "+psycopg_async"),
            },
            "celery": {
                "broker_url": self.broker_url,
                "result_backend": "db+" + self.meta_url,
                "worker_concurrency": str(self.worker_concurrency),
                # a SIGKILLed worker's task goes back to the queue only after the visibility timeout
                "worker_prefetch_multiplier": "1",
            },
            # the tasks a SIGKILLed worker had received come back only after the visibility timeout: in the
            # short run (2026-11-28) they came back 190 s after the kill with it at 120 s. A running task redelivered
            # is ignored by Airflow ("Task already running elsewhere"), so it follows the heartbeat timeout
            "celery_broker_transport_options": {"visibility_timeout": str(int(self.heartbeat_timeout))},
            # a task whose worker died is noticed by the scheduler after this many seconds
            "scheduler": {
                "enable_health_check": "False",
                "task_instance_heartbeat_timeout": str(int(self.heartbeat_timeout)),
                "task_instance_heartbeat_timeout_detection_interval": "5",
            },
            "triggerer": {"capacity": "200"}
            | (
                {"triggerer_health_check_threshold": str(int(self.triggerer_takeover))}
                if self.triggerer_takeover
                else {}
            ),
            "deltaguard": {"lease_store_url": self.lease_store_url, "lease_ttl": str(self.lease_ttl)},
        }

    def _airflow(self, name: str, *args: str) -> Service:
        assert self.airflow is not None
        env = self.airflow.env()
        return Service(name, [sys.executable, "-m", "airflow", *args], env, self.log_dir / f"{name}.log")

    def airflow_services(self) -> list[Service]:
        services = [
            self._airflow("api-server", "api-server"),
            self._airflow("scheduler", "scheduler"),
            self._airflow("dag-processor", "dag-processor"),
        ]
        for i in range(1, self.triggerers + 1):
            services.append(self._airflow(f"triggerer-{i}", "triggerer", "--skip-serve-logs"))
        for i in range(1, self.celery_workers + 1):
            pid = self.home / f"celery-worker-{i}.pid"
            worker = self._airflow(
                f"celery-worker-{i}",
                "celery",
                "worker",
                "--celery-hostname",
                f"worker{i}@127.0.0.1",
                # Airflow's default queue, and one of this worker's own: a task routed there runs on this
                # worker only (the freeze fault's conflicting writer must not be fetched by the frozen one)
                "--queues",
                f"default,{worker_queue(i)}",
                "--concurrency",
                str(self.worker_concurrency),
                "--skip-serve-logs",
                "--pid",
                str(pid),
                "--without-gossip",
                "--without-mingle",
            )
            worker.env = {**worker.env, "AIRFLOW__DELTAGUARD__LEASE_STORE_URL": self.worker_store_url(i)}
            services.append(worker)
        return services

    # -- lifecycle ------------------------------------------------------------------------------------

    def up(self, timeout: float = 600.0) -> None:
        """Start every part in dependency order and wait until Airflow reports every component healthy."""
        self.started_at = time.monotonic()
        if self.home.exists():
            kill_leftovers(self.home)
            shutil.rmtree(self.home)
        self.log_dir.mkdir(parents=True)
        with self._timed("pg-meta data directory (initdb or copy)"):
            pg_meta = self._postgres("pg-meta", self.ports.pg_meta, "airflow")
        with self._timed("pg-leases data directory (initdb or copy)"):
            pg_leases = self._postgres("pg-leases", self.ports.pg_leases, "deltaguard_leases")
        # Airflow's processes need the databases and the broker to start; moto's S3 (its import took 8-11 s at
        # load 8-11) and the Spark master only by the runs, so they get ready while Airflow starts
        early = [pg_meta, pg_leases, self._redis()]
        late = [self._s3()] + ([self._spark_master()] if self.spark else [])
        began = time.monotonic()
        for service in early + late:
            self.services[service.name] = service
            service.start()
        self._write_state()
        for service in early:
            service.wait_ready(timeout)
            self.timings[f"{service.name} ready"] = round(time.monotonic() - began, 1)
        with self._timed("lease databases"):
            for url in self.lease_store_urls():
                self._pg_ready(self.ports.pg_leases, url.rsplit("/", 1)[1])
        self.airflow = prepare_home(
            self.home / "airflow",
            self._dags_folder(),
            parallelism=16,
            data_dir=self.home / "local_data",
            options=self.airflow_options(),
            extra_env=self.airflow_env(),
        )
        self._preload_store_modules()
        self._metadata_schema(timeout)
        with self._timed("airflow components healthy"):
            for service in self.airflow_services():
                self.services[service.name] = service
                service.start()
            self._write_state()
            for service in late:
                service.wait_ready(timeout)
                self.timings[f"{service.name} ready"] = round(time.monotonic() - began, 1)
            with self._timed("bucket"):
                self._create_bucket()
            spark_parts: list[Service] = []
            spark_began = time.monotonic()
            if self.spark:
                spark_parts = [self._spark_worker(i) for i in range(1, self.spark_workers + 1)]
                spark_parts.append(self._connect())
                for service in spark_parts:
                    self.services[service.name] = service
                    service.start()
                self._write_state()
            for service in spark_parts:
                service.wait_ready(timeout)
                self.timings[f"{service.name} ready"] = round(time.monotonic() - spark_began, 1)
            self.wait_airflow_healthy(timeout)
        self.timings["up"] = round(time.monotonic() - self.started_at, 1)

    #: the example DAG files the runs use (``example_pipeline.py`` holds what both import, no DAG)
    DAG_FILES: tuple[str, ...] = ("deltaguard_daily_sales.py", "example_pipeline.py")
    SPARK_DAG_FILES: tuple[str, ...] = ("pyspark_daily_sales.py",)
    #: the stack's own DAG files (``benchmarks/cluster/dags``), beside the examples when Spark runs
    CLUSTER_SPARK_DAG_FILES: tuple[str, ...] = ("pyspark_optimize_sales.py",)

    def _dags_folder(self) -> Path:
        """A DAGs folder of links to the example DAGs the runs trigger, not the whole examples folder: the
        dag-processor parses every file of its folder before it reports healthy, and the others (the
        conventional, Databricks, TaskFlow and asset examples) are never run here."""
        folder = self.home / "dags"
        folder.mkdir(exist_ok=True)
        for name in self.DAG_FILES + (self.SPARK_DAG_FILES if self.spark else ()):
            (folder / name).symlink_to(default_dags_folder() / name)
        for name in self.CLUSTER_SPARK_DAG_FILES if self.spark else ():
            (folder / name).symlink_to(CLUSTER_DAGS / name)
        return folder

    def _metadata_schema(self, timeout: float) -> None:
        """Airflow's tables in the metadata database: the cached dump of a migrated database when this
        Airflow was migrated here before (seconds), else ``airflow db migrate`` (minutes), kept for next time."""
        assert self.airflow is not None
        began = time.monotonic()
        if templates.restore_metadata(pg_bin(), self.ports.pg_meta, "airflow"):
            self.timings["metadata restored from the cached dump"] = round(time.monotonic() - began, 1)
            return
        self._recreate_database(self.ports.pg_meta, "airflow")  # a failed restore may have left tables
        with self._timed("airflow db migrate"):
            migrate = subprocess.run(
                [sys.executable, "-m", "airflow", "db", "migrate"],
                env=self.airflow.env(),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        if migrate.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed: {migrate.stderr[-3000:]}")
        with self._timed("metadata dumped for the next start"):
            templates.dump_metadata(pg_bin(), self.ports.pg_meta, "airflow")

    @staticmethod
    def _recreate_database(port: int, database: str) -> None:
        import psycopg

        with psycopg.connect(
            f"host=127.0.0.1 port={port} user=postgres dbname=postgres", autocommit=True
        ) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{database}"')
            c.execute(f'CREATE DATABASE "{database}"')

    #: imported once by each Celery worker (and inherited by the task processes it forks): the first store call
    #: of a task opens the store, and importing the PostgreSQL driver inside that call, bounded by
    #: ``store_timeout``, failed tasks with StoreCallTimeout under load average 20-30 on 2 cores
    STORE_PRELOADS: tuple[str, ...] = (
        "psycopg",
        "sqlalchemy.dialects.postgresql.psycopg",
        "deltaguard.leases.sql.postgres",
        "deltaguard.leases.manager",
        "deltaguard.hooks.lease",
    )

    def _preload_store_modules(self) -> None:
        """Preload in the Celery workers only: their task processes inherit the modules. The harness's
        settings preload pyarrow and deltalake in every Airflow process; here that would be paid by seven
        processes starting at once on two cores, five of which (api-server, scheduler, dag-processor,
        triggerers) never fork a task."""
        from benchmarks.harness.airflow_runner import PRELOAD_MODULES

        assert self.airflow is not None
        settings = self.airflow.home / "config" / "airflow_local_settings.py"
        modules = list(PRELOAD_MODULES) + list(self.STORE_PRELOADS)
        lines = [
            '"""Written by benchmarks.cluster: preloads for the Celery workers (docs/deployment.md, Preloading)."""',
            "",
            "import importlib",
            "import sys",
            "",
            'if "celery" in sys.argv and "worker" in sys.argv:',
            f"    for _module in {modules!r}:",
            "        try:",
            "            importlib.import_module(_module)",
            "        except ImportError:  # a preload is an optimisation only",
            "            pass",
        ]
        settings.write_text("\n".join(lines) + "\n")

    def wait_airflow_healthy(self, timeout: float = 300.0) -> dict[str, Any]:
        """Wait until the api-server reports the metadata DB, scheduler, triggerer and dag-processor healthy."""
        assert self.airflow is not None
        api = self.airflow.api()
        began = time.monotonic()
        deadline = began + timeout
        last: Any = None
        keys = ("metadatabase", "scheduler", "triggerer", "dag_processor")
        while time.monotonic() < deadline:
            for service in self.services.values():
                if service.process is not None and not service.alive() and service.name != "spark-connect":
                    raise RuntimeError(f"{service.name} exited{service.tail()}")
            workers = [n for n in self.services if n.startswith("celery-worker")]
            for name in workers:
                if f"{name} ready" not in self.timings and self._celery_ready(name):
                    self.timings[f"{name} ready"] = round(time.monotonic() - began, 1)
            try:
                last = api.health()
                for key in keys:
                    if (last.get(key) or {}).get("status") == "healthy":
                        self.timings.setdefault(f"{key} healthy", round(time.monotonic() - began, 1))
                if all(f"{k} healthy" in self.timings for k in keys) and all(
                    f"{n} ready" in self.timings for n in workers
                ):
                    for service in self.airflow_parts():
                        self.start_cpu[service.name] = cpu_seconds(service.pid)
                    return dict(last)
            except Exception as exc:
                last = exc
            time.sleep(1.0)
        raise RuntimeError(f"Airflow not healthy within {timeout:.0f} s: {last}")

    def airflow_parts(self) -> list[Service]:
        """The running stack's Airflow components."""
        return [s for n, s in self.services.items() if n.startswith(self.AIRFLOW_PREFIXES)]

    def _celery_ready(self, name: str) -> bool:
        """Whether Celery worker ``name`` logged that it consumes from the broker (``... ready.``)."""
        log = self.services[name].log
        return log.exists() and " ready." in log.read_text(errors="replace")

    def _create_bucket(self) -> None:
        import boto3

        boto3.client(
            "s3",
            endpoint_url=self.s3_endpoint,
            aws_access_key_id=AWS_KEY,
            aws_secret_access_key=AWS_SECRET,
            region_name=AWS_REGION,
        ).create_bucket(Bucket=BUCKET)

    def _write_state(self) -> None:
        state = {
            "home": str(self.home),
            "ports": self.ports.__dict__,
            "groups": {name: s.pid for name, s in self.services.items() if s.pid},
            "airflow_url": self.airflow.base_url if self.airflow else None,
            "spark_master": self.spark_master if self.spark else None,
            "s3_endpoint": self.s3_endpoint,
            "lease_store_url": self.lease_store_url,
        }
        (self.home / "state.json").write_text(json.dumps(state, indent=2))

    def restart(self, name: str, *, kill: bool = False, wait: bool = True) -> float:
        """Stop (or SIGKILL) one part and start it again; return the seconds it was away."""
        service = self.services[name]
        began = time.monotonic()
        service.kill() if kill else service.stop()
        service.start()
        self._write_state()
        if wait and service.ready is not None:
            service.wait_ready()
        return time.monotonic() - began

    #: stop order: Airflow first (tasks still write), then Spark, then the servers they use; the parts of one
    #: step stop at the same time (each waits only for its own processes)
    STOP_ORDER: tuple[tuple[str, ...], ...] = (
        ("celery-worker",),
        ("scheduler", "triggerer", "dag-processor", "api-server"),
        ("spark-connect",),
        ("spark-worker",),
        ("spark-master",),
        ("s3", "redis", "pg-leases", "pg-meta"),
    )

    #: the Airflow components' names start with these
    AIRFLOW_PREFIXES: tuple[str, ...] = (
        "api-server",
        "scheduler",
        "dag-processor",
        "triggerer",
        "celery-worker",
    )
    #: seconds an Airflow component gets after SIGTERM in :meth:`down` before its group is SIGKILLed. When
    #: the stack goes down every run has ended and the audit has read what it needs, so a clean exit buys
    #: nothing: measured (2026-11-28, load 3-6), with the 30 s grace the api-server and a triggerer took
    #: 15 s to exit. The faults' restarts keep :attr:`Service.grace` (a restarted scheduler stops cleanly).
    DOWN_GRACE: float = 5.0

    def down(self) -> list[int]:
        """Stop every part in :data:`STOP_ORDER`; return PIDs that had to be SIGKILLed after that."""
        began = time.monotonic()
        for step in self.STOP_ORDER:
            names = [name for name in self.services if name.startswith(step)]
            threads = [threading.Thread(target=self._stop_one, args=(name,)) for name in names]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        with self._timed("stop leftovers"):
            killed = kill_leftovers(self.home)
        self.timings["down"] = round(time.monotonic() - began, 1)
        return killed

    def _stop_one(self, name: str) -> None:
        began = time.monotonic()
        airflow = name.startswith(self.AIRFLOW_PREFIXES)
        self.services[name].stop(self.DOWN_GRACE if airflow else None)
        self.timings[f"stop {name}"] = round(time.monotonic() - began, 1)

    def leftovers(self) -> list[int]:
        return marked_processes(self.home)


def down_from_state(home: Path) -> list[int]:
    """Stop a stack started by another process (``python -m benchmarks.cluster down``)."""
    state_file = home / "state.json"
    groups: dict[str, int] = json.loads(state_file.read_text())["groups"] if state_file.exists() else {}
    for prefix in (prefix for step in ClusterStack.STOP_ORDER for prefix in step):
        for name, pgid in groups.items():
            if name.startswith(prefix):
                try:
                    os.killpg(pgid, signal.SIGINT if name.startswith("pg-") else signal.SIGTERM)
                except ProcessLookupError:
                    continue
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    try:
                        os.killpg(pgid, 0)
                    except ProcessLookupError:
                        break
                    time.sleep(0.3)
    return kill_leftovers(home)


def _check_reachable(data: Path, user: str) -> None:
    """Fail with what to do when ``user`` (the server's, as root runs it) cannot reach ``data``: initdb would
    only say "could not change directory" (a home under pytest's or ``mktemp``'s 0700 folders)."""
    probe = subprocess.run(
        ["runuser", "-u", user, "--", "test", "-w", str(data)], capture_output=True, timeout=30
    )
    if probe.returncode != 0:
        closed = [str(p) for p in reversed(data.parents) if p.exists() and not (p.stat().st_mode & 0o001)]
        raise RuntimeError(
            f"the {user} user cannot reach {data} (folders closed to other users: {', '.join(closed) or '?'}): "
            "give the stack a home under a folder every user may traverse"
        )
