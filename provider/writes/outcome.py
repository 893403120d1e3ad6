"""Pure helpers behind the deltaguard operators (no Airflow import), so they are tested without a scheduler.

* :func:`check_spec` - the bad-input checks that must fail a task *before* any lease is taken;
* :func:`labelled_operation` - the conflict model's view of a spec, named after the task;
* :func:`decision_line` - the one line the task log shows about admission;
* :func:`task_result` - the XCom return value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from deltaguard.core.operations import Operation
from deltaguard.core.table_config import TableConfig
from deltaguard.engines import specs
from deltaguard.engines.base import WriteResult
from deltaguard.engines.errors import InvalidWriteError


def _parse_predicate(sql: str, what: str) -> None:
    try:
        from deltaguard.core.predicates import parse_predicate
    except ImportError:  # the predicate parser is optional at this layer; the engine still validates
        return
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
            f"{type(spec).__name__} needs an existing table; {config.uri or 'it'} does not exist"
        )


def labelled_operation(spec: specs.WriteSpec, label: str) -> Operation:
    """The spec's operation for the conflict model, named ``label`` (the task's app id) in messages."""
    return dataclasses.replace(spec.operation(), label=label)


def wait_reason(reasons: Sequence[str], exceptions: Sequence[str] = (), advice: Sequence[str] = ()) -> str:
    """``<reasons> [can raise X]; advice: <advice>`` - why a write waited, for :func:`decision_line`."""
    text = " ".join(r.strip() for r in reasons if r.strip())
    if exceptions:
        text += f" (can raise {', '.join(dict.fromkeys(exceptions))})"
    if advice:
        text += "; advice: " + " ".join(a.strip() for a in advice if a.strip())
    return text.strip()


def decision_line(waited_s: float, behind: Sequence[str], explanation: str | None = None) -> str:
    """The admission decision in one line for the task log.

    :param waited_s: seconds spent waiting for the lease.
    :param behind: the tasks it waited for (owner descriptions), in the order first seen.
    :param explanation: the conflict model's explanation from the first wait (reason and advice).
    """
    if not behind and waited_s < 1:
        return "deltaguard: lease granted at once (no conflicting write was running or queued)"
    who = ", ".join(dict.fromkeys(behind)) or "other writers"
    line = f"deltaguard: waited {waited_s:.0f} s behind {who}"
    if explanation:
        line += f" ({explanation})"
    return line


def task_result(
    result: WriteResult,
    *,
    waited_s: float,
    behind: Sequence[str],
    lease_id: str | None,
    app_id: str | None,
    app_version: int | None,
    decision: str,
) -> dict[str, Any]:
    """The operator's XCom return value (JSON-serialisable)."""
    out: dict[str, Any] = dict(result.to_json())
    out.update(
        {
            "waited_s": round(waited_s, 3),
            "waited_behind": list(dict.fromkeys(behind)),
            "lease_id": lease_id,
            "app_id": app_id,
            "app_version": app_version,
            "decision": decision,
        }
    )
    return out
