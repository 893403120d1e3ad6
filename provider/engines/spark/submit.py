"""The Spark engine reached through ``spark-submit``: each write runs :mod:`deltaguard.engines.spark.job`.

The worker needs no Spark session: the write runs in a Spark application submitted through the
apache-spark provider's ``SparkSubmitHook`` (``spark`` connection). The job's exit code and its marker
lines tell this side what happened (see :mod:`deltaguard.engines.spark.job`):

* written: the result comes back through a local ``--result-file`` (client deploy mode; in cluster deploy
  mode the driver runs elsewhere, so the result's version is read back from the Delta log when possible);
* conflict: ``DELTAGUARD_CONFLICT <kind>`` in spark-submit's output -> :class:`DeltaConflictError`;
* missing Delta jars on the cluster: exit code 3 -> :class:`SparkSetupError`.

Sources must be URIs the cluster can read (see :func:`deltaguard.engines.spec_json.spec_to_json`).
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.base import DeltaEngine, WriteResult
from deltaguard.engines.commit_coordination import spark_coordination
from deltaguard.engines.errors import ConflictKind, DeltaConflictError, InvalidWriteError, SparkSetupError
from deltaguard.engines.spark.errors import conflict_kind
from deltaguard.engines.spark.job import CONFLICT_MARKER, EXIT_BAD_ARGS, EXIT_SETUP, build_args
from deltaguard.engines.spark.runners import operation_names, validate_spec
from deltaguard.engines.spark.session import job_application, submit_hook
from deltaguard.engines.spec_json import spec_to_json
from deltaguard.engines.specs import WriteContext, WriteSpec

_CONFLICT_RE = re.compile(re.escape(CONFLICT_MARKER) + r" (\w+) ?(.*)")
_EXIT_RE = re.compile(r"Error code is: (\d+)")


def failure_from_submit_error(message: str, table_uri: str) -> Exception | None:
    """Turn a failed submit's message (with spark-submit's output tail) into deltaguard's error, if typed.

    :param message: the hook's exception text.
    :param table_uri: the table, for the error.
    :returns: a :class:`DeltaConflictError` or :class:`SparkSetupError`, else ``None`` (re-raise).
    """
    marker = _CONFLICT_RE.search(message)
    if marker:
        try:
            kind = ConflictKind(marker.group(1))
        except ValueError:
            kind = ConflictKind.UNKNOWN
        return DeltaConflictError(
            kind, marker.group(2).strip() or message, table_uri=table_uri, engine="spark"
        )
    code = _EXIT_RE.search(message)
    if code and int(code.group(1)) == EXIT_SETUP:
        return SparkSetupError(f"the Spark job could not run Delta writes on the cluster:\n{message}")
    if code and int(code.group(1)) == EXIT_BAD_ARGS:
        return InvalidWriteError(f"the Spark job rejected the write:\n{message}")
    named = conflict_kind(RuntimeError(message))
    if named is not None:
        return DeltaConflictError(named, message.splitlines()[0], table_uri=table_uri, engine="spark")
    return None


class SparkSubmitEngine(DeltaEngine):
    """Writes by submitting :mod:`deltaguard.engines.spark.job` with ``SparkSubmitHook``.

    :param conn_id: the ``spark`` connection (master, deploy mode, Databricks extras for the profile).
    :param conf: extra ``--conf`` settings.
    :param packages: ``--packages`` (for example Delta's Maven coordinate).
    :param py_files: ``--py-files`` (a zip of deltaguard if the cluster's Python lacks it).
    :param profile: the engine profile when known better (the cluster's delta-spark version).
    :param storage_options: deltalake storage options for reading table configuration from the log.
    :param hook_kwargs: more ``SparkSubmitHook`` arguments (``executor_memory``, ``deploy_mode``, ...).
    """

    name = "spark"

    def __init__(
        self,
        conn_id: str = "spark_default",
        *,
        conf: Mapping[str, str] | None = None,
        packages: str | None = None,
        py_files: str | None = None,
        profile: EngineProfile | None = None,
        storage_options: Mapping[str, str] | None = None,
        **hook_kwargs: Any,
    ) -> None:
        self._conn_id = conn_id
        self._conf = dict(conf or {})
        self._packages = packages
        self._py_files = py_files
        self._profile = profile
        self._storage_options = dict(storage_options or {})
        self._hook_kwargs = hook_kwargs

    def profile(self) -> EngineProfile:
        if self._profile is not None:
            return self._profile
        from deltaguard.engines.spark.engine import SparkEngine

        # Same rules as the session engine, minus the session: explicit extras, env, delta-spark version.
        return SparkEngine(conn_id=self._conn_id).profile()

    def commit_coordination(self, table_uri: str) -> str:
        """Every spark-submit job is a driver of its own: only log stores that exclude every writer
        (the storage's, or a shared DynamoDB table) let its writes run beside others."""
        databricks = self.profile().name is EngineName.DATABRICKS
        return spark_coordination(
            table_uri, databricks=databricks, conf=lambda key: str(self._conf.get(key, "")), driver=None
        )

    def session_time_zone(self) -> str | None:
        """The zone the job's session reads literals in: the conf's, else the one every job is given."""
        from deltaguard.engines.spark.session import DEFAULT_SESSION_TIME_ZONE, SESSION_TIME_ZONE_CONF

        return str(self._conf.get(SESSION_TIME_ZONE_CONF) or DEFAULT_SESSION_TIME_ZONE)

    def session_ansi(self) -> bool | None:
        """The job's ``spark.sql.ansi.enabled`` when its conf sets it; the cluster's default is not known."""
        from deltaguard.engines.spark.session import ANSI_CONF, parse_ansi

        return parse_ansi(str(self._conf.get(ANSI_CONF) or ""))

    def table_config(self, table_uri: str) -> TableConfig:
        """From the Delta log (path-based tables only: no session here to ask a catalog), with the evaluators
        of :func:`deltaguard.engines.judged.attach_oracle`."""
        from deltaguard.engines.judged import read_judged_config

        return read_judged_config(table_uri, self._storage_options or None, engine=self)

    def validate(self, table_uri: str, spec: WriteSpec, config: TableConfig) -> None:
        validate_spec(spec, config)
        spec_to_json(spec)  # sources must be URIs: fail before the lease, not on the cluster

    def build_hook(
        self, table_uri: str, spec: WriteSpec, context: WriteContext, result_file: str | None
    ) -> Any:
        """The hook that would run this write (inspectable: :func:`spark_session.submit_command`)."""
        return submit_hook(
            build_args(table_uri, spec, context, result_file),
            conn_id=self._conn_id,
            conf=self._conf,
            packages=self._packages,
            py_files=self._py_files,
            name=f"deltaguard-{type(spec).__name__}",
            **self._hook_kwargs,
        )

    def write(self, table_uri: str, spec: WriteSpec, context: WriteContext) -> WriteResult:
        validate_spec(spec, None)
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="deltaguard-submit-") as tmp:
            result_file = str(Path(tmp) / "result.json")
            hook = self.build_hook(table_uri, spec, context, result_file)
            try:
                hook.submit(job_application())
            except Exception as exc:
                typed = failure_from_submit_error(str(exc), table_uri)
                if typed is not None:
                    raise typed from exc
                raise
            path = Path(result_file)
            if path.exists():
                data = json.loads(path.read_text(encoding="utf-8"))
                return WriteResult(
                    table_uri=table_uri,
                    version=data.get("version"),
                    operation=str(data.get("operation", "")),
                    metrics=data.get("metrics") or {},
                    elapsed_s=time.monotonic() - started,
                    duplicate=bool(data.get("duplicate", False)),
                )
        # Cluster deploy mode: the driver wrote its result elsewhere; report the table's version now.
        version = None
        try:
            version = self.table_config(table_uri).version
        except Exception:  # a catalog name or a location deltalake cannot read: version unknown
            version = None
        return WriteResult(
            table_uri, version, next(iter(operation_names(spec)), ""), {}, time.monotonic() - started
        )
