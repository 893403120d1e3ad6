"""The Spark engine names its driver as the commit coordinator of local and S3 tables."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from deltaguard.core import decide
from deltaguard.core.decision import Verdict
from deltaguard.core.operations import Operation, OperationKind
from deltaguard.core.profiles import STORAGE_COORDINATION
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.spark.engine import SparkEngine


def test_local_tables_are_coordinated_by_this_driver_only(delta_spark: Any, tmp_path: Path) -> None:
    engine = SparkEngine(spark=delta_spark)
    app_id = delta_spark.conf.get("spark.app.id")
    mine = engine.table_profile(str(tmp_path / "t"))
    assert mine.commit_coordination == f"single-driver:{app_id}"
    assert engine.table_profile("hdfs://nn/t").commit_coordination == STORAGE_COORDINATION
    # Another driver's append on the same local table: the two commits could replace each other.
    other = Operation(
        OperationKind.INSERT, engine=dataclasses.replace(mine, commit_coordination="single-driver:b")
    )
    decision = decide(Operation(OperationKind.INSERT), [other], TableConfig(), mine)
    assert decision.verdict is Verdict.CONFLICT
    same_driver = Operation(OperationKind.INSERT, engine=mine)
    assert (
        decide(Operation(OperationKind.INSERT), [same_driver], TableConfig(), mine).verdict
        is Verdict.NO_CONFLICT
    )
