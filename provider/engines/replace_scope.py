"""Give a REPLACE WHERE spec the ranges its source holds, before any lease is asked for (ADR 0020).

delta-rs decides a REPLACE WHERE's conflicts on the statistics of the files it adds; its new rows satisfy its
predicate (delta-rs checks every row), but on the columns the predicate does not constrain they may lie
anywhere unless the source's own ranges are known. This reads them -- with the engine that writes the source,
in the same way ADR 0019 reads a MERGE source -- and states them in the operation
(:attr:`~deltaguard.core.operations.Operation.inserts`); the engine refuses a source that has left them
at write time. Airflow-free glue, like :mod:`deltaguard.engines.merge_scope`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from deltaguard.core.merge_scope import ScopeLimits, plan_merge_scope
from deltaguard.engines.merge_scope import ranged_columns

if TYPE_CHECKING:
    from deltaguard.core.table_config import TableConfig
    from deltaguard.engines.base import DeltaEngine
    from deltaguard.engines.specs import ReplaceWhereSpec


def scoped_replace_where(
    spec: ReplaceWhereSpec, table_config: TableConfig, engine: DeltaEngine, *, limits: ScopeLimits
) -> tuple[ReplaceWhereSpec, tuple[str, ...]]:
    """``spec`` with the ranges of its source's integer and date columns, and the reasons for it.

    Only when the configuration carries file statistics (the only reader of the ranges is the delta-rs
    profile's statistics rule, and only the delta-rs engine reads statistics): otherwise the source is
    left unread, as before.

    :param spec: the REPLACE WHERE as declared.
    :param table_config: the target's configuration (its file statistics name the columns).
    :param engine: reads the source's columns; an engine that returns ``None`` leaves ``spec`` as it is.
    :param limits: how far the source's values are enumerated (above ``max_range_values`` distinct values a
        column is not bounded).
    """
    if table_config.file_stats is None:
        return spec, ("no file statistics were read: the source's ranges are not needed",)
    ranged = ranged_columns(table_config)
    if not ranged:
        # partitioned or clustered tables are judged on their partitions and clustering (ADR 0019)
        return spec, ("the table is partitioned or clustered, or has no integer or date column",)
    read = engine.read_source_keys(spec.source, sorted(ranged), limits)
    if read is None:
        return spec, (f"the {engine.name} engine does not check a source against a computed scope",)
    spec = dataclasses.replace(spec, source=read.source)
    scope = plan_merge_scope(
        matched={},
        inserted={column: column for column in ranged},
        partition_columns=table_config.partition_columns,
        summaries=read.summaries,
        limits=limits,
        ranged=ranged,
    )
    if not scope.inserted:
        return spec, scope.reasons
    return dataclasses.replace(spec, source_scope=scope), scope.reasons
