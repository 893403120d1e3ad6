"""Shared fixtures: a delta-rs engine and small real Delta tables in tmp_path."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pytest

from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.specs import AppendSpec, CreateSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # make `tests.engines.helpers` importable
from tests.engines.helpers import rows


@pytest.fixture
def engine() -> DeltaRsEngine:
    return DeltaRsEngine()


@pytest.fixture
def partitioned(engine: DeltaRsEngine, tmp_path: Path) -> str:
    """A table partitioned by ``day`` with ids 1,2 on 2024-01-01 and 3,4 on 2024-01-02 (version 2)."""
    uri = str(tmp_path / "partitioned")
    engine.write(
        uri, CreateSpec(schema={"id": "bigint", "day": "string", "v": "double"}, partition_by=("day",))
    )
    engine.write(uri, AppendSpec(rows([1, 2], "2024-01-01")))
    engine.write(uri, AppendSpec(rows([3, 4], "2024-01-02")))
    return uri


@pytest.fixture
def flat(engine: DeltaRsEngine, tmp_path: Path) -> str:
    """An unpartitioned table with ids 1..4 (version 0)."""
    uri = str(tmp_path / "flat")
    engine.write(uri, AppendSpec(pa.concat_tables([rows([1, 2], "2024-01-01"), rows([3, 4], "2024-01-02")])))
    return uri
