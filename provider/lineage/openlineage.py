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

from typing import TYPE_CHECKING, Any

import attr
from openlineage.client.facet_v2 import (
    dataset_version_dataset,
    lifecycle_state_change_dataset,
    storage_dataset,
)
from openlineage.client.generated.base import InputDataset, OutputDataset, RunFacet

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
