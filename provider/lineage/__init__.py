"""Lineage of deltaguard writes: OpenLineage datasets and facets, Airflow assets and their events.

``record`` is pure (how a table location is named, what a commit wrote, the record of a write); ``assets``
and ``openlineage`` speak Airflow and the optional OpenLineage provider (``assets`` holds the mixin the
write operators inherit). See ADR 0022.
"""
