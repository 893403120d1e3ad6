"""A cluster policy routing every deltaguard write task to its table's pool.

Use it from ``airflow_local_settings.py`` (opt-in: the pools must exist first)::

    from deltaguard.pools.policy import task_policy

(``dag_policy``, also importable from here, gives write tasks a priority from their table's serial work,
:mod:`deltaguard.pools.priority`; it is on in every install through the provider's ``airflow.policy`` entry
point, :mod:`deltaguard.pools.entry_point`, so it needs no import.)

Each deltaguard write task goes to its table's pool (unless its author chose a pool), and exclusive work
takes *all* of that pool's slots: metadata changes (table properties, schema, create/replace, overwrite)
and every write on a table marked ``identity_columns`` in the pools file. Run ``deltaguard pools sync``
first so the pools exist; the pool sizes come from the same pools file (``[deltaguard] pools_file``).

Tasks whose table is templated cannot be routed at parse time and are left alone (the lease manager still
orders them). The policy reads no metadata database and no Delta log.
"""

from __future__ import annotations

import os
from typing import Any

from deltaguard.core.operations import METADATA_CHANGES, Operation, OperationKind
from deltaguard.pools import PoolsConfig, load_pools_config, pool_name, task_table_key
from deltaguard.pools.priority import dag_policy

__all__ = ["dag_policy", "task_policy"]

DEFAULT_POOL = "default_pool"

_cache: dict[str, tuple[float, PoolsConfig]] = {}


def _pools_config() -> PoolsConfig:
    from deltaguard import config

    path = config.pools_file()
    if not path:
        return PoolsConfig()
    mtime = os.stat(path).st_mtime
    cached = _cache.get(path)
    if cached is None or cached[0] != mtime:  # re-read when the file changes, not on every task
        cached = (mtime, load_pools_config(path))
        _cache[path] = cached
    return cached[1]


def operation_kind_hint(task: Any) -> OperationKind | None:
    """The operation a deltaguard task will run, as far as it is known without reading the table."""
    from deltaguard.operators.dml import (
        DeltaDeleteOperator,
        DeltaInsertOperator,
        DeltaMergeOperator,
        DeltaReplaceWhereOperator,
        DeltaUpdateOperator,
    )
    from deltaguard.operators.maintenance import DeltaAlterTableOperator, DeltaOptimizeOperator
    from deltaguard.operators.sql import DeltaSqlOperator

    if isinstance(task, DeltaAlterTableOperator):
        return OperationKind.SET_TBLPROPERTIES if task.set_properties else OperationKind.ADD_COLUMNS
    if isinstance(task, DeltaInsertOperator):
        return OperationKind.OVERWRITE if task.mode == "overwrite" else OperationKind.INSERT
    if isinstance(task, DeltaSqlOperator):
        classified = _classified_sql(task)
        return classified.kind if classified is not None else None
    simple = {
        DeltaMergeOperator: OperationKind.MERGE,
        DeltaUpdateOperator: OperationKind.UPDATE,
        DeltaDeleteOperator: OperationKind.DELETE,
        DeltaReplaceWhereOperator: OperationKind.REPLACE_WHERE,
        DeltaOptimizeOperator: OperationKind.OPTIMIZE,
    }
    return next((kind for cls, kind in simple.items() if isinstance(task, cls)), None)


def _classified_sql(task: Any) -> Operation | None:
    """A ``DeltaSqlOperator``'s statement as the conflict model classifies it; ``None`` when templated or
    not classifiable here."""
    if "{{" in task.sql or "{%" in task.sql:
        return None
    try:
        from deltaguard.core.sql.classify import classify_sql

        return classify_sql(task.sql).operation
    except (ImportError, ValueError):
        return None


def evolves_schema_hint(task: Any) -> bool:
    """Whether a deltaguard task's write is known at parse time to evolve the table's schema: SQL saying
    ``WITH SCHEMA EVOLUTION`` (ADR 0035). The typed operators never evolve it (their engines pin the
    switches off)."""
    from deltaguard.operators.sql import DeltaSqlOperator

    if not isinstance(task, DeltaSqlOperator):
        return False
    classified = _classified_sql(task)
    return classified is not None and classified.evolves_schema


def is_exclusive(
    kind: OperationKind | None,
    identity_columns: bool = False,
    exclusive_table: bool = False,
    evolves_schema: bool = False,
) -> bool:
    """Whether a write must have its table's pool to itself.

    Metadata changes (a write that evolves the schema among them) and create/replace make every concurrent
    write fail; an overwrite replaces every file; on a table with identity columns no two transactions may
    overlap.
    """
    if identity_columns or exclusive_table or evolves_schema:
        return True
    return kind is not None and (kind in METADATA_CHANGES or kind is OperationKind.OVERWRITE)


def task_policy(task: Any) -> None:
    """Airflow cluster policy hook (called for every task when DAGs are parsed)."""
    from deltaguard.operators.base import DeltaWriteOperator

    if not isinstance(task, DeltaWriteOperator):
        return
    key = task_table_key(task.table, task.delta_conn_id)
    if key is None:
        return
    settings = _pools_config().for_table(key)
    if not task.pool or task.pool == DEFAULT_POOL:
        task.pool = settings.name or pool_name(key)
    if is_exclusive(
        operation_kind_hint(task), settings.identity_columns, settings.exclusive, evolves_schema_hint(task)
    ):
        task.pool_slots = settings.slots
