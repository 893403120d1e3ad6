"""Table maintenance and metadata: OPTIMIZE (compaction / Z-order) and ALTER TABLE."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from deltaguard.engines import specs
from deltaguard.operators.base import DeltaWriteOperator

if TYPE_CHECKING:
    from deltaguard.core.table_config import TableConfig

_BASE_FIELDS: tuple[str, ...] = tuple(DeltaWriteOperator.template_fields)


class DeltaOptimizeOperator(DeltaWriteOperator):
    """``OPTIMIZE table [WHERE partition filter] [ZORDER BY (cols)]``.

    :param zorder_by: Z-order columns; empty means plain compaction.
    :param partition_filters: partition column -> value restricting which partitions are rewritten
        (templated); a filtered OPTIMIZE conflicts only with writes that can touch those partitions.
    :param target_size: target file size in bytes (engine default when ``None``).
    """

    template_fields: Sequence[str] = (*_BASE_FIELDS, "partition_filters")

    def __init__(
        self,
        *,
        zorder_by: Sequence[str] = (),
        partition_filters: Mapping[str, Any] | None = None,
        target_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if isinstance(zorder_by, str):
            zorder_by = (zorder_by,)
        self.zorder_by = tuple(zorder_by)
        self.partition_filters = dict(partition_filters or {})
        self.target_size = target_size

    def build_spec(self, table_config: TableConfig) -> specs.WriteSpec:
        return specs.OptimizeSpec(
            zorder_by=self.zorder_by, partition_filters=self.partition_filters, target_size=self.target_size
        )


class DeltaAlterTableOperator(DeltaWriteOperator):
    """``ALTER TABLE ... SET TBLPROPERTIES`` or ``ALTER TABLE ... ADD COLUMNS`` (exactly one per task).

    A metadata change is exclusive: every concurrent write on the table would fail, so it waits until the
    table is quiet and holds the whole table meanwhile (and the cluster policy gives it all pool slots).

    :param set_properties: table properties to set (templated).
    :param add_columns: column name -> Spark SQL type (``string``, ``bigint``, ``decimal(10,2)``).
    :param if_not_exists: add only the columns the table lacks when the write runs (read under its lease)
        and commit nothing when it has them all, instead of failing with ``InvalidWriteError``: for
        pipelines whose runs may overlap or repeat.
    """

    template_fields: Sequence[str] = (*_BASE_FIELDS, "set_properties")

    def __init__(
        self,
        *,
        set_properties: Mapping[str, str] | None = None,
        add_columns: Mapping[str, str] | None = None,
        if_not_exists: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if bool(set_properties) == bool(add_columns):
            # one commit per task keeps the app transaction (one version per run) meaningful
            raise ValueError("DeltaAlterTableOperator needs exactly one of set_properties or add_columns")
        self.set_properties = dict(set_properties or {})
        self.add_columns = dict(add_columns or {})
        self.if_not_exists = bool(if_not_exists)

    def build_spec(self, table_config: TableConfig) -> specs.WriteSpec:
        if self.set_properties:
            return specs.SetPropertiesSpec(
                properties={str(k): str(v) for k, v in self.set_properties.items()}
            )
        return specs.AddColumnsSpec(columns=self.add_columns, if_not_exists=self.if_not_exists)
