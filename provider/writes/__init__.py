"""Airflow-free glue between a task and a write: its identity, its lease request, its table URI, SQL
translation, the waiting rule and what the task reports."""
