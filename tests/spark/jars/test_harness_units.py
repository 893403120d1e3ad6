"""Pieces of the delta-spark harness that need no JVM (they run without the jars too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.conformance.spark_runner import Gate, delta_version_from_jars


@pytest.mark.parametrize(
    ("jars", "version"),
    [
        (["/j/delta-storage-4.4.1.jar", "/j/delta-spark_4.2_2.13-4.4.1.jar"], "4.4.1"),
        (["/j/delta-spark_2.13-3.2.0.jar"], "3.2.0"),
        (["/j/other.jar"], None),
    ],
)
def test_delta_version_from_jar_names(jars: list[str], version: str | None) -> None:
    assert delta_version_from_jars(jars) == version


def test_gate_pauses_until_released(tmp_path: Path) -> None:
    import threading

    gate = Gate(tmp_path / "g")
    out: list[int] = []
    worker = threading.Thread(target=lambda: out.append(gate.function()(7)))
    worker.start()
    assert gate.wait_reached(timeout=10)
    worker.join(0.3)
    assert worker.is_alive() and out == []  # paused
    gate.release()
    worker.join(10)
    assert out == [7]


def test_the_isolation_slice_is_measured_on_tables_delta_rs_wrote(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    from lab.conformance.spark_runner import (
        ISOLATION_CELLS,
        ISOLATION_SLICE_SPELLINGS,
        SparkGroupRunner,
        create_with_deltars,
        spark_cells,
    )

    assert spark_cells("isolation") == list(ISOLATION_CELLS)
    # every spelling the profile distinguishes: both cases of WriteSerializable, SnapshotIsolation, garbage
    assert {"WriteSerializable", "writeserializable", "SnapshotIsolation", "nonsense"} <= set(
        ISOLATION_SLICE_SPELLINGS
    )
    # delta-rs stores a spelling Spark refuses to set, as given
    create_with_deltars(tmp_path / "t", ("p",), {"delta.isolationLevel": "nonsense"})
    table = DeltaTable(str(tmp_path / "t"))
    assert table.metadata().configuration == {"delta.isolationLevel": "nonsense"}
    assert table.metadata().partition_columns == ["p"]
    assert table.version() == 1  # the two initial commits
    with pytest.raises(ValueError, match="creator"):
        SparkGroupRunner(None, tmp_path, creator="spark")
