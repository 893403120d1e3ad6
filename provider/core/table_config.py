"""A Delta table's configuration as it matters for write conflicts."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from deltaguard.core.file_stats import FileStatsSummary
from deltaguard.core.oracle import PredicateOracle


@dataclass(frozen=True)
class TableConfig:
    """What the conflict model needs to know about one Delta table.

    Properties are kept exactly as stored in the Delta log (``delta.isolationLevel`` may be spelled
    ``Serializable``, ``WriteSerializable``, ``writeSerializable``, ...); the engine profile decides
    what a spelling means, because engines disagree.

    :param partition_columns: partition columns, in order.
    :param properties: table properties exactly as stored in the Delta log.
    :param clustering_columns: liquid clustering columns (non-empty means liquid clustering).
    :param identity_columns: identity columns (any means no concurrent transactions at all).
    :param exists: ``False`` when the table does not exist yet: any write then creates it.
    :param version: the table version the configuration was read at.
    :param min_reader_version: protocol reader version.
    :param min_writer_version: protocol writer version.
    :param reader_features: table features required by readers.
    :param writer_features: table features required by writers.
    :param unknown: properties or features the model does not understand; any entry makes the model
        conservative (every pair on the table conflicts).
    :param uri: where the table lives, for messages.
    :param file_stats: per-file column statistics of the same snapshot, when the engine layer read them
        (only the delta-rs profile uses them, ADR 0020); ``None``: not read.
    :param generated_columns: ``(column, generation expression)`` of every generated column (the schema's
        ``delta.generationExpression`` field metadata). Setting a column such an expression reads changes
        the generated column too: a row whose generated partition column follows moves (ADR 0001).
    :param timestamp_columns: columns of type ``TIMESTAMP`` or ``TIMESTAMP_NTZ``. A Spark session reads a
        date or timestamp literal compared with them in its own time zone (ADR 0001).
    :param column_types: ``(column, Delta type)`` of the top-level columns, types spelled as in the Delta
        schema (``string``, ``long``, ``decimal(5,2)``, ``double``, ``date``, ...; ``complex`` for a struct,
        array or map); ``None`` when the schema's types were not read. delta-rs compares numbers
        with partition values in ways that depend on the type (ADR 0003 fact 13): a column of unknown type
        is judged as possibly any of them.
    :param meaning: the engine's own evaluator of partition predicates, when an engine read the table:
        the delta-rs rules then let it confirm every pair they keep apart by partition (ADR 0037). Not
        part of the configuration's identity, and never stored.
    """

    partition_columns: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict, hash=False)
    clustering_columns: tuple[str, ...] = ()
    identity_columns: tuple[str, ...] = ()
    exists: bool = True
    version: int | None = None
    min_reader_version: int | None = None
    min_writer_version: int | None = None
    reader_features: tuple[str, ...] = ()
    writer_features: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    uri: str | None = field(default=None, compare=False)
    file_stats: FileStatsSummary | None = None
    generated_columns: tuple[tuple[str, str], ...] = ()
    timestamp_columns: tuple[str, ...] = ()
    column_types: tuple[tuple[str, str], ...] | None = None
    meaning: PredicateOracle | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Freeze the mapping so a shared configuration cannot be changed behind the cache's back.
        object.__setattr__(self, "properties", MappingProxyType(dict(self.properties)))

    def get_property(self, key: str) -> str | None:
        """A table property by its exact key, as deltalake 1.6.6 and delta-spark 4.4.0 read it (another
        spelling of the key is another property; :mod:`deltaguard.core.closed_world` reports it)."""
        return self.properties.get(key)

    def flag(self, key: str) -> bool:
        """A boolean table property by its exact key: ``'true'`` is true; absent or anything else is false
        (``'TRUE'`` is true to Spark and false to deltalake 1.6.6; :mod:`deltaguard.core.closed_world`
        reports such values)."""
        return self.get_property(key) == "true"

    def column_type(self, column: str) -> str | None:
        """The Delta type of a top-level column, lower-cased (``None``: not known; names case-insensitive)."""
        lowered = column.lower()
        for name, kind in self.column_types or ():
            if name.lower() == lowered:
                return kind.strip().lower()
        return None

    @property
    def string_columns(self) -> frozenset[str]:
        """The lower-cased columns the schema says are STRINGs (empty when the types were not read): Spark
        and delta-rs compare them with a string literal as text, so ``'01'`` and ``'1'`` are two values."""
        return frozenset(
            name.lower() for name, kind in self.column_types or () if kind.strip().lower() == "string"
        )

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_columns)

    @property
    def has_liquid_clustering(self) -> bool:
        return bool(self.clustering_columns)

    @property
    def deletion_vectors_enabled(self) -> bool:
        return self.flag("delta.enableDeletionVectors")

    @property
    def has_identity_columns(self) -> bool:
        return bool(self.identity_columns)

    def generated_by(self, assigned: Collection[str]) -> tuple[tuple[str, str], ...]:
        """The generated columns whose value changes when ``assigned`` columns are set.

        A generated column moves when its expression reads an assigned column (names compared
        case-insensitively, struct paths by their first part), or when the expression cannot be read (then
        any assignment may change it). ``*`` (``UPDATE SET *``) moves every generated column.

        :param assigned: the columns an UPDATE or MERGE sets.
        :returns: ``(column, expression)`` pairs, in the table's order.
        """
        from deltaguard.core.sql.columns import assigned_column, expression_columns

        names = {name for column in assigned for name in assigned_column(column).names}
        if not names:
            return ()
        moved: dict[str, tuple[str, str]] = {}
        changed = True
        while changed:  # Delta forbids generated columns over generated columns; the closure costs nothing
            changed = False
            for column, expression in self.generated_columns:
                if column.lower() in moved:
                    continue
                used = expression_columns(expression)
                if "*" in names or used is None or used & (names | set(moved)):
                    moved[column.lower()] = (column, expression)
                    changed = True
        return tuple(moved.values())
