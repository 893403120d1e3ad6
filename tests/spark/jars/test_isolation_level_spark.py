"""What delta-spark does with a ``delta.isolationLevel`` it finds in a table delta-rs wrote (ADR 0014, section 10).

Two cheap cells of ``python -m lab.conformance --engine delta-spark --slice isolation``: a blind INSERT and an
UPDATE of the same partition both commit, in both orders, on a ``WriteSerializable`` table (and the profile
says so), and a value delta-spark does not know fails the write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltaguard.engines.spark.setup import delta_jars_from_env
from lab.conformance.cells import Cell
from lab.conformance.scenarios import Layout, ProbeOp
from lab.conformance.spark_runner import (
    SparkGroupRunner,
    delta_version_from_jars,
    run_solo,
    run_spark_cells,
)


def test_write_serializable_from_delta_rs_lets_a_blind_insert_pass_an_update(
    delta_spark: Any, tmp_path: Path
) -> None:
    version = delta_version_from_jars(delta_jars_from_env())
    cell = Cell(ProbeOp.INSERT, ProbeOp.UPDATE, Layout.PARTITIONED_SAME, "WriteSerializable")
    (result,) = run_spark_cells([cell], delta_spark, tmp_path, version, creator="delta-rs")
    assert [o.observed.value for o in result.orders] == ["commit", "commit"], result.observed_summary()
    assert result.prediction.conflict is False and not result.unsound


def test_an_unknown_isolation_level_fails_the_write_but_not_the_read(
    delta_spark: Any, tmp_path: Path
) -> None:
    runner = SparkGroupRunner(
        delta_spark, tmp_path, delta_version_from_jars(delta_jars_from_env()), "delta-rs"
    )
    read, insert = run_solo(runner, "nonsense", (ProbeOp.INSERT,))
    assert read.observed == "ok"
    assert insert.observed == "error" and "DELTA_INVALID_ISOLATION_LEVEL" in insert.detail
