"""Starts a real Airflow (scheduler, triggerer, API server) for the demo, the end-to-end tests and the
orchestration benchmark, and reads what happened back from its REST API and the Delta logs."""
