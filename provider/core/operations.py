"""Write operations as the conflict model sees them."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from deltaguard.core.profiles import EngineProfile


class OperationKind(StrEnum):
    """Every kind of Delta write the conflict model reasons about."""

    INSERT = "INSERT"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    MERGE = "MERGE"
    OPTIMIZE = "OPTIMIZE"
    REORG_PURGE = "REORG_PURGE"
    REORG_UPGRADE = "REORG_UPGRADE"
    OVERWRITE = "OVERWRITE"
    REPLACE_WHERE = "REPLACE_WHERE"
    SET_TBLPROPERTIES = "SET_TBLPROPERTIES"
    ADD_COLUMNS = "ADD_COLUMNS"
    ALTER_SCHEMA = "ALTER_SCHEMA"
    CREATE_OR_REPLACE = "CREATE_OR_REPLACE"
    STREAMING_WRITE = "STREAMING_WRITE"


#: Data writes whose commit Delta's schema auto-merge (``spark.databricks.delta.schema.autoMerge.enabled``)
#: or a ``mergeSchema`` option can turn into a schema change: measured for MERGE, INSERT and DataFrame
#: appends on delta-spark 4.4.0 (ADR 0035); a streaming append honours the same switches. UPDATE and DELETE
#: never add columns.
SCHEMA_EVOLVABLE: frozenset[OperationKind] = frozenset(
    {
        OperationKind.INSERT,
        OperationKind.MERGE,
        OperationKind.REPLACE_WHERE,
        OperationKind.OVERWRITE,
        OperationKind.STREAMING_WRITE,
    }
)

#: Operations that change metadata (protocol, properties, schema) or (re)create the table.
#: The Databricks page: "Metadata changes cause all concurrent write operations to fail."
METADATA_CHANGES: frozenset[OperationKind] = frozenset(
    {
        OperationKind.SET_TBLPROPERTIES,
        OperationKind.ADD_COLUMNS,
        OperationKind.ALTER_SCHEMA,
        OperationKind.REORG_UPGRADE,
        OperationKind.CREATE_OR_REPLACE,
    }
)

#: UPDATE, DELETE and MERGE: the middle row/column of the Databricks page's tables.
DML: frozenset[OperationKind] = frozenset({OperationKind.UPDATE, OperationKind.DELETE, OperationKind.MERGE})


@dataclass(frozen=True)
class Operation:
    """One write against one table.

    :param kind: what the write does.
    :param predicate: the rows it reads/rewrites (``WHERE`` of UPDATE/DELETE, the ``replaceWhere`` of
        REPLACE_WHERE, the partition filter of OPTIMIZE; for INSERT optionally the partition values the
        appended rows carry, e.g. ``date = '2024-01-01'``). ``None`` means the whole table.
    :param merge_condition: the ``ON`` condition of a MERGE; only its explicit target-side conjuncts
        restrict what the MERGE reads.
    :param target_alias: the alias of the target table in ``merge_condition`` (default ``t``).
    :param zorder_by: OPTIMIZE ... ZORDER BY columns.
    :param reads_target: the statement reads its own table besides its predicate (INSERT ... SELECT from
        it, a subquery, CTE or MERGE source over it, or a relation that may be it). It then reads the whole
        table and has MERGE concurrency ("Isolation levels and write conflicts", footnote 1).
    :param checkpoint_location: a streaming write's checkpoint; two streams with the same checkpoint
        conflict.
    :param assignments: ``(column, expression)`` pairs an UPDATE or a MERGE's ``WHEN MATCHED THEN UPDATE``
        sets on the rows it reads; ``("*", "*")`` for ``UPDATE SET *``. A row whose partition column is set
        moves to another partition, so the operation writes outside what it reads (ADR 0012).
    :param inserts: the rows a MERGE's ``WHEN NOT MATCHED THEN INSERT`` adds: ``""`` when it has no such
        clause, a predicate such as ``date = '2024-01-01'`` when the inserted values are fixed, ``None``
        when they come from the source (anywhere in the table). For a REPLACE_WHERE, a predicate every new
        row satisfies besides ``predicate`` (the source's ranges, ``id BETWEEN 1 AND 9``), ``""`` when
        only ``predicate`` is known.
    :param evolves_schema: the write may add columns to (or widen) the table's schema as it commits: a
        ``MERGE WITH SCHEMA EVOLUTION``, a write under ``spark.databricks.delta.schema.autoMerge.enabled``
        or with ``mergeSchema``, delta-rs ``schema_mode="merge"`` / ``merge_schema=True``. Its commit then
        carries a ``metaData`` action, and every concurrent write fails with MetadataChangedException
        (measured on delta-spark 4.4.0 and delta-rs 1.6.6, ADR 0035): it is judged as a metadata change.
    :param engine: the engine that commits this operation, when it is not the one the question is asked
        for (a running write of another engine on the same table).
    :param sql: the Spark SQL statement this operation was classified from, if any.
    :param label: a human name for messages (e.g. the Airflow task id).
    """

    kind: OperationKind
    predicate: str | None = None
    merge_condition: str | None = None
    target_alias: str = "t"
    zorder_by: tuple[str, ...] = ()
    reads_target: bool = False
    checkpoint_location: str | None = None
    assignments: tuple[tuple[str, str], ...] = ()
    inserts: str | None = ""
    evolves_schema: bool = False
    engine: EngineProfile | None = None
    sql: str | None = field(default=None, compare=False)
    label: str | None = field(default=None, compare=False)

    def __hash__(self) -> int:
        # Computed once (over the compared fields, as the generated hash would be): every decision looks its
        # running operations up by them (their digested facts, the verdicts of operations equal but for
        # their label), 1,000 times per decision in a long queue.
        found: int | None = self.__dict__.get("_hash")
        if found is None:
            found = hash(tuple(getattr(self, f.name) for f in fields(self) if f.compare))
            object.__setattr__(self, "_hash", found)
        return found

    def __getstate__(self) -> dict[str, Any]:
        # A string's hash differs between processes: a pickled operation must not carry this one's.
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    @property
    def misjudged_under_auto_merge(self) -> bool:
        """Schema auto-merge (``spark.databricks.delta.schema.autoMerge.enabled``) could make this write add
        columns as it commits, although it is judged as changing no metadata: a write of a kind in
        :data:`SCHEMA_EVOLVABLE` not already marked ``evolves_schema``."""
        return self.kind in SCHEMA_EVOLVABLE and not self.evolves_schema

    @property
    def changes_metadata(self) -> bool:
        """A metadata change by its kind, or a data write that evolves the schema as it commits."""
        return self.kind in METADATA_CHANGES or self.evolves_schema

    def describe(self) -> str:
        """A short human description such as ``MERGE (t.date = '2024-01-01')``."""
        name = self.label or self.kind.value
        detail = self.merge_condition if self.kind is OperationKind.MERGE else self.predicate
        text = f"{name} ({detail})" if detail else name
        # What it writes outside what it reads, so a reason about a write scope names it.
        if self.assignments:
            text += " SET " + ", ".join(f"{column} = {value}" for column, value in self.assignments[:3])
            text += ", ..." if len(self.assignments) > 3 else ""
        if self.inserts is None:
            text += " INSERT source rows"
        elif self.inserts:
            text += f" INSERT ({self.inserts})"
        if self.reads_target and self.kind is not OperationKind.INSERT:
            text += " reading its own table"
        if self.evolves_schema:
            text += " with schema evolution"
        return text
