"""Give a MERGE or REPLACE WHERE spec the scope its source implies, before any lease is asked for.

Airflow-free glue between the operator, the engine (which reads the source's key columns) and the pure
decision in :mod:`deltaguard.core.merge_scope`.

* :func:`scoped_merge` (ADR 0019): a MERGE's scope from the values its source holds in its key columns.
* :func:`scoped_replace_where` (ADR 0020): delta-rs decides a REPLACE WHERE's conflicts on the statistics of
  the files it adds; its new rows satisfy its predicate (delta-rs checks every row), but on the columns the
  predicate does not constrain they may lie anywhere unless the source's own ranges are known. This reads them
  -- with the engine that writes the source, in the same way ADR 0019 reads a MERGE source -- and states them
  in the operation (:attr:`~deltaguard.core.operations.Operation.inserts`); the engine refuses a source that
  has left them at write time."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from deltaguard.core.file_stats import DATE_TYPES, INTEGER_TYPES
from deltaguard.core.merge_scope import (
    ScopeLimits,
    equated_columns,
    inserted_columns,
    plan_merge_scope,
    values_outside,
)
from deltaguard.core.sql.literals import merge_condition_with_partitions
from deltaguard.core.sql.predicates import merge_target_predicate
from deltaguard.engines.errors import InvalidWriteError

if TYPE_CHECKING:
    from deltaguard.core.table_config import TableConfig
    from deltaguard.engines.base import DeltaEngine
    from deltaguard.engines.specs import MergeSpec, ReplaceWhereSpec


#: ``on_source_outside_target`` choices
FAIL = "fail"
WIDEN = "widen"
OUTSIDE_CHOICES = (FAIL, WIDEN)


def scoped_merge(
    spec: MergeSpec,
    table_config: TableConfig,
    engine: DeltaEngine,
    *,
    limits: ScopeLimits,
    explicit: bool = True,
    on_outside: str = FAIL,
    produced: bool = False,
) -> tuple[MergeSpec, tuple[str, ...]]:
    """``spec`` with the scope its source implies, and the reasons for it.

    :param spec: the MERGE as declared.
    :param table_config: the target's configuration (partition and clustering columns).
    :param engine: reads the source's key columns; an engine that returns ``None`` leaves ``spec`` as it is.
    :param limits: how far the source's values are enumerated.
    :param explicit: add the scope's conjunct to the executed ON condition (and so to the claim).
    :param on_outside: ``"fail"``: refuse a source whose inserted rows would land outside the declared target
        predicate; ``"widen"``: claim the partitions they land in.
    :param produced: the source is produced by a callable, whose work would move before the lease: it is
        read only when its data can narrow the claim (a key column not pinned by ``target_partition_values``)
        or ``on_outside`` is ``"widen"``; otherwise it runs under the lease as before, where the engine
        checks copied rows against the declared partitions (ADR 0012).
    :raises InvalidWriteError: with ``"fail"``, naming the offending values (before any lease, nothing written).
    """
    if on_outside not in OUTSIDE_CHOICES:
        raise InvalidWriteError(
            f"on_source_outside_target must be one of {OUTSIDE_CHOICES}, got {on_outside!r}"
        )
    keys = tuple(dict.fromkeys((*table_config.partition_columns, *table_config.clustering_columns)))
    ranged = {} if keys else ranged_columns(table_config)
    if not keys and not ranged:
        return spec, ("the table has no partition or clustering columns: nothing to narrow",)
    # the columns read from the source; the declared-target check below stays on the partition/clustering keys
    scoped = keys or tuple(ranged)
    matched = equated_columns(spec.condition, scoped, spec.target_alias, spec.source_alias)
    inserted = inserted_columns(
        scoped,
        insert_all=spec.not_matched_insert_all,
        insert_map=spec.not_matched_insert,
        source_alias=spec.source_alias,
    )
    if spec.matched_update_all:
        # UPDATE SET * copies every source column: a key column is known only if inserts copy the same one
        same = {c: c for c in scoped}
        inserted = same if inserted is None else {c: s for c, s in inserted.items() if s.lower() == c.lower()}
    wanted = {*matched.values(), *(inserted or {}).values()}
    if not wanted:
        return spec, ("no key column is equated to or copied from the source",)
    pinned = {c.lower() for c in spec.target_partition_values}
    if produced and on_outside == FAIL and {c.lower() for c in (*matched, *(inserted or {}))} <= pinned:
        return spec, (
            "target_partition_values pins every key column: the source callable runs under the lease, where "
            "the engine checks its rows against them",
        )
    read = engine.read_source_keys(spec.source, sorted(wanted), limits)
    if read is None:
        return spec, (f"the {engine.name} engine does not check a source against a computed scope",)
    # a callable's produced data is written as read, so a write granted at once does not produce it again
    spec = dataclasses.replace(spec, source=read.source)
    scope = plan_merge_scope(
        matched=matched,
        inserted=inserted,
        partition_columns=table_config.partition_columns,
        summaries=read.summaries,
        limits=limits,
        ranged=ranged,
    )
    reasons = list(scope.reasons)
    inserts = spec.not_matched_insert is not None or spec.not_matched_insert_all
    if inserts:
        declared = merge_target_predicate(
            merge_condition_with_partitions(spec.condition, spec.target_partition_values, spec.target_alias),
            spec.target_alias,
        )
        outside = values_outside(scope.inserted, declared, keys)
        if outside and on_outside == FAIL:
            shown = "; ".join(f"{c}: {_values(v)}" for c, v in outside.items())
            raise InvalidWriteError(
                f"the MERGE source holds rows outside its declared target ({declared.sql}) that WHEN NOT "
                f"MATCHED THEN INSERT would add to partitions nobody declared: {shown}. Filter the source, widen "
                "the declared target, or pass on_source_outside_target='widen'"
            )
        if outside:
            reasons.append(f"widened: inserted rows also land outside {declared.sql}")
        elif on_outside == WIDEN and not scope.inserted and spec.target_partition_values:
            # the inserted rows could not be enumerated: without the engine's declared-partition check they
            # may land anywhere, which the empty scope claims
            return dataclasses.replace(spec, source_scope=scope, explicit_scope=explicit), (
                *reasons,
                "widened: inserted rows may land anywhere",
            )
    if not (scope.matched or scope.inserted):
        return spec, tuple(reasons)
    return dataclasses.replace(spec, source_scope=scope, explicit_scope=explicit), tuple(reasons)


def ranged_columns(table_config: TableConfig) -> dict[str, str]:
    """Integer and date columns of a table without partition or clustering columns whose file statistics
    were read (column -> Delta type): the delta-rs profile bounds a MERGE by its source's range there
    (ADR 0020), so the scope covers them as ``BETWEEN min AND max``."""
    stats = table_config.file_stats
    if stats is None or table_config.partition_columns or table_config.clustering_columns:
        return {}
    return {c: t for c, t in stats.column_types if t in INTEGER_TYPES | DATE_TYPES}


def _values(values: tuple[object, ...]) -> str:
    shown = ", ".join("NULL" if v is None else repr(v) for v in values[:10])
    return shown + (f" and {len(values) - 10} more" if len(values) > 10 else "")


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
