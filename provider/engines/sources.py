"""Resolve a write's ``source`` into Arrow data.

Accepted sources:

* ``pyarrow.Table`` and ``pyarrow.RecordBatchReader`` (used as they are);
* ``pandas.DataFrame`` (converted without its index);
* any object exporting the Arrow C stream interface (``__arrow_c_stream__``: polars, arro3, ...);
* an object with ``toArrow()`` (a Spark DataFrame, Spark 4+);
* a URI string: ``delta+<uri>`` or a directory holding ``_delta_log`` is read as a Delta table
  (with the engine's storage options); a path ending in ``.csv``/``.csv.gz`` (file or directory of them)
  as CSV; anything else as Parquet (a file or a directory of files). Parquet/CSV go through
  ``pyarrow.dataset``, so any filesystem pyarrow understands works (local, ``s3://``, ``gs://``, ...);
* a zero-argument callable returning any of the above (resolved once, so the data is produced only when
  the write actually runs).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.dataset as pads

from deltaguard.engines.errors import InvalidWriteError

ArrowData: TypeAlias = pa.Table | pa.RecordBatchReader

#: Prefix that marks a URI string as a Delta table to read.
DELTA_PREFIX = "delta+"


def resolve_source(source: Any, storage_options: dict[str, str] | None = None) -> ArrowData:
    """Turn a write source into a ``pyarrow.Table`` or ``pyarrow.RecordBatchReader``.

    :param source: see the module documentation.
    :param storage_options: storage options for reading Delta sources.
    :raises InvalidWriteError: for ``None``, unsupported types, missing paths or unreadable files.
    """
    if callable(source) and not _is_data(source):
        produced = _call_source(source)
        if callable(produced) and not _is_data(produced):
            raise InvalidWriteError("a source callable must return data, not another callable")
        return _resolve_value(produced, storage_options)
    return _resolve_value(source, storage_options)


def materialize(data: ArrowData) -> pa.Table:
    """Read a reader fully into a table (tables are returned unchanged)."""
    return data.read_all() if isinstance(data, pa.RecordBatchReader) else data


def _is_data(obj: Any) -> bool:
    # pandas/pyarrow objects are not callables, but some dataframe types are; data wins over "callable".
    return isinstance(obj, pa.Table | pa.RecordBatchReader) or hasattr(obj, "__arrow_c_stream__")


def _call_source(source: Callable[[], Any]) -> Any:
    # Check the signature rather than catching TypeError, which the callable's own body may raise.
    try:
        inspect.signature(source).bind()
    except TypeError as exc:
        raise InvalidWriteError(f"a source callable must take no arguments: {exc}") from exc
    except ValueError:  # builtins without a signature: just call them
        pass
    return source()


def _resolve_value(source: Any, storage_options: dict[str, str] | None) -> ArrowData:
    if source is None:
        raise InvalidWriteError("the write needs a source, got None")
    if isinstance(source, pa.Table | pa.RecordBatchReader):
        return source
    if _is_pandas(source):
        return pa.Table.from_pandas(source, preserve_index=False)
    if isinstance(source, str | os.PathLike):
        return _read_uri(os.fspath(source), storage_options)
    to_arrow = getattr(source, "toArrow", None)
    if callable(to_arrow):
        result = to_arrow()
        if isinstance(result, pa.Table | pa.RecordBatchReader):
            return result
        raise InvalidWriteError(f"toArrow() returned {type(result).__name__}, not a pyarrow.Table")
    if hasattr(source, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(source)
    raise InvalidWriteError(
        f"unsupported source type {type(source).__name__}: use a pyarrow.Table/RecordBatchReader, a pandas "
        "DataFrame, a Parquet/CSV/Delta URI, an object with toArrow() or a zero-argument callable"
    )


def _is_pandas(source: Any) -> bool:
    module = type(source).__module__
    return module.startswith("pandas") and type(source).__name__ == "DataFrame"


def _read_uri(uri: str, storage_options: dict[str, str] | None) -> ArrowData:
    if not uri.strip():
        raise InvalidWriteError("the source URI is empty")
    if uri.startswith(DELTA_PREFIX):
        return _read_delta(uri[len(DELTA_PREFIX) :], storage_options)
    if "://" not in uri or uri.startswith("file://"):
        local = uri.removeprefix("file://")
        if not os.path.exists(local):
            raise InvalidWriteError(f"source path {uri!r} does not exist")
        if os.path.isdir(os.path.join(local, "_delta_log")):
            return _read_delta(uri, storage_options)
    file_format = (
        "csv" if uri.rstrip("/").lower().endswith((".csv", ".csv.gz")) or _dir_of_csv(uri) else "parquet"
    )
    try:
        return pads.dataset(uri, format=file_format).to_table()
    except (OSError, pa.ArrowInvalid) as exc:
        raise InvalidWriteError(f"cannot read {file_format} source {uri!r}: {exc}") from exc


def _dir_of_csv(uri: str) -> bool:
    """A local directory whose data files are all CSV."""
    local = uri.removeprefix("file://")
    if "://" in local or not os.path.isdir(local):
        return False
    names = [n for n in os.listdir(local) if not n.startswith((".", "_"))]
    return bool(names) and all(n.lower().endswith((".csv", ".csv.gz")) for n in names)


def _read_delta(uri: str, storage_options: dict[str, str] | None) -> pa.Table:
    from deltalake import DeltaTable
    from deltalake.exceptions import DeltaError, TableNotFoundError

    try:
        return DeltaTable(uri, storage_options=storage_options).to_pyarrow_table()
    except TableNotFoundError as exc:
        raise InvalidWriteError(f"source Delta table {uri!r} does not exist") from exc
    except DeltaError as exc:
        raise InvalidWriteError(f"cannot read source Delta table {uri!r}: {exc}") from exc
