"""Airflow triggers."""
