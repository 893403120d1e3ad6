"""One Airflow pool per Delta table: names, sizes, the pools file and syncing them through the Airflow CLI.

Pools are the coarse, visible layer: a table's pool caps how many of its writes run at once and lets a
metadata change take every slot (see :mod:`deltaguard.pools.policy`); the lease manager decides the rest pairwise.

The pools file (JSON, or TOML by extension) is optional::

    {"default_slots": 8,
     "tables": {"/data/sales": {"slots": 4, "exclusive": false, "identity_columns": true}}}

``tables`` keys are table URIs (or ``conn_id/relative/name`` for tables given relative to a connection).
``identity_columns: true`` marks a table on which every write is exclusive (Delta allows no concurrent
transactions on tables with identity columns). Nothing here touches Airflow's metadata database.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltaguard.writes.table_uri import table_key

DEFAULT_SLOTS = 8
POOL_PREFIX = "delta_"
_MAX_POOL_NAME = 200
#: Airflow keeps a pool's slots in a 32-bit integer column
_MAX_SLOTS = 2**31 - 1
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_POOL_NAME = re.compile(rf"[A-Za-z0-9_.-]{{1,{_MAX_POOL_NAME}}}")


@dataclass(frozen=True)
class TablePool:
    """Pool settings for one table.

    :param slots: pool size (how many of the table's writes may run at once at most).
    :param exclusive: every write on the table takes all slots.
    :param identity_columns: the table has identity columns (implies exclusive).
    :param name: an explicit pool name (default: derived from the table key).
    """

    slots: int = DEFAULT_SLOTS
    exclusive: bool = False
    identity_columns: bool = False
    name: str | None = None


@dataclass(frozen=True)
class PoolsConfig:
    default_slots: int = DEFAULT_SLOTS
    tables: Mapping[str, TablePool] = field(default_factory=dict)

    def for_table(self, key: str) -> TablePool:
        return self.tables.get(key) or TablePool(slots=self.default_slots)


@dataclass(frozen=True)
class PoolSpec:
    name: str
    slots: int
    description: str


def task_table_key(table: str, conn_id: str | None) -> str | None:
    """The table key a task's pool is derived from, or ``None`` when the table is templated.

    An absolute URI or path is the table itself; a relative name is qualified by its connection id (the
    policy cannot resolve connections while DAGs are parsed).
    """
    text = (table or "").strip()
    if not text or "{{" in text or "{%" in text:
        return None
    if "://" in text or text.startswith("/"):
        return str(table_key(text))
    return f"{conn_id or 'delta_default'}/{text.strip('/')}"


def pool_name(key: str) -> str:
    """``delta_<table key made safe>``; long keys are shortened with a hash so names stay unique."""
    safe = _UNSAFE.sub("_", key).strip("_") or "table"
    name = POOL_PREFIX + safe
    if len(name) > _MAX_POOL_NAME:
        digest = hashlib.sha1(key.encode()).hexdigest()[:12]
        name = f"{name[: _MAX_POOL_NAME - 13]}_{digest}"
    return name


def _check_slots(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_SLOTS:
        raise ValueError(f"{where}: slots must be a positive integer (at most {_MAX_SLOTS}), got {value!r}")
    return value


def parse_pools_config(data: Any) -> PoolsConfig:
    """Validate a decoded pools file.

    :raises ValueError: naming what is wrong, for anything but a mapping of the documented shape.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"the pools file must hold an object (a mapping), got {type(data).__name__}")
    default = _check_slots(data.get("default_slots", DEFAULT_SLOTS), "default_slots")
    tables: dict[str, TablePool] = {}
    raw_tables = data.get("tables", {})
    if not isinstance(raw_tables, Mapping):
        raise ValueError("'tables' must map table URIs to settings")
    for raw_key, settings in raw_tables.items():
        if not isinstance(raw_key, str) or not raw_key.strip():
            raise ValueError(f"tables: a table URI must be a non-empty string, got {raw_key!r}")
        settings = settings or {}
        if not isinstance(settings, Mapping):
            raise ValueError(f"tables[{raw_key!r}] must be an object")
        unknown = set(settings) - {"slots", "exclusive", "identity_columns", "pool"}
        if unknown:
            raise ValueError(f"tables[{raw_key!r}]: unknown settings {sorted(map(str, unknown))}")
        name = settings.get("pool")
        if name is not None and (not isinstance(name, str) or not _POOL_NAME.fullmatch(name)):
            raise ValueError(
                f"tables[{raw_key!r}]: pool must be a name of letters, digits, '_', '.' or '-' "
                f"(at most {_MAX_POOL_NAME}), got {name!r}"
            )
        try:
            key = task_table_key(raw_key, None) if "://" in raw_key or raw_key.startswith("/") else raw_key
        except ValueError as exc:
            raise ValueError(f"tables[{raw_key!r}]: {exc}") from None
        tables[key or raw_key] = TablePool(
            slots=_check_slots(settings.get("slots", default), f"tables[{raw_key!r}]"),
            exclusive=bool(settings.get("exclusive", False)),
            identity_columns=bool(settings.get("identity_columns", False)),
            name=name,
        )
    return PoolsConfig(default_slots=default, tables=tables)


def load_pools_config(path: str | Path | None) -> PoolsConfig:
    """Read the pools file (``.toml`` or JSON); ``None``/empty path gives the defaults.

    :raises ValueError: one line naming the file and what is wrong with it (unreadable, not UTF-8, not
        JSON/TOML, or not of the documented shape).
    """
    if not path:
        return PoolsConfig()
    file = Path(path)
    kind = "TOML" if file.suffix == ".toml" else "JSON"
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{file}: cannot read the pools file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{file}: the pools file is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    try:
        data = tomllib.loads(text) if kind == "TOML" else json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        raise ValueError(f"{file}: the pools file is not valid {kind}: {str(exc).splitlines()[0]}") from None
    try:
        return parse_pools_config(data)
    except ValueError as exc:
        raise ValueError(f"{file}: {exc}") from None


def desired_pools(config: PoolsConfig, scanned_keys: Iterable[str] = ()) -> list[PoolSpec]:
    """One pool per table named in the pools file or found by a DAG scan, sorted by name."""
    specs: dict[str, PoolSpec] = {}
    for key in [*config.tables, *scanned_keys]:
        settings = config.for_table(key)
        name = settings.name or pool_name(key)
        specs[name] = PoolSpec(name, settings.slots, f"deltaguard: writes to {key}")
    return [specs[n] for n in sorted(specs)]


def scan_dag_tables(dags_folder: str | Path) -> set[str]:
    """Table keys of every deltaguard write task in the DAGs of ``dags_folder`` (parsed with a DagBag).

    :raises RuntimeError: if some DAG files fail to import (their tables would be missed silently).
    """
    from airflow.dag_processing.dagbag import DagBag

    from deltaguard.operators.base import DeltaWriteOperator

    bag = DagBag(dag_folder=str(dags_folder))
    if bag.import_errors:
        files = ", ".join(sorted(bag.import_errors))
        raise RuntimeError(f"cannot scan DAGs: import errors in {files}")
    keys = set()
    for dag in bag.dags.values():
        for task in dag.tasks:
            if isinstance(task, DeltaWriteOperator):
                key = task_table_key(task.table, task.delta_conn_id)
                if key is not None:
                    keys.add(key)
    return keys


def pools_import_document(specs: Iterable[PoolSpec]) -> dict[str, dict[str, Any]]:
    """The JSON document ``airflow pools import`` reads. Deferred tasks do not occupy slots: a task
    waiting in the triggerer for its lease must not block the pool."""
    return {
        s.name: {"slots": s.slots, "description": s.description, "include_deferred": False} for s in specs
    }


def sync_pools(specs: list[PoolSpec], airflow_cmd: list[str] | None = None, timeout_s: float = 300) -> str:
    """Create or update the pools with one ``airflow pools import`` call (upsert); return its output.

    :param specs: the pools.
    :param airflow_cmd: the Airflow CLI (default: the ``airflow`` next to this Python).
    :raises RuntimeError: when the CLI fails (its output is included).
    """
    if not specs:
        return "no pools to sync"
    command = airflow_cmd or [str(Path(sys.executable).with_name("airflow"))]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(pools_import_document(specs), handle)
        path = handle.name
    try:
        done = subprocess.run(
            [*command, "pools", "import", path], capture_output=True, text=True, timeout=timeout_s
        )
    finally:
        Path(path).unlink(missing_ok=True)
    if done.returncode != 0:
        raise RuntimeError(f"'airflow pools import' failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout
