"""Run a real Airflow 3 stack (scheduler, dag-processor, triggerer, api-server) as subprocesses.

Used by ``python -m benchmarks.demo``, the end-to-end test and the orchestration benchmark. Airflow is
never imported here: every component is a child process (``python -m airflow ...``) with its own
``AIRFLOW_HOME``, so the caller stays light and several stacks (one per test) can coexist on one machine.

Layout of an ``AIRFLOW_HOME`` prepared by :func:`prepare_home`::

    airflow.cfg                         SQLite metadata DB, LocalExecutor, [deltaguard] options; or, with
                                        ``generated=True``, the file Airflow writes itself (every default)
                                        and the harness's settings as AIRFLOW__* environment variables
    airflow.db                          the metadata DB
    config/airflow_local_settings.py    preloads pyarrow, deltalake and the operators (no cluster policy)
    simple_auth_manager_passwords.json.generated   the UI/API admin password
    deltaguard_leases.db                the lease store
    deltaguard_example_data/            Delta tables written by the example DAGs
    logs/<component>.log                each component's stdout/stderr (task logs under logs/dag_id=...)
"""

from __future__ import annotations

import configparser
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness.airflow_api import AirflowApi, TaskInstanceRecord
from benchmarks.harness.ports import free_port

#: The four long-running components, in start order.
COMPONENTS: tuple[str, ...] = ("api-server", "scheduler", "dag-processor", "triggerer")
#: Health keys reported by ``/api/v2/monitor/health`` for the components we start.
HEALTH_KEYS: tuple[str, ...] = ("metadatabase", "scheduler", "triggerer", "dag_processor")
#: Environment variable through which the example DAGs find their data directory.
DATA_DIR_ENV = "DELTAGUARD_EXAMPLE_DATA_DIR"
TERMINAL_RUN_STATES = frozenset({"success", "failed"})
ADMIN_USER = "admin"


def repo_root() -> Path:
    """The source checkout this module runs from (``benchmarks/harness/`` inside it)."""
    return Path(__file__).resolve().parents[2]


def default_home() -> Path:
    """``<repo>/airflow_home`` (git-ignored)."""
    return repo_root() / "airflow_home"


def default_dags_folder() -> Path:
    """The example DAGs shipped in the repository."""
    return repo_root() / "dags_examples"


@dataclass(frozen=True)
class AirflowHome:
    """A prepared ``AIRFLOW_HOME``.

    :param home: the directory.
    :param port: the api-server port.
    :param data_dir: where the example DAGs keep their Delta tables.
    :param extra_env: further environment for every component.
    :param config_env: the harness's Airflow options as ``AIRFLOW__SECTION__KEY`` variables (a home whose
        ``airflow.cfg`` Airflow generated; empty when the harness wrote ``airflow.cfg`` itself).
    """

    home: Path
    port: int
    data_dir: Path
    extra_env: Mapping[str, str] = field(default_factory=dict)
    config_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def password_file(self) -> Path:
        return self.home / "simple_auth_manager_passwords.json.generated"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @property
    def lease_store_url(self) -> str:
        return f"sqlite:///{self.home / 'deltaguard_leases.db'}"

    def admin_password(self) -> str:
        return str(json.loads(self.password_file.read_text())[ADMIN_USER])

    def env(self) -> dict[str, str]:
        """The environment every component (and any ``airflow`` CLI call) must run with."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW__")}
        env.update(
            {
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW_CONFIG": str(self.home / "airflow.cfg"),
                DATA_DIR_ENV: str(self.data_dir),
                # Children must find the same interpreter and the venv's scripts.
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                "PYTHONUNBUFFERED": "1",
                # The benchmark DAGs import `benchmarks.*`, which is not installed: it lives in the repository.
                "PYTHONPATH": os.pathsep.join(
                    p for p in (str(repo_root()), os.environ.get("PYTHONPATH", "")) if p
                ),
            }
        )
        env.update(self.config_env)
        env.update(self.extra_env)
        return env

    def default_pool_slots(self) -> int | None:
        """The ``default_pool`` size this home asks for (``[core] default_pool_task_slot_count`` as the
        components see it), or ``None`` when it sets none."""
        key = "AIRFLOW__CORE__DEFAULT_POOL_TASK_SLOT_COUNT"
        value = self.extra_env.get(key) or self.config_env.get(key)
        if value is None:
            cfg = configparser.ConfigParser(interpolation=None)
            cfg.read(self.home / "airflow.cfg")
            value = cfg.get("core", "default_pool_task_slot_count", fallback=None)
        return int(value) if value else None

    @property
    def generated(self) -> bool:
        """Whether Airflow wrote this home's ``airflow.cfg`` (options then come from the environment)."""
        return bool(self.config_env)

    def api(self) -> AirflowApi:
        return AirflowApi(self.base_url, ADMIN_USER, self.admin_password())


def _settings(home: Path, dags_folder: Path, port: int, parallelism: int) -> dict[str, dict[str, str]]:
    """The Airflow options the harness sets, ``{section: {key: value}}``."""
    return {
        "core": {
            "dags_folder": str(dags_folder),
            "executor": "LocalExecutor",
            "parallelism": str(parallelism),
            "max_active_tasks_per_dag": str(max(16, parallelism)),
            "load_examples": "False",
            "dags_are_paused_at_creation": "True",
            "auth_manager": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
            "simple_auth_manager_users": f"{ADMIN_USER}:admin",
            "simple_auth_manager_passwords_file": str(home / "simple_auth_manager_passwords.json.generated"),
            "execution_api_server_url": f"http://127.0.0.1:{port}/execution/",
            "fernet_key": "",
            # Every task re-imports its DAG file; with a dozen tasks starting at once on two cores that
            # takes far longer than the 30 s default, and a timeout reschedules the task.
            "dagbag_import_timeout": "300",
            # Airflow loads plugins declared by providers (the deltaguard UI) only when providers are
            # discovered eagerly; the default (lazy) would leave the UI out.
            "lazy_discover_providers": "False",
            # Airflow 3.3.2's LocalExecutor never counts a dispatched task as running, so the scheduler does
            # not hold it to `parallelism` (apache/airflow#71914): it sends every schedulable task to the
            # executor's first-come, first-served queue, where priority weights no longer order starts and a
            # write resumed with a granted lease waits behind tasks queued before it. A default pool of
            # `parallelism` slots (deferred tasks hold none) restores the limit; docs/deployment.md gives
            # the same step to every LocalExecutor deployment.
            "default_pool_task_slot_count": str(parallelism),
        },
        "database": {"sql_alchemy_conn": f"sqlite:///{home / 'airflow.db'}"},
        "api": {
            "host": "127.0.0.1",
            "port": str(port),
            "workers": "1",
            "base_url": f"http://127.0.0.1:{port}",
        },
        # One secret for every component, otherwise task tokens issued by one process fail in another.
        "api_auth": {"jwt_secret": secrets.token_urlsafe(32)},
        "logging": {"base_log_folder": str(home / "logs"), "logging_level": "INFO"},
        # Pick up the example DAGs quickly and keep parsing to one process on a small machine.
        "dag_processor": {
            "refresh_interval": "5",
            "parsing_processes": "1",
            "min_file_process_interval": "30",
            "dag_file_processor_timeout": "600",
        },
        "scheduler": {"enable_health_check": "False", "use_job_schedule": "True"},
        # Task supervisors talk to the api-server; on a loaded machine a call can take tens of seconds.
        "workers": {"execution_api_timeout": "60", "execution_api_retries": "10"},
        # Only where the lease store lives: every other [deltaguard] option (timing, deferral, the priority
        # policy) is what a fresh install gets, so the benchmark measures the default deployment.
        "deltaguard": {"lease_store_url": f"sqlite:///{home / 'deltaguard_leases.db'}"},
    }


#: what a generated home sets of the sections below: deltaguard's options and Airflow's deferral switch are
#: left to the generated file (its defaults), except ``lease_ttl``, as a user shortening leases would
GENERATED_HOME_SECTIONS: Mapping[str, Mapping[str, str]] = {
    "operators": {},
    "deltaguard": {"lease_ttl": "60"},
}


def _airflow_cfg(
    home: Path, dags_folder: Path, port: int, parallelism: int, options: Mapping[str, Mapping[str, str]]
) -> str:
    sections = _with_options(_settings(home, dags_folder, port, parallelism), options)
    lines = ["# Written by benchmarks.harness.airflow_runner.prepare_home; regenerated on every prepare."]
    for section, values in sections.items():
        lines.append(f"\n[{section}]")
        lines.extend(f"{key} = {value}" for key, value in values.items())
    return "\n".join(lines) + "\n"


def _with_options(
    sections: dict[str, dict[str, str]], options: Mapping[str, Mapping[str, str]]
) -> dict[str, dict[str, str]]:
    """``sections`` with the caller's ``options`` over them; ``default_pool`` follows a caller's
    ``parallelism`` unless the caller sizes it too."""
    for section, values in options.items():
        sections.setdefault(section, {}).update(values)
    core = sections["core"]
    if "default_pool_task_slot_count" not in options.get("core", {}):
        core["default_pool_task_slot_count"] = core["parallelism"]
    return sections


def _environment(sections: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """``{section: {key: value}}`` as Airflow's ``AIRFLOW__SECTION__KEY`` environment variables."""
    return {
        f"AIRFLOW__{section.upper()}__{key.upper()}": value
        for section, values in sections.items()
        for key, value in values.items()
    }


def generate_airflow_cfg(home: Path, timeout: float = 300.0) -> Path:
    """Let Airflow write ``home/airflow.cfg`` itself, as a user's first ``airflow`` command does.

    Airflow writes every option it knows with its default, the providers' sections included (``[deltaguard]``
    from the provider info) and ``[operators] default_deferrable = false``. Nothing of the caller's
    ``AIRFLOW__*`` environment reaches the file.

    :param home: an ``AIRFLOW_HOME``; an existing ``airflow.cfg`` there is replaced.
    :return: the file.
    """
    home.mkdir(parents=True, exist_ok=True)
    target = home / "airflow.cfg"
    target.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONFIG"))}
    env["AIRFLOW_HOME"] = str(home)
    result = subprocess.run(
        [sys.executable, "-m", "airflow", "config", "list"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0 or not target.exists():
        raise RuntimeError(
            f"airflow config list wrote no {target} ({result.returncode}): {result.stderr[-2000:]}"
        )
    return target


#: Imported by every Airflow process at start. The scheduler's LocalExecutor workers fork task processes,
#: which then inherit these modules instead of importing them again for each task: on a small machine a
#: dozen tasks starting at once otherwise spend most of a minute each importing pyarrow and deltalake.
PRELOAD_MODULES: tuple[str, ...] = (
    "pyarrow",
    "deltalake",
    "deltaguard.operators.dml",
    "deltaguard.operators.maintenance",
    "deltaguard.engines.deltars.engine",
)


def _local_settings(preload: Sequence[str] = PRELOAD_MODULES) -> str:
    """Preloads only: no cluster policy. The priority ``dag_policy`` comes from the provider's
    ``airflow.policy`` entry point as in every install; the pool-routing ``task_policy`` is opt-in and the
    benchmark measures the default deployment. The preload is the step docs/deployment.md recommends to
    every LocalExecutor deployment."""
    lines = [
        '"""Written by benchmarks.harness.airflow_runner: preloaded modules (docs/deployment.md)."""',
        "",
    ]
    lines += [
        "import importlib",
        "",
        f"for _module in {list(preload)!r}:",
        "    try:",
        "        importlib.import_module(_module)",
        "    except ImportError:  # a preload is an optimisation only",
        "        pass",
    ]
    return "\n".join(lines) + "\n"


def prepare_home(
    home: Path | None = None,
    dags_folder: Path | None = None,
    *,
    port: int | None = None,
    parallelism: int = 8,
    data_dir: Path | None = None,
    options: Mapping[str, Mapping[str, str]] | None = None,
    extra_env: Mapping[str, str] | None = None,
    generated: bool = False,
    preload: Sequence[str] = PRELOAD_MODULES,
) -> AirflowHome:
    """Write ``airflow.cfg``, the local settings and the admin password into ``home``.

    Existing metadata, leases and data are kept (the demo can be re-run on the same home).

    With ``generated=True`` the home looks like a user's: Airflow writes ``airflow.cfg`` itself
    (:func:`generate_airflow_cfg`: every default, ``[deltaguard]`` included) and the harness's options reach
    every component as ``AIRFLOW__*`` environment variables only, as in the official Docker image. Of
    deltaguard's options only ``lease_ttl`` is set then, and ``[operators] default_deferrable`` not at all
    (:data:`GENERATED_HOME_SECTIONS`); ``options`` still add or override.

    :param home: the ``AIRFLOW_HOME`` (default ``<repo>/airflow_home``).
    :param dags_folder: the DAGs to serve (default ``<repo>/dags_examples``).
    :param port: api-server port (default: a free one).
    :param parallelism: LocalExecutor worker slots (the issue asks for at least 4).
    :param data_dir: the example DAGs' data directory (default ``<home>/deltaguard_example_data``).
    :param options: extra ``airflow.cfg`` options, ``{section: {key: value}}``, overriding the defaults.
    :param extra_env: extra environment variables for every component.
    :param generated: let Airflow generate ``airflow.cfg`` and pass the options in the environment.
    :param preload: the modules ``airflow_local_settings.py`` imports (the Spark benchmark adds its engine's).
    :raises ValueError: on a parallelism below 4 or a missing DAGs folder.
    """
    if parallelism < 4:
        raise ValueError(f"parallelism must be at least 4 to show concurrent writes, got {parallelism}")
    home = (home or default_home()).resolve()
    dags_folder = (dags_folder or default_dags_folder()).resolve()
    if not dags_folder.is_dir():
        raise ValueError(f"DAGs folder {dags_folder} does not exist")
    port = port or free_port()
    data_dir = (data_dir or home / "deltaguard_example_data").resolve()
    for directory in (home, home / "config", home / "logs", data_dir):
        directory.mkdir(parents=True, exist_ok=True)
    config_env: dict[str, str] = {}
    if generated:
        generate_airflow_cfg(home)
        sections = _settings(home, dags_folder, port, parallelism)
        sections.update({section: dict(values) for section, values in GENERATED_HOME_SECTIONS.items()})
        config_env = _environment(_with_options(sections, options or {}))
    else:
        (home / "airflow.cfg").write_text(_airflow_cfg(home, dags_folder, port, parallelism, options or {}))
    (home / "config" / "airflow_local_settings.py").write_text(_local_settings(preload))
    prepared = AirflowHome(
        home=home, port=port, data_dir=data_dir, extra_env=dict(extra_env or {}), config_env=config_env
    )
    if not prepared.password_file.exists():
        # Written before the api-server starts, so the harness knows the password without scraping logs.
        prepared.password_file.write_text(json.dumps({ADMIN_USER: secrets.token_urlsafe(12)}) + "\n")
        prepared.password_file.chmod(0o600)
    return prepared


def _process_table() -> dict[int, tuple[int, int]]:
    """``pid -> (parent pid, start time in clock ticks)`` of every live, non-zombie process."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name may contain spaces and parentheses: split after its closing parenthesis
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z":
            continue
        table[int(entry.name)] = (int(fields[1]), int(fields[19]))
    return table


def descendants(roots: Sequence[int]) -> dict[int, int]:
    """Live descendants of ``roots`` (and the roots themselves): ``pid -> start time``."""
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, int] = {}
    todo = [pid for pid in roots if pid in table]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found[pid] = table[pid][1]
        todo.extend(children.get(pid, ()))
    return found


def stack_processes(home: Path) -> list[int]:
    """PIDs of live processes whose environment names this ``AIRFLOW_HOME`` (our own processes only).

    Task processes put themselves in their own process groups, so process groups alone cannot find every
    process a stack started. Processes that rename themselves (``setproctitle``, as the api-server does)
    may overwrite their environment, so :class:`AirflowStack` also follows the process tree.
    """
    marker = f"AIRFLOW_HOME={home}".encode()
    found = []
    for pid in _process_table():
        if pid == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.append(pid)
    return sorted(found)


class AirflowStack:
    """The four Airflow components of one prepared home, started and stopped together.

    Use as a context manager: ``with AirflowStack(prepare_home(...)) as stack: ...``; leaving the block
    stops everything (SIGINT, then SIGTERM, then SIGKILL, each after a bounded wait) and checks that no
    process of the stack survives.

    :param home: the prepared home.
    :param components: which components to run.
    :param migrate: run ``airflow db migrate`` on entering (``False`` for a home given an already migrated
        metadata DB of this Airflow version: the command then only costs a minute of imports).
    """

    def __init__(
        self, home: AirflowHome, components: Sequence[str] = COMPONENTS, *, migrate: bool = True
    ) -> None:
        self.home = home
        self.components = tuple(components)
        self.migrate_on_enter = migrate
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[Any] = []
        self._api: AirflowApi | None = None
        #: the processes seen at the last :meth:`stop` (``pid -> start time``), for orphan checks
        self.last_snapshot: dict[int, int] = {}

    # -- lifecycle -------------------------------------------------------------------------------

    def airflow(self, *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        """Run one ``airflow`` CLI command against this home; raise with its output if it fails."""
        result = subprocess.run(
            [sys.executable, "-m", "airflow", *args],
            env=self.home.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"airflow {' '.join(args)} failed ({result.returncode}):\n{result.stdout[-2000:]}\n"
                f"{result.stderr[-4000:]}"
            )
        return result

    def migrate(self, timeout: float = 300.0) -> None:
        """Create or upgrade the metadata DB."""
        self.airflow("db", "migrate", timeout=timeout)

    def start(self) -> None:
        """Start every component in its own process group, logging to ``logs/<component>.log``."""
        self.home.log_dir.mkdir(parents=True, exist_ok=True)
        for name in self.components:
            log = open(self.home.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed in stop()
            self._logs.append(log)
            self.processes[name] = subprocess.Popen(
                [sys.executable, "-m", "airflow", name],
                env=self.home.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    @property
    def api(self) -> AirflowApi:
        if self._api is None:
            self._api = self.home.api()
        return self._api

    def _check_alive(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise RuntimeError(
                    f"airflow {name} exited with {process.returncode}; see {self.home.log_dir / name}.log"
                )

    def wait_healthy(self, timeout: float = 240.0) -> dict[str, Any]:
        """Wait until the api-server answers and reports every started component healthy."""

        def healthy() -> dict[str, Any] | None:
            self._check_alive()
            report = self.api.health()
            keys = [k for k in HEALTH_KEYS if k == "metadatabase" or k.replace("_", "-") in self.components]
            ok = all((report.get(k) or {}).get("status") == "healthy" for k in keys)
            return report if ok else None

        return dict(self.api.wait("all Airflow components to report healthy", healthy, timeout, 2.0))

    def tracked_processes(self) -> dict[int, int]:
        """Every live process of this stack: ``pid -> start time`` (component trees and env marker)."""
        table = _process_table()
        tracked = descendants([p.pid for p in self.processes.values()])
        for pid in stack_processes(self.home.home):
            if pid in table:
                tracked.update(descendants([pid]))
        return tracked

    def leftover_processes(self, tracked: Mapping[int, int] | None = None) -> list[int]:
        """Processes of this stack still alive (``tracked`` adds earlier snapshots, matched by start time)."""
        table = _process_table()
        alive = {pid for pid, start in (tracked or {}).items() if pid in table and table[pid][1] == start}
        return sorted(alive | set(self.tracked_processes()))

    def stop(self, grace: float = 45.0) -> list[int]:
        """Stop every component: SIGINT to each process group, then SIGTERM, then SIGKILL.

        Processes are tracked by a snapshot of the component trees taken before signalling, so task
        processes in their own process groups, or orphaned by a dying parent, are found too.

        :param grace: seconds to wait after SIGINT and again after SIGTERM.
        :return: PIDs that had to be killed with SIGKILL (empty when everything stopped cleanly).
        """
        snapshot = self.tracked_processes()
        killed: list[int] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            for process in self.processes.values():
                if process.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, sig)
            if sig == signal.SIGTERM:
                for pid in self.leftover_processes(snapshot):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, sig)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and self.leftover_processes(snapshot):
                for process in self.processes.values():
                    process.poll()  # reap finished components so they stop counting as alive
                time.sleep(0.5)
            snapshot.update(self.tracked_processes())
        # Whatever is left (a component or a task process in its own group) is killed outright.
        for pid in self.leftover_processes(snapshot):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        for process in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        self.last_snapshot = snapshot
        for log in self._logs:
            log.close()
        self._logs.clear()
        return killed

    def size_default_pool(self) -> None:
        """Give ``default_pool`` the size the home asks for: ``default_pool_task_slot_count`` only takes
        effect when the metadata DB is created, and a home may start from a copied or older one."""
        slots = self.home.default_pool_slots()
        if slots is not None:
            self.api.set_pool_slots("default_pool", slots)

    def __enter__(self) -> AirflowStack:
        if self.migrate_on_enter:
            self.migrate()
        self.start()
        try:
            self.wait_healthy()
            self.size_default_pool()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- DAG runs --------------------------------------------------------------------------------

    def wait_for_dag(self, dag_id: str, timeout: float = 180.0) -> dict[str, Any]:
        """Wait until the dag-processor has serialized ``dag_id``; fail early on its import error."""

        def parsed() -> dict[str, Any] | None:
            self._check_alive()
            dag = self.api.dag(dag_id)
            if dag is None:
                errors = self.api.import_errors()
                if errors:
                    raise RuntimeError(f"DAG import errors: {errors}")
            return dag

        return dict(self.api.wait(f"DAG {dag_id} to be parsed", parsed, timeout, 2.0))

    def trigger(self, dag_id: str, conf: Mapping[str, Any] | None = None, run_id: str | None = None) -> str:
        """Unpause ``dag_id`` and create a run now; return the run id."""
        self.api.set_paused(dag_id, False)
        return self.api.trigger(dag_id, dict(conf or {}), run_id)

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 300.0) -> str:
        """Wait until the run succeeds or fails; return its final state."""

        def finished() -> str | None:
            self._check_alive()
            state = self.api.dag_run(dag_id, run_id).get("state")
            return str(state) if state in TERMINAL_RUN_STATES else None

        return str(self.api.wait(f"run {run_id} of {dag_id} to finish", finished, timeout, 2.0))

    def task_instances(self, dag_id: str, run_id: str) -> list[TaskInstanceRecord]:
        return self.api.task_instances(dag_id, run_id)


@contextlib.contextmanager
def running_stack(home: AirflowHome, components: Sequence[str] = COMPONENTS) -> Iterator[AirflowStack]:
    """``with running_stack(prepare_home(...)) as stack:`` — migrate, start, wait healthy, always stop."""
    stack = AirflowStack(home, components)
    with stack:
        yield stack
