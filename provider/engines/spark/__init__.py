"""The Spark engines (a PySpark session or Spark Connect, and spark-submit) with delta-spark.

Nothing here imports PySpark until a session is needed, so the package imports without the ``spark`` extra.
"""
