"""A production-shaped deltaguard stack on one machine (Celery, PostgreSQL, Redis, S3, a Spark cluster).

``python -m benchmarks.cluster up|down|run``; see docs/deployment.md ("A production-shaped stack on one
machine"). Not part of the wheel.
"""
