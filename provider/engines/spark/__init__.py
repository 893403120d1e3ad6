"""The Spark engine (a PySpark session or Spark Connect) with delta-spark.

Nothing here imports PySpark until a session is needed, so the package imports without the ``spark`` extra.
"""
