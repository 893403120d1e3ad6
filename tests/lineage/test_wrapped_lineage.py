"""The lineage of leased work merges the wrapped operator's own report with the leased tables."""

from __future__ import annotations

from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.event_v2 import Dataset
from openlineage.client.facet_v2 import documentation_dataset
from openlineage.client.generated.base import OutputDataset

from deltaguard.lineage.openlineage import leased_tables_lineage
from deltaguard.lineage.record import dataset_name


def test_a_table_the_wrapped_operator_reports_as_a_plain_dataset_gains_the_delta_facets(tmp_path) -> None:
    # Many operators report their outputs as plain OpenLineage Datasets (no output facets field at all).
    location = str(tmp_path / "sales")
    name = dataset_name(location)
    docs = documentation_dataset.DocumentationDatasetFacet(description="daily sales")
    wrapped = OperatorLineage(
        outputs=[Dataset(namespace=name.namespace, name=name.name, facets={"documentation": docs})]
    )

    lineage = leased_tables_lineage(wrapped, (), table_locations=[location])

    (output,) = lineage.outputs
    assert isinstance(output, OutputDataset)
    assert (output.namespace, output.name) == (name.namespace, name.name)
    assert output.facets["documentation"] == docs  # theirs kept
    assert output.facets["storage"].storageLayer == "delta"  # ours added
