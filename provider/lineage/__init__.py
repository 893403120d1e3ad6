"""Lineage of deltaguard writes: OpenLineage datasets and facets, Airflow assets and their events.

``naming`` is pure (how a table location is named for OpenLineage and as an Airflow asset); ``assets`` and
``openlineage`` speak Airflow and the optional OpenLineage provider; ``operator`` is the mixin the write
operators inherit. See ADR 0022.
"""
