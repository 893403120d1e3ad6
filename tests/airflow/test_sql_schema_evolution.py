"""``DeltaSqlOperator`` hands a ``MERGE WITH SCHEMA EVOLUTION`` to Spark, judged as a metadata change
(ADR 0035); the delta-rs translator, which cannot parse the clause, is not asked first."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from deltaguard.core.table_config import TableConfig
from deltaguard.engines import specs
from deltaguard.engines.errors import InvalidWriteError
from deltaguard.operators.sql import DeltaSqlOperator

EVOLVING = "MERGE WITH SCHEMA EVOLUTION INTO t USING updates s ON t.id = s.id WHEN MATCHED THEN UPDATE SET *"


def test_a_schema_evolving_merge_runs_on_spark_as_a_metadata_change() -> None:
    op = DeltaSqlOperator(task_id="sql", table="/t", sql=EVOLVING)
    op.resolved_engine = SimpleNamespace(name="spark")
    spec = op.build_spec(TableConfig(partition_columns=("p",)))
    assert isinstance(spec, specs.SqlSpec) and spec.sql == EVOLVING
    assert spec.operation().evolves_schema and op.conflict_operation(spec).changes_metadata
    op.resolved_engine = SimpleNamespace(name="delta-rs")
    with pytest.raises(InvalidWriteError):
        op.build_spec(TableConfig(partition_columns=("p",)))
