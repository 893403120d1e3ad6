"""Bad writes are refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.errors import InvalidWriteError
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
    UpdateSpec,
    WriteContext,
    WriteSpec,
)
from tests.engines.helpers import rows

SOURCE = rows([1], "2024-01-01")

BAD_SPECS: list[tuple[WriteSpec, str]] = [
    (MergeSpec(SOURCE, "", matched_update_all=True), "ON condition"),
    (MergeSpec(SOURCE, "t.id = s.id"), "WHEN clause"),
    (MergeSpec(SOURCE, "t.id = = s.id", matched_delete=True), "does not parse"),
    (
        MergeSpec(SOURCE, "t.id = s.id", target_partition_values={"id": 1}, matched_delete=True),
        "not a partition",
    ),
    (MergeSpec(SOURCE, "t.id = s.id", matched_update={"v": "s.v"}, matched_update_all=True), "not both"),
    (MergeSpec(SOURCE, "t.id = s.id", matched_update={}), "at least one column"),
    (MergeSpec(SOURCE, "t.id = s.id", matched_delete=True, source_alias="t"), "different"),
    (MergeSpec(SOURCE, "t.id = s.id; DROP TABLE x", matched_delete=True), "several statements"),
    (MergeSpec(None, "t.id = s.id", matched_delete=True), "source"),
    (UpdateSpec({}), "at least one column"),
    (UpdateSpec({"nope": "1"}), "unknown column"),
    (UpdateSpec({"v": "v +"}), "does not parse"),
    (UpdateSpec({"v": "1"}, "missing_col = 1"), "unknown column"),
    (DeleteSpec("id ==== 1"), "does not parse"),
    (DeleteSpec("SELECT 1"), "not a statement"),
    (ReplaceWhereSpec(SOURCE, ""), "needs a predicate"),
    (ReplaceWhereSpec(SOURCE, "day = "), "does not parse"),
    (OptimizeSpec(partition_filters={"id": 1}), "not a partition"),
    (OptimizeSpec(zorder_by=("nope",)), "unknown column"),
    (OptimizeSpec(target_size=0), "positive"),
    (SetPropertiesSpec({}), "at least one"),
    (AddColumnsSpec({"x": "varchar2"}), "unknown Spark SQL type"),
    (AddColumnsSpec({"id": "int"}), "already exists"),
    (AppendSpec(SOURCE, partition_values={"v": 1.0}), "not a partition"),
    (AppendSpec(SOURCE, partition_by=("id",)), "differs"),
    (CreateSpec(schema={"id": "int"}), "already exists"),
]


@pytest.mark.parametrize(("spec", "message"), BAD_SPECS, ids=[m for _, m in BAD_SPECS])
def test_bad_spec_writes_nothing(
    engine: DeltaRsEngine, partitioned: str, spec: WriteSpec, message: str
) -> None:
    with pytest.raises(InvalidWriteError, match=message):
        engine.write(partitioned, spec)
    assert DeltaTable(partitioned).version() == 2


@pytest.mark.parametrize(
    "spec",
    [
        UpdateSpec({"v": "1"}),
        DeleteSpec("id = 1"),
        MergeSpec(SOURCE, "t.id = s.id", matched_delete=True),
        ReplaceWhereSpec(SOURCE, "day = '2024-01-01'"),
        OptimizeSpec(),
        SetPropertiesSpec({"delta.appendOnly": "true"}),
        AddColumnsSpec({"x": "int"}),
    ],
)
def test_a_missing_table_is_refused_except_for_creating_writes(
    engine: DeltaRsEngine, tmp_path: Path, spec: WriteSpec
) -> None:
    uri = str(tmp_path / "missing")
    with pytest.raises(InvalidWriteError, match="does not exist"):
        engine.write(uri, spec)
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize(
    ("context", "message"),
    [
        (WriteContext(app_id="a"), "go together"),
        (WriteContext(app_version=1), "go together"),
        (WriteContext(app_id="a", app_version=-1), ">= 0"),
        (WriteContext(app_id=" ", app_version=1), "empty"),
        (WriteContext(commit_metadata={"operation": "x"}), "reserved"),
        (WriteContext(commit_metadata={"deltaguard.commit_id": "x"}), "reserved"),
        (WriteContext(commit_metadata={"k": 1}), "must be a string"),  # type: ignore[dict-item]
        (WriteContext(max_commit_retries=-1), ">= 0"),
    ],
)
def test_bad_context(engine: DeltaRsEngine, partitioned: str, context: WriteContext, message: str) -> None:
    with pytest.raises(InvalidWriteError, match=message):
        engine.write(partitioned, DeleteSpec("id = 1"), context)
    assert DeltaTable(partitioned).version() == 2


def test_validate_uses_the_table_config_without_writing(engine: DeltaRsEngine, partitioned: str) -> None:
    config = engine.table_config(partitioned)
    engine.validate(
        partitioned,
        MergeSpec(SOURCE, "t.id = s.id", target_partition_values={"day": "x"}, matched_delete=True),
        config,
    )
    with pytest.raises(InvalidWriteError, match="not a partition"):
        engine.validate(partitioned, OptimizeSpec(partition_filters={"v": 1}), config)
    with pytest.raises(InvalidWriteError, match="does not exist"):
        engine.validate("nowhere", DeleteSpec(), engine.table_config(str(Path(partitioned) / "nope")))


def test_delta_rs_rejections_become_invalid_write(engine: DeltaRsEngine, partitioned: str) -> None:
    wrong_type = pa.table({"id": ["not a number"], "day": ["2024-01-01"], "v": [1.0]})
    with pytest.raises(InvalidWriteError):
        engine.write(partitioned, AppendSpec(wrong_type))
    with pytest.raises(InvalidWriteError):
        engine.write(partitioned, OverwriteSpec(pa.table({"other": [1]})))
    assert DeltaTable(partitioned).version() == 2


def test_unsupported_spec_type(engine: DeltaRsEngine, partitioned: str) -> None:
    with pytest.raises(InvalidWriteError, match="not supported by delta-rs"):
        engine.write(partitioned, "DELETE FROM t")  # type: ignore[arg-type]
