"""Airflow-free glue between a task and a write: its identity, its lease request, its table URI, SQL
translation, the checks before a lease is taken, the waiting rule and what the task reports."""
