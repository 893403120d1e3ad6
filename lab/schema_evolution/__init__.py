"""Schema-evolving writes measured on real tables (ADR 0035), kept out of ``make test`` for their JVM.

* ``python -m lab.schema_evolution``: delta-spark 4.4.0 in one local JVM; each schema-evolving write
  commits while a compatible INSERT of another partition waits at a Python UDF gate, then that INSERT
  commits (or fails); plus the two pins the Spark engine relies on and the history labels Spark reads.
* ``python -m pytest lab/schema_evolution``: the Spark engine under ``schema.autoMerge.enabled=true``.

delta-rs 1.6.6 is measured in ``tests/engines/test_schema_evolution_deltars.py`` (no JVM, seconds).
"""
