"""Small data helpers shared by the engine tests (importable as ``tests.engines.helpers``)."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable


def rows(ids: list[int], day: str) -> pa.Table:
    """Rows ``id, day, v`` with ``v = id * 1.0``."""
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "day": [day] * len(ids), "v": pa.array([float(i) for i in ids])}
    )


def table_rows(uri: str) -> list[dict[str, object]]:
    """The table's rows sorted by id."""
    return sorted(DeltaTable(uri).to_pyarrow_table().to_pylist(), key=lambda r: (r["id"], str(r)))


def ids(uri: str) -> list[int]:
    return [int(r["id"]) for r in table_rows(uri)]  # type: ignore[call-overload]
