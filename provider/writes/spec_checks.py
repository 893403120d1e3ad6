"""The bad-input checks that must fail a write task *before* any lease is taken (no Airflow import)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from deltaguard.core.sql.predicates import parse_predicate
from deltaguard.core.table_config import TableConfig
from deltaguard.engines import specs
from deltaguard.exceptions import InvalidWriteError


def _parse_predicate(sql: str, what: str) -> None:
    try:
        parse_predicate(sql)
    except ValueError as exc:  # PredicateError is a ValueError
        raise InvalidWriteError(f"{what} {sql!r} cannot be parsed: {exc}") from None


def _check_partition_columns(values: Mapping[str, Any], config: TableConfig, what: str) -> None:
    if not values or not config.exists:
        return
    known = {c.lower() for c in config.partition_columns}
    unknown = [c for c in values if c.lower() not in known]
    if unknown:
        partitioned = ", ".join(config.partition_columns) or "no column (the table is not partitioned)"
        raise InvalidWriteError(
            f"{what} name {', '.join(map(repr, unknown))}, but {config.uri or 'the table'} is partitioned by "
            f"{partitioned}"
        )


def check_spec(spec: specs.WriteSpec, config: TableConfig) -> None:
    """Reject a write the model or the engine could only get wrong, before any lease is taken.

    :param spec: the write.
    :param config: the target table's configuration.
    :raises InvalidWriteError: MERGE without an ON condition, an unparsable predicate, partition values for a
        column the table is not partitioned by, DML on a table that does not exist, an empty update.
    """
    if isinstance(spec, specs.MergeSpec):
        if not spec.condition or not spec.condition.strip():
            raise InvalidWriteError("MERGE needs an ON condition (the 'condition' argument is empty)")
        _parse_predicate(spec.condition, "MERGE condition")
        _check_partition_columns(spec.target_partition_values, config, "target_partition_values")
        if spec.matched_condition:
            _parse_predicate(spec.matched_condition, "matched condition")
    elif isinstance(spec, specs.AppendSpec):
        _check_partition_columns(spec.partition_values, config, "partition_values")
    elif isinstance(spec, specs.UpdateSpec):
        if not spec.updates:
            raise InvalidWriteError("UPDATE needs at least one column to set")
        if spec.predicate:
            _parse_predicate(spec.predicate, "UPDATE predicate")
    elif isinstance(spec, specs.DeleteSpec):
        if spec.predicate:
            _parse_predicate(spec.predicate, "DELETE predicate")
    elif isinstance(spec, specs.ReplaceWhereSpec):
        if not spec.predicate or not spec.predicate.strip():
            raise InvalidWriteError(
                "replace-where needs a predicate; use an overwrite to replace the whole table"
            )
        _parse_predicate(spec.predicate, "replaceWhere predicate")
    elif isinstance(spec, specs.OptimizeSpec):
        _check_partition_columns(spec.partition_filters, config, "partition_filters")
    elif isinstance(spec, specs.SetPropertiesSpec):
        if not spec.properties:
            raise InvalidWriteError("ALTER TABLE SET TBLPROPERTIES needs at least one property")
    elif isinstance(spec, specs.AddColumnsSpec) and not spec.columns:
        raise InvalidWriteError("ALTER TABLE ADD COLUMNS needs at least one column")
    needs_table = (
        specs.MergeSpec,
        specs.UpdateSpec,
        specs.DeleteSpec,
        specs.OptimizeSpec,
        specs.SetPropertiesSpec,
        specs.AddColumnsSpec,
    )
    if isinstance(spec, needs_table) and not config.exists:
        raise InvalidWriteError(
            f"{specs.write_name(spec, capital=True)} needs an existing table; {config.uri or 'it'} does not exist"
        )
