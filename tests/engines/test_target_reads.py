"""Sources that read the write's own table, on real delta-rs tables (ADR 0012).

Two MERGEs, one copying partition ``b`` into ``a`` and one copying ``a`` into ``b``, both commit on
deltalake 1.6.6 from one snapshot and swap the values: a table no serial order gives. Each reads the other's
partition through its source, which the model is told only when the engine layer sees the source may read
the target: every spelling of the target's location (symlink, ``file:``, ``..``, trailing slash, a partition
directory inside it) and every source computed as the write runs (a callable, a lazy frame).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltaguard.core.model import pair_verdict
from deltaguard.engines.deltars.engine import DeltaRsEngine
from deltaguard.engines.discovery import read_table_config
from deltaguard.engines.sources import (
    location_reads_target,
    source_reads_target,
    sql_reads_target,
    with_target_reads,
    wrap_source,
)
from deltaguard.engines.specs import AppendSpec, MergeSpec, SqlSpec


def _table(path: Path) -> str:
    write_deltalake(
        str(path),
        pa.table({"id": pa.array([1, 1], pa.int64()), "p": ["a", "b"], "v": pa.array([1, 2], pa.int64())}),
        partition_by=["p"],
    )
    return str(path)


def _copy(into: str, source: object) -> MergeSpec:
    return MergeSpec(
        source=source,
        condition="t.id = s.id",
        target_partition_values={"p": into},
        matched_update={"v": "s.v"},
    )


def _values(uri: str) -> dict[str, int]:
    return {row["p"]: row["v"] for row in DeltaTable(uri).to_pyarrow_table().to_pylist()}


def test_two_merges_reading_each_others_partition_swap_values_and_now_conflict(tmp_path: Path) -> None:
    uri = _table(tmp_path / "t")
    engine = DeltaRsEngine()
    # both sources are read before either commits, as when the two run at once
    from_b = DeltaTable(uri).to_pyarrow_table(filters=[("p", "=", "b")]).drop_columns(["p"])
    from_a = DeltaTable(uri).to_pyarrow_table(filters=[("p", "=", "a")]).drop_columns(["p"])
    stale = engine.open_table(uri)
    engine.write(uri, _copy("a", from_b))
    engine.write(uri, _copy("b", from_a), snapshot=stale)
    assert _values(uri) == {"a": 2, "b": 1}  # swapped: serial orders give {2, 2} or {1, 1}

    config = read_table_config(uri)
    profile = engine.profile()
    first = _copy("a", lambda: DeltaTable(uri).to_pyarrow_table(filters=[("p", "=", "b")]))
    second = _copy("b", lambda: DeltaTable(uri).to_pyarrow_table(filters=[("p", "=", "a")]))
    # what the spec alone says: two MERGEs of different partitions
    assert not pair_verdict(first.operation(), second.operation(), config, profile).conflict
    judged = [with_target_reads(spec.operation(), spec, uri) for spec in (first, second)]
    assert all(why is not None for _, why in judged)
    assert pair_verdict(judged[0][0], judged[1][0], config, profile).conflict


def test_every_spelling_of_the_target_is_the_target(tmp_path: Path) -> None:
    uri = _table(tmp_path / "t")
    link = tmp_path / "link"
    os.symlink(uri, link)
    for spelling in (
        uri + "/",
        "file://" + uri,
        f"{tmp_path}/other/../t",
        str(link),
        "delta+" + str(link),
        uri + "/p=a",
        str(tmp_path),
    ):
        assert location_reads_target(spelling, uri), spelling
        assert source_reads_target(spelling, uri) is not None
    other = _table(tmp_path / "t2")
    assert not location_reads_target(other, uri)
    assert source_reads_target("delta+" + other, uri) is None


def test_a_relative_path_may_be_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """deltalake reads a relative source from the working directory: there ``t`` is the target (found by the
    meaning fuzzer's source generator; the two MERGEs through it swap values like any other spelling)."""
    uri = _table(tmp_path / "t")
    monkeypatch.chdir(tmp_path)
    from deltaguard.engines.sources import resolve_source

    assert resolve_source("t").num_rows == DeltaTable(uri).to_pyarrow_table().num_rows  # the engine reads it
    for spelling in ("t", "./t", "t/p=a", "delta+t", "../" + tmp_path.name + "/t"):
        assert location_reads_target(spelling, uri), spelling
        assert "relative path" in (source_reads_target(spelling, uri) or ""), spelling
    config, profile = read_table_config(uri), DeltaRsEngine().profile()
    judged = [
        with_target_reads(spec.operation(), spec, uri)[0] for spec in (_copy("a", "t"), _copy("b", "t"))
    ]
    assert pair_verdict(judged[0], judged[1], config, profile).conflict


def test_only_data_in_memory_is_known_not_to_read_the_target(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    assert source_reads_target(pa.table({"id": [1]}), uri) is None
    assert source_reads_target(pd.DataFrame({"id": [1]}), uri) is None
    assert source_reads_target(lambda: pa.table({"id": [1]}), uri) is not None
    assert source_reads_target(wrap_source(lambda: pa.table({"id": [1]})), uri) is not None
    assert source_reads_target(pa.table({"id": [1]}).to_reader(), uri) is not None


@pytest.mark.parametrize("prefix", ["delta", "parquet"])
def test_a_statement_reading_a_symlink_of_its_target_reads_its_target(tmp_path: Path, prefix: str) -> None:
    uri = _table(tmp_path / "t")
    link = tmp_path / "link"
    os.symlink(uri, link)
    sql = f"INSERT INTO delta.`{uri}` SELECT id, 'b' AS p, v FROM {prefix}.`{link}` WHERE p = 'a'"
    assert sql_reads_target(sql, uri) is not None
    other = f"INSERT INTO delta.`{uri}` SELECT id, 'b' AS p, v FROM {prefix}.`{tmp_path}/elsewhere`"
    assert sql_reads_target(other, uri) is None
    from deltaguard.core.sql.classify import classify_sql

    operation = classify_sql(sql).operation
    if prefix == "delta":
        assert not operation.reads_target  # two delta paths: the classifier cannot see the symlink
    judged, why = with_target_reads(operation, SqlSpec(sql=sql, classified=operation), uri)
    assert judged.reads_target and (why or operation.reads_target)


def test_an_append_of_a_callable_source_reads_the_target(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    spec = AppendSpec(source=lambda: pa.table({"id": [1]}), partition_values={"p": "b"})
    judged, why = with_target_reads(spec.operation(), spec, uri)
    assert judged.reads_target and why


def test_the_authors_word_frees_a_computed_source_but_never_a_location(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    computed = AppendSpec(source=lambda: pa.table({"id": [1]}), partition_values={"p": "b"})
    judged, why = with_target_reads(computed.operation(), computed, uri, declared=False)
    assert not judged.reads_target and why is None
    # the target's own location reads the target whatever the author says
    itself = AppendSpec(source=uri + "/", partition_values={"p": "b"})
    judged, why = with_target_reads(itself.operation(), itself, uri, declared=False)
    assert judged.reads_target and why
    # and True marks even data already in memory
    rows = AppendSpec(source=pa.table({"id": [1]}), partition_values={"p": "b"})
    judged, why = with_target_reads(rows.operation(), rows, uri, declared=True)
    assert judged.reads_target and why


def test_catalog_names_are_resolved_by_the_engines_catalog(tmp_path: Path) -> None:
    uri = _table(tmp_path / "t")
    located = {"`db`.`alias_of_t`": "file:" + uri, "`db`.`staging`": str(tmp_path / "staging")}
    asked: list[str] = []

    def locate(name: str) -> str | None:
        asked.append(name)
        return located.get(name)

    target = f"MERGE INTO delta.`{uri}` t USING {{}} s ON t.id = s.id WHEN MATCHED THEN DELETE"
    assert sql_reads_target(target.format("db.alias_of_t"), uri, locate) is not None
    assert sql_reads_target(target.format("db.staging"), uri, locate) is None
    # a view, or a name the catalog does not know, may read anything
    assert sql_reads_target(target.format("db.some_view"), uri, locate) is not None
    # a CTE is not a catalog relation; what it reads is
    cte = f"WITH src AS (SELECT * FROM db.staging) MERGE INTO delta.`{uri}` t USING src s ON t.id = s.id WHEN MATCHED THEN DELETE"
    assert sql_reads_target(cte, uri, locate) is None
    assert "`src`" not in asked
    # without a catalog, names are left to the classifier
    assert sql_reads_target(target.format("db.some_view"), uri) is None
