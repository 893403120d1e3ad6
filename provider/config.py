"""The ``[deltaguard]`` Airflow configuration section: option descriptions and typed accessors.

Every accessor reads Airflow's configuration when it is called, never at import time, so an environment
variable such as ``AIRFLOW__DELTAGUARD__POLL_INTERVAL=2`` set for one worker or test takes effect without a
re-import. Importing this module does not import Airflow; the same defaults serve as fallbacks when the
provider's configuration has not been registered (e.g. in a bare task-SDK worker).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deltaguard.leases.timing import LeaseTiming

SECTION = "deltaguard"

#: option -> (type, default, description). ``{AIRFLOW_HOME}`` in a default is expanded at call time.
OPTIONS: dict[str, tuple[str, str, str]] = {
    "lease_store_url": (
        "string",
        "sqlite:///{AIRFLOW_HOME}/deltaguard_leases.db",
        "SQLAlchemy URL of the lease store shared by every worker and the triggerer "
        "(SQLite for one machine, PostgreSQL for several). Sensitive: it may hold a password; prefer "
        "``lease_store_conn_id``.",
    ),
    "lease_store_conn_id": (
        "string",
        "",
        "A ``postgres`` Airflow connection (host, port, login, password, schema = database; libpq extras "
        "such as ``sslmode``) to use as the lease store instead of ``lease_store_url``; its password comes "
        "from the secrets backend and is never written into trigger arguments.",
    ),
    "default_engine": (
        "string",
        "delta-rs",
        "Engine deltaguard operators write with unless the task names one: ``delta-rs`` or ``spark``.",
    ),
    "lease_ttl": (
        "float",
        "120",
        "Seconds a lease stays valid without a heartbeat; a crashed worker's lease expires after this.",
    ),
    "heartbeat_interval": (
        "float",
        "20",
        "Seconds between lease heartbeats while a write runs (keep well below ``lease_ttl``).",
    ),
    "store_timeout": (
        "float",
        "10",
        "Seconds any one lease-store call may take (connect, lock wait, statement; a frozen store is "
        "abandoned after this). See ADR 0018 for how it relates to ``lease_ttl``.",
    ),
    "commit_margin": (
        "float",
        "15",
        "Seconds of lease that must remain when a write is fenced just before its commit.",
    ),
    "poll_interval": (
        "float",
        "5",
        "Seconds between lease checks while a task (or its trigger) waits for admission.",
    ),
    "lease_store_listen": (
        "boolean",
        "True",
        "Whether the triggerer listens for lease releases so waiting writes wake when a blocker leaves, "
        "polling only every 6 poll intervals as a safety net (ADR 0025): on a PostgreSQL store by "
        "LISTEN/NOTIFY on one extra connection per store, on an SQLite store by one read of the decision "
        "log every 0.5 s per triggerer. Set ``False`` behind a connection pooler in transaction mode "
        "(PgBouncer), which does not deliver notifications: triggers then poll every ``poll_interval``.",
    ),
    "file_stats": (
        "boolean",
        "True",
        "Whether delta-rs write operators read the table's per-file statistics before asking for a lease and "
        "write from exactly that snapshot, so per-date rewrites of an unpartitioned table clustered by date "
        "may run side by side (ADR 0020). Statistics decide only against running writes that read a snapshot "
        "no newer than theirs. An operator's ``file_stats`` argument overrides this.",
    ),
    "pools_file": (
        "string",
        "",
        "Optional JSON/TOML file with per-table pool sizes and exclusivity, read by ``deltaguard pools sync`` "
        "and the cluster policy (see :mod:`deltaguard.pools`). Empty: every table gets the default size.",
    ),
    "decision_log_retention": (
        "float",
        "30",
        "Days the lease store keeps admission decisions and ended requests; a task asking for a lease prunes "
        "older ones (at most once a minute per process).",
    ),
    "spark_conn_id": (
        "string",
        "",
        "``spark`` connection (apache-spark provider) the Spark engine builds its worker session from "
        "(master, extra ``spark-conf``, Databricks extras), unless the task or its ``delta`` connection "
        "names one. Empty: the active SparkSession, else ``local[2]``.",
    ),
    "spark_connect_conn_id": (
        "string",
        "",
        "``spark_connect`` connection the Spark engine reaches Spark Connect through, unless the task or "
        "its ``delta`` connection names a Spark connection. Empty: no Spark Connect.",
    ),
    "priority_policy": (
        "boolean",
        "True",
        "Whether the ``dag_policy`` cluster policy the provider registers (``airflow.policy`` entry point) "
        "gives deltaguard write tasks a ``priority_weight`` from their table's longest conflict chain, so "
        "worker slots go to it first (ADR 0028). Read each time a DAG is parsed. ``False``: task priorities "
        "stay as their authors set them (Airflow's defaults).",
    ),
}


#: options whose value may hold a credential: Airflow hides them and accepts ``_CMD`` / ``_SECRET`` forms
SENSITIVE = frozenset({"lease_store_url"})


def provider_config_description() -> dict[str, Any]:
    """The ``config`` entry of :func:`deltaguard.get_provider_info.get_provider_info`."""
    return {
        SECTION: {
            "description": "Conflict-aware orchestration of Delta Lake writes (deltaguard).",
            "options": {
                name: {
                    "description": description,
                    "version_added": "0.1.0",
                    "type": kind,
                    "example": None,
                    "default": default,
                    "sensitive": name in SENSITIVE,
                }
                for name, (kind, default, description) in OPTIONS.items()
            },
        }
    }


def _airflow_home() -> str:
    return os.environ.get("AIRFLOW_HOME") or str(Path("~/airflow").expanduser())


def _raw(option: str) -> str:
    from airflow.sdk import conf

    default = OPTIONS[option][1]
    value = conf.get(SECTION, option, fallback=default)
    text = default if value is None or str(value).strip() == "" else str(value).strip()
    return text.replace("{AIRFLOW_HOME}", _airflow_home())


def _positive_float(option: str) -> float:
    text = _raw(option)
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"[{SECTION}] {option} must be a number of seconds, got {text!r}") from None
    if value <= 0:
        raise ValueError(f"[{SECTION}] {option} must be positive, got {value}")
    return value


def lease_store_url() -> str:
    """The lease store URL: from ``lease_store_conn_id`` when set, else ``lease_store_url`` (default: a
    SQLite file under ``$AIRFLOW_HOME``). It may hold a password: never log it or serialize it."""
    conn_id = _raw("lease_store_conn_id")
    if conn_id:
        return store_url_from_connection(conn_id)
    return _raw("lease_store_url")


def store_url_from_connection(conn_id: str) -> str:
    """The lease store URL of Airflow connection ``conn_id`` (read through the secrets backends)."""
    from airflow.sdk import BaseHook

    from deltaguard.leases.store_location import url_from_connection

    return url_from_connection(BaseHook.get_connection(conn_id))


def resolve_store_reference(reference: str) -> str:
    """The URL to open for a trigger's store reference, in the process that runs the trigger.

    The configured store (``[deltaguard] lease_store_conn_id`` or ``lease_store_url``) is used with its
    password when the reference names it; any other reference is opened as it is, so a store outside the
    configuration must authenticate without a password in its URL (libpq's ``PGPASSFILE``, certificates).

    :param reference: a :func:`store_reference`.
    """
    from deltaguard.leases.store_location import store_reference

    configured = lease_store_url()
    return configured if store_reference(configured) == reference else reference


def default_engine() -> str:
    """The engine name used when a task does not choose one."""
    return _raw("default_engine")


def lease_ttl() -> float:
    """Seconds a lease lives without a heartbeat."""
    return _positive_float("lease_ttl")


def heartbeat_interval() -> float:
    """Seconds between heartbeats; never more than a third of the TTL, so one lost beat is survivable."""
    return min(_positive_float("heartbeat_interval"), lease_ttl() / 3)


def lease_timing() -> LeaseTiming:
    """TTL, heartbeat interval, store timeout and commit margin, validated together (ADR 0018).

    :raises deltaguard.leases.timing.LeaseTimingError: for a combination that a short store stall could
        make lose a lease.
    """
    from deltaguard.leases.timing import LeaseTiming

    ttl = lease_ttl()
    # An option left unset scales with the TTL (the defaults' proportions: 120 s, 20, 10, 15), so a
    # deployment that only shortens the TTL stays valid; an option set explicitly is taken as given.
    return LeaseTiming(
        ttl_s=ttl,
        heartbeat_s=_positive_float("heartbeat_interval") if _is_set("heartbeat_interval") else ttl / 6,
        store_timeout_s=_positive_float("store_timeout") if _is_set("store_timeout") else ttl / 12,
        commit_margin_s=_positive_float("commit_margin") if _is_set("commit_margin") else ttl / 8,
    )


def _is_set(option: str) -> bool:
    """Whether ``option`` was set explicitly (environment or ``airflow.cfg``), not left to its default."""
    import configparser

    from airflow.sdk import conf

    # The base ConfigParser only knows options read from a file; registered defaults are kept aside.
    return (
        f"AIRFLOW__{SECTION.upper()}__{option.upper()}" in os.environ
        or configparser.ConfigParser.has_option(conf, SECTION, option)
    )


def poll_interval() -> float:
    """Seconds between admission checks while waiting."""
    return _positive_float("poll_interval")


def lease_store_listen() -> bool:
    """Whether the triggerer listens for lease releases on a PostgreSQL store."""
    value = _raw("lease_store_listen").strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"[{SECTION}] lease_store_listen must be true or false, got {value!r}")


def file_stats() -> bool:
    """Whether delta-rs write operators use file statistics in their lease requests (ADR 0020)."""
    return _boolean("file_stats")


def _boolean(option: str) -> bool:
    value = _raw(option).strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"[{SECTION}] {option} must be true or false, got {value!r}")


def priority_policy() -> bool:
    """Whether the registered ``dag_policy`` sets write priorities (ADR 0028)."""
    return _boolean("priority_policy")


def pools_file() -> str | None:
    """The pools file path, or ``None``."""
    return _raw("pools_file") or None


def spark_conn_id() -> str | None:
    """The default ``spark`` connection id for the Spark engine, or ``None``."""
    return _raw("spark_conn_id") or None


def spark_connect_conn_id() -> str | None:
    """The default ``spark_connect`` connection id for the Spark engine, or ``None``."""
    return _raw("spark_connect_conn_id") or None


def decision_log_retention_days() -> float:
    """Days admission decisions are kept."""
    return _positive_float("decision_log_retention")


def default_deferrable() -> bool:
    """Whether deltaguard tasks wait deferrably when the task does not say.

    deltaguard defers by default (a waiting writer should not hold a worker slot), but an operator who
    set Airflow's ``[operators] default_deferrable`` explicitly (``airflow.cfg`` or
    ``AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE``) is obeyed, whichever way they set it.
    """
    import configparser

    from airflow.sdk import conf

    # The base ConfigParser only knows options read from a file; Airflow keeps built-in defaults aside.
    explicitly_set = (
        "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE" in os.environ
        or configparser.ConfigParser.has_option(conf, "operators", "default_deferrable")
    )
    if not explicitly_set:
        return True
    return bool(conf.getboolean("operators", "default_deferrable", fallback=True))


@dataclass(frozen=True)
class LeaseSettings:
    """The ``[deltaguard]`` options one task try (or trigger) waits and writes with, read once and checked.

    :param store_url: the lease store URL.
    :param ttl_s: seconds a lease lives without a heartbeat.
    :param heartbeat_s: seconds between heartbeats (at most a third of ``ttl_s``).
    :param poll_s: seconds between admission checks while waiting.
    :param deferrable: whether to wait in the triggerer rather than in the worker.
    :param retention_s: how long the store keeps decision-log entries and closed requests.
    :param timing: TTL, heartbeat interval, store timeout and commit margin checked together (ADR 0018);
        ``None``: derived from ``ttl_s`` and ``heartbeat_s`` with the default proportions.
    """

    store_url: str
    ttl_s: float
    heartbeat_s: float
    poll_s: float
    deferrable: bool
    retention_s: float
    timing: LeaseTiming | None = None

    def __post_init__(self) -> None:
        if not self.store_url:
            raise ValueError(f"[{SECTION}] lease_store_url is empty")
        for name in ("ttl_s", "heartbeat_s", "poll_s", "retention_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.heartbeat_s > self.ttl_s / 3:
            raise ValueError(f"heartbeat_s={self.heartbeat_s} must be at most a third of ttl_s={self.ttl_s}")
        if self.timing is None:
            from deltaguard.leases.timing import LeaseTiming

            timing = LeaseTiming(self.ttl_s, self.heartbeat_s, self.ttl_s / 12, self.ttl_s / 8)
            object.__setattr__(self, "timing", timing)

    @property
    def lease_timing(self) -> LeaseTiming:
        """:attr:`timing`, always set after construction."""
        assert self.timing is not None
        return self.timing


def lease_settings(store_url: str | None = None, deferrable: bool | None = None) -> LeaseSettings:
    """Read the lease options now (never at import time), with a task's own overrides.

    :param store_url: the task's ``lease_store_url``, overriding ``[deltaguard] lease_store_url``.
    :param deferrable: the task's ``deferrable``, overriding :func:`default_deferrable`.
    :raises ValueError: an option is not a positive number, or the store URL is empty.
    """
    timing = lease_timing()
    return LeaseSettings(
        store_url=store_url or lease_store_url(),
        ttl_s=timing.ttl_s,
        heartbeat_s=timing.heartbeat_s,
        poll_s=poll_interval(),
        deferrable=default_deferrable() if deferrable is None else bool(deferrable),
        retention_s=decision_log_retention_days() * 86400.0,
        timing=timing,
    )
