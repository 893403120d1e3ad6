"""One Airflow pool per Delta table: the pools file, pool names and sync (:mod:`.table_pools`), and the
cluster policy that routes each task to its table's pool (:mod:`.policy`)."""

from deltaguard.pools.table_pools import (
    PoolsConfig,
    PoolSpec,
    TablePool,
    desired_pools,
    load_pools_config,
    parse_pools_config,
    pool_name,
    pools_import_document,
    scan_dag_tables,
    sync_pools,
    task_table_key,
)

__all__ = [
    "PoolSpec",
    "PoolsConfig",
    "TablePool",
    "desired_pools",
    "load_pools_config",
    "parse_pools_config",
    "pool_name",
    "pools_import_document",
    "scan_dag_tables",
    "sync_pools",
    "task_table_key",
]
