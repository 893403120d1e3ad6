"""Data writes: MERGE, INSERT (append/overwrite), UPDATE, DELETE, replace-where.

All share :class:`~deltaguard.operators.base.DeltaWriteOperator` (validate -> lease -> write -> release).
``source`` is a Parquet/CSV/Delta URI (templated; ``delta+<uri>`` forces Delta), a zero-argument callable
returning a ``pyarrow.Table`` or ``pandas.DataFrame``, or a PySpark source (``def f(spark) -> DataFrame`` or a
``SparkSource``), called only when the write runs, under the lease (a MERGE's source is also read once before
the lease, for its key columns: ADR 0019).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from deltaguard.core.merge_scope import (
    DEFAULT_MAX_IN_VALUES,
    DEFAULT_MAX_RANGE_VALUES,
    MergeScope,
    ScopeLimits,
)
from deltaguard.engines import specs
from deltaguard.engines.merge_scope import OUTSIDE_CHOICES, scoped_merge, scoped_replace_where
from deltaguard.engines.sources import CallableSource
from deltaguard.operators.base import DeltaWriteOperator, wrap_source

if TYPE_CHECKING:
    from airflow.sdk import Context

    from deltaguard.core.table_config import TableConfig

_BASE_FIELDS: tuple[str, ...] = tuple(DeltaWriteOperator.template_fields)


# The mixin's methods call on to the write operator it is mixed into (before it in the MRO); typed as its
# subclass, mypy checks those calls.
if TYPE_CHECKING:
    _ScopeBase = DeltaWriteOperator
else:
    _ScopeBase = object


class _ScopeThroughDeferral(_ScopeBase):
    """A write whose spec carries a scope computed from its source: a resumed try takes the scope its
    lease was asked for from the prepared write its deferral carried
    (:attr:`~deltaguard.operators.base.DeltaWriteOperator.resumed_write`), so it writes exactly what the
    lease was judged for without reading its source again."""

    def execute(self, context: Context) -> dict[str, Any]:
        return self._result(super().execute(context))

    def execute_complete(self, context: Context, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self._result(super().execute_complete(context, *args, **kwargs))

    def _result(self, result: dict[str, Any]) -> dict[str, Any]:
        """The task's XCom result (operators add what the scope did)."""
        return result

    def _kept_scope(self) -> tuple[bool, MergeScope | None]:
        """``(True, scope)`` when this try resumed with the scope its lease was asked for (``None``: the
        lease was asked for without one); ``(False, None)`` when the scope is still to be computed."""
        if self.resumed_write is None:
            return False, None
        return True, self.resumed_write.source_scope


class DeltaMergeOperator(_ScopeThroughDeferral, DeltaWriteOperator):
    """``MERGE INTO table t USING source s ON condition`` with the chosen clauses.

    With no clause chosen it upserts (``WHEN MATCHED UPDATE SET *`` + ``WHEN NOT MATCHED INSERT *``).

    :param source: the rows to merge (URI or callable).
    :param condition: the ON condition (``t`` = target, ``s`` = source).
    :param target_partition_values: partition values of the target rows this MERGE touches; they are added
        to the condition as ``t.col = literal``, which is what lets two MERGEs on different partitions run at
        once (``s.date = t.date`` alone restricts nothing). Templated.
    :param matched_update: column -> SQL expression for ``WHEN MATCHED THEN UPDATE``.
    :param matched_update_all: ``WHEN MATCHED THEN UPDATE SET *``.
    :param matched_delete: ``WHEN MATCHED THEN DELETE``.
    :param matched_condition: extra condition for the matched clause.
    :param not_matched_insert: column -> SQL expression for ``WHEN NOT MATCHED THEN INSERT``.
    :param not_matched_insert_all: ``WHEN NOT MATCHED THEN INSERT *``.
    :param not_matched_by_source_delete: ``WHEN NOT MATCHED BY SOURCE THEN DELETE``.
    :param explicit_partitions: when the ON condition equates a partition (or clustering) column to the
        source (``t.date = s.date``), add ``t.date IN (<the source's dates>)`` to the condition the engine
        runs, the conjunct the lease is judged on (ADR 0019). ``False`` leaves the condition as written:
        the engine then reads the whole table and only the inserted rows' scope is narrowed.
    :param on_source_outside_target: when the condition or ``target_partition_values`` declares the target
        partitions but the source holds rows of others, which ``WHEN NOT MATCHED THEN INSERT`` would add
        there: ``"fail"`` (default) refuses the task before any lease, naming the values; ``"widen"`` claims
        those partitions too.
    :param scope_max_in_values: up to this many distinct source values the scope is an ``IN`` list.
    :param scope_max_range_values: above ``scope_max_in_values`` and up to this many, a ``BETWEEN`` range
        (integer and date columns); above it, the scope is not narrowed.
    """

    template_fields: Sequence[str] = (*_BASE_FIELDS, "source", "condition", "target_partition_values")

    def __init__(
        self,
        *,
        source: Any,
        condition: str,
        target_partition_values: Mapping[str, Any] | None = None,
        matched_update: Mapping[str, str] | None = None,
        matched_update_all: bool = False,
        matched_delete: bool = False,
        matched_condition: str | None = None,
        not_matched_insert: Mapping[str, str] | None = None,
        not_matched_insert_all: bool = False,
        not_matched_by_source_delete: bool = False,
        source_alias: str = "s",
        target_alias: str = "t",
        explicit_partitions: bool = True,
        on_source_outside_target: str = "fail",
        scope_max_in_values: int = DEFAULT_MAX_IN_VALUES,
        scope_max_range_values: int = DEFAULT_MAX_RANGE_VALUES,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if on_source_outside_target not in OUTSIDE_CHOICES:
            raise ValueError(f"on_source_outside_target must be one of {OUTSIDE_CHOICES}")
        self.explicit_partitions = explicit_partitions
        #: what the source's data did to the scope, and why (set when the spec is built)
        self.scope_reasons: list[str] = []
        self.on_source_outside_target = on_source_outside_target
        self.scope_limits = ScopeLimits(scope_max_in_values, scope_max_range_values)
        self.source = wrap_source(source)
        self.condition = condition
        self.target_partition_values = dict(target_partition_values or {})
        no_clause = (
            not (
                matched_update
                or matched_update_all
                or matched_delete
                or not_matched_insert
                or not_matched_insert_all
            )
            and not not_matched_by_source_delete
        )
        self.matched_update = dict(matched_update) if matched_update else None
        self.matched_update_all = matched_update_all or no_clause
        self.matched_delete = matched_delete
        self.matched_condition = matched_condition
        self.not_matched_insert = dict(not_matched_insert) if not_matched_insert else None
        self.not_matched_insert_all = not_matched_insert_all or no_clause
        self.not_matched_by_source_delete = not_matched_by_source_delete
        self.source_alias = source_alias
        self.target_alias = target_alias

    def build_spec(self, table_config: TableConfig) -> specs.WriteSpec:
        declared = self._declared_spec()
        if self.resolved_engine is None:  # set by execute before build_spec; absent only when called alone
            return declared
        resumed, scope = self._kept_scope()
        if resumed:
            # Resumed after waiting: the lease was asked for (and may have been granted by the trigger) with
            # this scope, so the write keeps it; the engine refuses a source that has left it since.
            if scope is None:
                return declared
            self.scope_reasons = [*scope.reasons, "kept the scope the lease was asked for before waiting"]
            return dataclasses.replace(declared, source_scope=scope, explicit_scope=self.explicit_partitions)
        spec, reasons = scoped_merge(
            declared,
            table_config,
            self.resolved_engine,
            limits=self.scope_limits,
            explicit=self.explicit_partitions,
            on_outside=self.on_source_outside_target,
            produced=isinstance(self.source, CallableSource),
        )
        self.scope_reasons = list(reasons)
        self.log.info("deltaguard: MERGE scope from the source: %s", "; ".join(reasons) or "none")
        return spec

    def _result(self, result: dict[str, Any]) -> dict[str, Any]:
        """The XCom result with what the source's data did to the MERGE's scope, and why (ADR 0019)."""
        return {**result, "merge_scope": list(self.scope_reasons)}

    def _declared_spec(self) -> specs.MergeSpec:
        return specs.MergeSpec(
            source=self.write_source(self.source),
            condition=self.condition,
            target_partition_values=self.target_partition_values,
            matched_update=self.matched_update,
            matched_update_all=self.matched_update_all,
            matched_delete=self.matched_delete,
            matched_condition=self.matched_condition,
            not_matched_insert=self.not_matched_insert,
            not_matched_insert_all=self.not_matched_insert_all,
            not_matched_by_source_delete=self.not_matched_by_source_delete,
            source_alias=self.source_alias,
            target_alias=self.target_alias,
        )


class DeltaInsertOperator(DeltaWriteOperator):
    """Append rows (a blind append: it reads nothing of the table), or overwrite the whole table.

    :param source: the rows (URI or callable).
    :param partition_by: partition columns when the write creates the table.
    :param partition_values: the partition values the appended rows carry, if known (templated): narrows
        the conflict model's view, e.g. lets an append to ``date='2024-01-02'`` run beside a DELETE of
        ``date='2024-01-01'``. Must name partition columns of the table.
    :param mode: ``append`` (default) or ``overwrite``.
    """

    template_fields: Sequence[str] = (*_BASE_FIELDS, "source", "partition_values")

    def __init__(
        self,
        *,
        source: Any,
        partition_by: Sequence[str] = (),
        partition_values: Mapping[str, Any] | None = None,
        mode: str = "append",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if mode not in ("append", "overwrite"):
            raise ValueError(f"mode must be 'append' or 'overwrite', got {mode!r}")
        self.source = wrap_source(source)
        self.partition_by = tuple(partition_by)
        self.partition_values = dict(partition_values or {})
        self.mode = mode

    def build_spec(self, table_config: TableConfig) -> specs.WriteSpec:
        if self.mode == "overwrite":
            return specs.OverwriteSpec(source=self.write_source(self.source), partition_by=self.partition_by)
        return specs.AppendSpec(
            source=self.write_source(self.source),
            partition_by=self.partition_by,
            partition_values=self.partition_values,
        )


class DeltaUpdateOperator(DeltaWriteOperator):
    """``UPDATE table SET col = expr, ... WHERE predicate``.

    :param updates: column -> SQL expression (templated).
    :param predicate: which rows (templated); ``None`` updates every row. Text that renders empty or blank
        is refused, not read as "every row".
    """

    template_fields: Sequence[str] = (*_BASE_FIELDS, "updates", "predicate")

    def __init__(self, *, updates: Mapping[str, str], predicate: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.updates = dict(updates)
        self.predicate = predicate

    def build_spec(self, table_config: TableConfig) -> specs.WriteSpec:
        # Only None means every row: a template that rendered "" is refused by the spec's checks.
        return specs.UpdateSpec(updates=self.updates, predicate=self.predicate)


class DeltaDeleteOperator(DeltaWriteOperator):
    """``DELETE FROM table WHERE predicate``.

    :param predicate: which rows (templated). Deleting every row needs ``predicate=None`` *and*
        ``allow_delete_all=True``, so a template that renders empty cannot wipe the table; so does a
        predicate that holds for every row (``1 = 1``, ``TRUE``, :func:`~deltaguard.core.sql.tautology.always_true`).
    """

    template_fields: Sequence[str] = (*_BASE_FIELDS, "predicate")

    def __init__(self, *, predicate: str | None, allow_delete_all: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.predicate = predicate
        self.allow_delete_all = allow_delete_all

    def build_spec(self, table_config: TableConfig) -> specs.WriteSpec:
        from deltaguard.core.sql.tautology import always_true
        from deltaguard.engines.errors import InvalidWriteError

        predicate = (self.predicate or "").strip() or None
        if predicate is None and not self.allow_delete_all:
            raise InvalidWriteError(
                "DELETE without a predicate deletes every row: pass allow_delete_all=True"
            )
        if predicate is not None and not self.allow_delete_all and always_true(predicate):
            raise InvalidWriteError(
                f"DELETE predicate {predicate!r} holds for every row, so it deletes every row: "
                "pass allow_delete_all=True if that is meant"
            )
        return specs.DeleteSpec(predicate=predicate)


class DeltaReplaceWhereOperator(_ScopeThroughDeferral, DeltaWriteOperator):
    """Overwrite exactly the rows matching ``predicate`` with ``source`` (Delta's ``replaceWhere``).

    :param source: the new rows (URI or callable); every row must satisfy the predicate.
    :param predicate: the rows replaced (templated), e.g. ``date = '2024-01-01'``.
    """

    template_fields: Sequence[str] = (*_BASE_FIELDS, "source", "predicate")

    def __init__(self, *, source: Any, predicate: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source = wrap_source(source)
        self.predicate = predicate

    def build_spec(self, table_config: TableConfig) -> specs.WriteSpec:
        declared = specs.ReplaceWhereSpec(source=self.write_source(self.source), predicate=self.predicate)
        if self.resolved_engine is None:  # set by execute before build_spec; absent only when called alone
            return declared
        resumed, scope = self._kept_scope()
        if resumed:
            return declared if scope is None else dataclasses.replace(declared, source_scope=scope)
        # with the table's file statistics, the source's ranges bound the files it adds (ADR 0020)
        spec, reasons = scoped_replace_where(
            declared, table_config, self.resolved_engine, limits=ScopeLimits()
        )
        self.log.info("deltaguard: REPLACE WHERE source ranges: %s", "; ".join(reasons) or "none")
        return spec
