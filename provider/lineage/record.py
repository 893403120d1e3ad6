"""What one committed write tells lineage: the table, its version, the Delta operation, the inputs.

Pure (no Airflow, no OpenLineage): the asset event's ``extra`` and the OpenLineage facets are both built
from one :class:`WriteRecord`, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from deltaguard.lineage.naming import DatasetName, canonical_uri, dataset_name

#: Delta operation names (the commit's ``operation``) after which the table is a new table or has a new
#: shape, as OpenLineage's ``LifecycleStateChange`` names it; other writes change rows only. delta-rs 1.6.6
#: names, measured on real tables (``tests/lineage/test_lifecycle.py`` runs each kind of write and checks
#: the name its commit records): ``CREATE TABLE``, ``CREATE OR REPLACE TABLE``, ``ADD COLUMN``,
#: ``CHANGE COLUMN`` (``drop_column_not_null``), ``SET TBLPROPERTIES``, ``ADD CONSTRAINT``,
#: ``DROP CONSTRAINT``, ``ADD FEATURE``, ``UPDATE TABLE METADATA`` (name, description),
#: ``UPDATE FIELD METADATA``, ``RESTORE``; row writes are ``WRITE``, ``MERGE``, ``UPDATE``, ``DELETE``,
#: ``OPTIMIZE`` (compaction and Z-order), ``VACUUM START``/``VACUUM END``. delta-spark's names are those of
#: its ``DeltaOperations`` (``ADD COLUMNS``, ``CREATE TABLE AS SELECT``, ``UNSET TBLPROPERTIES``, ...).
_LIFECYCLE: dict[str, str] = {
    # a new table
    "CREATE TABLE": "CREATE",
    "CREATE TABLE AS SELECT": "CREATE",
    "CLONE": "CREATE",
    # a table replaced, or its contents set back to an older version
    "CREATE OR REPLACE TABLE": "OVERWRITE",
    "CREATE OR REPLACE TABLE AS SELECT": "OVERWRITE",
    "REPLACE TABLE": "OVERWRITE",
    "REPLACE TABLE AS SELECT": "OVERWRITE",
    "RESTORE": "OVERWRITE",
    # a new shape, properties, constraints or features
    "ADD COLUMN": "ALTER",
    "ADD COLUMNS": "ALTER",
    "CHANGE COLUMN": "ALTER",
    "CHANGE COLUMNS": "ALTER",
    "REPLACE COLUMNS": "ALTER",
    "RENAME COLUMN": "ALTER",
    "DROP COLUMNS": "ALTER",
    "SET TBLPROPERTIES": "ALTER",
    "UNSET TBLPROPERTIES": "ALTER",
    "ADD CONSTRAINT": "ALTER",
    "DROP CONSTRAINT": "ALTER",
    "ADD FEATURE": "ALTER",
    "DROP FEATURE": "ALTER",
    "UPGRADE PROTOCOL": "ALTER",
    "UPDATE TABLE METADATA": "ALTER",
    "UPDATE FIELD METADATA": "ALTER",
    "CLUSTER BY": "ALTER",
    "TRUNCATE": "TRUNCATE",
}


@dataclass(frozen=True)
class WriteRecord:
    """One write as lineage reports it.

    :param table_uri: the table's canonical URI (:func:`~deltaguard.lineage.naming.canonical_uri`), also
        its asset URI.
    :param output: the table as an OpenLineage dataset.
    :param version: the table version the write committed (or, when nothing was committed, read).
    :param operation: the Delta operation in the commit (``WRITE``, ``MERGE``, ``DELETE``, ...).
    :param committed: ``False`` when the write changed nothing and made no commit.
    :param duplicate: ``True`` when an earlier try had committed this write already.
    :param mode: ``overwrite`` for a whole-table overwrite (a Delta ``WRITE`` in overwrite mode).
    :param app_id: the app transaction id the write ran under.
    :param inputs: the source locations the write read, where known, as OpenLineage datasets.
    :param input_uris: the same locations as canonical URIs (their asset URIs).
    :param metrics: the engine's numeric operation metrics.
    """

    table_uri: str
    output: DatasetName
    version: int | None
    operation: str
    committed: bool = True
    duplicate: bool = False
    mode: str | None = None
    app_id: str | None = None
    inputs: tuple[DatasetName, ...] = ()
    input_uris: tuple[str, ...] = ()
    metrics: Mapping[str, int | float] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        table_uri: str,
        result: Any,
        *,
        storage_options: Mapping[str, str] | None = None,
        inputs: Sequence[str] = (),
        mode: str | None = None,
        app_id: str | None = None,
    ) -> WriteRecord:
        """From an engine's :class:`~deltaguard.engines.base.WriteResult` (read by attribute).

        :param table_uri: the table as the operator resolved it.
        :param result: the write's result.
        :param storage_options: the table's storage options (see :func:`canonical_uri`).
        :param inputs: source locations (paths or URIs) the write read.
        :param mode: the write's mode when it is an overwrite.
        :param app_id: the app transaction id.
        """
        metrics = {
            str(k): v
            for k, v in dict(getattr(result, "metrics", None) or {}).items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
        version = getattr(result, "version", None)
        return cls(
            table_uri=canonical_uri(table_uri, storage_options),
            output=dataset_name(table_uri, storage_options),
            version=None if version is None else int(version),
            operation=str(getattr(result, "operation", "") or ""),
            committed=bool(getattr(result, "committed", True)),
            duplicate=bool(getattr(result, "duplicate", False)),
            mode=mode,
            app_id=app_id,
            inputs=tuple(dataset_name(i) for i in inputs),
            input_uris=tuple(canonical_uri(i) for i in inputs),
            metrics=metrics,
        )

    @property
    def lifecycle(self) -> str | None:
        """OpenLineage's lifecycle state change of the table (``CREATE``, ``OVERWRITE``, ``ALTER``, ...),
        ``None`` when only rows changed or nothing was committed."""
        if not self.committed or self.duplicate:
            return None
        if self.version == 0:  # the first commit creates the table, whatever the operation
            return "CREATE"
        if self.mode == "overwrite":
            return "OVERWRITE"
        return _LIFECYCLE.get(self.operation.upper())

    def asset_extra(self) -> dict[str, Any]:
        """The ``extra`` of the table's asset event (JSON: what a downstream DAG may read)."""
        return {
            "table_uri": self.table_uri,
            "version": self.version,
            "operation": self.operation,
            "committed": self.committed,
            "duplicate": self.duplicate,
            "app_id": self.app_id,
        }
