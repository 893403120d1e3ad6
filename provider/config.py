"""The ``[deltaguard]`` Airflow configuration section: option descriptions and typed accessors.

:data:`OPTIONS` is the table of options (type, default, description); one reader, :func:`_read`, turns a row
into a typed value, and the accessors and :func:`lease_settings` (what one task try waits and writes with)
go through it. Every accessor reads Airflow's configuration when it is called, never at import time, so an
environment variable such as ``AIRFLOW__DELTAGUARD__POLL_INTERVAL=2`` set for one worker or test takes effect
without a re-import. Importing this module does not import Airflow; the same defaults serve as fallbacks when
the provider's configuration has not been registered (e.g. in a bare task-SDK worker).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from deltaguard.leases.keeper import LeaseTiming

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
    # The three options below default to empty (unset) so that they follow ``lease_ttl``: Airflow writes
    # every default into the airflow.cfg it generates, and a literal default there would look like a choice.
    "heartbeat_interval": (
        "float",
        "",
        "Seconds between lease heartbeats while a write runs (at most a third of ``lease_ttl``). Empty: "
        "``lease_ttl / 6`` (20 with the default TTL).",
    ),
    "store_timeout": (
        "float",
        "",
        "Seconds any one lease-store call may take (connect, lock wait, statement; a frozen store is "
        "abandoned after this). Empty: ``lease_ttl / 12`` (10 with the default TTL). See ADR 0018 for how "
        "it relates to ``lease_ttl``.",
    ),
    "commit_margin": (
        "float",
        "",
        "Seconds of lease that must remain when a write is fenced just before its commit. Empty: "
        "``lease_ttl / 8`` (15 with the default TTL).",
    ),
    "poll_interval": (
        "float",
        "5",
        "Seconds between lease checks while a task (or its trigger) waits for admission. A trigger's first "
        "check, and any event of a deltaguard trigger, comes no sooner than ``[workers] "
        "min_heartbeat_interval`` + 3 s after it starts, so that Airflow has heard of the deferring try's "
        "exit (ADR 0039).",
    ),
    "worker_slots": (
        "string",
        "",
        "Worker slots the deferrable deltaguard writes run in: a waiting write is granted only while fewer "
        "leases than that are held, so a granted write never waits for a worker while holding its tables "
        "(the slot gate, ADR 0028). Empty: ``[core] parallelism``; set it to the pool's size when the "
        "writes run in a smaller pool. ``0``: no gate.",
    ),
    "phase_wait": (
        "string",
        "5",
        "Seconds a write waits, before its first lease question, for the conflicting writes the priority "
        "policy runs before it on its table (earlier phases) to ask first in the same DAG run. Tasks that "
        "Airflow starts together ask within seconds of each other in no useful order, and on a free table "
        "the first question is granted: without this wait a Z-order OPTIMIZE can take a table ahead of "
        "the MERGEs that could have run side by side (ADR 0040). ``0``: no wait.",
    ),
    "deferrable": (
        "boolean",
        "True",
        "Whether deltaguard tasks that do not say ``deferrable=`` wait for their lease in the triggerer "
        "(freeing their worker slot) rather than in the worker. Airflow's "
        "``AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE`` in the environment overrides this option unless "
        "``AIRFLOW__DELTAGUARD__DEFERRABLE`` is set too; Airflow's ``[operators] default_deferrable`` in "
        "airflow.cfg is not read (Airflow writes ``false`` there into every file it generates).",
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
    "spark_connect_timeout": (
        "float",
        "600",
        "Seconds a Spark write waits for its Spark Connect server's first answer before it fails, naming the "
        "server, before any lease is asked (a warning is logged every 30 s meanwhile). pyspark alone retries "
        "a refused connection for at least 10 minutes, and waits without end on a port where something else "
        "than a Connect server listens, both without a log line. Lower it where servers are always up; keep "
        "it long where a cluster may start on first use (Databricks).",
    ),
    "priority_policy": (
        "boolean",
        "True",
        "Whether the ``dag_policy`` cluster policy the provider registers (``airflow.policy`` entry point) "
        "gives each deltaguard write task a ``priority_weight`` from the longest conflict chain through it, so "
        "worker slots go to the writes on the longest chains first, and a lease ``priority`` from its phase of "
        "pairwise compatible writes, so writes that ask together queue phase by phase (ADR 0028). Read each "
        "time a DAG is parsed. ``False``: task priorities and lease priorities stay as their authors set them "
        "(the defaults).",
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


def _read(option: str) -> str | float | bool | None:
    """The one reader of the ``[deltaguard]`` options: ``option``'s value now, typed by its row in
    :data:`OPTIONS` (a ``float`` is a positive number of seconds; ``{AIRFLOW_HOME}`` is expanded).

    An option that is absent or empty takes its default; ``None`` when that is empty too (unset: Airflow
    writes ``option =`` into the airflow.cfg it generates for an option whose default is empty).

    :raises ValueError: a value that is not of the option's type, naming the option.
    """
    from airflow.sdk import conf

    kind, default, _ = OPTIONS[option]
    value = conf.get(SECTION, option, fallback=default)
    text = str(value).strip() if value is not None else ""
    text = (text or default).replace(
        "{AIRFLOW_HOME}", os.environ.get("AIRFLOW_HOME") or str(Path("~/airflow").expanduser())
    )
    if not text:
        return None
    if kind == "boolean":
        flag = BOOLEANS.get(text.lower())
        if flag is None:
            raise ValueError(f"[{SECTION}] {option} must be true or false, got {text.lower()!r}")
        return flag
    if kind == "float":
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"[{SECTION}] {option} must be a number of seconds, got {text!r}") from None
        if not number > 0:
            raise ValueError(f"[{SECTION}] {option} must be positive, got {number}")
        return number
    return text


def lease_store_url() -> str:
    """The lease store URL: from ``lease_store_conn_id`` when set, else ``lease_store_url`` (default: a
    SQLite file under ``$AIRFLOW_HOME``). It may hold a password: never log it or serialize it."""
    conn_id = _read("lease_store_conn_id")
    if conn_id:
        return store_url_from_connection(str(conn_id))
    return str(_read("lease_store_url") or "")


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
    return str(_read("default_engine"))


def lease_ttl() -> float:
    """Seconds a lease lives without a heartbeat."""
    return cast(float, _read("lease_ttl"))


def heartbeat_interval() -> float:
    """Seconds between heartbeats; never more than a third of the TTL, so one lost beat is survivable.

    Unset (absent or empty): ``lease_ttl / 6``.
    """
    ttl = lease_ttl()
    given = cast("float | None", _read("heartbeat_interval"))
    return ttl * DERIVED_SHARE["heartbeat_interval"] if given is None else min(given, ttl / 3)


#: what ``heartbeat_interval``, ``store_timeout`` and ``commit_margin`` resolve to when unset: a share of
#: ``lease_ttl`` (the proportions of the defaults 120 s, 20, 10, 15)
DERIVED_SHARE: dict[str, float] = {
    "heartbeat_interval": 1 / 6,
    "store_timeout": 1 / 12,
    "commit_margin": 1 / 8,
}
#: the literal defaults earlier builds shipped for them, which an airflow.cfg generated with one still carries
LEGACY_DEFAULTS: dict[str, float] = {"heartbeat_interval": 20.0, "store_timeout": 10.0, "commit_margin": 15.0}


def lease_timing() -> LeaseTiming:
    """TTL, heartbeat interval, store timeout and commit margin, validated together (ADR 0018).

    An option left unset (absent or empty, as in the airflow.cfg Airflow generates) is the share of the TTL
    in :data:`DERIVED_SHARE`, so a deployment that only sets ``lease_ttl`` stays valid; an option set is
    taken as given. One exception keeps an airflow.cfg generated with an earlier build working: a value in
    the file (not the environment) equal to that build's literal default (:data:`LEGACY_DEFAULTS`) is
    derived instead when, taken as given, it would make every write fail; a warning names it.

    :raises deltaguard.leases.keeper.LeaseTimingError: for a combination that a short store stall could
        make lose a lease.
    """
    from deltaguard.leases.keeper import LeaseTiming, LeaseTimingError

    ttl = cast(float, _read("lease_ttl"))
    given: dict[str, float] = {}
    legacy: list[str] = []
    for option in DERIVED_SHARE:
        value = cast("float | None", _read(option))
        if value is not None:
            given[option] = value
            environment = os.environ.get(f"AIRFLOW__{SECTION.upper()}__{option.upper()}", "")
            if value == LEGACY_DEFAULTS[option] and not environment.strip():
                legacy.append(option)
    # as given; then, if that fails, with the legacy literals derived instead
    tries = [given, {o: v for o, v in given.items() if o not in legacy}] if legacy else [given]
    first: LeaseTimingError | None = None
    for values in tries:
        try:
            timing = LeaseTiming(
                ttl_s=ttl,
                heartbeat_s=values.get("heartbeat_interval", ttl * DERIVED_SHARE["heartbeat_interval"]),
                store_timeout_s=values.get("store_timeout", ttl * DERIVED_SHARE["store_timeout"]),
                commit_margin_s=values.get("commit_margin", ttl * DERIVED_SHARE["commit_margin"]),
            )
        except LeaseTimingError as exc:
            first = first or exc
            continue
        if first is not None:
            _warn_legacy(sorted(legacy), ttl)
        return timing
    assert first is not None
    raise first


_warned_legacy: set[tuple[tuple[str, ...], float]] = set()


def _warn_legacy(options: list[str], ttl: float) -> None:
    import logging

    if (tuple(options), ttl) in _warned_legacy:
        return
    _warned_legacy.add((tuple(options), ttl))
    logging.getLogger(__name__).warning(
        "[%s] %s in airflow.cfg hold(s) the literal default(s) of earlier deltaguard builds, which do not "
        "fit lease_ttl=%g; derived from lease_ttl instead. Empty them (or set values that fit) to silence "
        "this warning.",
        SECTION,
        ", ".join(options),
        ttl,
    )


def worker_slots() -> int | None:
    """The slot gate's size (``[deltaguard] worker_slots``, else ``[core] parallelism``), read at every call;
    ``None`` when it is ``0`` (no gate).

    :raises ValueError: the option is not a whole number of at least 0.
    """
    text = cast("str | None", _read("worker_slots"))
    if text is None:
        from airflow.sdk import conf

        text = str(conf.get("core", "parallelism", fallback="32") or "32").strip()
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"[{SECTION}] worker_slots must be a whole number, got {text!r}") from None
    if value < 0:
        raise ValueError(f"[{SECTION}] worker_slots must be at least 0, got {value}")
    return value or None


def phase_wait_s() -> float:
    """Seconds a write lets the earlier phases of its table ask first (``[deltaguard] phase_wait``).

    :raises ValueError: the option is not a number of seconds of at least 0.
    """
    text = cast("str | None", _read("phase_wait")) or "0"
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"[{SECTION}] phase_wait must be a number of seconds, got {text!r}") from None
    if not 0 <= value < math.inf:
        raise ValueError(f"[{SECTION}] phase_wait must be at least 0, got {value}")
    return value


def first_event_after_s() -> float:
    """Seconds from a deltaguard trigger's start before it may fire its event
    (:func:`deltaguard.leases.waiting.first_event_after_s`), from this process's
    ``[workers] min_heartbeat_interval``, read at every call.

    :raises ValueError: the option is not a number.
    """
    from airflow.sdk import conf

    from deltaguard.leases.waiting import AIRFLOW_EXIT_POLL_S
    from deltaguard.leases.waiting import first_event_after_s as rule

    text = str(conf.get("workers", "min_heartbeat_interval", fallback="") or "").strip()
    try:
        exit_poll_s = float(text) if text else AIRFLOW_EXIT_POLL_S
    except ValueError:
        raise ValueError(f"[workers] min_heartbeat_interval must be a number, got {text!r}") from None
    return rule(exit_poll_s)


def poll_interval() -> float:
    """Seconds between admission checks while waiting."""
    return cast(float, _read("poll_interval"))


def lease_store_listen() -> bool:
    """Whether the triggerer listens for lease releases on a PostgreSQL store."""
    return bool(_read("lease_store_listen"))


def file_stats() -> bool:
    """Whether delta-rs write operators use file statistics in their lease requests (ADR 0020)."""
    return bool(_read("file_stats"))


#: the texts a boolean option may hold, in any case
BOOLEANS = {"true": True, "t": True, "1": True, "yes": True, "y": True, "on": True}
BOOLEANS.update({"false": False, "f": False, "0": False, "no": False, "n": False, "off": False})


def priority_policy() -> bool:
    """Whether the registered ``dag_policy`` sets write priorities (ADR 0028)."""
    return bool(_read("priority_policy"))


def pools_file() -> str | None:
    """The pools file path, or ``None``."""
    return cast("str | None", _read("pools_file"))


def spark_conn_ids() -> tuple[str | None, str | None]:
    """The default ``(spark, spark_connect)`` connection ids for the Spark engine (``None``: unset)."""
    return cast("str | None", _read("spark_conn_id")), cast("str | None", _read("spark_connect_conn_id"))


def spark_connect_timeout() -> float:
    """Seconds a Spark write waits for its Spark Connect server's first answer."""
    return cast(float, _read("spark_connect_timeout"))


def default_deferrable() -> bool:
    """Whether deltaguard tasks wait deferrably when the task does not say.

    In this order: ``AIRFLOW__DELTAGUARD__DEFERRABLE``; ``AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE`` (Airflow's
    switch for every operator, obeyed when set in the environment); ``[deltaguard] deferrable`` in
    airflow.cfg (default ``True``: a waiting writer should not hold a worker slot). Airflow's
    ``[operators] default_deferrable`` in airflow.cfg is not read: Airflow writes its default ``false``
    there into every airflow.cfg it generates, so the file cannot tell a choice from the default.

    :raises ValueError: a value that is not a boolean.
    """
    airflow_wide = os.environ.get("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "").strip()
    if airflow_wide and not os.environ.get(f"AIRFLOW__{SECTION.upper()}__DEFERRABLE", "").strip():
        flag = BOOLEANS.get(airflow_wide.lower())
        if flag is None:
            raise ValueError(
                f"[operators] default_deferrable must be true or false, got {airflow_wide.lower()!r}"
            )
        return flag
    return bool(_read("deferrable"))


@dataclass(frozen=True)
class LeaseSettings:
    """The ``[deltaguard]`` options one task try (or trigger) waits and writes with, read once and checked
    by :func:`lease_settings`.

    :param store_url: the lease store URL.
    :param ttl_s: seconds a lease lives without a heartbeat (``timing.ttl_s``).
    :param heartbeat_s: seconds between heartbeats (``timing.heartbeat_s``).
    :param poll_s: seconds between admission checks while waiting.
    :param first_event_s: seconds from a trigger's start before it may fire (:func:`first_event_after_s`).
    :param phase_wait_s: seconds a fresh try lets the earlier phases of its table ask first
        (:func:`phase_wait_s`).
    :param deferrable: whether to wait in the triggerer rather than in the worker.
    :param retention_s: how long the store keeps decision-log entries and closed requests.
    :param timing: TTL, heartbeat interval, store timeout and commit margin checked together (ADR 0018).
    """

    store_url: str
    ttl_s: float
    heartbeat_s: float
    poll_s: float
    first_event_s: float
    deferrable: bool
    retention_s: float
    timing: LeaseTiming
    phase_wait_s: float = 0.0


def lease_settings(store_url: str | None = None, deferrable: bool | None = None) -> LeaseSettings:
    """Read the lease options now (never at import time), with a task's own overrides.

    :param store_url: the task's ``lease_store_url``, overriding ``[deltaguard] lease_store_url``.
    :param deferrable: the task's ``deferrable``, overriding :func:`default_deferrable`.
    :raises ValueError: an option is not a positive number, or the store URL is empty.
    """
    timing = lease_timing()
    url = store_url or lease_store_url()
    if not url:
        raise ValueError(f"[{SECTION}] lease_store_url is empty")
    return LeaseSettings(
        store_url=url,
        ttl_s=timing.ttl_s,
        heartbeat_s=timing.heartbeat_s,
        poll_s=cast(float, _read("poll_interval")),
        first_event_s=first_event_after_s(),
        deferrable=default_deferrable() if deferrable is None else bool(deferrable),
        retention_s=cast(float, _read("decision_log_retention")) * 86400.0,
        timing=timing,
        phase_wait_s=phase_wait_s(),
    )
