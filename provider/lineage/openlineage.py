"""OpenLineage facets of a deltaguard write (needs the optional ``apache-airflow-providers-openlineage``).

Imported only from ``get_openlineage_facets_on_complete``, which the OpenLineage provider calls; without the
provider nothing here is imported and the operators work as before.

Standard facets where the spec has one:

* output dataset ``version`` (``DatasetVersionDatasetFacet``): the committed Delta table version;
* output dataset ``storage`` (``StorageDatasetFacet``): ``storageLayer="delta"``, ``fileFormat="parquet"``;
* output dataset ``lifecycleStateChange`` (``LifecycleStateChangeDatasetFacet``) when the write created,
  overwrote or altered the table (:attr:`~deltaguard.lineage.record.WriteRecord.lifecycle`);

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
    storage_dataset,
)
from openlineage.client.generated.base import InputDataset, OutputDataset, RunFacet

from deltaguard.lineage.naming import dataset_name

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

    from deltaguard.lineage.record import WriteRecord

#: the custom facet's ``_schemaURL``: a URN naming this version of the facet, as the project publishes its
#: schema nowhere on the web yet (the fields are documented in docs/operators.md, "Lineage and assets")
FACET_SCHEMA_URL = "urn:deltaguard:openlineage:DeltaguardWriteRunFacet:1-0-0"


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


def operator_lineage(record: WriteRecord) -> OperatorLineage:
    """The :class:`OperatorLineage` of one write."""
    from airflow.providers.openlineage.extractors import OperatorLineage

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
    output = OutputDataset(namespace=record.output.namespace, name=record.output.name, facets=facets)
    inputs = [InputDataset(namespace=i.namespace, name=i.name) for i in record.inputs]
    run_facet = DeltaguardWriteRunFacet(
        tableUri=record.table_uri,
        version=record.version,
        operation=record.operation,
        committed=record.committed,
        duplicate=record.duplicate,
        appId=record.app_id,
        metrics=dict(record.metrics),
    )
    return OperatorLineage(inputs=inputs, outputs=[output], run_facets={"deltaguardWrite": run_facet})


def leased_tables_lineage(wrapped: OperatorLineage | None, table_locations: Sequence[str]) -> OperatorLineage:
    """The lineage of work done under a lease: the wrapped operator's own, plus each leased table as an output.

    deltaguard does not see the wrapped commit, so the tables carry no version; a table the wrapped operator
    already reports is not repeated.

    :param wrapped: what the wrapped operator reported itself, if anything.
    :param table_locations: the leased tables' locations.
    """
    from airflow.providers.openlineage.extractors import OperatorLineage

    outputs = list(wrapped.outputs) if wrapped is not None else []
    reported = {(o.namespace, o.name) for o in outputs}
    for location in table_locations:
        name = dataset_name(location)
        if (name.namespace, name.name) in reported:
            continue
        reported.add((name.namespace, name.name))
        storage = storage_dataset.StorageDatasetFacet(storageLayer="delta", fileFormat="parquet")
        outputs.append(OutputDataset(namespace=name.namespace, name=name.name, facets={"storage": storage}))
    if wrapped is None:
        return OperatorLineage(outputs=outputs)
    return OperatorLineage(
        inputs=list(wrapped.inputs),
        outputs=outputs,
        run_facets=dict(wrapped.run_facets),
        job_facets=dict(wrapped.job_facets),
    )
