"""OpenLineage facets of a deltaguard write (needs the optional ``apache-airflow-providers-openlineage``).

Imported only from ``get_openlineage_facets_on_complete``, which the OpenLineage provider calls; without the
provider nothing here is imported and the operators work as before.

Standard facets where the spec has one:

* output dataset ``version`` (``DatasetVersionDatasetFacet``): the committed Delta table version;
* output dataset ``storage`` (``StorageDatasetFacet``): ``storageLayer="delta"``, ``fileFormat="parquet"``;
* output dataset ``lifecycleStateChange`` (``LifecycleStateChangeDatasetFacet``) when the write created,
  overwrote or altered the table (:attr:`~deltaguard.lineage.record.WriteRecord.lifecycle`);
* output dataset ``schema`` (``SchemaDatasetFacet``): the table's columns at the written version;
* output dataset facet ``outputStatistics`` (``OutputStatisticsOutputDatasetFacet``): rows, bytes and files
  the commit added (:mod:`deltaguard.lineage.record`);

and one custom run facet, ``deltaguardWrite`` (:class:`DeltaguardWriteRunFacet`), for what the spec has no
field for: the Delta operation, whether a commit was made or an earlier try's commit was found, the app
transaction id and the numeric operation metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attr
from openlineage.client.facet_v2 import (
    dataset_version_dataset,
    lifecycle_state_change_dataset,
    output_statistics_output_dataset,
    schema_dataset,
    storage_dataset,
)
from openlineage.client.generated.base import InputDataset, OutputDataset, RunFacet

from deltaguard import RAW_SOURCE_URL, SOURCE_URL, __version__
from deltaguard.lineage.record import dataset_name

if TYPE_CHECKING:
    from typing import TypeAlias

    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset
    from openlineage.client.facet import BaseFacet as BaseFacetV1
    from openlineage.client.facet_v2 import JobFacet

    from deltaguard.lineage.record import CommitFacts, SchemaField, WriteRecord

    #: The lineage deltaguard reports: datasets in and out, run and job facets (a wrapped operator's own may
    #: be of OpenLineage's first facet generation, which OperatorLineage also takes).
    Lineage: TypeAlias = OperatorLineage[Dataset, BaseFacetV1 | RunFacet | JobFacet]

#: the custom facet's ``_schemaURL``: the JSON schema shipped in the package
#: (``deltaguard/lineage/DeltaguardWriteRunFacet.json``), served as JSON (not a repository's HTML page) from
#: the release's tag, so a URL names one schema for good, as OpenLineage's versioned spec URLs do
FACET_SCHEMA_URL = (
    f"{RAW_SOURCE_URL}/{__version__}/provider/lineage/DeltaguardWriteRunFacet.json"
    "#/$defs/DeltaguardWriteRunFacet"
)
#: who produced the facet: deltaguard at its version (OpenLineage's ``_producer`` convention, a URI naming
#: the producing code), not the OpenLineage provider that sends the event
FACET_PRODUCER = f"{SOURCE_URL}/tree/{__version__}"


@attr.define
class DeltaguardWriteRunFacet(RunFacet):
    """The Delta commit a deltaguard task made.

    :param tableUri: the table's canonical URI (also its Airflow asset URI).
    :param version: the committed table version (read version when nothing was committed).
    :param operation: the Delta operation in the commit (``WRITE``, ``MERGE``, ``DELETE``, ``OPTIMIZE``, ...).
    :param committed: ``False`` when the write changed nothing and made no commit.
    :param duplicate: ``True`` when an earlier try had committed this write (nothing written now).
    :param appId: the app transaction id the write ran under.
    :param metrics: the engine's numeric operation metrics.
    """

    tableUri: str
    version: int | None
    operation: str
    committed: bool
    duplicate: bool
    appId: str | None = attr.field(default=None)
    metrics: dict[str, Any] = attr.field(factory=dict)

    @staticmethod
    def _get_schema() -> str:
        return FACET_SCHEMA_URL


def operator_lineage(record: WriteRecord, facts: CommitFacts | None = None) -> Lineage:
    """The :class:`OperatorLineage` of one write.

    :param record: the write.
    :param facts: the schema and statistics read from its commit (none: those facets are left out).
    """
    from airflow.providers.openlineage.extractors import OperatorLineage

    output = output_dataset(record, facts)
    inputs: list[Dataset] = [InputDataset(namespace=i.namespace, name=i.name) for i in record.inputs]
    return OperatorLineage(inputs=inputs, outputs=[output], run_facets={"deltaguardWrite": run_facet(record)})


def output_dataset(record: WriteRecord, facts: CommitFacts | None = None) -> OutputDataset:
    """The table a write wrote, with the standard facets of its version, storage, lifecycle, schema and
    statistics (module doc)."""
    facets: dict[str, Any] = {
        "storage": storage_dataset.StorageDatasetFacet(storageLayer="delta", fileFormat="parquet"),
    }
    if record.version is not None:
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(
            datasetVersion=str(record.version)
        )
    if record.lifecycle is not None:
        facets["lifecycleStateChange"] = lifecycle_state_change_dataset.LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=lifecycle_state_change_dataset.LifecycleStateChange(record.lifecycle)
        )
    output_facets: dict[str, Any] = {}
    if facts is not None and facts.schema is not None:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(fields=_schema_fields(facts.schema))
    if facts is not None and facts.statistics is not None and record.committed and not record.duplicate:
        stats = facts.statistics
        output_facets["outputStatistics"] = (
            output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=stats.row_count, size=stats.size, fileCount=stats.file_count
            )
        )
    return OutputDataset(
        namespace=record.output.namespace, name=record.output.name, facets=facets, outputFacets=output_facets
    )


def _schema_fields(fields: Sequence[SchemaField]) -> list[schema_dataset.SchemaDatasetFacetFields]:
    return [
        schema_dataset.SchemaDatasetFacetFields(
            name=f.name, type=f.type, ordinal_position=i, fields=_schema_fields(f.fields)
        )
        for i, f in enumerate(fields, start=1)
    ]


def run_facet(record: WriteRecord) -> DeltaguardWriteRunFacet:
    """The custom run facet of one write."""
    return DeltaguardWriteRunFacet(
        producer=FACET_PRODUCER,
        tableUri=record.table_uri,
        version=record.version,
        operation=record.operation,
        committed=record.committed,
        duplicate=record.duplicate,
        appId=record.app_id,
        metrics=dict(record.metrics),
    )


def leased_tables_lineage(
    wrapped: Lineage | None,
    writes: Sequence[tuple[WriteRecord, CommitFacts | None]],
    table_locations: Sequence[str] = (),
) -> Lineage:
    """The lineage of work done under a lease: the wrapped operator's own, plus each leased table as an output.

    deltaguard does not make the wrapped commit but reads it from the table's log once the work ended
    (:mod:`deltaguard.operators.leased_lineage`), so each table carries its version, schema and statistics like a
    write of deltaguard's own. A table the wrapped operator already reports keeps its facets and gains
    those it lacks.

    :param wrapped: what the wrapped operator reported itself, if anything.
    :param writes: each leased table's write record and what its commit(s) wrote.
    :param table_locations: leased tables with no record (unreadable after the work): named, no facets.
    """
    from airflow.providers.openlineage.extractors import OperatorLineage

    outputs = list(wrapped.outputs) if wrapped is not None else []
    position = {(o.namespace, o.name): i for i, o in enumerate(outputs)}
    ours = [output_dataset(record, facts) for record, facts in writes]
    for location in table_locations:
        name = dataset_name(location)
        storage = storage_dataset.StorageDatasetFacet(storageLayer="delta", fileFormat="parquet")
        ours.append(OutputDataset(namespace=name.namespace, name=name.name, facets={"storage": storage}))
    for dataset in ours:
        key = (dataset.namespace, dataset.name)
        if key not in position:
            position[key] = len(outputs)
            outputs.append(dataset)
            continue
        theirs = outputs[position[key]]
        # a plain Dataset (as many operators report their outputs) has no output facets
        their_output_facets = theirs.outputFacets if isinstance(theirs, OutputDataset) else None
        outputs[position[key]] = OutputDataset(
            namespace=theirs.namespace,
            name=theirs.name,
            facets={**(dataset.facets or {}), **(theirs.facets or {})},
            outputFacets={**(dataset.outputFacets or {}), **(their_output_facets or {})},
        )
    run_facets = dict(wrapped.run_facets) if wrapped is not None else {}
    if len(writes) == 1:  # one table: the same run facet as deltaguard's own writes
        run_facets.setdefault("deltaguardWrite", run_facet(writes[0][0]))
    return OperatorLineage(
        inputs=list(wrapped.inputs) if wrapped is not None else [],
        outputs=outputs,
        run_facets=run_facets,
        job_facets=dict(wrapped.job_facets) if wrapped is not None else {},
    )
