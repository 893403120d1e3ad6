"""A table's history read with the version numbers its commits really have (delta-rs 1.6.6 numbers them
from the version the table object was loaded at)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import deltalake
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltaguard.core.delta_history import HistoryMovedError, consistent_history
from deltaguard.leases.sensor_checks import commits_after


def _stale_table(tmp_path: Path) -> tuple[str, DeltaTable]:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [0]}))
    write_deltalake(path, pa.table({"id": [1]}), mode="append")
    stale = DeltaTable(path)  # loaded at version 1
    DeltaTable(path).delete("id = 0")  # version 2, by another writer
    return path, stale


def test_a_commit_after_the_table_was_loaded_keeps_its_own_version(tmp_path: Path) -> None:
    _, stale = _stale_table(tmp_path)
    # the engine's own labels are shifted: the DELETE comes back as version 1
    assert next((c["version"], c["operation"]) for c in stale.history(1)) == (1, "DELETE")
    version, rows = consistent_history(stale, since=0)
    assert version == 2
    assert [(c["version"], c["operation"]) for c in rows] == [(2, "DELETE"), (1, "WRITE")]


def test_commits_after_names_each_commit_by_its_version(tmp_path: Path) -> None:
    path, _ = _stale_table(tmp_path)
    current, commits = commits_after(path, 0)
    assert current == 2
    assert [(c["version"], c["operation"]) for c in commits] == [(1, "WRITE"), (2, "DELETE")]


def test_a_table_that_never_stops_moving_is_refused() -> None:
    class Moving:
        def __init__(self) -> None:
            self.at = 2

        def version(self) -> int:
            return self.at

        def history(self, limit: int | None = None) -> list[dict[str, object]]:
            return [{"version": self.at, "operation": "WRITE"}]

        def update_incremental(self) -> None:
            self.at += 1

    with pytest.raises(HistoryMovedError):
        consistent_history(Moving(), since=0)


@pytest.fixture
def commit_after_load(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Make the next ``deltalake.DeltaTable(path)`` load, then let another writer commit a DELETE: the race
    of a commit landing between loading a table and reading its history, forced."""
    original = deltalake.DeltaTable

    def arm(path: str) -> None:
        armed = [True]

        class LoadedThenMoved(original):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                if armed and str(args[0]) == path:
                    armed.clear()
                    original(path).delete("id = 0")

        monkeypatch.setattr(deltalake, "DeltaTable", LoadedThenMoved)

    return arm


def _two_commits(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [0]}))
    write_deltalake(path, pa.table({"id": [1]}), mode="append")
    return path


def test_the_spark_engine_reads_a_path_tables_history_by_its_own_versions(
    tmp_path: Path, commit_after_load: Callable[[str], None]
) -> None:
    from deltaguard.engines.spark.engine import SparkEngine
    from deltaguard.engines.spark.target import SparkTarget

    path = _two_commits(tmp_path)
    commit_after_load(path)
    # the path-table branch reads the log through deltalake and never touches Spark
    rows = SparkEngine()._history(cast(Any, None), SparkTarget.parse(path), 2)
    assert rows is not None
    assert [(r["version"], r["operation"]) for r in rows] == [(2, "DELETE"), (1, "WRITE")]


def test_lineage_pairs_the_latest_version_with_its_own_operation(
    tmp_path: Path, commit_after_load: Callable[[str], None]
) -> None:
    from deltaguard.lineage.record import latest_commit

    path = _two_commits(tmp_path)
    commit_after_load(path)
    assert latest_commit(path, None) == (2, "DELETE")
