"""NULL partition values on real delta-rs tables: every pair the engine makes fail, the model calls a
conflict; pairs that name different non-NULL partitions still commit and stay allowed (ADR 0003 fact 11).

Each pair runs in both orders from one snapshot: the first write commits, the second commits from its stale
handle. The table is partitioned by ``p`` (STRING, DATE or BIGINT) with rows in ``a``, ``b`` and NULL, two
commits so every partition has two files.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from deltaguard.core.model import pair_verdict
from deltaguard.core.operations import Operation
from deltaguard.core.operations import OperationKind as K
from deltaguard.core.profiles import EngineName, EngineProfile
from deltaguard.core.table_config import TableConfig
from deltaguard.engines.discovery import read_table_config
from tests.engines.stale_commits import either_order_fails

DELTARS = EngineProfile(EngineName.DELTA_RS, "1.6.6")
TYPES: dict[str, tuple[pa.DataType, object, object, Callable[[object], str]]] = {
    "string": (pa.string(), "a", "b", lambda v: f"'{v}'"),
    "date": (pa.date32(), dt.date(2024, 1, 1), dt.date(2024, 1, 2), lambda v: f"'{v}'"),
    "bigint": (pa.int64(), 1, 2, str),
}

#: (kind, predicate template with {a} / {b}) per write
NULL_WRITES = [(K.UPDATE, "p IS NULL"), (K.DELETE, "p IS NULL")]
OTHER_WRITES = [
    (K.UPDATE, "p = {b}"),
    (K.UPDATE, "p <> {a}"),
    (K.DELETE, "p > {a}"),
    (K.UPDATE, "p NOT IN ({a})"),
    (K.UPDATE, "NOT (p = {a})"),
    (K.UPDATE, "p IS NOT NULL"),
]


def _table(tmp_path: Path, kind: str) -> Path:
    typ, a, b, _ = TYPES[kind]
    path = tmp_path / f"base_{kind}"
    for ids in ((1, 2, 3), (4, 5, 6)):
        write_deltalake(
            str(path),
            pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "v": pa.array([0, 0, 0], pa.int64()),
                    "p": pa.array([a, b, None], typ),
                }
            ),
            partition_by=["p"],
            mode="append",
        )
    return path


def _run(kind: K, predicate: str) -> Callable[[DeltaTable], object]:
    if kind is K.DELETE:
        return lambda t: t.delete(predicate)
    return lambda t: t.update(predicate=predicate, updates={"v": "v + 1"})


def _engine_conflicts(tmp_path: Path, base: Path, x: tuple[K, str], y: tuple[K, str]) -> bool:
    return either_order_fails(base, tmp_path / "work", _run(*x), _run(*y))


def _model_conflicts(x: tuple[K, str], y: tuple[K, str], table: TableConfig | None = None) -> bool:
    # without column types a number compared with p separates nothing (ADR 0003 fact 13)
    table = table or TableConfig(partition_columns=("p",))
    return pair_verdict(Operation(x[0], x[1]), Operation(y[0], y[1]), table, DELTARS).conflict


@pytest.mark.parametrize("kind", list(TYPES))
def test_null_partition_pairs_are_sound(tmp_path: Path, kind: str) -> None:
    base = _table(tmp_path, kind)
    _, a, b, lit = TYPES[kind]
    failing: list[tuple[str, str]] = []
    for null_kind, null_predicate in NULL_WRITES:
        for other_kind, template in OTHER_WRITES:
            x = (null_kind, null_predicate)
            y = (other_kind, template.format(a=lit(a), b=lit(b)))
            engine = _engine_conflicts(tmp_path, base, x, y)
            if engine and not _model_conflicts(x, y):
                failing.append((x[1], y[1]))
            assert engine, ("measured: every such pair conflicts on delta-rs", x, y)
    assert not failing, failing


@pytest.mark.parametrize("kind", list(TYPES))
def test_different_named_partitions_still_commit(tmp_path: Path, kind: str) -> None:
    base = _table(tmp_path, kind)
    _, a, b, lit = TYPES[kind]
    x, y = (K.UPDATE, f"p = {lit(a)}"), (K.DELETE, f"p = {lit(b)}")
    assert not _engine_conflicts(tmp_path, base, x, y)
    assert not _model_conflicts(x, y, read_table_config(str(base)))


def test_empty_string_partition_is_read_like_null(tmp_path: Path) -> None:
    """delta-rs logs ``p = ''`` as a null partition value; its files count as read by a comparison."""
    base = tmp_path / "empty"
    for ids in ((1, 2, 3), (4, 5, 6)):
        write_deltalake(
            str(base),
            pa.table(
                {"id": pa.array(ids, pa.int64()), "v": pa.array([0, 0, 0], pa.int64()), "p": ["a", "", "c"]}
            ),
            partition_by=["p"],
            mode="append",
        )
    logged = pa.table(DeltaTable(str(base)).get_add_actions(flatten=True)).column("partition.p").to_pylist()
    assert None in logged and "" not in logged
    x, y = (K.UPDATE, "p > 'b'"), (K.DELETE, "p < 'b'")
    assert _engine_conflicts(tmp_path, base, x, y)
    assert _model_conflicts(x, y)


#: readers whose exact reading excludes ``b`` only through a term a null test contradicts: delta-rs prunes with
#: the null test as unknown, so the term stays and reads the files of ``b`` (found by the differential fuzzer,
#: ``tests/conformance/fuzz_regressions/null-test-in-contradiction-seed1818.json``)
NULL_TEST_READERS = [
    "p <> 'a' AND (p IS NULL OR p <> 'b')",
    "p = 'c' OR (p = 'b' AND p IS NULL)",
    "p = 'c' OR p = 'b' AND p IS NULL AND id > 0",
]
#: readers of ``b``-free partitions that delta-rs prunes exactly enough to commit beside a rewrite of ``b``
SEPARATE_READERS = [
    "p IS NOT NULL AND p <> 'b'",
    "(p = 'a' OR p = 'c') AND p <> 'a'",
    "p = 'c' AND (p IS NULL OR id > 0)",
    "NOT (p = 'b' OR p IS NULL)",
]


def _three_partitions(tmp_path: Path) -> Path:
    base = tmp_path / "abc"
    write_deltalake(
        str(base),
        pa.table(
            {
                "id": pa.array(range(8), pa.int64()),
                "v": pa.array([0] * 8, pa.int64()),
                "p": ["a", "b", "c", None] * 2,
            }
        ),
        partition_by=["p"],
    )
    return base


def test_a_null_test_in_a_contradicting_term_still_reads_other_partitions(tmp_path: Path) -> None:
    base = _three_partitions(tmp_path)
    table = read_table_config(str(base))
    writer = (K.UPDATE, "p = 'b'")
    for predicate in NULL_TEST_READERS:
        reader = (K.DELETE, predicate)
        assert _engine_conflicts(tmp_path, base, reader, writer), (
            "measured: the stale DELETE fails",
            predicate,
        )
        assert _model_conflicts(reader, writer, table), predicate
    for predicate in SEPARATE_READERS:
        reader = (K.DELETE, predicate)
        assert not _engine_conflicts(tmp_path, base, reader, writer), ("measured: both commit", predicate)
        assert not _model_conflicts(reader, writer, table), predicate
