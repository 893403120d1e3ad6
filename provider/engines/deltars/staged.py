"""Appends and overwrites with delta-rs in two steps: data files first, the lease check, then the commit.

``write_deltalake`` writes the data files and commits in one Rust call; the fence could only run when it
pulled the source's last batch, leaving the flush of the last files and the commit unchecked (measured:
1.4-1.6 s for 4 M rows, ADR 0018). Here the files are written by delta-rs itself into a staging table
*inside* the target's directory (``deltaguard-staged-<id>/``, not hidden, so VACUUM still sees its files),
the staging table's ``add`` actions are read from its first log entry (paths, sizes, partition values and
the statistics exactly as delta-rs wrote them), the fence is checked, and those actions are committed to
the target with ``DeltaTable.create_write_transaction`` (deltalake 1.6.6). What stays unchecked is the
commit call itself. A write fenced off leaves only unreferenced files behind, which VACUUM removes.

Only tables whose protocol needs nothing a plain ``add`` action lacks take this path (:func:`unstageable`):
column mapping, generated or identity columns, CHECK constraints, invariants, change data feed and row
tracking all make delta-rs write or check more than the files, so such tables keep the single call with
the stream-end check. MERGE, UPDATE, DELETE, REPLACE WHERE and OPTIMIZE have no such split in deltalake
1.6.6: their unchecked window is detected after the commit instead
(:meth:`deltaguard.leases.keeper.LeaseKeeper.after_commit`).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.fs import DeltaStorageHandler
from deltalake.transaction import AddAction, CommitProperties, RemoveAction

from deltaguard.engines.fencing import CommitFence, check_fence

#: where a staged write's files go, under the table's root
STAGING_PREFIX = "deltaguard-staged-"
#: writer features a plain ``add`` action satisfies (table features protocol, writer version 7)
_PLAIN_WRITER_FEATURES = frozenset(
    {"appendOnly", "timestampNtz", "deletionVectors", "v2Checkpoint", "vacuumProtocolCheck"}
)
#: the first log entry of a table (the staging table is new)
_FIRST_COMMIT = "_delta_log/00000000000000000000.json"


def unstageable(table: DeltaTable, partition_by: Sequence[str]) -> str | None:
    """Why a write to ``table`` cannot be staged, or ``None`` when it can.

    :param table: the open target table.
    :param partition_by: the partition columns the write names (empty: the table's).
    """
    protocol = table.protocol()
    features = set(protocol.writer_features or ())
    if protocol.min_writer_version > 2 and not (
        protocol.min_writer_version == 7 and features <= _PLAIN_WRITER_FEATURES
    ):
        return f"writer protocol {protocol.min_writer_version} with features {sorted(features)}"
    configuration = table.metadata().configuration
    if any(key.startswith("delta.constraints.") for key in configuration):
        return "CHECK constraints"
    if str(configuration.get("delta.enableChangeDataFeed", "")).lower() == "true":
        return "change data feed"
    if str(configuration.get("delta.columnMapping.mode", "none")).lower() != "none":
        return "column mapping"
    for field in table.schema().fields:
        if any(key.startswith("delta.") for key in (field.metadata or {})):
            return f"column {field.name} carries Delta metadata (invariants, generation, identity)"
    partitions = list(table.metadata().partition_columns)
    if partition_by and list(partition_by) != partitions:
        return f"partition_by {list(partition_by)} differs from the table's {partitions}"
    return None


def staged_commit(
    table: DeltaTable,
    table_uri: str,
    data: pa.Table | pa.RecordBatchReader,
    *,
    mode: str,
    commit: CommitProperties,
    fence: CommitFence,
    storage_options: dict[str, str] | None,
) -> None:
    """Write ``data`` into a staging table under ``table_uri``, check ``fence``, commit the files.

    :param table: the open target (the commit is made from its snapshot).
    :param table_uri: the target's URI.
    :param data: the rows (cast to the table's schema as delta-rs would; a cast that fails is raised).
    :param mode: ``"append"`` or ``"overwrite"``.
    :param commit: commit properties (metadata, app transaction, retries).
    :param fence: the writer's fence, checked between the files and the commit.
    :param storage_options: storage options of the target.
    :raises CommitFencedError: the lease is lost; nothing is committed.
    """
    schema = pa.schema(table.schema().to_arrow())
    partitions = list(table.metadata().partition_columns)
    directory = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    staging_uri = f"{table_uri.rstrip('/')}/{directory}"
    staged = conformed(data, schema)
    write_deltalake(
        staging_uri,
        staged,
        mode="error",
        partition_by=partitions or None,
        configuration=_stats_settings(table.metadata().configuration),
        storage_options=storage_options,
    )
    handler = DeltaStorageHandler(staging_uri, options=storage_options)
    actions: list[AddAction | RemoveAction] = [_add_action(directory, add) for add in _staged_adds(handler)]
    try:
        check_fence(fence, table_uri)  # the last check: only the commit call below is unchecked
        table.create_write_transaction(
            actions,
            mode=mode,
            schema=table.schema(),
            partition_by=partitions or None,
            commit_properties=commit,
        )
    finally:
        _forget_staging_log(handler)


def same_columns(data: pa.Table | pa.RecordBatchReader, table: DeltaTable) -> bool:
    """Whether ``data`` has exactly the table's columns (in any order); else delta-rs decides alone."""
    return set(data.schema.names) == {f.name for f in table.schema().fields}


def conformed(data: pa.Table | pa.RecordBatchReader, schema: pa.Schema) -> pa.Table | pa.RecordBatchReader:
    """``data`` with the table's column order and types (a safe cast, as delta-rs casts on write).

    :raises InvalidWriteError: a value does not fit the table's type.
    """
    from deltaguard.engines.errors import InvalidWriteError

    def cast(table: pa.Table) -> pa.Table:
        try:
            return table.select(schema.names).cast(schema)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
            raise InvalidWriteError(f"the rows do not fit the table's schema: {exc}") from exc

    if isinstance(data, pa.Table):
        return cast(data)
    batches = (b for chunk in data for b in cast(pa.Table.from_batches([chunk])).to_batches())
    return pa.RecordBatchReader.from_batches(schema, batches)


def _stats_settings(configuration: dict[str, Any]) -> dict[str, str | None]:
    """The target's statistics settings, so the staged files carry the statistics its writes would."""
    keys = ("delta.dataSkippingNumIndexedCols", "delta.dataSkippingStatsColumns")
    return {k: configuration[k] for k in keys if configuration.get(k) is not None}


def _staged_adds(handler: DeltaStorageHandler) -> list[dict[str, Any]]:
    with handler.open_input_stream(_FIRST_COMMIT) as stream:
        lines = stream.read().decode("utf-8").splitlines()
    actions = [json.loads(line) for line in lines if line.strip()]
    return [a["add"] for a in actions if "add" in a]


def _add_action(directory: str, add: dict[str, Any]) -> AddAction:
    return AddAction(
        path=f"{directory}/{add['path']}",
        size=int(add["size"]),
        partition_values=add.get("partitionValues") or {},
        modification_time=int(add["modificationTime"]),
        data_change=True,
        stats=add.get("stats") or "",
    )


def _forget_staging_log(handler: DeltaStorageHandler) -> None:
    """Delete the staging table's log: its files now belong to the target (or to nobody, for VACUUM)."""
    with contextlib.suppress(Exception):  # a leftover log is harmless: only the target's log names the files
        handler.delete_dir("_delta_log")
