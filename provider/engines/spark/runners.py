"""The Spark engine's runners by spec class, and its validation point (no Spark needed to import).

Spec types are declared in :mod:`deltaguard.engines.specs`; here Spark registers, per spec class, how it
runs it (:mod:`deltaguard.engines.spark.ops`), the Delta log operation names its commit may carry, and what
Spark checks beyond the spec's own checks (:mod:`deltaguard.engines.spark.specs`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deltaguard.core.sql.literals import SPARK
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.base import Runners, spec_check
from deltaguard.engines.base import validate_spec as validate_write_spec
from deltaguard.engines.spark import ops
from deltaguard.engines.spark.specs import (
    CREATE_OPERATION_NAMES,
    check_add_columns_for_spark,
    check_create_for_spark,
    check_isolation_level,
    check_merge_for_spark,
    check_optimize_for_spark,
    sql_operation_names,
)
from deltaguard.engines.spark.target import SparkTarget
from deltaguard.engines.specs import (
    AddColumnsSpec,
    AppendSpec,
    CreateSpec,
    DeleteSpec,
    MergeSpec,
    OptimizeSpec,
    OverwriteSpec,
    ReplaceWhereSpec,
    SetPropertiesSpec,
    SpecCheck,
    SqlSpec,
    UpdateSpec,
    WriteContext,
    WriteSpec,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class SparkRunner:
    """How Spark runs one spec type.

    :param run: executes the spec on a session (:data:`deltaguard.engines.spark.ops.SparkRun`).
    :param operation_names: the Delta log operation names its commit may carry (the first is the usual one;
        empty: any name), or a function of the spec giving them.
    :param check: what Spark checks beyond the spec's own checks.
    """

    run: ops.SparkRun
    operation_names: tuple[str, ...] | Callable[[Any], tuple[str, ...]]
    check: Callable[[Any, SpecCheck], None] | None = None

    def names(self, spec: WriteSpec) -> tuple[str, ...]:
        if callable(self.operation_names):
            return self.operation_names(spec)
        return self.operation_names


#: how Spark runs each spec type
RUNNERS: Runners[SparkRunner] = Runners(
    "Spark",
    {
        AppendSpec: SparkRunner(ops.run_append, ("WRITE", "CREATE TABLE AS SELECT")),
        ReplaceWhereSpec: SparkRunner(ops.run_replace_where, ("WRITE",)),
        OverwriteSpec: SparkRunner(
            ops.run_overwrite, ("WRITE", "CREATE OR REPLACE TABLE AS SELECT", "CREATE TABLE AS SELECT")
        ),
        MergeSpec: SparkRunner(ops.under_txn_confs(ops.run_merge), ("MERGE",), check_merge_for_spark),
        UpdateSpec: SparkRunner(ops.under_txn_confs(ops.run_update), ("UPDATE",)),
        DeleteSpec: SparkRunner(ops.under_txn_confs(ops.run_delete), ("DELETE",)),
        OptimizeSpec: SparkRunner(ops.run_optimize, ("OPTIMIZE",), check_optimize_for_spark),
        SetPropertiesSpec: SparkRunner(ops.under_txn_confs(ops.run_set_properties), ("SET TBLPROPERTIES",)),
        AddColumnsSpec: SparkRunner(
            ops.under_txn_confs(ops.run_add_columns), ("ADD COLUMNS",), check_add_columns_for_spark
        ),
        CreateSpec: SparkRunner(
            ops.under_txn_confs(ops.run_create), CREATE_OPERATION_NAMES, check_create_for_spark
        ),
        SqlSpec: SparkRunner(ops.run_sql_statement, sql_operation_names),
    },
)


def validate_spec(spec: WriteSpec, config: TableConfig | None) -> None:
    """Reject a spec Spark cannot run, or a malformed one, before anything runs.

    :param spec: the write.
    :param config: the table's configuration when known (checks partition columns and existence).
    :raises UnsupportedWriteError: when Spark has no runner for the spec.
    :raises InvalidWriteError: naming what is wrong.
    """
    runner = RUNNERS.runner(spec)
    validate_write_spec(spec, config, dialect=SPARK)
    if config is not None and config.exists:
        check_isolation_level(spec, config)
    if runner.check is not None:
        runner.check(spec, spec_check(spec, config))


def operation_names(spec: WriteSpec) -> tuple[str, ...]:
    """The Delta log operation names ``spec`` may commit (empty: unknown, any commit may be it)."""
    return RUNNERS.runner(spec).names(spec)


def execute(
    spark: SparkSession,
    target: SparkTarget,
    spec: WriteSpec,
    context: WriteContext,
    user_metadata: str | None,
) -> None:
    """Run one spec with its runner. DataFrame writes carry writer options; the rest run under the session
    confs (:mod:`deltaguard.engines.spark.ops`)."""
    RUNNERS.runner(spec).run(spark, target, spec, context, user_metadata)
